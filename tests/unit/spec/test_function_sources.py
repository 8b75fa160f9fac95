"""Where a `python.function` step's code comes from, checked and digested when the
workflow loads (agentctl.spec.function_sources, docs/python-steps.md): real files in
tmp_path, no user code imported."""

from __future__ import annotations

from pathlib import Path

from agentctl.spec import load_workflow

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fs}
spec:
  python: {path: [lib]}
  actions:
    step: {kind: python.function, function: "%s"%s}
  tasks:
    - {id: work, uses: "action:step"}
"""


def _digest(ws: Path, function: str, extra: str = "") -> str | None:
    (ws / "wf.yaml").write_text(WORKFLOW % (function, extra))
    loaded = load_workflow(ws / "wf.yaml")
    assert loaded.ok and loaded.document is not None, [d.message for d in loaded.diagnostics]
    return loaded.document.spec.actions["step"].source_digest


def test_the_digest_covers_the_files_importing_the_module_runs(tmp_path: Path) -> None:
    package = tmp_path / "lib" / "release"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "steps.py").write_text("def main(ctx, inputs):\n    return {}\n")
    (package / "other.py").write_text("X = 1\n")
    (tmp_path / "marker.txt").write_text("Python never reads this")
    first = _digest(tmp_path, "release.steps:main")
    assert first is not None and first.startswith("sha256:")
    (package / "other.py").write_text("X = 2\n")  # not imported by the name: not hashed
    (tmp_path / "marker.txt").write_text("changed")
    assert _digest(tmp_path, "release.steps:main") == first
    (package / "__init__.py").write_text("VERSION = 2\n")  # runs on import: hashed
    second = _digest(tmp_path, "release.steps:main")
    assert second != first
    (package / "steps.py").write_text("def main(ctx, inputs):\n    return {'v': 2}\n")
    assert _digest(tmp_path, "release.steps:main") not in (first, second)


def test_the_workflow_folder_comes_first_and_a_given_digest_is_kept(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "steps.py").write_text("def main(ctx, inputs):\n    return 1\n")
    from_lib = _digest(tmp_path, "steps:main")
    (tmp_path / "steps.py").write_text("def main(ctx, inputs):\n    return 2\n")
    assert _digest(tmp_path, "steps:main") != from_lib  # the folder's own steps.py wins
    given = "sha256:" + "3" * 64
    assert _digest(tmp_path, "steps:main", f", sourceDigest: '{given}'") == given


def test_installed_modules_and_another_interpreter_are_not_hashed(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    assert _digest(tmp_path, "json:dumps") is None  # installed: the environment's
    # Another interpreter's path is its own: not found here is not an error.
    assert _digest(tmp_path, "elsewhere.steps:main", ", python: python3") is None
