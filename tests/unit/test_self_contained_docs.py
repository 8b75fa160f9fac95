"""Docs, code comments, tests, benchmarks and example workflows cite only pages a clone of
this repository has: no section numbers (a section sign) or numbered quirks of an outside
reference, no paths into the design folder beside the checkout."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("agentctl", "docs", "tests", "migrations", "bench", "workflows", "scripts")
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".html", ".js", ".css")
FORBIDDEN = ("\N{SECTION SIGN}", "../shared", "DESIGN.md", "workflow-format.md")
NUMBERED_QUIRK = re.compile(r"quirk[\s_-]*\d", re.IGNORECASE)


def _lines_citing_outside_documents() -> list[str]:
    found = []
    paths = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    for folder in CHECKED:
        paths.extend(sorted((ROOT / folder).rglob("*")))
    for path in paths:
        if path == Path(__file__) or not path.is_file():
            continue
        if path.suffix not in SUFFIXES and path.name != "Makefile":
            continue
        if any(part in (".venv", "node_modules", "__pycache__") for part in path.parts):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(marker in line for marker in FORBIDDEN) or NUMBERED_QUIRK.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    return found


def test_no_citation_of_outside_documents() -> None:
    found = _lines_citing_outside_documents()
    assert found == [], "say it in our own words, or cite a docs/ page:\n" + "\n".join(found)


def test_the_check_finds_what_it_forbids() -> None:
    for line in ("see quirk 7", "Quirk-11 fixed", "test_quirk3_x", "(\N{SECTION SIGN}22)"):
        assert NUMBERED_QUIRK.search(line) or "\N{SECTION SIGN}" in line, line
    assert not NUMBERED_QUIRK.search("a quirk of YAML")
