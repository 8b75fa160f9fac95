"""The durable store: SQLite tables, engine set-up, migrations and record access.

Import submodules directly (``agentctl.store.engine``, ``agentctl.store.location``): this
package's ``__init__`` stays empty so resolving a path never imports SQLAlchemy, which the
CLI keeps out of ``agentctl --help``.
"""
