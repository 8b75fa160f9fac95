"""Docs, code comments, tests, benchmarks and example workflows cite only pages a clone of
this repository has: no section numbers (a section sign) or numbered quirks of an outside
reference, no paths into the design folder beside the checkout."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
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


def test_no_section_sign_anywhere_in_the_package_or_the_docs() -> None:
    # The reviewer's check, run as written: it reads every file, the binary ones too (a
    # screenshot whose compressed bytes held 0xC2 0xA7 was re-chunked to pass it).
    found = subprocess.run(
        ["grep", "-rn", "§", "agentctl", "docs"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    assert found.returncode == 1, (
        found.stdout.decode(errors="replace")
        + found.stderr.decode()
        + "(a screenshot: python3 scripts/png_rechunk.py FILE FILE)"
    )
    assert found.stdout == b""


def test_the_screenshots_are_whole_pngs() -> None:
    for path in sorted((ROOT / "docs" / "images").glob("*.png")):
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", path
        position, kinds, image = 8, [], b""
        width = height = 0
        while position < len(data):
            (length,) = struct.unpack(">I", data[position : position + 4])
            kind = data[position + 4 : position + 8]
            body = data[position + 8 : position + 8 + length]
            (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
            assert zlib.crc32(kind + body) == crc, f"{path.name}: bad CRC in {kind!r}"
            if kind == b"IHDR":
                width, height, depth, color = struct.unpack(">IIBB", body[:10])
                assert (depth, color) == (8, 2), f"{path.name}: expected 8-bit RGB"
            elif kind == b"IDAT":
                image += body
            kinds.append(kind)
            position += 12 + length
        assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND", path.name
        # One filter byte and three bytes per pixel on every row.
        assert len(zlib.decompress(image)) == height * (1 + 3 * width), path.name
