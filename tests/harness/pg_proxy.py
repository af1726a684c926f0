"""A TCP proxy on 127.0.0.1 between a gateway host and the test cluster, that a test cuts.

The test cluster listens on a Unix socket only (tests/pg_cluster.py); a host given
:attr:`PgProxy.dsn` reaches it through this proxy, the way a host reaches PostgreSQL across
a network, and the test cuts that network: every connection through the proxy is closed at
once, both sides (the host's driver sees the server go away; the server sees its client go
and rolls back what was not committed). New connections are taken again after a cut.

:meth:`PgProxy.cut_at_commit` cuts at the end of a transaction the test names by a
statement it contains (its SQL text, as the client sends it in a Parse message, the first
time that text passes). Either the chunk carrying that statement never reaches the server
(the transaction is cut before it could commit: the server rolls it back), or everything
reaches the server and its answer that ends the transaction (ReadyForQuery, "idle") is
dropped: the transaction committed, and the host does not know.

:meth:`PgProxy.hold` stops passing anything on, both ways, without closing a connection: a
network that holds the packets, or a server that stopped answering (the host's TCP stack
sees a live peer); :meth:`PgProxy.release` passes on what was held and the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tests.pg_cluster import PgCluster

__all__ = ["Cut", "PgProxy"]

CHUNK = 65536


# the server's ReadyForQuery with the status "idle": the transaction has ended
IDLE = b"Z\x00\x00\x00\x05I"


class Cut(enum.Enum):
    BEFORE_COMMIT = "the transaction never reaches its COMMIT"
    COMMIT_UNANSWERED = "the COMMIT is done, its answer never reaches the host"


@dataclass(eq=False)
class _Pair:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter


@dataclass
class _Trigger:
    statement: bytes
    how: Cut
    done: asyncio.Event
    pair: _Pair | None = None  # the connection the statement passed on (COMMIT_UNANSWERED)


class PgProxy:
    def __init__(self, cluster: PgCluster) -> None:
        self._cluster = cluster
        self._socket = Path(cluster.host) / f".s.PGSQL.{cluster.port}"
        self._server: asyncio.Server | None = None
        self._pairs: set[_Pair] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._trigger: _Trigger | None = None
        self.port = 0
        self.cuts = 0  # how many times every connection was cut
        self.connections = 0  # connections taken in all
        self.refuse = False  # True: the database is unreachable, a new connection is closed
        self.refusals = 0
        self._refused = asyncio.Condition()
        self._flowing = asyncio.Event()
        self._flowing.set()

    @property
    def dsn(self) -> str:
        """The cluster's database, through this proxy (TCP on loopback, no TLS)."""
        user, name = quote(self._cluster.user), quote(self._cluster.dbname)
        return f"postgresql://{user}@127.0.0.1:{self.port}/{name}?sslmode=disable"

    async def __aenter__(self) -> PgProxy:
        self._server = await asyncio.start_server(self._take, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def cut(self) -> None:
        """Close every connection through the proxy now, both sides."""
        self.cuts += 1
        for pair in list(self._pairs):
            self._close(pair)

    def hold(self) -> None:
        """Pass nothing on from now on, either way, and close nothing (see the module)."""
        self._flowing.clear()

    def release(self) -> None:
        """Pass on again, what was held first."""
        self._flowing.set()

    def cut_at_commit(self, statement: str, how: Cut) -> asyncio.Event:
        """Cut every connection at the end of the first transaction that sends
        ``statement`` (see the module); the event is set once cut."""
        done = asyncio.Event()
        self._trigger = _Trigger(statement.encode(), how, done)
        return done

    # --- the pumps --------------------------------------------------------------------------

    async def refused(self, count: int) -> None:
        """Wait until ``count`` connections in all were refused (``refuse``)."""
        async with self._refused:
            await self._refused.wait_for(lambda: self.refusals >= count)

    async def _take(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            writer.transport.abort()
            async with self._refused:
                self.refusals += 1
                self._refused.notify_all()
            return
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(str(self._socket))
        except OSError:
            writer.close()
            return
        pair = _Pair(client=writer, server=up_writer)
        self._pairs.add(pair)
        for pump in (self._upstream(pair, reader), self._downstream(pair, up_reader)):
            task = asyncio.get_running_loop().create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _upstream(self, pair: _Pair, reader: asyncio.StreamReader) -> None:
        """The host's messages to the server."""
        tail = b""
        try:
            while data := await reader.read(CHUNK):
                trigger = self._trigger
                if (
                    trigger is not None
                    and trigger.pair is None
                    and trigger.statement in tail + data
                ):
                    if trigger.how is Cut.BEFORE_COMMIT:
                        self._fire(trigger)  # this chunk is not passed on
                        return
                    trigger.pair = pair
                tail = data[-64:]
                await self._flowing.wait()
                pair.server.write(data)
                await pair.server.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            self._close(pair)

    async def _downstream(self, pair: _Pair, reader: asyncio.StreamReader) -> None:
        """The server's answers to the host."""
        tail = b""
        try:
            while data := await reader.read(CHUNK):
                trigger = self._trigger
                if trigger is not None and trigger.pair is pair and IDLE in tail + data:
                    self._fire(trigger)  # the transaction ended: its answer is not passed on
                    return
                tail = data[-len(IDLE) :]
                await self._flowing.wait()
                pair.client.write(data)
                await pair.client.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            self._close(pair)

    def _fire(self, trigger: _Trigger) -> None:
        self._trigger = None
        self.cut()
        trigger.done.set()

    def _close(self, pair: _Pair) -> None:
        if pair not in self._pairs:
            return
        self._pairs.discard(pair)
        for writer in (pair.client, pair.server):
            with contextlib.suppress(Exception):
                writer.transport.abort()  # at once, no goodbye: a cut, not a close
