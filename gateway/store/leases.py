"""Leases by the database's clock (issue 19, design point 5): the SQL and the holder.

A lease is one row of ``leases`` (migration 10, PostgreSQL only: a single host on SQLite
needs none). It expires by the database's clock only (``now()``), never a host's:

- acquire: an ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` the row has lapsed (or, for a
  host's own lease taken again at its start, is this holder's), which moves its fence;
- renew: an ``UPDATE`` of ``expires_at`` that names the holder *and* its fence, so a holder
  whose fence moved (another took the lease while it was frozen) renews nothing;
- release: the row is made lapsed at once, fence kept (a fence only grows).

:class:`LeaseHolder` holds one lease on a connection of its own (a renew never waits behind
the ledger's writer) and keeps :class:`gateway.store.lease_timing.LeaseTiming`'s deadline:
``holds()``
turns False the moment a renew is refused or the deadline passes, whatever the loop is
doing. A renew that finds no database (an error, no answer) is tried again on a new
connection until the deadline: a cut connection is ridden out, an unreachable database is
not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from gateway.config.ledger_url import PgTarget
from gateway.store.lease_timing import LeaseTiming
from gateway.store.postgresql import close_quietly

__all__ = [
    "LeaseHolder",
    "acquire",
    "fence_out",
    "lapsed",
    "release",
    "renew",
]

log = logging.getLogger(__name__)

_ACQUIRE = """
INSERT INTO leases AS l (name, holder, fence, expires_at)
VALUES (%(name)s, %(holder)s, 1, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, fence = l.fence + 1, expires_at = excluded.expires_at
WHERE (l.expires_at < now() OR (%(take_own)s AND l.holder = excluded.holder))
  AND NOT EXISTS (
      SELECT 1 FROM leases r WHERE r.name = %(unless)s AND r.expires_at >= now())
RETURNING fence
"""


async def acquire(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    holder: str,
    ttl: float,
    *,
    take_own: bool = False,
    unless_held: str | None = None,
) -> int | None:
    """The lease's new fence, or None while another holds it. ``take_own``: the lease is
    taken again even unexpired if ``holder`` holds it (a host starting again: its previous
    process is gone or frozen, and the new fence shuts it out). ``unless_held``: refused
    while that other lease is held (a host waits while a reaper ends its old epochs)."""
    cursor = await conn.execute(
        _ACQUIRE,
        {
            "name": name,
            "holder": holder,
            "ttl": ttl,
            "take_own": take_own,
            "unless": unless_held or "",
        },
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def renew(
    conn: psycopg.AsyncConnection[Any], name: str, holder: str, fence: int, ttl: float
) -> bool:
    """Whether the lease was renewed: False once its fence moved."""
    cursor = await conn.execute(
        "UPDATE leases SET expires_at = now() + make_interval(secs => %s)"
        " WHERE name = %s AND holder = %s AND fence = %s",
        (ttl, name, holder, fence),
    )
    return cursor.rowcount == 1


async def release(conn: psycopg.AsyncConnection[Any], name: str, holder: str, fence: int) -> None:
    """Let the lease go now (it lapses; its fence stays, to grow on the next acquire)."""
    await conn.execute(
        "UPDATE leases SET expires_at = now() - interval '1 microsecond'"
        " WHERE name = %s AND holder = %s AND fence = %s",
        (name, holder, fence),
    )


async def held(conn: psycopg.AsyncConnection[Any], prefix: str) -> list[str]:
    """The names (without ``prefix``) of the leases held now whose name starts with it."""
    cursor = await conn.execute(
        "SELECT substr(name, %s) FROM leases WHERE starts_with(name, %s)"
        " AND expires_at >= now() AND holder <> '' ORDER BY name",
        (len(prefix) + 1, prefix),
    )
    return [str(row[0]) for row in await cursor.fetchall()]


async def lapsed(conn: psycopg.AsyncConnection[Any], prefix: str) -> list[str]:
    """The names (without ``prefix``) of the lapsed leases whose name starts with it and
    that a holder let lapse (not those a reaper already fenced out)."""
    cursor = await conn.execute(
        "SELECT substr(name, %s) FROM leases WHERE starts_with(name, %s) AND expires_at < now()"
        " AND holder <> '' ORDER BY name",
        (len(prefix) + 1, prefix),
    )
    return [str(row[0]) for row in await cursor.fetchall()]


async def fence_out(conn: psycopg.AsyncConnection[Any], name: str) -> int | None:
    """Move a lapsed lease's fence with nobody holding it (a reaper shuts out the holder
    that may yet return): the new fence, or None if the lease is held again."""
    cursor = await conn.execute(
        "UPDATE leases SET holder = '', fence = fence + 1"
        " WHERE name = %s AND expires_at < now() RETURNING fence",
        (name,),
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def connect(target: PgTarget) -> psycopg.AsyncConnection[Any]:
    extra = target.connect_options()
    return await psycopg.AsyncConnection.connect(target.url, autocommit=True, **extra)


class LeaseHolder:
    """One lease held by this process: :meth:`acquire` once, then :meth:`keep` renews it
    every ttl/3 until it is lost (returns then). ``holds()`` is what leased work asks."""

    def __init__(
        self,
        target: PgTarget,
        name: str,
        holder: str,
        ttl: float,
        *,
        take_own: bool = False,
        unless_held: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.holder = holder
        self.timing = LeaseTiming(ttl)
        self.fence: int | None = None
        self._target = target
        self._take_own = take_own
        self._unless_held = unless_held
        self._now = monotonic
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._running = asyncio.Event()  # cleared: the renewer is frozen (tests' SIGSTOP)
        self._running.set()
        # the last attempt found no database (an error or no answer in time), rather than
        # an answer: what a host without its lease tells people
        self.unreachable = False
        self.renewed = asyncio.Event()  # set at each renew granted (tests clear it)

    def holds(self) -> bool:
        return self.timing.holds(self._now())

    async def acquire(self) -> bool:
        """One attempt; True when held (with a new fence)."""
        sent = self._now()
        try:
            conn = await self._connection()
            fence = await acquire(
                conn,
                self.name,
                self.holder,
                self.timing.ttl,
                take_own=self._take_own,
                unless_held=self._unless_held,
            )
        except psycopg.Error as exc:
            await self._drop(exc)
            return False
        self.unreachable = False
        if fence is None:
            return False
        self.fence = fence
        self.timing.granted(sent)
        log.info("lease %s: held by %s, fence %d", self.name, self.holder, fence)
        return True

    async def acquire_until(self) -> None:
        """Try every period until held."""
        while True:
            if await self.acquire():
                return
            await asyncio.sleep(self.timing.period)  # by the database's clock: nothing to wait on

    async def keep(self) -> None:
        """Renew every period; return the moment the lease is lost (a renew refused, none
        granted before the deadline, or the deadline passed while this loop was frozen)."""
        while True:
            await asyncio.sleep(self.timing.renew_in(self._now()))
            await self._running.wait()
            sent = await self._renew()
            if sent is None:
                break
            self.timing.granted(sent)
            self.renewed.set()
        self.timing.refused()
        log.warning("lease %s: lost by %s (fence %s)", self.name, self.holder, self.fence)

    async def _renew(self) -> float | None:
        """One renew, tried again on a new connection while the database does not answer,
        until the deadline: the send time of the attempt granted, or None (refused, or no
        attempt answered in time)."""
        assert self.fence is not None
        while True:
            sent = self._now()
            deadline = self.timing.deadline()
            if deadline is None or sent >= deadline:
                return None
            try:
                async with asyncio.timeout(deadline - sent):
                    conn = await self._connection()
                    renewed = await renew(conn, self.name, self.holder, self.fence, self.timing.ttl)
            except (psycopg.Error, TimeoutError) as exc:
                await self._drop(exc)
                pause = self.timing.retry_in(self._now())
                if pause is None:
                    return None
                await asyncio.sleep(pause)  # a new connection, after a moment
                continue
            self.unreachable = False
            return sent if renewed else None

    async def release(self) -> None:
        """Let the lease go (a clean stop); what fails here lapses by itself."""
        if self.fence is None or not self.holds():
            return
        self.timing.refused()
        try:
            await release(await self._connection(), self.name, self.holder, self.fence)
        except psycopg.Error as exc:
            log.warning("lease %s: not released (%s)", self.name, type(exc).__name__)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # --- the tests' SIGSTOP: the renewer alone frozen, then continued ---------------------

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        """The lease's own connection (autocommit), for writes fenced by it (a receiver's
        offset); a database error there should go to :meth:`drop`."""
        return await self._connection()

    async def drop(self, exc: BaseException) -> None:
        """The connection failed: closed, and opened again on the next use."""
        await self._drop(exc)

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await connect(self._target)
        return self._conn

    async def _drop(self, exc: BaseException) -> None:
        log.warning("lease %s: the database did not answer (%s)", self.name, type(exc).__name__)
        self.unreachable = True
        conn, self._conn = self._conn, None
        await close_quietly(conn)
