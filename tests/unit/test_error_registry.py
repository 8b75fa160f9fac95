"""One error-code registry: every code the source raises is an ErrorCode and has a row in
docs/errors.md with the exit code the raising class ends with.

The source is read, not run: an AST walk collects the string literals that reach a
``code``: ``code=`` keywords (including both sides of ``x or "a.b"`` / ``"a" if … else
"b"``), ``code = …`` / ``default_code = …`` assignments, ``code`` parameter defaults and
``{"code": …}`` dicts. Literals passed positionally to a call inside those expressions
(``error.get("code")``) are not codes. f-string codes (``f"mcp.{kind}"``) must match at
least one registered code.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections import defaultdict
from pathlib import Path

from agentctl.error_codes import ErrorCode

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "agentctl"
ERRORS_DOC = ROOT / "docs" / "errors.md"
LANGUAGE_DOC = ROOT / "docs" / "workflow-language.md"
EXIT_CODES = {"0", "1", "2", "3", "4", "5", "6", "130"}
_CODE_NAMES = ("code", "default_code")


def _exit_codes_by_class() -> dict[str, int]:
    """Exception class name -> the exit code the CLI ends with when it escapes."""
    import agentctl.artifacts.store
    import agentctl.policy.secrets
    import agentctl.providers.base
    from agentctl.errors import AgentctlError

    del agentctl  # the imports register the subclasses defined outside agentctl.errors
    found: dict[str, int] = {}
    pending: list[type[AgentctlError]] = [AgentctlError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls.exit_code
        pending.extend(cls.__subclasses__())
    # A task failure fails its task; the run then fails (exit 4).
    found["TaskFailure"] = 4
    return found


def _codes_in(node: ast.AST) -> tuple[list[str], list[str]]:
    """Literal codes (and ``ErrorCode`` members) and f-string patterns in a code-valued
    expression."""
    skipped: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            skipped.update(id(arg) for arg in sub.args)
        if isinstance(sub, ast.JoinedStr):
            skipped.update(id(part) for part in sub.values)
    literals: list[str] = []
    patterns: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr) and id(sub) not in skipped:
            patterns.append(
                "".join(
                    re.escape(part.value) if isinstance(part, ast.Constant) else "[a-z_]+"
                    for part in sub.values
                )
            )
        elif (
            isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in skipped
        ):
            literals.append(sub.value)
        elif (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "ErrorCode"
            and id(sub) not in skipped
        ):
            # A member names its code: ``ErrorCode.POLICY_DENIED`` raises "policy.denied".
            member = ErrorCode.__members__.get(sub.attr)
            literals.append(member.value if member is not None else f"ErrorCode.{sub.attr}")
    return literals, patterns


def _code_values(tree: ast.AST) -> list[tuple[ast.AST, str | None]]:
    """(code-valued expression, name of the class it is passed to when a call)."""
    found: list[tuple[ast.AST, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            callee = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            found.extend((kw.value, callee) for kw in node.keywords if kw.arg == "code")
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id in _CODE_NAMES for t in node.targets):
                found.append((node.value, None))
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            if isinstance(target, ast.Name) and target.id in _CODE_NAMES and node.value:
                found.append((node.value, None))
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            defaults = zip(
                positional[len(positional) - len(node.defaults) :], node.defaults, strict=True
            )
            for arg, default in [*defaults, *zip(node.kwonlyargs, node.kw_defaults, strict=True)]:
                if arg.arg == "code" and default is not None:
                    found.append((default, None))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "code":
                    found.append((value, None))
    return found


class Collected:
    def __init__(self) -> None:
        self.codes: dict[str, set[str]] = defaultdict(set)
        self.patterns: dict[str, set[str]] = defaultdict(set)
        self.raised_by: dict[str, set[str]] = defaultdict(set)


def collect(root: Path) -> Collected:
    out = Collected()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for value, callee in _code_values(tree):
            where = f"{path.relative_to(root.parent)}:{getattr(value, 'lineno', 0)}"
            literals, patterns = _codes_in(value)
            for code in literals:
                out.codes[code].add(where)
                if callee is not None:
                    out.raised_by[code].add(callee)
            for pattern in patterns:
                out.patterns[pattern].add(where)
    return out


def _diagnostic_codes() -> set[str]:
    """The workflow diagnostic codes docs/workflow-language.md lists (a separate set)."""
    text = LANGUAGE_DOC.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.MULTILINE))


def _documented() -> dict[str, tuple[str, str, str]]:
    rows: dict[str, tuple[str, str, str]] = {}
    for line in ERRORS_DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", line)
        if match:
            code, exits, meaning, step = match.groups()
            assert code not in rows, f"{code} is documented twice"
            rows[code] = (exits.strip(), meaning.strip(), step.strip())
    return rows


def unregistered(collected: Collected) -> list[str]:
    registered = {code.value for code in ErrorCode}
    diagnostics = _diagnostic_codes()
    problems = [
        f"{code} ({', '.join(sorted(where))})"
        for code, where in collected.codes.items()
        if code not in registered and not ("." not in code and code in diagnostics)
    ]
    problems += [
        f"pattern {pattern} ({', '.join(sorted(where))}) matches no registered code"
        for pattern, where in collected.patterns.items()
        if not any(re.fullmatch(pattern, code) for code in registered)
    ]
    return sorted(problems)


def test_every_raised_code_is_registered() -> None:
    problems = unregistered(collect(SOURCE))
    assert not problems, "codes missing from agentctl.error_codes.ErrorCode:\n" + "\n".join(
        problems
    )


def test_the_walk_finds_a_new_code(tmp_path: Path) -> None:
    package = tmp_path / "agentctl"
    package.mkdir()
    (package / "new.py").write_text(
        textwrap.dedent("""
            def check(error):
                code = error.get("code") or "made.up_default"
                raise UsageError("x", code="made.up" if error else "store.not_found")
            def pick(kind):
                return TaskFailure("y", code=f"nowhere.{kind}")
        """)
    )
    problems = unregistered(collect(package))
    assert [p.split(" (")[0] for p in problems] == [
        "made.up",
        "made.up_default",
        r"pattern nowhere\.[a-z_]+",
    ]


def test_every_registered_code_is_documented_once_with_its_exit_code() -> None:
    rows = _documented()
    registered = {code.value for code in ErrorCode}
    assert sorted(registered - rows.keys()) == [], "undocumented in docs/errors.md"
    assert sorted(rows.keys() - registered) == [], "documented but not in ErrorCode"
    for code, (exits, meaning, step) in rows.items():
        listed = {part.strip() for part in exits.split(",")}
        assert listed and listed <= EXIT_CODES, f"{code}: exit cell {exits!r}"
        assert meaning and step, f"{code} needs a meaning and a next step"


def test_documented_exit_codes_match_the_raising_classes() -> None:
    exits = _exit_codes_by_class()
    rows = _documented()
    wrong = []
    for code, classes in collect(SOURCE).raised_by.items():
        if code not in rows:
            continue
        listed = {part.strip() for part in rows[code][0].split(",")}
        for name in classes:
            if name in exits and str(exits[name]) not in listed:
                wrong.append(f"{code}: raised by {name} (exit {exits[name]}), docs say {listed}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_registered_code_is_stale() -> None:
    """Each member still appears in the source (a literal, ``ErrorCode.NAME``, or an
    f-string that makes it)."""
    literals: set[str] = set()
    patterns: list[str] = []
    for path in SOURCE.rglob("*.py"):
        if path.name == "error_codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                literals.add(node.value)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "ErrorCode"
                and node.attr in ErrorCode.__members__
            ):
                literals.add(ErrorCode[node.attr].value)
        patterns.extend(collect_patterns(path))
    stale = [
        code.value
        for code in ErrorCode
        if code.value not in literals and not any(re.fullmatch(p, code.value) for p in patterns)
    ]
    assert not stale, f"registered but never raised: {stale}"


def collect_patterns(path: Path) -> list[str]:
    out: list[str] = []
    for value, _ in _code_values(ast.parse(path.read_text(encoding="utf-8"))):
        out.extend(_codes_in(value)[1])
    return out
