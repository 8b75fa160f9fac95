"""Snapshots of the human views, with a fixed clock and fixed ids, colours off and on.

One story is played twice by real `agentctl` processes, each started with its own time in
AGENTCTL_TEST_NOW (a test-only seam: the clock stands still and ids come from a counter,
see agentctl/ids.py): a fan-out that succeeds, a release that pauses for an approval and
is resumed two minutes later, a process that fails, a question left waiting. The first
play runs with NO_COLOR and `--color auto`, the second with NO_COLOR and `--color always`
(an explicit choice wins over NO_COLOR). Because both plays make the same ids, the views
of both are compared with the same snapshot files in tests/cli/snapshots/: NAME.txt when
a view has no colour, NAME.never.txt and NAME.always.txt when it has.

The reading views (runs list, inspect, effects inspect, approvals list, plan --graph) are
rendered from the stored records with `--color never`, `--color always` and NO_COLOR.
Update the files with AGENTCTL_UPDATE_SNAPSHOTS=1 (tests/cli/snapshot_files.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli.sample_workflows import FANNED
from tests.cli.snapshot_files import assert_snapshot
from tests.forkserver import run_agentctl

RELEASE = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: release}
spec:
  policy: {approval: mutations, nonInteractive: pause, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
    set: {kind: builtin.assign}
  tasks:
    - {id: version, uses: action:set, with: {tag: v1.2.0}}
    - id: notes
      uses: action:save
      needs: [version]
      with: {path: out/notes.txt, content: "release ${{ tasks.version.output.after.tag }}"}
  outputs:
    tag: "${{ tasks.version.output.after.tag }}"
"""

NOISY = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: noisy}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i >&2; done; exit 3"]
  tasks:
    - {id: step, uses: action:work}
"""

ASKING = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
    set: {kind: builtin.assign}
  tasks:
    - {id: first, uses: action:set, with: {a: 1}}
    - {id: env, uses: action:ask, needs: [first], with: {prompt: "Which region?"}}
"""

READ_AT = "2026-03-02T10:00:00Z"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_APPROVAL = re.compile(r"approval-[0-9a-f]{16}")


@dataclass
class Play:
    """One play of the story: its directory, the transcripts of the commands that changed
    state (by snapshot name) and the ids they made."""

    work: Path
    transcripts: dict[str, str] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)


def _agentctl(play: Play, at: str, color: list[str], *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTCTL_"))}
    env.update(
        AGENTCTL_TEST_NOW=at,
        AGENTCTL_HOME=str(play.work / "home"),
        HOME=str(play.work / "home"),
        NO_COLOR="1",
    )
    # A real process per command, forked from a server that has imported agentctl once.
    result = run_agentctl([*color, *args], cwd=play.work, env=env, timeout=120)
    return result.returncode, result.stdout, result.stderr


def _transcript(work: Path, code: int, stdout: str, stderr: str, *args: str) -> str:
    """The command, what it printed and its exit code; the play's directory (which differs
    between plays and machines) reads as $WORK."""
    text = f"$ agentctl {' '.join(args)}\n{stdout}"
    if stderr:
        text += f"[stderr]\n{stderr}"
    return (text + f"[exit {code}]\n").replace(str(work), "$WORK")


def _play(work: Path, color: list[str]) -> Play:
    work.mkdir()
    (work / "home").mkdir()
    play = Play(work)
    for name, text in (
        ("fan.yaml", FANNED),
        ("release.yaml", RELEASE),
        ("noisy.yaml", NOISY),
        ("ask.yaml", ASKING),
    ):
        (work / name).write_text(text)

    def step(snapshot: str | None, at: str, *args: str) -> tuple[int, str]:
        code, out, err = _agentctl(play, at, color, *args)
        assert "Traceback" not in err, err
        if snapshot is not None:
            play.transcripts[snapshot] = _transcript(play.work, code, out, err, *args)
        return code, out

    assert step("roll-succeeded", "2026-03-02T09:00:00Z", "roll", "fan.yaml", "--db", "r.db")[
        0
    ] == (0)
    code, paused = step(
        "roll-paused", "2026-03-02T09:10:00Z", "roll", "release.yaml", "--db", "r.db"
    )
    assert code == 3, paused
    (approval,) = set(_APPROVAL.findall(paused))
    approve = ("approvals", "approve", approval, "--reason", "notes checked", "--db", "r.db")
    assert step("approve", "2026-03-02T09:11:30Z", *approve)[0] == 0
    release = paused.split()[0]
    assert release.startswith("run-")
    resume = ("resume", release, "--db", "r.db")
    assert step("resume-succeeded", "2026-03-02T09:12:00Z", *resume)[0] == 0
    assert step("roll-failed", "2026-03-02T09:20:00Z", "roll", "noisy.yaml", "--db", "r.db")[0] == (
        4
    )
    assert step(None, "2026-03-02T09:30:00Z", "roll", "ask.yaml", "--db", "r.db")[0] == 3
    return play


# The story's processes (the module's fixture) take the most time of this file: started
# first by `make test`, on one worker (tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Play]:
    base = tmp_path_factory.mktemp("story")
    return {
        "never": _play(base / "plain", []),
        "always": _play(base / "colour", ["--color", "always"]),
    }


def _check(name: str, never: str, always: str) -> None:
    """One file when the view has no colour, else one per colour mode; either way the
    coloured form is the plain one with escapes added (they take no width)."""
    assert _ANSI.sub("", always) == never
    if always == never:
        assert_snapshot(name, never)
    else:
        assert_snapshot(f"{name}.never", never)
        assert_snapshot(f"{name}.always", always)


@pytest.mark.parametrize(
    "name", ["roll-succeeded", "roll-paused", "approve", "resume-succeeded", "roll-failed"]
)
def test_commands_that_run_and_decide(plays: dict[str, Play], name: str) -> None:
    _check(name, plays["never"].transcripts[name], plays["always"].transcripts[name])


def _ids(cli: Any) -> dict[str, str]:
    runs = cli("--output", "json", "runs", "list", "--db", "r.db").json()["data"]["runs"]
    found = {run["workflow"]: run["runId"] for run in runs}
    effects = cli("--output", "json", "effects", "list", found["noisy"], "--db", "r.db")
    found["noisy-effect"] = effects.json()["data"]["effects"][0]["effectId"]
    return found


READING: dict[str, list[str]] = {
    "runs-list": ["runs", "list", "--db", "r.db"],
    "inspect-fanned": ["inspect", "{fanned}", "--db", "r.db"],
    "inspect-release": ["inspect", "{release}", "--db", "r.db"],
    "inspect-noisy": ["inspect", "{noisy}", "--db", "r.db"],
    "inspect-asking": ["inspect", "{asking}", "--db", "r.db"],
    "effects-inspect": ["effects", "inspect", "{noisy-effect}", "--db", "r.db"],
    "approvals-list": ["approvals", "list", "--all", "--db", "r.db"],
    "plan-graph-mermaid": ["plan", "fan.yaml", "--graph", "mermaid"],
    "plan-graph-dot": ["plan", "fan.yaml", "--graph", "dot"],
    "inspect-graph-mermaid": ["inspect", "{noisy}", "--graph", "mermaid", "--db", "r.db"],
}


@pytest.mark.parametrize("name", sorted(READING))
def test_reading_views(
    cli: Any, plays: dict[str, Play], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("AGENTCTL_TEST_NOW", READ_AT)  # "now" for durations of running runs
    shown: dict[str, str] = {}
    for mode, play in plays.items():
        monkeypatch.chdir(play.work)
        ids = _ids(cli)
        args = [arg.format_map(ids) if arg.startswith("{") else arg for arg in READING[name]]
        monkeypatch.delenv("NO_COLOR", raising=False)
        never = cli("--color", "never", *args)
        always = cli("--color", "always", *args)
        assert never.exit_code == always.exit_code == 0, never.stderr
        monkeypatch.setenv("NO_COLOR", "1")
        assert cli(*args).stdout == never.stdout  # auto: NO_COLOR turns colour off
        assert cli("--color", "always", *args).stdout == always.stdout  # explicit wins
        plain = never.stdout.replace(str(play.work), "$WORK")
        shown[mode] = plain
        _check(name, plain, always.stdout.replace(str(play.work), "$WORK"))
    # Both plays made the same ids and times, so their views are the same.
    assert shown["never"] == shown["always"]
