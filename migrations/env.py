"""Alembic environment: runs on the connection the store opened (its pragmas, its lock).

agentctl calls Alembic programmatically with ``config.attributes["connection"]`` set to a
connection already inside an IMMEDIATE transaction, so a migration is atomic and two
processes never migrate the same database at once.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from agentctl.store.tables import metadata

config = context.config
connection = config.attributes.get("connection")

if connection is None:
    # Only for maintainers running `alembic` against a scratch database.
    url = config.get_main_option("sqlalchemy.url") or "sqlite:///scratch.db"
    with create_engine(url).begin() as conn:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()
