"""The import graph of agentctl/ keeps the layers of docs/architecture.md.

The graph is built from the source (``ast``), never by importing it, and covers every
import: module level, inside functions, and under ``if TYPE_CHECKING:``. Three rules:

1. An import goes down the floors of docs/architecture.md, or stays inside its own unit
   (package). Up or sideways to another unit on the same floor fails.
2. No cycle between modules. Imports under ``if TYPE_CHECKING:`` do not run, so they are
   not part of a cycle (they still count for rule 1). Between packages no cycle at all,
   type-only imports included: a module directly in ``agentctl/`` counts as a package of
   its own, any other as the package that holds it.
3. No private name (``_name``) of another module is imported or reached through a
   module attribute (``module._name``).

The floors are read from the table in docs/architecture.md, so the drawing and this test
cannot disagree. A floor is a number with an optional storey (``5.2`` is above ``5.1``,
both above ``4`` and below ``6``): the engine's sub-packages stand on the storeys of
floor 5, and every one of them is a unit of its own. ``ALLOWED`` holds edges that break
rule 1 on purpose; each must be justified in that document (it is empty).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentctl"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# (importer unit, imported unit) pairs that go up or sideways on purpose. Every entry needs
# its reason in docs/architecture.md under "Allowed exceptions".
ALLOWED: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module (or package)
    line: int
    type_only: bool


@dataclass(frozen=True)
class Unit:
    name: str
    floor: tuple[int, int]  # (floor, storey): "5.2" is (5, 2), "4" is (4, 0)
    members: tuple[str, ...]

    @property
    def shown_floor(self) -> str:
        floor, storey = self.floor
        return f"{floor}.{storey}" if storey else str(floor)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers inside ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            for child in node.body:
                end = child.end_lineno or child.lineno
                lines.update(range(child.lineno, end + 1))
    return lines


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def parse_edges(
    modules: dict[str, Path],
) -> tuple[list[Edge], list[tuple[str, str, str, int]]]:
    """All import edges inside agentctl, and every private name reached across modules."""
    edges: list[Edge] = []
    private: list[tuple[str, str, str, int]] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        type_only = _type_checking_lines(tree)
        is_package = path.name == "__init__.py"
        aliases: dict[str, str] = {}  # local name -> agentctl module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != "agentctl":
                        continue
                    edges.append(Edge(module, alias.name, node.lineno, node.lineno in type_only))
                    if alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, is_package, node)
                if target.split(".")[0] != "agentctl":
                    continue
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    imported = full if full in modules else target
                    edges.append(Edge(module, imported, node.lineno, node.lineno in type_only))
                    if imported == full:
                        aliases[alias.asname or alias.name] = full
                    elif _is_private(alias.name) and target != module:
                        private.append((module, target, alias.name, node.lineno))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _is_private(node.attr)
                and aliases[node.value.id] != module
            ):
                private.append((module, aliases[node.value.id], node.attr, node.lineno))
    return edges, private


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def read_units(text: str) -> list[Unit]:
    """The rows of the floors table: ``| floor | unit | `module`, `module` … | … |``."""
    section = text.split("## Floors", 1)[1].split("\n## ", 1)[0]
    units = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        floor = re.fullmatch(r"(\d+)(?:\.(\d+))?", cells[0]) if len(cells) >= 3 else None
        if floor is None:
            continue
        members = tuple(re.findall(r"`(agentctl[\w.]*)`", cells[2]))
        units.append(Unit(cells[1], (int(floor[1]), int(floor[2] or 0)), members))
    return units


def unit_of(module: str, units: list[Unit]) -> Unit | None:
    """The unit whose member is the longest prefix of ``module``."""
    best: tuple[int, Unit] | None = None
    for unit in units:
        for member in unit.members:
            matches = module == member or (member != "agentctl" and module.startswith(member + "."))
            if matches and (best is None or len(member) > best[0]):
                best = (len(member), unit)
    return None if best is None else best[1]


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module counts in for package cycles: a package is itself, a module
    directly in ``agentctl/`` is its own, any other module is its package's."""
    if modules[module].name == "__init__.py" or module.count(".") == 1:
        return module
    return module.rsplit(".", 1)[0]


def package_cycles(modules: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """Cycles between packages, type-only imports included (see :func:`package_of`)."""
    packages = {package_of(m, modules) for m in modules}
    graph: dict[str, set[str]] = {p: set() for p in packages}
    for edge in edges:
        if edge.target not in modules:
            continue
        source, target = package_of(edge.source, modules), package_of(edge.target, modules)
        if source != target:
            graph[source].add(target)
    return strongly_connected(graph)


def cycles(modules: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components (more than one module) of the runtime import graph."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for edge in edges:
        if not edge.type_only and edge.target in graph and edge.target != edge.source:
            graph[edge.source].add(edge.target)
    return strongly_connected(graph)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iterative so a deep graph cannot hit the recursion limit.
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def layer_violations(
    edges: list[Edge], units: list[Unit], allowed: frozenset[tuple[str, str]]
) -> list[str]:
    problems = []
    for edge in edges:
        source, target = unit_of(edge.source, units), unit_of(edge.target, units)
        if source is None or target is None or source == target:
            continue
        if target.floor < source.floor or (source.name, target.name) in allowed:
            continue
        direction = "sideways" if target.floor == source.floor else "upward"
        problems.append(
            f"{edge.source}:{edge.line} imports {edge.target} ({direction}: {source.name} "
            f"on floor {source.shown_floor} -> {target.name} on floor {target.shown_floor})"
        )
    return problems


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], list[Edge], list[tuple[str, str, str, int]], list[Unit]]:
    modules = all_modules()
    edges, private = parse_edges(modules)
    units = read_units(ARCHITECTURE.read_text(encoding="utf-8"))
    return modules, edges, private, units


def test_every_module_has_a_floor(graph) -> None:  # type: ignore[no-untyped-def]
    modules, _, _, units = graph
    assert len(units) >= 8, "the floors table of docs/architecture.md was not found"
    homeless = [m for m in modules if unit_of(m, units) is None]
    assert homeless == [], f"place these modules on a floor in docs/architecture.md: {homeless}"
    named = [member for unit in units for member in unit.members]
    assert len(named) == len(set(named)), "a module is on two floors of docs/architecture.md"
    missing = [m for m in named if m not in modules]
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


def test_imports_only_go_down_the_floors(graph) -> None:  # type: ignore[no-untyped-def]
    _, edges, _, units = graph
    problems = layer_violations(edges, units, ALLOWED)
    assert problems == [], "\n".join(problems)


def test_no_import_cycle_between_modules(graph) -> None:  # type: ignore[no-untyped-def]
    modules, edges, _, _ = graph
    assert cycles(modules, edges) == []


def test_no_cycle_between_packages_even_through_type_only_imports(graph) -> None:  # type: ignore[no-untyped-def]
    modules, edges, _, _ = graph
    assert package_cycles(modules, edges) == []


def test_every_engine_package_is_a_unit_of_its_own(graph) -> None:  # type: ignore[no-untyped-def]
    modules, _, _, units = graph
    packages = [m for m, path in modules.items() if path.name == "__init__.py"]
    engine = [p for p in packages if p.startswith("agentctl.engine.")]
    assert engine, "agentctl/engine has no sub-packages"
    named = {member for unit in units for member in unit.members}
    unplaced = [p for p in engine if p not in named]
    assert unplaced == [], f"give these engine packages a floor in docs/architecture.md: {unplaced}"


def test_no_private_name_is_imported_across_modules(graph) -> None:  # type: ignore[no-untyped-def]
    _, _, private, _ = graph
    shown = [f"{src}:{line} uses {target}.{name}" for src, target, name, line in private]
    assert shown == [], "\n".join(shown)


def test_every_allowed_exception_is_justified_in_the_document() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for source, target in ALLOWED:
        assert f"{source} -> {target}" in text, f"justify {source} -> {target} in {ARCHITECTURE}"


# The checks themselves must be able to fail: each runs on a small made-up package.


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return {module_name(p): p for p in sorted((root / "agentctl").rglob("*.py"))}


def test_the_checks_catch_upward_sideways_cyclic_and_private_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    modules = _write(
        tmp_path,
        {
            "agentctl/__init__.py": "",
            "agentctl/errors.py": "import agentctl.tools.a\n",
            "agentctl/tools/__init__.py": "",
            "agentctl/tools/a.py": "from agentctl.providers import b\nb._secret\n",
            "agentctl/providers/__init__.py": "",
            "agentctl/providers/b.py": (
                "from typing import TYPE_CHECKING\n"
                "from agentctl.tools.a import _helper\n"
                "if TYPE_CHECKING:\n    from agentctl.engine import c\n"
            ),
            "agentctl/engine/__init__.py": "",
            "agentctl/engine/c.py": "from agentctl.engine import d\n",
            "agentctl/engine/d.py": "def f():\n    from agentctl.engine import c\n",
        },
    )
    units = read_units(
        "## Floors\n| floor | unit | modules |\n| --- | --- | --- |\n"
        "| 0 | foundation | `agentctl.errors` |\n"
        "| 1 | services | `agentctl.tools` |\n"
        "| 1 | providers | `agentctl.providers` |\n"
        "| 2 | engine | `agentctl.engine` |\n"
        "| 3 | facade | `agentctl` |\n"
    )
    edges, private = parse_edges(modules)
    problems = layer_violations(edges, units, frozenset())
    assert any("agentctl.errors:1 imports agentctl.tools.a (upward" in p for p in problems)
    assert any("agentctl.tools.a:1 imports agentctl.providers.b (sideways" in p for p in problems)
    assert any("agentctl.providers.b:4 imports agentctl.engine.c (upward" in p for p in problems)
    allowed = layer_violations(edges, units, frozenset({("services", "providers")}))
    # Allowing services -> providers leaves the other direction refused.
    assert [p for p in problems if not p.startswith("agentctl.tools.a:1")] == allowed
    # The engine's c <-> d is a cycle even through a function-level import; the type-only
    # import of c from providers.b is not part of the tools.a <-> providers.b cycle.
    assert cycles(modules, edges) == [
        ["agentctl.engine.c", "agentctl.engine.d"],
        ["agentctl.providers.b", "agentctl.tools.a"],
    ]
    assert sorted((src, name) for src, _, name, _ in private) == [
        ("agentctl.providers.b", "_helper"),
        ("agentctl.tools.a", "_secret"),
    ]
    assert unit_of("agentctl.unplaced", units) is None


def test_storeys_order_units_and_package_cycles_count_type_only_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    modules = _write(
        tmp_path,
        {
            "agentctl/__init__.py": "",
            "agentctl/errors.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from agentctl.diagnostics import D\n"
            ),
            "agentctl/diagnostics.py": "from agentctl.errors import E\n",
            "agentctl/engine/__init__.py": "",
            "agentctl/engine/top.py": "from agentctl.engine.run import x\n",
            "agentctl/engine/run/__init__.py": "",
            "agentctl/engine/run/x.py": "from agentctl.engine.core import y\n",
            "agentctl/engine/core/__init__.py": "",
            "agentctl/engine/core/y.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from agentctl.engine.run.x import X\n"
            ),
        },
    )
    units = read_units(
        "## Floors\n| floor | unit | modules |\n| --- | --- | --- |\n"
        "| 0 | foundation | `agentctl.errors`, `agentctl.diagnostics` |\n"
        "| 5.1 | engine.core | `agentctl.engine.core` |\n"
        "| 5.4 | engine.run | `agentctl.engine.run` |\n"
        "| 5.6 | engine | `agentctl.engine` |\n"
        "| 6 | facade | `agentctl` |\n"
    )
    assert [u.shown_floor for u in units] == ["0", "5.1", "5.4", "5.6", "6"]
    edges, _ = parse_edges(modules)
    # The type-only import of run from core goes up a storey; the rest go down.
    assert layer_violations(edges, units, frozenset()) == [
        "agentctl.engine.core.y:3 imports agentctl.engine.run.x (upward: engine.core "
        "on floor 5.1 -> engine.run on floor 5.4)"
    ]
    # Neither loop runs (each closes through a type-only import): no module cycle, yet
    # two package cycles, one between modules directly in agentctl/.
    assert cycles(modules, edges) == []
    assert package_cycles(modules, edges) == [
        ["agentctl.diagnostics", "agentctl.errors"],
        ["agentctl.engine.core", "agentctl.engine.run"],
    ]


# -- One door (issue 31, "The door" in docs/architecture.md) ------------------------------
#
# cli/ and web/ reach the engine and the store only through ``agentctl.Runtime``: they may
# import the facade (``agentctl``, ``agentctl.runtime``, ``agentctl.results``), each other,
# the foundation modules directly in ``agentctl/`` (errors, ids, hints, ...), and the face
# a lower package publishes in its ``__init__`` (``agentctl.compiler``, ``agentctl.spec``,
# ...). Never a module inside a lower package, and never the face of ``agentctl.store`` or
# ``agentctl.engine``: those are the Runtime's to open.

DOORS = ("agentctl.cli", "agentctl.web")
FACADE = frozenset(
    {
        "agentctl",
        "agentctl.runtime",
        "agentctl.runtime_reading",
        "agentctl.runtime_recovery",
        "agentctl.runtime_admin",
        "agentctl.runtime_scheduling",
        "agentctl.runtime_records",
        "agentctl.runtime_dashboard",
        "agentctl.runtime_views",
        "agentctl.results",
    }
)
BEHIND_THE_RUNTIME = ("agentctl.store", "agentctl.engine")

# The commands and dashboard modules that still reach past the door, as
# (importer, imported) pairs: none since issue 31 routed the last ones through the Runtime.
# It stays empty: route a new command through a Runtime method (or import the lower
# package's face); a line that no longer matches an import fails the test below.
THROUGH_THE_WALL: frozenset[tuple[str, str]] = frozenset()


def door_violations(modules: dict[str, Path], edges: list[Edge]) -> set[tuple[str, str]]:
    """The (importer, imported) pairs of cli/ and web/ that pass by the door."""
    packages = {m for m, path in modules.items() if path.name == "__init__.py"}
    found = set()
    for edge in edges:
        source, target = edge.source, edge.target
        if not source.startswith(DOORS) or target.startswith(DOORS) or target in FACADE:
            continue
        foundation = target.count(".") == 1 and target not in packages
        face = target in packages and not target.startswith(BEHIND_THE_RUNTIME)
        if not (foundation or face):
            found.add((source, target))
    return found


def test_cli_and_web_go_through_the_door(graph) -> None:  # type: ignore[no-untyped-def]
    modules, edges, _, _ = graph
    found = door_violations(modules, edges)
    new = sorted(found - THROUGH_THE_WALL)
    assert new == [], (
        "cli/ and web/ go through agentctl.Runtime (docs/architecture.md, 'The door'); "
        "add a Runtime method or import the package's face instead of:\n"
        + "\n".join(f"{src} imports {target}" for src, target in new)
    )
    gone = sorted(THROUGH_THE_WALL - found)
    assert gone == [], f"no longer imported: remove these from THROUGH_THE_WALL: {gone}"


def test_the_door_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    modules = _write(
        tmp_path,
        {
            "agentctl/__init__.py": "",
            "agentctl/runtime.py": "",
            "agentctl/errors.py": "",
            "agentctl/compiler/__init__.py": "",
            "agentctl/compiler/plan.py": "",
            "agentctl/store/__init__.py": "",
            "agentctl/store/runs_repo.py": "",
            "agentctl/cli/__init__.py": "",
            "agentctl/cli/good.py": (
                "from agentctl.runtime import Runtime\nfrom agentctl.errors import E\n"
                "from agentctl.compiler import Plan\nfrom agentctl import Runtime\n"
            ),
            "agentctl/cli/bad.py": (
                "from agentctl.store import runs_repo\nimport agentctl.store\n"
                "def f():\n    from agentctl.compiler.plan import Plan\n"
            ),
        },
    )
    edges, _ = parse_edges(modules)
    assert door_violations(modules, edges) == {
        ("agentctl.cli.bad", "agentctl.store.runs_repo"),
        ("agentctl.cli.bad", "agentctl.store"),
        ("agentctl.cli.bad", "agentctl.compiler.plan"),
    }
