"""The compiler: a pure function from a validated workflow document to a plan (docs/compiler.md).

``compile_workflow(workflow, source=..., settings=...)`` returns a :class:`CompileResult`
holding the :class:`Plan` (or ``None``) and every located diagnostic found on the way.
"""

from agentctl.compiler.compile import (
    CompileResult,
    CompileSettings,
    compile_document,
    compile_workflow,
)
from agentctl.compiler.plan import PLAN_FORMAT_VERSION, Plan, PlanTask

__all__ = [
    "PLAN_FORMAT_VERSION",
    "CompileResult",
    "CompileSettings",
    "Plan",
    "PlanTask",
    "compile_document",
    "compile_workflow",
]
