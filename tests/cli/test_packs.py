"""Local packs through the CLI: items loaded as <pack>.<item> and run end to end, integrity
and the lock file checked before any run exists, trust for unsigned packs, collisions,
remote sources refused, and policyDefaults that never weaken the workflow's policy."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

MANIFEST = """\
apiVersion: agentctl.dev/pack/v1alpha1
name: example.utility
version: 1.2.0
agentctl: ">=0.1.0, <1.0.0"
providers: [scripted]
actions:
  stamp: { kind: builtin.assign }
  put: { kind: builtin.write }
tools:
  shout:
    kind: builtin.echo
    description: Echo the input back.
    inputSchema:
      type: object
      properties: { text: { type: string } }
      required: [text]
      additionalProperties: false
    outputSchema: { type: object }
    capability: internal
    risk: low
    effectClass: pure
    idempotency: pure
    retrySafe: true
    timeoutSeconds: 5
agents:
  crier:
    provider: scripted
    model: scripted
    instructions: Shout the text, then say done.
    tools: [shout]
    maxTurns: 2
    maxToolCalls: 1
    providerOptions:
      toolInput: { text: hi }
      finalText: done
workflows:
  label:
    version: 1.0.0
    inputs: { prefix: build }
    inputSchema: { type: object }
    outputSchema: { type: object }
    outputs: { label: "${{ tasks.make.output.output }}" }
    tasks:
      - id: make
        uses: action:stamp
        with: { text: "${{ inputs.prefix }}-${{ inputs.number }}" }
policyDefaults:
  approval: never
  writableRoots: [.]
"""

TASKS = """\
  tasks:
    - id: first
      uses: action:example.utility.stamp
      with: { value: 1 }
    - id: cry
      uses: agent:example.utility.crier
      with: { prompt: shout }
    - id: named
      uses: workflow:example.utility.label
      with: { number: 7 }
  outputs:
    first: "${{ tasks.first.output.output }}"
    said: "${{ tasks.cry.output.text }}"
    label: "${{ tasks.named.output.label }}"
"""


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _setup(
    tmp_path: Path,
    *,
    manifest: str = MANIFEST,
    reference: str | None = None,
    extra: str = "  packTrust: { unsigned: allow }\n",
    tasks: str = TASKS,
) -> Path:
    pack = tmp_path / "packs" / "utility"
    pack.mkdir(parents=True)
    (pack / "agentctl-pack.yaml").write_text(manifest, encoding="utf-8")
    (pack / "README.md").write_text("Utility pack.\n", encoding="utf-8")
    if reference is None:
        reference = (
            "    - name: example.utility\n      version: 1.2.0\n      path: packs/utility\n"
            f"      integrity: {_digest(pack / 'agentctl-pack.yaml')}\n"
        )
    path = tmp_path / "workflow.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: packed }\nspec:\n"
        "  providers:\n    scripted: { kind: fake }\n"
        f"  packs:\n{reference}{extra}{tasks}",
        encoding="utf-8",
    )
    return path


def _line(path: Path, text: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _refused(result: Any) -> list[dict[str, Any]]:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    return [d for d in result.error_json()["diagnostics"] if d["severity"] == "error"]


def _no_run(cli: Any, db: Path) -> None:
    """Refused before the store is opened: no database, so certainly no run."""
    assert not db.exists()


def test_a_local_pack_runs_end_to_end_with_action_agent_tool_and_sub_workflow(
    cli: Any, tmp_path: Path
) -> None:
    path = _setup(tmp_path)
    checked = cli("--output", "json", "check", path)
    assert checked.exit_code == 0, checked.stderr
    planned = cli("--output", "json", "plan", path).json()["data"]
    assert planned["tasks"]["first"]["uses"] == {"kind": "action", "name": "example.utility.stamp"}
    assert planned["tasks"]["named--make"]["uses"]["name"] == "example.utility.stamp"
    assert [t["name"] for t in planned["requirements"]["tools"]] == ["example.utility.shout"]
    rolled = cli("--output", "json", "roll", path, "--db", tmp_path / "s.db")
    assert rolled.exit_code == 0, rolled.stderr
    assert rolled.json()["data"]["output"] == {
        "first": {"value": 1},
        "said": "done",
        "label": {"text": "build-7"},
    }


def test_a_manifest_that_no_longer_matches_its_integrity_is_refused_before_a_run(
    cli: Any, tmp_path: Path
) -> None:
    path = _setup(tmp_path)
    manifest = tmp_path / "packs" / "utility" / "agentctl-pack.yaml"
    manifest.write_text(MANIFEST.replace("value", "value") + "# edited\n", encoding="utf-8")
    db = tmp_path / "s.db"
    found = _refused(cli("--output", "json", "roll", path, "--db", db))
    assert [(d["code"], d["path"]) for d in found] == [
        ("incompatible_state", "spec.packs[0].integrity")
    ]
    assert found[0]["file"] == str(path) and found[0]["line"] == _line(path, "integrity:")
    _no_run(cli, db)


def test_pack_lock_pins_every_file_and_a_later_change_is_refused(cli: Any, tmp_path: Path) -> None:
    path = _setup(tmp_path)
    locked = cli("--output", "json", "pack", "lock", path)
    assert locked.exit_code == 0, locked.stderr
    lock = json.loads((tmp_path / "agentctl.pack.lock").read_text(encoding="utf-8"))
    assert lock["apiVersion"] == "agentctl.dev/pack-lock/v1"
    entry = lock["packs"][0]
    assert entry["name"] == "example.utility" and entry["version"] == "1.2.0"
    assert entry["integrity"] == _digest(tmp_path / "packs" / "utility" / "agentctl-pack.yaml")
    assert entry["items"]["subworkflows"] == ["example.utility.label"]
    assert cli("pack", "verify", path).exit_code == 0
    # A file beside the manifest changes: the manifest's integrity still holds, the lock
    # does not, and nothing runs.
    (tmp_path / "packs" / "utility" / "README.md").write_text("changed\n", encoding="utf-8")
    db = tmp_path / "s.db"
    found = _refused(cli("--output", "json", "roll", path, "--db", db))
    assert found[0]["code"] == "incompatible_state" and found[0]["path"] == "spec.packs[0]"
    assert "changed after it was locked (files differ" in found[0]["message"]
    assert found[0]["line"] == _line(path, "- name: example.utility")
    _no_run(cli, db)
    verify = _refused(cli("--output", "json", "pack", "verify", path))
    assert "changed after it was locked" in verify[0]["message"]
    # After review, locking again pins the new bytes.
    assert cli("pack", "lock", path).exit_code == 0
    assert cli("--output", "json", "roll", path, "--db", db).exit_code == 0


def test_a_source_path_pack_needs_the_lock_file(cli: Any, tmp_path: Path) -> None:
    reference = (
        "    - name: example.utility\n      version: 1.2.0\n      source: { path: packs/utility }\n"
    )
    path = _setup(tmp_path, reference=reference)
    found = _refused(cli("--output", "json", "check", path))
    assert "no integrity and there is no agentctl.pack.lock" in found[0]["message"]
    assert cli("pack", "lock", path).exit_code == 0
    assert cli("--output", "json", "check", path).exit_code == 0
    assert cli("pack", "verify", path).exit_code == 0


def test_verify_without_a_lock_says_what_to_do(cli: Any, tmp_path: Path) -> None:
    path = _setup(tmp_path)
    result = cli("--output", "json", "pack", "verify", path)
    assert result.exit_code == 2
    error = result.error_json()["error"]
    assert error["code"] == "pack.unlocked" and "pack lock" in error["hint"]


@pytest.mark.parametrize(
    "source",
    [
        "{ git: https://example.com/p.git, rev: " + "a" * 40 + " }",
        "{ url: https://example.com/p.tgz, integrity: sha256:" + "0" * 64 + " }",
    ],
    ids=["git", "https"],
)
def test_remote_sources_are_refused_offline(cli: Any, tmp_path: Path, source: str) -> None:
    reference = f"    - name: example.utility\n      version: 1.2.0\n      source: {source}\n"
    path = _setup(tmp_path, reference=reference)
    found = _refused(cli("--output", "json", "check", path))
    assert found[0]["code"] == "unsupported_capability"
    assert found[0]["path"] == "spec.packs[0].source"
    assert "not supported offline" in found[0]["message"]
    assert found[0]["line"] == _line(path, "source:")


def test_pack_trust_for_unsigned_packs(cli: Any, tmp_path: Path) -> None:
    path = _setup(tmp_path / "deny", extra="  packTrust: { unsigned: deny }\n")
    found = _refused(cli("--output", "json", "check", path))
    assert [(d["code"], d["path"]) for d in found] == [("policy_denied", "spec.packs[0]")]
    path = _setup(tmp_path / "warn", extra="")
    warned = cli("--output", "json", "check", path)
    assert warned.exit_code == 0
    assert [d["code"] for d in warned.json()["diagnostics"]] == ["policy_denied"]
    assert warned.json()["diagnostics"][0]["severity"] == "warning"
    path = _setup(tmp_path / "allow")
    assert cli("--output", "json", "check", path).json()["diagnostics"] == []


def test_an_unsigned_pack_with_processes_needs_allow_unsigned_process(
    cli: Any, tmp_path: Path
) -> None:
    manifest = MANIFEST.replace(
        "  stamp: { kind: builtin.assign }\n",
        "  stamp: { kind: builtin.assign }\n"
        "  ping: { kind: builtin.shell.exec, command: echo, timeoutSeconds: 5 }\n",
    )
    path = _setup(tmp_path / "a", manifest=manifest)
    found = _refused(cli("--output", "json", "check", path))
    assert found[0]["code"] == "policy_denied" and "runs processes (ping)" in found[0]["message"]
    path = _setup(
        tmp_path / "b",
        manifest=manifest,
        extra="  packTrust: { unsigned: allow, allowUnsignedProcess: true }\n",
    )
    assert cli("--output", "json", "check", path).exit_code == 0


def test_a_name_collision_with_the_workflow_is_refused(cli: Any, tmp_path: Path) -> None:
    extra = (
        "  packTrust: { unsigned: allow }\n"
        '  actions:\n    "example.utility.stamp": { kind: builtin.assign }\n'
    )
    path = _setup(tmp_path, extra=extra)
    found = _refused(cli("--output", "json", "check", path))
    assert found[0]["path"] == "spec.packs[0].name"
    assert "`example.utility.stamp` collides with spec.actions" in found[0]["message"]


def test_problems_inside_a_manifest_point_at_the_manifest(cli: Any, tmp_path: Path) -> None:
    manifest = MANIFEST.replace(
        "  put: { kind: builtin.write }\n", "  put: { kind: builtin.write, colour: red }\n"
    )
    manifest = manifest.replace("uses: action:stamp", "uses: action:missing")
    path = _setup(tmp_path, manifest=manifest)
    found = _refused(cli("--output", "json", "check", path))
    file = str(tmp_path / "packs" / "utility" / "agentctl-pack.yaml")
    assert [(d["code"], d["path"], d["file"]) for d in found] == [
        ("schema_violation", "actions.put.colour", file)
    ]
    assert found[0]["line"] == _line(Path(file), "colour: red")
    manifest = MANIFEST.replace("uses: action:stamp", "uses: action:missing")
    path = _setup(tmp_path / "second", manifest=manifest)
    found = _refused(cli("--output", "json", "check", path))
    assert [(d["code"], d["path"]) for d in found] == [
        ("missing_reference", "workflows.label.tasks[0].uses")
    ]
    manifest_file = tmp_path / "second" / "packs" / "utility" / "agentctl-pack.yaml"
    assert found[0]["line"] == _line(manifest_file, "uses: action:missing")


def test_versions_must_match_and_suit_this_agentctl(cli: Any, tmp_path: Path) -> None:
    path = _setup(tmp_path / "a", manifest=MANIFEST.replace('">=0.1.0, <1.0.0"', '"^2.0"'))
    found = _refused(cli("--output", "json", "check", path))
    assert found[0]["code"] == "unsupported_version" and found[0]["path"] == "agentctl"
    assert "requires agentctl ^2.0, this is " in found[0]["message"]
    path = _setup(tmp_path / "b", manifest=MANIFEST.replace("version: 1.2.0", "version: 1.3.0"))
    found = _refused(cli("--output", "json", "check", path))
    assert "declared, but its manifest is `example.utility` 1.3.0" in found[0]["message"]


def test_policy_defaults_never_weaken_the_workflow_policy(cli: Any, tmp_path: Path) -> None:
    # The pack says approval: never and makes every directory writable; the workflow's
    # policy (approval on mutations, writable only under out/) still governs its items.
    tasks = """\
  policy: { writableRoots: [out] }
  tasks:
    - id: save
      uses: action:example.utility.put
      with: { path: out/note.txt, content: hi }
"""
    path = _setup(tmp_path, tasks=tasks)
    rolled = cli("--output", "json", "roll", path, "--db", tmp_path / "s.db")
    assert rolled.exit_code == 3, rolled.stderr
    assert rolled.json()["data"]["pendingApprovals"]
    assert not (tmp_path / "out" / "note.txt").exists()
    outside = tasks.replace("out/note.txt", "elsewhere.txt")
    path = _setup(tmp_path / "second", tasks=outside)
    denied = cli("--output", "json", "roll", path, "--db", tmp_path / "t.db")
    assert denied.exit_code == 4, denied.stderr
    assert denied.error_json()["error"]["code"] == "policy.path_not_writable"
    assert not (tmp_path / "second" / "elsewhere.txt").exists()


def test_a_pack_tool_reaches_a_real_provider_under_a_wire_safe_name(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.llm_servers.openai_wire import responses_body
    from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackServer() as server:
        # Providers accept only [A-Za-z0-9_-] tool names: the pack tool is offered as
        # example_utility_shout and the call is run as example.utility.shout.
        server.script(
            JsonReply(responses_body(calls=[("call_1", "example_utility_shout", {"text": "hi"})])),
            JsonReply(responses_body(text="done", response_id="resp_2")),
        )
        scripted = "    providerOptions:\n      toolInput: { text: hi }\n      finalText: done\n"
        manifest = (
            MANIFEST.replace("providers: [scripted]", "providers: [model]")
            .replace("provider: scripted", "provider: model")
            .replace(scripted, "")
        )
        tasks = """\
  policy: { networkAllowlist: [127.0.0.1] }
  tasks:
    - id: cry
      uses: agent:example.utility.crier
      with: { prompt: shout }
"""
        path = _setup(tmp_path, manifest=manifest, tasks=tasks)
        text = path.read_text(encoding="utf-8").replace(
            "scripted: { kind: fake }",
            f'model: {{ kind: openai, endpoint: "{server.url("/v1/responses")}" }}',
        )
        path.write_text(text, encoding="utf-8")
        rolled = cli("--output", "json", "roll", path, "--db", tmp_path / "s.db")
        assert rolled.exit_code == 0, rolled.stderr
        offered = [tool["name"] for tool in server.requests[0].json["tools"]]
        assert offered == ["example_utility_shout"]
        returned = server.requests[1].json["input"]
    assert rolled.json()["data"]["output"]["cry"]["text"] == "done"
    # The tool ran (builtin.echo echoes its input) and its result went back to the model.
    assert any(item.get("type") == "function_call_output" for item in returned)


def test_compile_problems_in_pack_items_are_located_in_the_manifest(
    cli: Any, tmp_path: Path
) -> None:
    path = _setup(tmp_path)
    # The workflow's provider is not the fake one, so the pack agent's fake-only options
    # are wrong: the compiler finds that in the merged workflow, the user edits the manifest.
    text = path.read_text(encoding="utf-8").replace(
        "scripted: { kind: fake }", 'scripted: { kind: openai, endpoint: "http://127.0.0.1:9" }'
    )
    path.write_text(text, encoding="utf-8")
    found = _refused(cli("--output", "json", "check", path))
    manifest = tmp_path / "packs" / "utility" / "agentctl-pack.yaml"
    assert {(d["path"], d["file"], d["line"]) for d in found} == {
        (
            'spec.agents["example.utility.crier"].providerOptions.toolInput',
            str(manifest),
            _line(manifest, "toolInput:"),
        ),
        (
            'spec.agents["example.utility.crier"].providerOptions.finalText',
            str(manifest),
            _line(manifest, "finalText:"),
        ),
    }


def test_a_one_file_pack_beside_the_workflow_and_a_lock_shared_by_two_workflows(
    cli: Any, tmp_path: Path
) -> None:
    manifest = tmp_path / "utility.pack.yaml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    reference = (
        "    - name: example.utility\n      version: 1.2.0\n"
        "      source: { path: utility.pack.yaml }\n"
    )
    first = _setup(tmp_path / "unused", reference=reference)
    body = first.read_text(encoding="utf-8")
    for name in ("one.yaml", "two.yaml"):
        (tmp_path / name).write_text(body.replace("name: packed", f"name: {name[:3]}"), "utf-8")
    assert cli("pack", "lock", tmp_path / "one.yaml").exit_code == 0
    assert cli("pack", "lock", tmp_path / "two.yaml").exit_code == 0
    lock = json.loads((tmp_path / "agentctl.pack.lock").read_text(encoding="utf-8"))
    assert [p["source"]["path"] for p in lock["packs"]] == ["utility.pack.yaml"]
    # The pack is the manifest alone: the lock file, the database and the other workflow
    # beside it are not part of it, so runs in that directory keep verifying.
    db = tmp_path / "s.db"
    for name in ("one.yaml", "two.yaml", "one.yaml"):
        rolled = cli("--output", "json", "roll", tmp_path / name, "--db", db)
        assert rolled.exit_code == 0, rolled.stderr
    manifest.write_text(MANIFEST + "# edited\n", encoding="utf-8")
    found = _refused(cli("--output", "json", "check", tmp_path / "two.yaml"))
    assert "changed after it was locked (manifest, files differ" in found[0]["message"]


def test_pack_items_cannot_read_variables_files(cli: Any, tmp_path: Path) -> None:
    manifest = MANIFEST.replace(
        "      - id: make\n        uses: action:stamp\n",
        "      - id: make\n        uses: action:stamp\n        varsFiles: [v.yaml]\n",
    )
    path = _setup(tmp_path, manifest=manifest)
    found = _refused(cli("--output", "json", "check", path))
    assert [(d["code"], d["path"]) for d in found] == [
        ("unsupported_capability", "workflows.label.tasks[0].varsFiles")
    ]
    manifest_file = tmp_path / "packs" / "utility" / "agentctl-pack.yaml"
    assert found[0]["file"] == str(manifest_file)
    assert found[0]["line"] == _line(manifest_file, "varsFiles")


def test_a_yaml_lock_as_upstream_writes_it_is_read(cli: Any, tmp_path: Path) -> None:
    reference = (
        "    - name: example.utility\n      version: 1.2.0\n      source: { path: packs/utility }\n"
    )
    path = _setup(tmp_path, reference=reference)
    manifest = tmp_path / "packs" / "utility" / "agentctl-pack.yaml"
    # YAML, packs as a mapping, and no `content` (upstream pins the manifest bytes only).
    (tmp_path / "agentctl.pack.lock").write_text(
        "apiVersion: agentctl.dev/pack-lock/v1\n"
        "packs:\n"
        "  example.utility:\n"
        "    version: 1.2.0\n"
        "    source: { path: packs/utility }\n"
        f"    integrity: {_digest(manifest)}\n",
        encoding="utf-8",
    )
    assert cli("--output", "json", "check", path).exit_code == 0
    verified = cli("--output", "json", "pack", "verify", path)
    assert verified.exit_code == 0, verified.stderr
    # Files beside the manifest are not pinned by such a lock; the manifest still is.
    (tmp_path / "packs" / "utility" / "README.md").write_text("changed\n", encoding="utf-8")
    assert cli("--output", "json", "check", path).exit_code == 0
    manifest.write_text(MANIFEST + "# edited\n", encoding="utf-8")
    found = _refused(cli("--output", "json", "check", path))
    assert "changed after it was locked (manifest differ" in found[0]["message"]
    (tmp_path / "agentctl.pack.lock").write_text("packs: [\n", encoding="utf-8")
    broken = _refused(cli("--output", "json", "check", path))
    assert "agentctl.pack.lock" in broken[0]["message"]
    assert "not valid YAML or JSON" in broken[0]["message"]


def test_a_pack_reference_may_name_a_version_range(cli: Any, tmp_path: Path) -> None:
    digest = "sha256:" + hashlib.sha256(MANIFEST.encode()).hexdigest()
    for index, (wanted, accepted) in enumerate(
        (("^1.0", True), ("~1.2", True), (">=1.0 <2", True), ("~1.3", False))
    ):
        reference = (
            f"    - name: example.utility\n      version: '{wanted}'\n      path: packs/utility\n"
            f"      integrity: {digest}\n"
        )
        path = _setup(tmp_path / str(index), reference=reference)
        checked = cli("--output", "json", "check", path)
        if accepted:
            assert checked.exit_code == 0, (wanted, checked.stderr)
            # The lock holds the version found; the range still names it.
            assert cli("pack", "lock", path).exit_code == 0
            assert cli("--output", "json", "check", path).exit_code == 0
        else:
            found = _refused(checked)
            assert "`example.utility` ~1.3 is declared, but its manifest is" in found[0]["message"]


def test_manifest_dependencies_as_a_mapping_are_verified_against_spec_packs(
    cli: Any, tmp_path: Path
) -> None:
    base = tmp_path / "packs" / "base"
    base.mkdir(parents=True)
    (base / "agentctl-pack.yaml").write_text(
        "apiVersion: agentctl.dev/pack/v1alpha1\nname: example.base\nversion: 1.4.0\n",
        encoding="utf-8",
    )
    manifest = MANIFEST.replace(
        "providers: [scripted]\n", "providers: [scripted]\ndependencies:\n  example.base: ^1.2\n"
    )
    path = _setup(tmp_path, manifest=manifest)
    found = _refused(cli("--output", "json", "check", path))
    assert [d["code"] for d in found] == ["missing_reference"]
    assert "depends on `example.base` ^1.2, but it is not declared" in found[0]["message"]
    text = path.read_text(encoding="utf-8").replace(
        "  packTrust:",
        "    - name: example.base\n      version: 1.4.0\n      path: packs/base\n"
        f"      integrity: {_digest(base / 'agentctl-pack.yaml')}\n  packTrust:",
    )
    path.write_text(text, encoding="utf-8")
    checked = cli("--output", "json", "check", path)
    assert checked.exit_code == 0, checked.stderr


def test_a_pack_for_another_agentctl_says_what_it_requires(cli: Any, tmp_path: Path) -> None:
    from agentctl.version import __version__

    manifest = MANIFEST.replace('agentctl: ">=0.1.0, <1.0.0"', 'agentctl: ">=99.0"')
    path = _setup(tmp_path, manifest=manifest)
    found = _refused(cli("--output", "json", "check", path))
    assert found[0]["code"] == "unsupported_version"
    assert found[0]["message"] == (
        f"pack `example.utility` requires agentctl >=99.0, this is {__version__}"
    )


def test_packs_inspect_and_verify_a_manifest(cli: Any, tmp_path: Path) -> None:
    _setup(tmp_path)
    manifest = tmp_path / "packs" / "utility" / "agentctl-pack.yaml"
    shown = cli("--output", "json", "packs", "inspect", manifest)
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["kind"] == "PackInspection"
    data = shown.json()["data"]
    assert (data["name"], data["version"], data["integrity"]) == (
        "example.utility",
        "1.2.0",
        _digest(manifest),
    )
    assert data["agentctl"]["requires"] == ">=0.1.0, <1.0.0" and data["agentctl"]["satisfied"]
    assert "example.utility.stamp" in data["items"]["actions"]
    # The directory names its manifest too.
    assert cli("packs", "inspect", manifest.parent).exit_code == 0
    good = cli("--output", "json", "packs", "verify", manifest, "--integrity", _digest(manifest))
    assert good.exit_code == 0, good.stderr
    assert good.json()["data"]["verified"] is True
    bad = cli("--output", "json", "packs", "verify", manifest, "--integrity", "sha256:" + "0" * 64)
    assert bad.exit_code == 2
    assert "does not match the integrity given" in bad.error_json()["error"]["message"]
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: agentctl.dev/pack/v1alpha1\nname: x\n")
    refused = cli("--output", "json", "packs", "inspect", broken)
    assert refused.exit_code == 2 and refused.error_json()["error"]["code"] == "pack.invalid"


def test_packs_update_verify_lock_and_the_locked_flag(cli: Any, tmp_path: Path) -> None:
    path = _setup(tmp_path)
    # --locked: a workflow with packs needs its lock.
    found = _refused(cli("--output", "json", "--locked", "check", path))
    assert "--locked" in found[0]["message"] and "agentctl.pack.lock" in found[0]["message"]
    assert cli("--offline", "packs", "lock", path).exit_code == 0
    assert cli("--output", "json", "check", path, "--locked").exit_code == 0
    assert cli("packs", "verify-lock", path).exit_code == 0
    (tmp_path / "packs" / "utility" / "README.md").write_text("changed\n", encoding="utf-8")
    assert cli("packs", "verify-lock", path).exit_code == 2
    # --locked never rewrites the lock.
    locked = cli("--output", "json", "--locked", "packs", "update", path)
    assert locked.exit_code == 2 and locked.error_json()["error"]["code"] == "pack.locked"
    unknown = cli("--output", "json", "packs", "update", path, "--pack", "nope")
    assert unknown.exit_code == 2 and "no pack `nope`" in unknown.error_json()["error"]["message"]
    updated = cli("--output", "json", "packs", "update", path, "--pack", "example.utility")
    assert updated.exit_code == 0, updated.stderr
    assert [p["name"] for p in updated.json()["data"]["packs"]] == ["example.utility"]
    assert cli("packs", "verify-lock", path).exit_code == 0
    assert cli("pack", "verify", path).exit_code == 0  # the alias and its old form
