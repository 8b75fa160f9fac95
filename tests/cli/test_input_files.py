"""Every file a user names is read by one reader (agentctl.input_files; issue 38 item 8).

The rule, generated over every place that reads such a file and every kind of file that is
not a small regular one: the command ends at once with exit 2 naming the file. A FIFO is
refused without waiting for a writer, ``/dev/zero`` (behind a symlink) without reading
from it. Each case runs the CLI in a forked child with a memory cap and a time limit, so a
regression fails the test instead of hanging it or eating the machine's memory.
"""

from __future__ import annotations

import itertools
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# Imported here, before any fork, so each forked child starts warm.
from tests.cli.test_packs import MANIFEST, TASKS

KINDS = ("fifo", "dev_zero", "directory", "oversized")

OK = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ok}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - id: a
      uses: action:set
      with: {x: 1}
"""


def _make_bad(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"#" * ((1 << 20) + 1))


def _packed(root: Path) -> Path:
    pack = root / "packs" / "utility"
    pack.mkdir(parents=True)
    (pack / "agentctl-pack.yaml").write_text(MANIFEST, encoding="utf-8")
    workflow = root / "workflow.yaml"
    workflow.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: packed }\nspec:\n"
        "  providers:\n    scripted: { kind: fake }\n"
        "  packs:\n    - name: example.utility\n      version: 1.2.0\n"
        "      source: { path: packs/utility }\n"
        f"  packTrust: {{ unsigned: allow }}\n{TASKS}",
        encoding="utf-8",
    )
    return workflow


# Each place: (prepare the directory and return the bad file's path, the command line).
Place = Callable[[Path], tuple[Path, list[str]]]


def _workflow(root: Path) -> tuple[Path, list[str]]:
    return root / "wf.yaml", ["check", str(root / "wf.yaml")]


def _inputs(root: Path) -> tuple[Path, list[str]]:
    (root / "ok.yaml").write_text(OK)
    return root / "in.json", ["roll", str(root / "ok.yaml"), "--inputs-file", str(root / "in.json")]


def _vars(root: Path) -> tuple[Path, list[str]]:
    (root / "ok.yaml").write_text(OK)
    return root / "vars.yaml", ["check", str(root / "ok.yaml"), "--vars-file", "vars.yaml"]


def _reconcile(flag: str) -> Place:
    def place(root: Path) -> tuple[Path, list[str]]:
        (root / "result.json").write_text('{"exitCode": 0}')
        (root / "schema.json").write_text('{"type": "object"}')
        files = {
            "--result-file": root / "result.json",
            "--result-schema-file": root / "schema.json",
        }
        files[flag] = root / "bad.json"
        extra = [str(part) for item in files.items() for part in item]
        command = ["reconcile", "effect-0123456789abcdef", "--status", "applied"]
        return root / "bad.json", [*command, "--reason", "r", *extra, "--db", str(root / "r.db")]

    return place


def _pack_lock(root: Path) -> tuple[Path, list[str]]:
    return root / "agentctl.pack.lock", ["check", str(_packed(root))]


def _pack_manifest(root: Path) -> tuple[Path, list[str]]:
    workflow = _packed(root)
    manifest = root / "packs" / "utility" / "agentctl-pack.yaml"
    manifest.unlink()
    return manifest, ["pack", "lock", str(workflow)]


def _pack_file(root: Path) -> tuple[Path, list[str]]:
    workflow = _packed(root)
    return root / "packs" / "utility" / "notes.txt", ["pack", "lock", str(workflow)]


PLACES: dict[str, Place] = {
    "workflow": _workflow,
    "inputs-file": _inputs,
    "vars-file": _vars,
    "result-file": _reconcile("--result-file"),
    "result-schema-file": _reconcile("--result-schema-file"),
    "evidence-file": _reconcile("--evidence-file"),
    "pack-lock": _pack_lock,
    "pack-manifest": _pack_manifest,
    "pack-file": _pack_file,
}
# A file inside a pack may be up to the pack's 64 MiB, so "oversized" does not apply there,
# and a directory inside a pack is walked, not read;
# a /dev/zero symlink inside a pack or beside a workflow leads out and is refused as such.
CASES = [
    (place, kind)
    for place, kind in itertools.product(PLACES, KINDS)
    if not (place == "pack-file" and kind in ("oversized", "directory"))
]


def _guarded(argv: list[str], cwd: Path, out: Path) -> tuple[int | str, str]:
    """Run the CLI in a forked child with 1 GiB more address space and 20 seconds."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            with open("/proc/self/statm") as statm:
                pages = int(statm.read().split()[0])
            limit = pages * os.sysconf("SC_PAGE_SIZE") + (1 << 30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            os.chdir(cwd)
            with open(out, "w", encoding="utf-8") as sink:
                sys.stdout = sys.stderr = sink
                from agentctl.cli import main as cli_main

                code = cli_main.main(argv)
                sink.flush()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), out.read_text(encoding="utf-8")
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung", out.read_text(encoding="utf-8") if out.exists() else ""


@pytest.mark.parametrize(("place", "kind"), CASES)
def test_a_named_file_that_is_not_a_small_regular_file_is_refused_at_once(
    tmp_path: Path, cli: object, place: str, kind: str
) -> None:
    root = tmp_path / "case"
    root.mkdir()
    if place in ("result-file", "result-schema-file", "evidence-file"):
        (root / "ok.yaml").write_text(OK)
        rolled = cli("roll", root / "ok.yaml", "--db", root / "r.db")  # type: ignore[operator]
        assert rolled.exit_code == 0, rolled.stderr
    bad, argv = PLACES[place](root)
    _make_bad(bad, kind)
    code, text = _guarded(argv, root, tmp_path / "out.txt")
    assert code == 2, text
    assert bad.name in text, text
    assert "Traceback" not in text
