# Every target works from a clean clone: the virtual environment is created on demand.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test test-quick lint format demo bench docs statements screenshots lock clean

# The development environment is the exact set of requirements-dev.lock (every extra, the
# test and lint tools), then agentctl itself in editable mode.
$(STAMP): pyproject.toml requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# How the two workers share the tests: one at a time, in the order tests/conftest.py sets
# (the tests marked slow first), a module sharing a module-scoped fixture on one worker.
DIST := -n 2 --dist loadgroup --no-loadscope-reorder

# The whole suite, as CI runs it. Every test has a time limit (pytest-timeout, set in
# pyproject.toml): a hang fails with the stacks of every thread instead of stalling the run.
test: $(STAMP)
	$(BIN)/python -m pytest -q $(DIST) --durations=25

# The same properties with many more generated cases (AGENTCTL_SOAK=1; docs/installing.md):
# the model test's random schedules (on both stores), the identity rules, the spec fuzzer,
# the plain schemas, the artifact GC state machine and the budget ledger. Minutes to an
# hour; run it after a change to the engine or the store, never in CI.
soak: $(STAMP)
	AGENTCTL_IDENTITY_EXAMPLES=3000 AGENTCTL_FUZZ_EXAMPLES=3000 AGENTCTL_SOAK=1 \
	$(BIN)/python -m pytest -q $(DIST) --timeout 0 \
	    tests/model tests/unit/compiler tests/unit/spec tests/crash/test_identity_crash.py \
	    tests/unit/artifacts/test_gc_state_machine.py tests/engine/test_budget_properties.py

# The edit loop: unit tests (the compiler's among them) and the CLI tests, under a minute
# on two cores. Run `make test` before pushing; CI runs only that.
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q $(DIST) tests/unit tests/cli

lint: $(STAMP)
	$(BIN)/ruff check agentctl tests migrations $(wildcard bench)
	$(BIN)/ruff format --check agentctl tests migrations $(wildcard bench)
	$(BIN)/mypy --strict agentctl

format: $(STAMP)
	$(BIN)/ruff check --fix agentctl tests migrations $(wildcard bench)
	$(BIN)/ruff format agentctl tests migrations $(wildcard bench)

demo: $(STAMP)
	bash scripts/demo.sh

bench: $(STAMP)
	$(BIN)/python bench/compile_bench.py
	$(BIN)/python bench/engine_bench.py
	$(BIN)/python bench/otel_overhead.py
	$(BIN)/python bench/fanout_bench.py --items 1000 10000
	$(BIN)/python bench/startup_bench.py --runs 20

# Refresh requirements-dev.lock after changing a dependency in pyproject.toml; commit both.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
		--quiet --output-file requirements-dev.lock

# Refresh the store's statements compiled ahead of time (agentctl/store/compiled_*.py) after
# changing a statement's builder; tests/unit/store/test_statement_texts.py fails until then.
statements: $(STAMP)
	$(BIN)/python -m agentctl.store.statement_texts

docs: $(STAMP)
	$(BIN)/python -m agentctl.cli.reference > docs/cli-reference.md

# Refresh the dashboard's screenshots in docs/images/ (docs/dashboard.md shows them): the
# browser tests take them in headless Chromium, at desktop and narrow widths.
screenshots: $(STAMP)
	AGENTCTL_SCREENSHOTS=$(CURDIR)/docs/images $(BIN)/python -m pytest -q -p no:xdist \
		tests/web/test_dashboard_browser.py tests/web/test_dashboard_browser_graph.py \
		tests/web/test_dashboard_browser_waits.py tests/web/test_dashboard_browser_recovery.py
	for f in docs/images/dashboard-*.png; do $(BIN)/python scripts/png_rechunk.py $$f $$f; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
