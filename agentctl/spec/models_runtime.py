"""Run-wide settings: ``runtime`` (concurrency, timeouts, budgets, pricing), ``memory`` and
``output`` (docs/memory.md, docs/budgets.md, docs/workflow-language.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from agentctl.spec.models_common import JsonObject, SpecModel, TimeoutSeconds

__all__ = [
    "Budgets",
    "Embedding",
    "EXPANSION_ITEMS_CEILING",
    "EXPANSION_ITEMS_DEFAULT_CAP",
    "Limits",
    "LongTermMemory",
    "Memory",
    "OutputSettings",
    "PriceEntry",
    "Pricing",
    "PythonSettings",
    "Runtime",
]

PositiveInt = Annotated[int, Field(gt=0)]


class Budgets(SpecModel):
    """Run-wide ceilings; every set value must be > 0 (docs/budgets.md)."""

    max_provider_requests: PositiveInt | None = None
    max_turns: PositiveInt | None = None
    max_tool_calls: PositiveInt | None = None
    max_input_tokens: PositiveInt | None = None
    max_output_tokens: PositiveInt | None = None
    max_total_tokens: PositiveInt | None = None
    max_wall_time_seconds: PositiveInt | None = None
    max_process_output_bytes: PositiveInt | None = None
    max_artifact_bytes: PositiveInt | None = None
    max_tasks: PositiveInt | None = None
    max_expansion_items: PositiveInt | None = None
    max_loop_iterations: PositiveInt | None = None
    max_cost_microusd: PositiveInt | None = None


class PriceEntry(SpecModel):
    """Token prices of one ``provider/model`` in micro-USD per million tokens."""

    input_microusd_per_million_tokens: PositiveInt
    output_microusd_per_million_tokens: PositiveInt
    reasoning_microusd_per_million_tokens: int | None = Field(default=None, ge=0)
    cache_read_microusd_per_million_tokens: int | None = Field(default=None, ge=0)
    cache_write_microusd_per_million_tokens: int | None = Field(default=None, ge=0)


class Pricing(SpecModel):
    """A versioned price sheet for monetary budgets."""

    version: str = Field(min_length=1)
    models: dict[str, PriceEntry] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _provider_model_keys(cls, value: dict[str, PriceEntry]) -> dict[str, PriceEntry]:
        for key in value:
            provider, sep, model = key.partition("/")
            if not sep or not provider or not model or model.endswith("/"):
                raise ValueError(f"pricing key `{key}` must look like `<provider name>/<model>`")
        return value


EXPANSION_ITEMS_DEFAULT_CAP = 256
"""The largest ``maxItems`` a foreach or matrix may declare unless ``runtime.limits`` raises it."""

EXPANSION_ITEMS_CEILING = 100_000
"""The hard ceiling ``runtime.limits.maxItemsPerExpansion`` may be raised to."""


class Limits(SpecModel):
    """Compile-time caps a workflow may raise deliberately (an agentctl addition).

    ``maxItemsPerExpansion`` is the largest ``maxItems`` any ``foreach`` or ``matrix`` may
    declare: 256 by default, as upstream, and at most 100,000. A construct without
    ``maxItems`` is still capped at 32 items.
    """

    max_items_per_expansion: int = Field(
        default=EXPANSION_ITEMS_DEFAULT_CAP, ge=1, le=EXPANSION_ITEMS_CEILING
    )


class Runtime(SpecModel):
    """Scheduling and resource settings of a run (docs/budgets.md)."""

    max_concurrency: int = Field(default=1, ge=1, le=64)
    default_timeout_seconds: TimeoutSeconds = 120
    budgets: Budgets = Field(default_factory=Budgets)
    pricing: Pricing | None = None
    limits: Limits = Field(default_factory=Limits)

    @model_validator(mode="after")
    def _pricing_for_cost_budget(self) -> Runtime:
        if self.budgets.max_cost_microusd is not None and self.pricing is None:
            raise ValueError("`budgets.maxCostMicrousd` requires `runtime.pricing`")
        return self


class Embedding(SpecModel):
    """Embedding settings of the long-term store **[ADV]**."""

    provider: str = "local_hash"
    model: str | None = None
    dimensions: int = Field(default=64, ge=8, le=4096)


class LongTermMemory(SpecModel):
    """The cross-run memory store (docs/memory.md)."""

    provider: str = "sqlite"
    namespace: str = "default"
    retention_days: int | None = Field(default=None, ge=1, le=36500)
    embedding: Embedding = Field(default_factory=Embedding)


class Memory(SpecModel):
    """Initial working memory and the optional long-term store (docs/memory.md)."""

    working: JsonObject = Field(default_factory=dict)
    long_term: LongTermMemory | None = None


def _import_folder(value: str) -> str:
    if "\0" in value or "${{" in value:
        raise ValueError("a spec.python.path entry must be a literal folder name")
    return value


ImportFolder = Annotated[str, Field(min_length=1), AfterValidator(_import_folder)]


class PythonSettings(SpecModel):
    """How ``python.function`` steps find their code (docs/python-steps.md).

    ``path`` lists folders, relative to the workflow file's folder (or absolute), that a
    step's process puts on its import path after that folder; ``agentctl check`` refuses
    one that does not exist.
    """

    path: list[ImportFolder] = Field(default_factory=list)


class OutputSettings(SpecModel):
    """Presentation hints (docs/workflow-language.md). ``showDiff`` defaults to true even for
    ``output: {}``."""

    verbose: bool = False
    show_diff: bool = True
