"""Where the database lives: ``--db``, else ``$AGENTCTL_DB``, else ``.agentctl/runtime.db``.

Kept free of SQLAlchemy so the CLI can resolve paths without importing it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_DB", "MEMORY", "artifact_root", "resolve_db_path"]

DEFAULT_DB = Path(".agentctl") / "runtime.db"
MEMORY = ":memory:"


def resolve_db_path(db: str | os.PathLike[str] | None, *, cwd: Path | None = None) -> str:
    """The database path to use; ``:memory:`` passes through untouched."""
    chosen: str | os.PathLike[str] | None = db or os.environ.get("AGENTCTL_DB") or None
    if chosen is None:
        chosen = DEFAULT_DB
    if str(chosen) == MEMORY:
        return MEMORY
    path = Path(chosen).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    return str(path)


def artifact_root(db_path: str) -> Path | None:
    """The content-addressed artifact store lives in ``artifacts/`` beside the database."""
    if db_path == MEMORY:
        return None
    return Path(db_path).parent / "artifacts"
