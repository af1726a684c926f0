"""What differs between the ledger's two backends, SQLite and PostgreSQL, in one place.

The store's SQL is written once, in the SQLite spelling with ``?`` parameters; everything
else in it runs on both (times are ISO text, flags INTEGER 0/1, JSON text, ties broken by a
table's key, never ``rowid``). PostgreSQL runs it through :func:`to_postgresql`: the few
SQLite-only fragments (:data:`FRAGMENTS`) are swapped for their PostgreSQL spelling, ``%``
is escaped and ``?`` becomes psycopg's ``%s``. A ``?`` inside a string literal would be
taken for a parameter: tests/test_store_dialect.py refuses one in every text the store runs.

Migrations are DDL in SQLite's spelling too; :func:`postgresql_ddl` rewrites a statement's
types (``INTEGER PRIMARY KEY AUTOINCREMENT`` to an identity, ``INTEGER`` to ``BIGINT``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "FOR_UPDATE",
    "FOR_UPDATE_OF_E",
    "FOR_UPDATE_OF_I",
    "FRAGMENTS",
    "POSTGRESQL",
    "SQLITE",
    "Backend",
    "Dialect",
    "postgresql_ddl",
    "to_postgresql",
]


class Backend(StrEnum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True, kw_only=True, slots=True)
class Dialect:
    """How a backend opens its transactions, and the one clause a closure appends.

    ``begin_write`` opens a write; ``begin_read`` a read of several statements (None: the
    read runs bare, as SQLite's single writer does under its lock); ``begin_snapshot`` a
    read on the read-only connection.
    """

    backend: Backend
    begin_write: str
    begin_read: str | None
    begin_snapshot: str


SQLITE = Dialect(
    backend=Backend.SQLITE,
    begin_write="BEGIN IMMEDIATE",
    begin_read=None,
    begin_snapshot="BEGIN",
)
POSTGRESQL = Dialect(
    backend=Backend.POSTGRESQL,
    begin_write="BEGIN",
    begin_read="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    begin_snapshot="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
)

# Appended to a SELECT that locks the rows it reads before a write that depends on them
# (many writers, docs/decisions.md): a comment on SQLite, whose BEGIN IMMEDIATE already
# excludes every other writer; the clause itself on PostgreSQL. Locks are taken in one
# order: a session's row before an interaction's.
FOR_UPDATE = " /* FOR UPDATE */"
FOR_UPDATE_OF_I = " /* FOR UPDATE OF i */"  # SELECT_INTERACTION: the interaction's row only
FOR_UPDATE_OF_E = " /* FOR UPDATE OF e */"  # a join of runtime_epochs e: the epoch's row only
_LOCK_COMMENT = re.compile(r"/\* (FOR UPDATE(?: OF \w+)?) \*/")

# SQLite-only text the store runs -> its PostgreSQL spelling (exact text; the test checks
# that each one still occurs in the store's SQL, so none can go stale silently).
FRAGMENTS: tuple[tuple[str, str], ...] = (
    # interaction_rows.SELECT_INTERACTION: the live votes as a JSON array of arrays
    (
        "(SELECT json_group_array(json_array(s.person, s.actor_platform, s.actor_user_id,\n"
        "                    s.actor_display, s.action_id, s.needed, s.surface, s.content_hash,\n"
        "                    s.voted_at))\n"
        "        FROM (SELECT * FROM votes WHERE interaction_id = i.id AND withdrawn_at IS NULL\n"
        "              ORDER BY voted_at, person) s)",
        "(SELECT coalesce(json_agg(json_build_array(s.person, s.actor_platform,"
        " s.actor_user_id, s.actor_display, s.action_id, s.needed, s.surface, s.content_hash,"
        " s.voted_at) ORDER BY s.voted_at, s.person), '[]')::text"
        " FROM votes s WHERE s.interaction_id = i.id AND s.withdrawn_at IS NULL)",
    ),
    # cards.COPIES_JSON: a request's card copies as a JSON array of arrays
    (
        "(SELECT json_group_array(json_array(m.id, m.interaction_id, m.platform,\n"
        "                    m.space, m.channel, m.thread, m.message_ref, m.state,\n"
        "                    m.rendered_version, m.error, m.updated_at, m.again))\n"
        "        FROM (SELECT * FROM interaction_messages WHERE interaction_id = i.id\n"
        "              ORDER BY id) m)",
        "(SELECT coalesce(json_agg(json_build_array(m.id, m.interaction_id, m.platform,"
        " m.space, m.channel, m.thread, m.message_ref, m.state, m.rendered_version, m.error,"
        " m.updated_at, m.again) ORDER BY m.id), '[]')::text"
        " FROM interaction_messages m WHERE m.interaction_id = i.id)",
    ),
    # grants: fields of an audit entry's JSON details
    ("json_extract(a.details_json, '$.by')", "(a.details_json::json ->> 'by')"),
    ("json_extract(a.details_json, '$.how')", "(a.details_json::json ->> 'how')"),
    ("json_extract(a.details_json, '$.grant')", "(a.details_json::json ->> 'grant')::bigint"),
    ("json_extract(a.details_json, '$.host')", "(a.details_json::json ->> 'host')"),
    ("char(9)", "chr(9)"),
)


@functools.cache
def to_postgresql(sql: str) -> str:
    """The store's SQLite text as psycopg runs it (cached: the texts are a fixed set).

    A ``?`` inside a string literal is refused (it would become a parameter): write the
    literal as a parameter instead."""
    # split at quotes, the odd pieces are inside literals ('' escapes give an empty piece)
    if any("?" in piece for piece in sql.split("'")[1::2]):
        raise ValueError(f"a '?' inside a string literal of the store's SQL: {sql!r}")
    for sqlite, postgresql in FRAGMENTS:
        sql = sql.replace(sqlite, postgresql)
    sql = _LOCK_COMMENT.sub(r"\1", sql)
    return sql.replace("%", "%%").replace("?", "%s")


_AUTOINCREMENT = re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b")
_INTEGER = re.compile(r"\bINTEGER\b")


def postgresql_ddl(statement: str) -> str:
    """A migration statement in PostgreSQL's types: ids are identities, integers 64-bit
    (SQLite's INTEGER is 64-bit; PostgreSQL's is 32)."""
    statement = _AUTOINCREMENT.sub("BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", statement)
    return _INTEGER.sub("BIGINT", statement)
