"""The dashboard (``agentctl ui``): a local web app over the store that shows runs and acts.

Only this package imports Starlette. Pages and actions call the engine's own operations
(the same ones the CLI calls), with the actor ``ui``.
"""

from __future__ import annotations

from agentctl.web.app import ACTOR, DashboardConfig, create_app

__all__ = ["ACTOR", "DashboardConfig", "create_app"]
