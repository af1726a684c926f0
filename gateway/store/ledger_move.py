"""Moving a ledger from SQLite to PostgreSQL (``agent-gateway move-ledger``, issue 37).

A team that outgrows one machine keeps its history and its open requests: every row of the
SQLite ledger is copied into an empty PostgreSQL ledger of the same schema, in one
transaction (all or nothing), with the same ids, and the identity sequences set past them.
Both backends keep the same values (times as ISO text, flags as 0/1, JSON as text:
gateway/store/dialect.py), so a row is copied as it is.

The gateway must be stopped: the data dir's lock is held for the whole move, so a gateway
that runs refuses it, and one started meanwhile refuses to start. Both ledgers are first
opened by the store, which migrates each to the newest schema. The target must be empty (a
second move, or a ledger already in use, is refused before anything is written). Tables
are filled parents first (the target's foreign keys decide the order). The SQLite file is
left as it was: it is the backup until the gateway runs well on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from gateway.config.ledger_url import PgTarget
from gateway.errors import StoreError
from gateway.store.datadir import hold_data_dir
from gateway.store.store import DATABASE_FILE, Store

__all__ = ["move_to_postgresql"]

BATCH = 1000
SKIPPED = frozenset({"schema_version"})  # each ledger's own, written by its migrations


def _sqlite_tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    names = [
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {
        name: [str(column[1]) for column in conn.execute(f'PRAGMA table_info("{name}")')]
        for name in names
        if name not in SKIPPED
    }


async def _pg_tables(conn: psycopg.AsyncConnection[Any]) -> dict[str, list[str]]:
    cursor = await conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    )
    found: dict[str, list[str]] = {}
    for table, column in await cursor.fetchall():
        found.setdefault(str(table), []).append(str(column))
    return found


async def _parents_first(conn: psycopg.AsyncConnection[Any], tables: Iterable[str]) -> list[str]:
    """``tables`` ordered so that each comes after the tables its foreign keys name."""
    cursor = await conn.execute(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c"
        " WHERE c.contype = 'f'"
    )
    parents: dict[str, set[str]] = {}
    for child, parent in await cursor.fetchall():
        parents.setdefault(str(child).strip('"'), set()).add(str(parent).strip('"'))
    wanted = list(tables)
    ordered: list[str] = []
    placed: set[str] = set()

    def place(table: str, path: tuple[str, ...]) -> None:
        if table in placed or table in path:
            return
        for parent in sorted(parents.get(table, ())):
            if parent in wanted:
                place(parent, (*path, table))
        placed.add(table)
        ordered.append(table)

    for table in wanted:
        place(table, ())
    return ordered


async def _identity_columns(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str]]:
    cursor = await conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES'"
    )
    return [(str(t), str(c)) for t, c in await cursor.fetchall()]


async def move_to_postgresql(data_dir: Path, target: PgTarget) -> dict[str, int]:
    """Copy the SQLite ledger of ``data_dir`` into the empty PostgreSQL ledger ``target``;
    returns the rows copied per table. StoreError, nothing written, when the target holds
    data or a table of the source has no place in it."""
    source = data_dir / DATABASE_FILE
    if not source.is_file():
        raise StoreError(f"no SQLite ledger at {source}")
    with hold_data_dir(data_dir):  # no gateway runs on it meanwhile
        async with Store.open(data_dir):
            pass  # migrated to the newest schema
        async with Store.open(data_dir, postgresql=target.for_a_command()):
            pass  # the target's schema made, or found
        reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            return await _copy(reader, target)
        finally:
            reader.close()


async def _copy(reader: sqlite3.Connection, target: PgTarget) -> dict[str, int]:
    tables = _sqlite_tables(reader)
    conn = await psycopg.AsyncConnection.connect(target.url, **target.connect_options())
    try:
        async with conn.transaction():
            await conn.execute("SET LOCAL statement_timeout = 0")
            there = await _pg_tables(conn)
            missing = sorted(set(tables) - set(there))
            if missing:
                raise StoreError(
                    f"the PostgreSQL ledger has no table {', '.join(missing)}: is it the "
                    "same version of agent-gateway?"
                )
            for table in there:
                if table in SKIPPED:
                    continue
                query = sql.SQL("SELECT 1 FROM {} LIMIT 1").format(sql.Identifier(table))
                if await (await conn.execute(query)).fetchone() is not None:
                    raise StoreError(
                        f"the PostgreSQL ledger is not empty (table {table} has rows): a "
                        "ledger is moved into a new database only"
                    )
            identities = await _identity_columns(conn)
            overriding = {table for table, _ in identities}
            copied: dict[str, int] = {}
            for table in await _parents_first(conn, tables):
                columns = [c for c in tables[table] if c in there[table]]
                copied[table] = await _copy_table(
                    reader, conn, table, columns, overriding=table in overriding
                )
            for table, column in identities:
                await conn.execute(
                    sql.SQL(
                        "SELECT setval(pg_get_serial_sequence({t}, {c}),"
                        " coalesce(max({col}), 1), max({col}) IS NOT NULL) FROM {tbl}"
                    ).format(
                        t=sql.Literal(table),
                        c=sql.Literal(column),
                        col=sql.Identifier(column),
                        tbl=sql.Identifier(table),
                    )
                )
    finally:
        await conn.close()
    return copied


async def _copy_table(
    reader: sqlite3.Connection,
    conn: psycopg.AsyncConnection[Any],
    table: str,
    columns: list[str],
    *,
    overriding: bool,
) -> int:
    names = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    insert = sql.SQL("INSERT INTO {} ({}) {}VALUES ({})").format(
        sql.Identifier(table),
        names,
        sql.SQL("OVERRIDING SYSTEM VALUE " if overriding else ""),
        sql.SQL(", ").join(sql.Placeholder() for _ in columns),
    )
    listed = ", ".join(f'"{c}"' for c in columns)
    rows = reader.execute(f'SELECT {listed} FROM "{table}"')
    count = 0
    async with conn.cursor() as cursor:
        while batch := rows.fetchmany(BATCH):
            await cursor.executemany(insert, batch)
            count += len(batch)
    return count
