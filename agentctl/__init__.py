"""agentctl: run AI-agent workflows durably.

The package imports without the CLI; heavy dependencies (SQLAlchemy, Alembic, httpx) load
only in the modules that need them.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
