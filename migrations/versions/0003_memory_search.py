"""Search indexes for long-term memory: an FTS5 table and a per-namespace change counter.

Why: ``builtin.long_term_memory.search`` ranks entries by BM25 (text mode) and compares
embeddings (vector mode). The FTS5 table is an *external content* index over
``memory_entries.text`` (no second copy of the text), and the per-namespace generation
counter lets a process keep a namespace's embedding matrix in memory and know, with one
indexed read, whether any entry changed since it loaded it.

Both are maintained by triggers on ``memory_entries``, so they change inside the same
transaction as the row that changed them: no writer (put, delete, gc, a hand-written
``DELETE``) can leave the index out of step. Neither can be expressed in SQLAlchemy
metadata (a virtual table and triggers), so the schema comparison test ignores names
starting with ``memory_search_``. Existing rows are indexed on upgrade.

On PostgreSQL the text index is PostgreSQL's own full-text search: a GIN expression index
on ``to_tsvector('simple', text)`` (nothing to keep in step, the index follows the row),
and the generation counter is bumped by a PL/pgSQL trigger function.

Revision ID: 0003_memory_search
Revises: 0002_run_workflow
Create Date: 2026-11-29 17:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003_memory_search"
down_revision: str | None = "0002_run_workflow"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BUMP = (
    "INSERT INTO memory_search_generations (namespace, generation) VALUES ({ns}, 1) "
    "ON CONFLICT (namespace) DO UPDATE SET generation = generation + 1;"
)
_FTS_INSERT = "INSERT INTO memory_search_fts (rowid, text) VALUES (new.id, new.text);"
_FTS_DELETE = (
    "INSERT INTO memory_search_fts (memory_search_fts, rowid, text) "
    "VALUES ('delete', old.id, old.text);"
)

_STATEMENTS = (
    "CREATE VIRTUAL TABLE memory_search_fts USING fts5("
    "text, content='memory_entries', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TABLE memory_search_generations ("
    "namespace VARCHAR(255) NOT NULL PRIMARY KEY, generation INTEGER NOT NULL)",
    "CREATE TRIGGER memory_search_after_insert AFTER INSERT ON memory_entries BEGIN "
    + _FTS_INSERT
    + _BUMP.format(ns="new.namespace")
    + " END",
    "CREATE TRIGGER memory_search_after_delete AFTER DELETE ON memory_entries BEGIN "
    + _FTS_DELETE
    + _BUMP.format(ns="old.namespace")
    + " END",
    # Re-embedding (reindex) rewrites only the embedding: the text index is left alone.
    "CREATE TRIGGER memory_search_after_update_text AFTER UPDATE OF text ON memory_entries "
    "BEGIN " + _FTS_DELETE + _FTS_INSERT + " END",
    "CREATE TRIGGER memory_search_after_update AFTER UPDATE ON memory_entries BEGIN "
    + _BUMP.format(ns="old.namespace")
    + _BUMP.format(ns="new.namespace")
    + " END",
    "INSERT INTO memory_search_fts (memory_search_fts) VALUES ('rebuild')",
    "INSERT INTO memory_search_generations (namespace, generation) "
    "SELECT DISTINCT namespace, 1 FROM memory_entries",
)


_PG_BUMP = (
    "INSERT INTO memory_search_generations (namespace, generation) VALUES ({ns}, 1) "
    "ON CONFLICT (namespace) DO UPDATE "
    "SET generation = memory_search_generations.generation + 1;"
)

_PG_STATEMENTS = (
    "CREATE TABLE memory_search_generations ("
    "namespace VARCHAR(255) NOT NULL PRIMARY KEY, generation INTEGER NOT NULL)",
    "CREATE INDEX memory_search_text ON memory_entries "
    "USING GIN (to_tsvector('simple', COALESCE(text, '')))",
    "CREATE FUNCTION memory_search_bump() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP <> 'INSERT' THEN " + _PG_BUMP.format(ns="OLD.namespace") + " END IF; "
    "IF TG_OP <> 'DELETE' THEN " + _PG_BUMP.format(ns="NEW.namespace") + " END IF; "
    "RETURN NULL; END $$",
    "CREATE TRIGGER memory_search_after_change AFTER INSERT OR UPDATE OR DELETE "
    "ON memory_entries FOR EACH ROW EXECUTE FUNCTION memory_search_bump()",
    "INSERT INTO memory_search_generations (namespace, generation) "
    "SELECT DISTINCT namespace, 1 FROM memory_entries",
)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in _PG_STATEMENTS if postgres else _STATEMENTS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS memory_search_after_change ON memory_entries")
        op.execute("DROP FUNCTION IF EXISTS memory_search_bump()")
        op.execute("DROP INDEX IF EXISTS memory_search_text")
        op.execute("DROP TABLE IF EXISTS memory_search_generations")
        return
    for name in ("after_update", "after_update_text", "after_delete", "after_insert"):
        op.execute(f"DROP TRIGGER IF EXISTS memory_search_{name}")
    op.execute("DROP TABLE IF EXISTS memory_search_generations")
    op.execute("DROP TABLE IF EXISTS memory_search_fts")
