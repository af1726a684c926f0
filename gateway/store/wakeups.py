"""Waking the host that runs a session (issue 19, design point 3): PostgreSQL LISTEN/NOTIFY.

A decision committed on any host for a session of host A is written to A's agent by A
alone (``Broker.sweep``: only the owner sweeps its epochs, so it is written once). The
ledger wakes A in the committing transaction: migration 9's trigger on ``decisions`` runs
``pg_notify('host_<A>', 'decision:<session id>')`` (a queued prompt ``'prompt:...'``,
migration 25; before it, the bare session id), which PostgreSQL delivers at COMMIT only (a
rolled back decision wakes nobody). Each host listens on its own channel with one
connection of its own (:func:`listen_for_wakeups`); a notification sent while it is not
listening (the connection cut, the host restarting) is lost, so the caller sweeps every
session when the listener (re)connects and polls as a safety net.

A channel name is an identifier (at most 63 bytes): ``host_`` and a host name of at most
58 characters (``gateway.config.model.HOST_PATTERN``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import psycopg
from psycopg import sql

from gateway.config.ledger_url import PgTarget
from gateway.store.turns import TURN_TEXT_CHANNEL

__all__ = ["RETRY_SECONDS", "channel", "listen_for_wakeups"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0  # between two attempts to listen again after the connection failed


def channel(host: str) -> str:
    """The NOTIFY channel of ``host``: what migration 9's trigger sends to."""
    return f"host_{host}"


async def listen_for_wakeups(
    target: PgTarget,
    host: str,
    wake: Callable[[str], None],
    *,
    listening: Callable[[], None],
    lost: Callable[[], Awaitable[None]] | None = None,
    turn_text: Callable[[str], None] | None = None,
    needless: Callable[[str, int], bool] | None = None,
) -> None:
    """Until cancelled: listen on ``host``'s channel and hand each notification's payload
    (``decision:``, ``prompt:`` or ``request:`` and a session id) to ``wake``;
    ``listening`` is called each time the LISTEN is in place (the first time and after
    every reconnection: what was sent meanwhile is lost).
    ``lost`` is awaited after the connection failed, before it is made again (default: a
    pause of RETRY_SECONDS). ``turn_text``, if given: the same connection also listens on
    TURN_TEXT_CHANNEL, every host's, and hands it each session id whose turn moved (its
    timeline saved, the turn started or ended, on whichever host runs it).

    ``needless``, if given: whether a notification (its payload, the server process id of
    the connection that sent it) is one this host has no need of; it is dropped."""
    extra = target.connect_options()
    listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel(host)))
    listen_turns = sql.SQL("LISTEN {}").format(sql.Identifier(TURN_TEXT_CHANNEL))
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(target.url, autocommit=True, **extra)
            async with conn:
                if turn_text is not None:
                    await conn.execute(listen_turns)
                await conn.execute(listen)
                listening()
                async for note in conn.notifies():
                    if note.channel == TURN_TEXT_CHANNEL:
                        if turn_text is not None:
                            turn_text(note.payload)
                    elif needless is None or not needless(note.payload, note.pid):
                        wake(note.payload)
        except psycopg.Error as exc:
            log.warning(
                "host %s: listening for wake-ups failed (%s); again in %g s",
                host,
                type(exc).__name__,
                RETRY_SECONDS,
            )
        if lost is None:
            await asyncio.sleep(RETRY_SECONDS)
        else:
            await lost()
