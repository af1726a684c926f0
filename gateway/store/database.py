"""The connections to the ledger, the writer's lock, and the helpers every table module shares.

Every public store method is one plain function of the ``sqlite3`` connection, run whole on
the connection's own thread (:class:`Runner`) by :meth:`Database.write` (in a ``BEGIN
IMMEDIATE`` transaction) or :meth:`Database.read`, under one ``asyncio.Lock``: the gateway
has a single writer, and no method ever sees another's half-done work. Beside it,
:class:`ReadOnlyDatabase` is a second connection, opened read-only on a thread of its own, for
the few reads that must answer while the writer is busy (WAL: a reader never waits for a
writer). ``sqlite3`` errors are translated to :class:`~gateway.errors.StoreError` here,
chained.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sqlite3
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError

__all__ = [
    "Clock",
    "Database",
    "ReadOnlyDatabase",
    "Reader",
    "Runner",
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
T = TypeVar("T")


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


class Runner:
    """A thread of our own that owns one connection and runs functions of it, one at a time.

    One single-worker executor: a function given to :meth:`call` runs whole on that thread,
    in one trip there and back. Cancelled while queued, it is never run; cancelled while it
    runs, it ends (commits or rolls back) on its own, and the next call queues behind it.
    ``trips`` counts the calls (what ``bench.interactions`` reports per approval).
    """

    def __init__(self, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.trips = 0

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        self.trips += 1
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    def shutdown(self) -> None:
        """Let the thread end once its queue is empty (nothing waits for it here)."""
        self._pool.shutdown(wait=False)


class Database:
    """The writer's connection (autocommit mode, so transactions are explicit).

    A transaction is one plain function of the ``sqlite3`` connection, run whole on
    the connection's thread (:class:`Runner`): one trip there and back per store call, where
    a statement each was ~50 trips per approval (docs/decisions.md). The function must not
    await or block on the event loop; it may raise to roll back.
    """

    def __init__(self, runner: Runner, conn: sqlite3.Connection, clock: Clock) -> None:
        self.runner = runner
        self._conn = conn
        self._clock = clock
        self._lock = asyncio.Lock()
        self._closed = False

    def close(self) -> None:
        """Refuse every later call with StoreError (the connection is being closed)."""
        self._closed = True

    def now(self) -> str:
        """The clock's time as stored: ISO 8601 in UTC, microseconds."""
        return self.stored_time(self._clock())

    def stored_time(self, moment: datetime) -> str:
        """A time as stored: ISO 8601 in UTC, microseconds."""
        if moment.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return moment.astimezone(UTC).isoformat(timespec="microseconds")

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` as one write transaction (``BEGIN IMMEDIATE``), in one trip to the
        database thread: committed if it returns, rolled back if it raises."""
        return await self._submit(_in_transaction, work)

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work``'s SELECTs under the lock, in one trip: a consistent view.

        No BEGIN/COMMIT (docs/decisions.md): this connection is the only writer and holds
        the lock for every write, so nothing can change between the SELECTs of one read.
        """
        return await self._submit(_bare, work)

    async def _submit(
        self,
        runner: Callable[[sqlite3.Connection, Callable[[sqlite3.Connection], T], _Ticket], T],
        work: Callable[[sqlite3.Connection], T],
    ) -> T:
        async with self._lock:
            if self._closed:
                raise StoreError("the ledger is closed")
            return await _on_thread(self.runner, self._conn, runner, work)

    def audit(
        self,
        conn: sqlite3.Connection,
        event: str,
        *,
        actor: Actor | str | None = None,
        session_id: str | None = None,
        interaction_id: str | None = None,
        details: JsonObject | None = None,
    ) -> None:
        """Append an audit entry inside the caller's transaction."""
        actor_text = actor.key() if isinstance(actor, Actor) else actor
        conn.execute(
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


class Reader(Protocol):
    """What runs a read: the writer's connection (:class:`Database`) or the read-only one."""

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T: ...


class ReadOnlyDatabase:
    """A second connection, opened read-only (``mode=ro``), with a thread of its own.

    WAL lets it read while the writer writes: a read here never waits for the writer's lock,
    its thread or its transaction, and sees what was committed when the read began. Each read
    is one deferred transaction, so its SELECTs share one snapshot (on this connection the
    writer may commit between two statements; the writer's own reads need no BEGIN because its
    lock rules that out). Nothing can be written through it: SQLite refuses.
    """

    def __init__(self, runner: Runner, conn: sqlite3.Connection) -> None:
        self.runner = runner
        self._conn = conn
        self._closed = False

    def close(self) -> None:
        """Refuse every later call with StoreError (the connection is being closed)."""
        self._closed = True

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work``'s SELECTs in one snapshot, on this connection's thread."""
        if self._closed:
            raise StoreError("the ledger is closed")
        return await _on_thread(self.runner, self._conn, _snapshot, work)


async def _on_thread(
    on: Runner,
    conn: sqlite3.Connection,
    runner: Callable[[sqlite3.Connection, Callable[[sqlite3.Connection], T], _Ticket], T],
    work: Callable[[sqlite3.Connection], T],
) -> T:
    """Run ``runner(work)`` on ``conn``'s thread, in one trip; errors become StoreError."""
    ticket = _Ticket()
    try:
        return await on.call(runner, conn, work, ticket)
    except sqlite3.Error as exc:
        raise StoreError(f"ledger error: {exc}") from exc
    except BaseException:
        # Cancelled: the function may be queued or running on the database thread.
        # Queued, it is skipped; running, it ends (commits or rolls back) on its own,
        # and the next transaction queues behind it: none is ever left open.
        ticket.cancelled = True
        raise


class _Ticket:
    """Set from the event loop when the awaiter is cancelled; read on the database thread."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False


class _Skipped(Exception):
    """A transaction whose awaiter was cancelled before it started (nobody reads this)."""


def _bare(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], ticket: _Ticket) -> T:
    if ticket.cancelled:
        raise _Skipped
    return work(conn)


def _snapshot(
    conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], ticket: _Ticket
) -> T:
    """On the read-only connection's thread: BEGIN (deferred), ``work``, then end it."""
    if ticket.cancelled:
        raise _Skipped
    conn.execute("BEGIN")
    try:
        return work(conn)
    finally:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # nothing was written: nothing to keep
                conn.execute("ROLLBACK")


def _in_transaction(
    conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], ticket: _Ticket
) -> T:
    """On the database thread: BEGIN IMMEDIATE, ``work``, COMMIT; ROLLBACK on any error."""
    if ticket.cancelled:
        raise _Skipped
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the original error is what matters
                conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return result


# Statements run on the database thread, inside a function given to Database.write/read.
# Queries given to fetch_one name one row.


def fetch_one(
    conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()
) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(sql, params).fetchone()
    return row


def fetch_all(
    conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()
) -> list[sqlite3.Row]:
    return conn.execute(sql, params).fetchall()
