"""Receivers that one host at a time runs, held by a lease (issue 19, design point 6).

Telegram allows one ``getUpdates`` consumer per bot (a second gets 409), and Discord sends
every event to every gateway connection of a bot (two hosts would both answer). With several
hosts on one PostgreSQL ledger, such a platform's receiving is driven here (one
:class:`ReceiverLease` per platform, a task the gateway owns): the lease it names
(``telegram:<bot id>``, ``discord:<application id>``, the host leases' ttl) is tried every
ttl/3 while another host holds it; once held, the platform receives (``receive``) while
the lease is renewed every ttl/3, and stops the moment it cannot renew (a renew refused
or unanswered, or the deadline passed), or this host loses its own lease (fenced, or the
ledger unreachable). Another host takes over once the lease lapses by the database's clock.

The driver is also the platform's :class:`~gateway.platform.ReceiverGate`: ``holds`` for
each batch, and the offset in the ledger written with the lease's fence
(gateway/store/receiver_offsets.py). Sending is not leased: every host sends with the token.
A single host, or SQLite: no lease, the platform receives as it always did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from gateway.config.model import Config
from gateway.errors import ConfigError
from gateway.platform import LeasedReceiving, Platform

if TYPE_CHECKING:
    from gateway.store.leases import LeaseHolder

__all__ = ["STOP_GRACE_SECONDS", "ReceiverLease", "lease_receivers"]

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10.0  # for the batch being handled when the receiving stops


def lease_receivers(config: Config, platforms: Mapping[str, Platform]) -> None:
    """Before the platforms connect: on a shared (PostgreSQL) ledger, the platforms whose
    receiving one host at a time may run wait for the gateway's lease to receive."""
    if config.gateway.store is None:
        return
    for platform in platforms.values():
        if isinstance(platform, LeasedReceiving):
            platform.lease_receiving()


class ReceiverLease:
    """One platform's receiving, run only while this host holds ``holder``'s lease."""

    def __init__(
        self,
        platform: LeasedReceiving,
        holder: LeaseHolder,
        *,
        fenced: Callable[[], bool],
        lost: asyncio.Event,
        grace: float = STOP_GRACE_SECONDS,
    ) -> None:
        self._platform = platform
        self._holder = holder
        self._fenced = fenced  # this host lost its own lease (or the ledger)
        self._lost = lost  # set when it did
        self._grace = grace
        self.receiving = asyncio.Event()  # set while this host receives (for tests)
        self.idle = asyncio.Event()  # set while it does not
        self.idle.set()

    @property
    def name(self) -> str:
        return self._holder.name

    # --- the gate the platform asks -------------------------------------------------------

    def holds(self) -> bool:
        return self._holder.holds() and not self._fenced()

    async def saved_offset(self) -> int | None:
        from gateway.store.receiver_offsets import read_offset

        conn = await self._holder.connection()
        return await read_offset(conn, self._holder.name)

    async def save_offset(self, offset: int) -> bool:
        import psycopg

        from gateway.store.receiver_offsets import write_offset

        fence = self._holder.fence
        if fence is None or not self.holds():
            return False
        try:
            conn = await self._holder.connection()
            written = await write_offset(conn, self.name, self._holder.holder, fence, offset)
        except psycopg.Error as exc:
            await self._holder.drop(exc)
            return False
        if not written:
            log.warning("receiver %s: the offset was not saved: the lease moved", self.name)
        return written

    async def close(self) -> None:
        """After :meth:`run` ended: the lease's connection closed."""
        await self._holder.release()
        await self._holder.close()

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: take the lease when free, receive while held, let it go when
        receiving stops; a cancellation (the gateway stopping) stops the receiving, lets
        its batch finish and releases the lease, so another host takes over at once."""
        while True:
            await self._platform.reachable()  # a host that cannot reach it leaves it to others
            if not self._fenced() and await self._holder.acquire():
                try:
                    await self._receive_while_held()
                finally:
                    await self._holder.release()
            await asyncio.sleep(self._holder.timing.period)  # by the database's clock

    async def _until_fenced(self) -> None:
        """Returns once this host is fenced: at once when its lease is found lost, and at
        the latest a period after its deadline passed (a renewer that could not run)."""
        lost = asyncio.create_task(self._lost.wait())
        try:
            while not self._fenced() and not lost.done():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._holder.timing.period):
                        await asyncio.shield(lost)
        finally:
            lost.cancel()

    async def _receive_while_held(self) -> None:
        log.info(
            "host %s receives %s (fence %s)", self._holder.holder, self.name, self._holder.fence
        )
        started = asyncio.Event()

        async def receive() -> None:
            started.set()  # from here on the platform hears stop_receiving()
            await self._platform.receive(self)

        receiving = asyncio.create_task(receive(), name=f"receive {self.name}")
        keeping = asyncio.create_task(self._holder.keep())
        lost = asyncio.create_task(self._until_fenced())
        self.idle.clear()
        self.receiving.set()
        try:
            await asyncio.wait({receiving, keeping, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            keeping.cancel()
            lost.cancel()
            if started.is_set():
                self._platform.stop_receiving()
            else:
                receiving.cancel()  # stopped before it began: nothing was taken
            done, _ = await asyncio.wait({receiving}, timeout=self._grace)
            if not done:
                log.warning("receiver %s: still busy after %g s, cut", self.name, self._grace)
                receiving.cancel()
                await asyncio.wait({receiving})
            self.receiving.clear()
            self.idle.set()
            log.info("host %s stopped receiving %s", self._holder.holder, self.name)
        if receiving.cancelled():
            return
        error = receiving.exception()
        if isinstance(error, ConfigError):
            raise error  # what a single host would refuse at its start
        if error is not None:
            log.error("receiver %s failed: %r", self.name, error, exc_info=error)
