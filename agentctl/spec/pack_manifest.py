"""Pack manifests (``agentctl.dev/pack/v1alpha1``): what a local pack declares.

A pack is reviewed, reusable workflow content — actions, agents, tools and sub-workflow
definitions — not plugin code. Its manifest is one YAML (or JSON) file:

.. code-block:: yaml

    apiVersion: agentctl.dev/pack/v1alpha1
    name: example.utility          # dotted; items load as example.utility.<item>
    version: 1.2.0                 # semantic version
    agentctl: ">=0.1.0, <1.0.0"    # which agentctl versions it works with
    actions: { stamp: { kind: builtin.assign } }
    agents: {}
    tools: {}
    workflows: {}                  # sub-workflow definitions
    capabilities: []
    providers: []                  # provider names the workflow must define
    policyDefaults: {}             # informational: never applied, never weakens policy

The items themselves are validated with the workflow document's own models (see
:mod:`agentctl.spec.packs`); this module checks the envelope and compares versions.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from agentctl.spec.models_common import JsonObject, SpecModel

__all__ = [
    "MANIFEST_API_VERSION",
    "MANIFEST_FILE",
    "PackManifest",
    "satisfies",
    "version_matches",
]

MANIFEST_API_VERSION = "agentctl.dev/pack/v1alpha1"
MANIFEST_FILE = "agentctl-pack.yaml"
"""The manifest's name when a pack reference names a directory."""

_DOTTED_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$")
_SEMVER_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_COMPARATOR_RE = re.compile(r"^(>=|<=|>|<|==|=|\^|~)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


class PackManifest(SpecModel):
    """The manifest envelope; ``actions`` … ``workflows`` are checked item by item later."""

    api_version: Literal["agentctl.dev/pack/v1alpha1"] = Field(alias="apiVersion")
    name: str
    version: str
    agentctl: str = "*"
    description: str | None = None
    # Pack name -> version requirement, as upstream writes it (a list of {name, version}
    # is read too). Each must be declared in the workflow's own spec.packs at a version
    # that satisfies it: agentctl verifies dependencies, it never fetches them.
    dependencies: dict[str, str] = Field(default_factory=dict)
    actions: dict[str, Any] = Field(default_factory=dict)
    agents: dict[str, Any] = Field(default_factory=dict)
    tools: dict[str, Any] = Field(default_factory=dict)
    workflows: dict[str, Any] = Field(default_factory=dict)
    capabilities: list[str] = Field(default_factory=list)
    providers: list[str] = Field(default_factory=list)
    policy_defaults: JsonObject = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if _DOTTED_RE.fullmatch(value) is None:
            raise ValueError("a pack name is dot-separated identifiers, e.g. `example.utility`")
        return value

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if _SEMVER_RE.fullmatch(value) is None:
            raise ValueError("a pack version is a semantic version such as `1.2.0`")
        return value

    @field_validator("agentctl")
    @classmethod
    def _requirement(cls, value: str) -> str:
        satisfies("0.0.0", value)  # raises ValueError for a malformed requirement
        return value

    @field_validator("dependencies", mode="before")
    @classmethod
    def _dependencies(cls, value: Any) -> Any:
        if isinstance(value, list):
            pairs: dict[str, Any] = {}
            for entry in value:
                if not isinstance(entry, dict) or set(entry) != {"name", "version"}:
                    raise ValueError(
                        "a dependency is `NAME: RANGE` (or `{name: NAME, version: RANGE}`)"
                    )
                pairs[str(entry["name"])] = entry["version"]
            value = pairs
        if isinstance(value, dict):
            for name, wanted in value.items():
                if not isinstance(wanted, str):
                    raise ValueError(f"dependency `{name}` needs a version range such as ^1.0")
                satisfies("0.0.0", wanted)  # raises ValueError for a malformed range
        return value


def _triple(text: str) -> tuple[int, int, int]:
    match = _SEMVER_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"`{text}` is not a semantic version")
    return int(match[1]), int(match[2]), int(match[3])


def version_matches(version: str, wanted: str) -> bool:
    """Whether a pack at ``version`` is the one ``wanted`` names: the same semantic version,
    or one a range (``^1.0``, ``~1.2``, ``>=1.0 <2``) accepts."""
    if _SEMVER_RE.fullmatch(wanted.strip()) is not None:
        return version == wanted.strip()
    return satisfies(version, wanted)


def satisfies(version: str, requirement: str) -> bool:
    """Whether ``version`` meets a requirement such as ``">=0.1.0, <1.0.0"`` or ``"^0.1"``.

    Comparators are separated by commas or spaces and must all hold; ``*`` or an empty
    requirement accepts every version. Raises ``ValueError`` for a malformed requirement."""
    have = _triple(version)
    parts = [p for p in re.split(r"[,\s]+(?=[<>=^~v\d*])", requirement.strip()) if p.strip()]
    for part in parts:
        part = part.strip().rstrip(",").strip()
        if part in ("*", ""):
            continue
        match = _COMPARATOR_RE.fullmatch(part)
        if match is None:
            raise ValueError(f"`{part}` is not a version comparator (use >=1.0.0, ^1.2, ~1.2 …)")
        op = match[1] or "^"
        given = [match[2], match[3], match[4]]
        want = tuple(int(x or 0) for x in given)
        precision = sum(1 for x in given if x is not None)
        if op in ("=", "=="):
            ok = have[:precision] == want[:precision]
        elif op == ">=":
            ok = have >= want
        elif op == ">":
            ok = have > want
        elif op == "<=":
            ok = have <= want
        elif op == "<":
            ok = have < want
        elif op == "~":
            upper = (want[0] + 1, 0, 0) if precision == 1 else (want[0], want[1] + 1, 0)
            ok = want <= have < upper
        else:  # caret: the left-most non-zero part may not change
            if want[0] > 0 or precision == 1:
                upper = (want[0] + 1, 0, 0)
            elif want[1] > 0 or precision == 2:
                upper = (0, want[1] + 1, 0)
            else:
                upper = (0, 0, want[2] + 1)
            ok = want <= have < upper
        if not ok:
            return False
    return True
