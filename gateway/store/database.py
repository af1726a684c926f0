"""The one connection to the ledger, its lock, and the helpers every table module shares.

Every public store method is one transaction taken through :meth:`Database.write` (``BEGIN
IMMEDIATE``) or :meth:`Database.read` (``BEGIN``), under one ``asyncio.Lock``: the gateway
has a single writer, and no method ever sees another's half-done work. ``sqlite3`` errors
are translated to :class:`~gateway.errors.StoreError` here, chained.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError

__all__ = [
    "Clock",
    "Database",
    "conversation_from_row",
    "conversation_params",
    "fetch_all",
    "fetch_one",
    "parse_optional_time",
    "parse_time",
    "utc_now",
]

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime; injected so tests control time."""

JsonObject = Mapping[str, Any]


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def parse_optional_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def conversation_params(conversation: ConversationRef) -> tuple[str, str, str, str]:
    """The four stored parts of a conversation ('' where the platform has none)."""
    return (
        conversation.platform,
        conversation.space or "",
        conversation.channel,
        conversation.thread or "",
    )


def conversation_from_row(row: sqlite3.Row) -> ConversationRef:
    return ConversationRef(
        platform=row["platform"],
        space=row["space"] or None,
        channel=row["channel"],
        thread=row["thread"] or None,
    )


class Database:
    """The single aiosqlite connection (autocommit mode, so transactions are explicit)."""

    def __init__(self, conn: aiosqlite.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock
        self._lock = asyncio.Lock()

    def now(self) -> str:
        """The clock's time as stored: ISO 8601 in UTC, microseconds."""
        moment = self._clock()
        if moment.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return moment.astimezone(UTC).isoformat(timespec="microseconds")

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction; commits on success, rolls back on any exception."""
        async with self._transaction("BEGIN IMMEDIATE") as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[aiosqlite.Connection]:
        """Reads under the lock: a consistent view across several SELECTs.

        No BEGIN/COMMIT (two trips to aiosqlite's thread, a third of the ledger's cost of an
        approval; docs/decisions.md): this connection is the only writer and holds the lock
        for every write, so nothing can change between the SELECTs of one read.
        """
        async with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise StoreError(f"ledger error: {exc}") from exc

    @asynccontextmanager
    async def _transaction(self, begin: str) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            try:
                await self._conn.execute(begin)
            except sqlite3.Error as exc:
                raise StoreError(f"could not start a transaction: {exc}") from exc
            except BaseException:
                # Cancelled: aiosqlite's thread runs the BEGIN all the same, and the next
                # transaction would fail ("cannot start a transaction within a transaction").
                # Its queue is in order, so this ROLLBACK comes after the BEGIN.
                with contextlib.suppress(sqlite3.Error):
                    await self._conn.execute("ROLLBACK")
                raise
            try:
                yield self._conn
            except sqlite3.Error as exc:
                await self._rollback()
                raise StoreError(f"ledger error: {exc}") from exc
            except BaseException:
                await self._rollback()
                raise
            try:
                await self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                await self._rollback()
                raise StoreError(f"could not commit: {exc}") from exc

    async def _rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                await self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the original error is what the caller needs to see

    async def audit(
        self,
        conn: aiosqlite.Connection,
        event: str,
        *,
        actor: Actor | str | None = None,
        session_id: str | None = None,
        interaction_id: str | None = None,
        details: JsonObject | None = None,
    ) -> None:
        """Append an audit entry inside the caller's transaction."""
        actor_text = actor.key() if isinstance(actor, Actor) else actor
        await conn.execute(
            "INSERT INTO audit (at, actor, event, session_id, interaction_id, details_json)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                self.now(),
                actor_text,
                event,
                session_id,
                interaction_id,
                json.dumps(dict(details or {}), sort_keys=True),
            ),
        )


# Each aiosqlite call is one trip to its thread and back (~60 us of CPU on this kind of
# machine); execute_fetchall is one trip where execute + fetch + close are three
# (bench/interactions.py, docs/decisions.md). Queries given to fetch_one name one row.


async def fetch_one(
    conn: aiosqlite.Connection, sql: str, params: tuple[Any, ...] = ()
) -> sqlite3.Row | None:
    rows = await conn.execute_fetchall(sql, params)
    for row in rows:
        return row
    return None


async def fetch_all(
    conn: aiosqlite.Connection, sql: str, params: tuple[Any, ...] = ()
) -> list[sqlite3.Row]:
    return list(await conn.execute_fetchall(sql, params))
