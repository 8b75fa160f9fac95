"""The effect protocol is written in types (issue 31): the gate and its helpers compare
``EffectState``/``ApprovalState``/``TaskState`` members and raise ``ErrorCode`` members, so
``mypy --strict`` refuses a misspelt state or code. This test keeps string literals out:
a literal state in a comparison, or a literal code or state passed as ``code=``/``status=``
(or to ``set_status``/``_finish``), fails with the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

from agentctl.error_codes import ErrorCode
from agentctl.store.states import ApprovalState, EffectState, RunState, TaskState

ROOT = Path(__file__).resolve().parents[2]
# The effect protocol: the gate and every helper beside it in engine/effects/.
PROTOCOL = sorted((ROOT / "agentctl" / "engine" / "effects").glob("*.py"))
STATES = {s.value for enum in (EffectState, ApprovalState, TaskState, RunState) for s in enum}
CODES = {c.value for c in ErrorCode}
STATUS_CALLS = {"set_status", "_finish", "finish_effect", "resolve_approval"}


def literal_states_and_codes(source: str, name: str) -> list[str]:
    """Where ``source`` spells a state or an error code as a string literal."""
    found: list[tuple[int, str]] = []

    def literal(node: ast.AST, values: set[str]) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value if node.value in values else None
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            hits = [literal(element, values) for element in node.elts]
            return next((hit for hit in hits if hit is not None), None)
        if isinstance(node, ast.IfExp):
            return literal(node.body, values) or literal(node.orelse, values)
        if isinstance(node, ast.BoolOp):
            return next((h for h in (literal(v, values) for v in node.values) if h), None)
        return None

    for node in ast.walk(ast.parse(source, name)):
        hit: str | None = None
        if isinstance(node, ast.Compare):
            hit = next(
                (h for h in (literal(o, STATES) for o in [node.left, *node.comparators]) if h),
                None,
            )
        elif isinstance(node, ast.keyword) and node.arg in {"status", "code"}:
            hit = literal(node.value, STATES if node.arg == "status" else CODES)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "code":
                    hit = hit or literal(value, CODES)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in STATUS_CALLS:
                hit = next((h for h in (literal(a, STATES) for a in node.args) if h), None)
        if hit is not None:
            found.append((getattr(node, "lineno", 0), hit))
    return [f"{name}:{line}: {hit!r}" for line, hit in sorted(found)]


def test_the_gate_and_its_helpers_name_states_and_codes_by_member() -> None:
    found = [
        spot
        for path in PROTOCOL
        for spot in literal_states_and_codes(
            path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        )
    ]
    assert found == [], "use EffectState/ApprovalState/TaskState and ErrorCode members:\n" + (
        "\n".join(found)
    )


def test_the_check_finds_literal_states_and_codes() -> None:
    source = (
        'if record.status == "succeeded":\n    pass\n'
        'journal.set_status(conn, effect, "uncertain", now)\n'
        'raise TaskFailure(message, code="policy.denied")\n'
        'error = {"code": "effect.uncertain"}\n'
        'resolve(status="approved" if ok else "rejected")\n'
        'if record.status in (EffectState.STARTED, "waiting_for_approval"):\n    pass\n'
        'log.event(conn, "budget.exceeded", {})\n'  # an event name, not a code: allowed
    )
    assert literal_states_and_codes(source, "x.py") == [
        "x.py:1: 'succeeded'",
        "x.py:3: 'uncertain'",
        "x.py:4: 'policy.denied'",
        "x.py:5: 'effect.uncertain'",
        "x.py:6: 'approved'",
        "x.py:7: 'waiting_for_approval'",
    ]
