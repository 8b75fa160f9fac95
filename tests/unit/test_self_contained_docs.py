"""Docs, code comments and tests cite only pages a clone of this repository has."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("agentctl", "docs", "tests", "migrations")
FORBIDDEN = ("§", "../shared", "DESIGN.md", "workflow-format.md")


def test_no_citation_of_the_design_folder() -> None:
    found = []
    paths = [ROOT / "README.md"]
    for folder in CHECKED:
        paths.extend(sorted((ROOT / folder).rglob("*")))
    for path in paths:
        if path.suffix not in (".py", ".md") or path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(marker in line for marker in FORBIDDEN):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert found == [], "cite docs/ pages instead:\n" + "\n".join(found)
