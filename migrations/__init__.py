"""Alembic revisions for the agentctl store, shipped as ``agentctl._migrations``."""
