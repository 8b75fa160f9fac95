"""docs/python-api.md's complete example runs as written, in a fresh directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def _example() -> tuple[str, str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## A complete example", 1)[1].split("\n## ", 1)[0]
    (workflow,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    (program,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return workflow, program


def test_the_complete_example_runs(tmp_path: Path) -> None:
    workflow, program = _example()
    name = re.match(r"# (\S+)\n", workflow)
    assert name is not None, "the YAML block starts with a comment naming its file"
    (tmp_path / name.group(1)).write_text(workflow)
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "greeting.txt").read_text() == "fake: hello Ada"
    assert "builtin.write" in result.stdout
    assert (tmp_path / "runs.db").exists()
