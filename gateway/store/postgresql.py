"""The ledger's PostgreSQL connection: psycopg 3, sync, on the store's own thread.

:class:`PgConn` is what a store closure gets on PostgreSQL: ``execute`` takes the store's
SQLite-spelled text and runs it as :func:`~gateway.store.dialect.to_postgresql` rewrites
it; rows come back as dicts (``dict_row``), which the decoders index by name as they do
``sqlite3.Row``. The connection is in autocommit mode: the runner's BEGIN and COMMIT are
the transactions, as on SQLite.

Each store call runs in psycopg's pipeline mode (:meth:`PgConn.pipelined`, entered by the
runner): a statement is sent without waiting for its answer, and the call waits only where
it reads one (a fetch, or a ``rowcount``, which forces a sync) and once at its end. The
same statements as one at a time, in far fewer round trips (docs/decisions.md). An error of
a statement surfaces at the next wait; the runner then rolls back outside the pipeline.

The password never travels in the URL (a URL with one is refused, naming
``store_password``): it is the ``password`` keyword, and what is shown of the target is
`describe` in :mod:`gateway.config.ledger_url` (libpq's parsed conninfo, the password left out).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row, tuple_row

from gateway.config.ledger_url import PgTarget
from gateway.store.database import Cursor
from gateway.store.dialect import to_postgresql

__all__ = ["PgConn", "close_quietly"]


async def close_quietly(conn: psycopg.AsyncConnection[Any] | None) -> None:
    """Close a connection that already failed: what its close says is of no use."""
    if conn is not None:
        with contextlib.suppress(psycopg.Error):
            await conn.close()


class PgConn:
    """A psycopg connection in autocommit mode, speaking the store's SQL (see the module)."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]], target: PgTarget) -> None:
        self.raw = conn
        self._target = target
        self._read_only = False
        self._pipeline: psycopg.Pipeline | None = None
        # the network round trips: a statement outside a pipeline, a wait inside one (a
        # fetch or rowcount whose answer had not come, the sync at the call's end);
        # bench.interactions reports them
        self.round_trips = 0

    @classmethod
    def connect(cls, target: PgTarget, *, read_only: bool = False) -> PgConn:
        """On the runner's thread (the connection belongs to it)."""
        extra = target.connect_options(read_only=read_only)
        conn = psycopg.connect(target.url, autocommit=True, row_factory=dict_row, **extra)
        made = cls(conn, target)
        made._read_only = read_only
        return made

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    @property
    def backend_pid(self) -> int:
        return self.raw.info.backend_pid

    def ready(self) -> None:
        """At the start of a store call: a connection cut in an earlier call (the server
        rolled back what was not committed), or ended while it sat idle, is made again, one
        attempt (its failure: StoreError).

        Idle: a host's pool holds connections no call used for a while; a cut (the server
        restarted, a proxy between) ends them all, and each learns it only at its next use.
        Found here, before anything of the call is sent, it is a connection to make again;
        found after (pipeline mode sends the COMMIT with the rest), it would leave the call's
        outcome unknown. Idle, the server sends nothing unasked but its goodbye: a readable
        socket is taken for one (one ``select`` with no wait)."""
        if not self.raw.broken and not self.raw.closed and _ended_while_idle(self.raw):
            self.raw.close()
        if self.raw.broken or self.raw.closed:
            self.raw = PgConn.connect(self._target, read_only=self._read_only).raw

    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        """One store call in pipeline mode; its end sends a sync and waits for every answer
        (an error among them is raised here)."""
        self.ready()
        try:
            with self.raw.pipeline() as pipeline:
                self._pipeline = pipeline
                yield
        finally:
            self._pipeline = None
            self.round_trips += 1

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        cursor = self.raw.cursor(row_factory=tuple_row)
        cursor.execute(to_postgresql(sql), parameters)
        if self._pipeline is None:
            self.round_trips += 1
            return _Named(cursor, sql)
        return _Pipelined(self, cursor, self._pipeline, sql)

    def abort(self) -> None:
        """From another thread: the call waiting on this connection fails now (its socket is
        shut down under it; the server rolls back what it had not committed), and the next
        call connects again (:meth:`ready`). For a server that does not answer at all."""
        try:
            fd = self.raw.pgconn.socket
        except psycopg.Error:
            return  # no socket: nothing waits on it
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.raw.close()


def _ended_while_idle(conn: psycopg.Connection[dict[str, Any]]) -> bool:
    """Whether the server sent ``conn`` anything since its last call ended: between calls it
    has nothing to say but its goodbye (an error, then the end of the stream), so anything is
    taken for one (a rare notice costs a new connection, never a call's outcome)."""
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (psycopg.Error, OSError, ValueError):
        return True
    return bool(readable)


# a statement's column names, by its text: the same text always has the same columns, so a
# row is made a dict by one zip (psycopg's dict_row reads and decodes every name again for
# each result: a request's row has 35)
_NAMES: dict[str, tuple[str, ...]] = {}


class _Named:
    """A statement's cursor whose rows are dicts by column name, as ``dict_row`` makes them."""

    __slots__ = ("_cursor", "_sql")

    def __init__(self, cursor: psycopg.Cursor[tuple[Any, ...]], sql: str) -> None:
        self._cursor = cursor
        self._sql = sql

    def _names(self) -> tuple[str, ...]:
        names = _NAMES.get(self._sql)
        if names is None:
            names = tuple(column.name for column in self._cursor.description or ())
            _NAMES[self._sql] = names
        return names

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> dict[str, Any] | None:
        values = self._cursor.fetchone()
        return None if values is None else dict(zip(self._names(), values, strict=True))

    def fetchall(self) -> list[dict[str, Any]]:
        rows = self._cursor.fetchall()
        names = self._names() if rows else ()
        return [dict(zip(names, values, strict=True)) for values in rows]


class _Pipelined(_Named):
    """A statement's cursor inside a pipeline: reading its answer waits for it (one round
    trip, unless an earlier wait brought it already)."""

    __slots__ = ("_owner", "_pipeline")

    def __init__(
        self,
        owner: PgConn,
        cursor: psycopg.Cursor[tuple[Any, ...]],
        pipeline: psycopg.Pipeline,
        sql: str,
    ) -> None:
        super().__init__(cursor, sql)
        self._owner = owner
        self._pipeline = pipeline

    def _arrived(self) -> bool:
        if self._cursor.pgresult is not None:
            return True
        self._owner.round_trips += 1
        return False

    @property
    def rowcount(self) -> int:
        if not self._arrived():
            self._pipeline.sync()  # psycopg sets rowcount only once the answer is read
        return self._cursor.rowcount

    def fetchone(self) -> dict[str, Any] | None:
        self._arrived()
        return super().fetchone()  # psycopg flushes and reads up to this answer

    def fetchall(self) -> list[dict[str, Any]]:
        self._arrived()
        return super().fetchall()
