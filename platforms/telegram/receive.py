"""Taking updates by long polling, at least once, and knowing whether Telegram is reachable.

python-telegram-bot's ``Updater`` confirms a batch of updates (the next ``offset``) as soon as
it has queued them, before they are handled: a crash in between loses them. The
:class:`Poller` here confirms an update only once it was taken (taking.py: handled, or
refused with a reply): the next ``getUpdates`` asks from the first update not taken, after a
back-off when one failed. Updates of one chat are taken in order; chats of one batch side by
side.

:meth:`Poller.stop` (the platform's ``stop_input``, before the gateway's runners stop): a
``getUpdates`` in flight is dropped (whatever it brought was not confirmed, so Telegram gives
it again, to the next gateway), a batch being handled is finished, and what was taken is
confirmed with a last ``getUpdates(timeout=0)`` (as PTB's Updater does when it stops).

With several hosts on one ledger the poller runs only while this host holds the lease
``telegram:<bot id>`` (gateway/sessions/receivers.py), through a
:class:`~gateway.platform.ReceiverGate`:
it starts from the offset the ledger keeps (the last poller's, wherever it ran), takes a
batch only while the gate holds, and after each batch's effects are committed saves the
next offset there (with the lease's fence) before the next ``getUpdates`` confirms it to
Telegram. A refused save, or the gate no longer holding, ends it at once, without the last
confirming ``getUpdates``: another host may be polling by then, and its long poll would be
ended by ours (409). What the ended poller took but could not record is given to the next
one again: the prompt queue's duplicate check by message id, and a decided card's
compare-and-set, take it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from gateway.platform import ReceiverGate
from platforms.telegram.outbox import is_network_failure, retry_seconds
from platforms.telegram.taking import Attempts, take_batch
from platforms.telegram.updates import UpdateHandler

__all__ = ["ALLOWED_UPDATES", "Health", "Poller"]

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message", "callback_query")
MAX_BACKOFF_SECONDS = 5.0
FIRST_RETRY_SECONDS = 0.25  # after an update failed: the ledger may be busy for a moment


class Health:
    """Whether Telegram answers; ``on_back`` runs once each time it answers again."""

    def __init__(self, on_back: Callable[[], None]) -> None:
        self._on_back = on_back
        self._down = asyncio.Event()
        self._up = asyncio.Event()
        self._up.set()

    @property
    def down(self) -> bool:
        return self._down.is_set()

    async def answers(self) -> None:
        """Returns once Telegram answers (at once unless it was found unreachable)."""
        await self._up.wait()

    def failed(self) -> None:
        self._down.set()
        self._up.clear()

    def ok(self) -> None:
        if self._down.is_set():
            self._down.clear()
            self._up.set()
            log.info("Telegram answers again")
            self._on_back()

    async def probe(self, bot: Bot) -> None:
        """While Telegram is unreachable, ask it (getMe) now and then (an owned task)."""
        while True:
            await self._down.wait()
            backoff = 0.5
            while self._down.is_set():
                await asyncio.sleep(backoff)  # backing off from an unreachable server
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                try:
                    await bot.get_me()
                except TelegramError as exc:
                    log.debug("Telegram still unreachable: %s", exc)
                else:
                    self.ok()


class Poller:
    def __init__(
        self,
        bot: Bot,
        handler: UpdateHandler,
        health: Health,
        timeout: int,
        *,
        gate: ReceiverGate | None = None,
    ) -> None:
        self._bot = bot
        self._gate = gate
        self._handler = handler
        self._health = health
        self._timeout = timeout
        self._attempts = Attempts()
        self._stopped = asyncio.Event()
        self._call: asyncio.Future[tuple[Update, ...]] | None = None  # the getUpdates in flight

    def stop(self) -> None:
        """Take no more updates; :meth:`run` returns once the batch being handled is done
        and what was taken is confirmed."""
        self._stopped.set()
        if self._call is not None:
            self._call.cancel()  # nothing it brings is taken, nor confirmed

    async def run(self) -> None:
        gate = self._gate
        offset: int | None = None  # every update before it is taken
        if gate is not None:
            offset = await gate.saved_offset()  # where the last poller, on any host, left off
            log.info("polling Telegram from offset %s", offset)
        saved = offset  # the offset the ledger has
        await self._call_until_ok(lambda: self._bot.delete_webhook(drop_pending_updates=False))
        if self._leave_to_another_host():
            return
        told: int | None = None  # the offset Telegram last heard
        backoff = 0.0
        retry = 0.0
        while not self._stopped.is_set():
            if gate is not None and not gate.holds():
                return  # the lease is no longer this host's: not one more call
            asked = offset
            try:
                updates = await self._fetch(asked)
            except InvalidToken:
                log.critical("Telegram refused the bot token: no updates will be taken")
                raise
            except RetryAfter as exc:
                await self._pause(retry_seconds(exc))  # Telegram's own instruction
                continue
            except TelegramError as exc:
                backoff = self._failed(exc, backoff)
                if self._leave_to_another_host():
                    break
                await self._pause(backoff)  # backing off from a failing server
                continue
            if updates is None:
                break  # stopped while waiting for news
            told, backoff = asked, 0.0
            self._health.ok()
            if not updates:
                continue
            if gate is not None and not gate.holds():
                return  # taken by nobody here: the next poller is given them
            first_left = await take_batch(self._handler, updates, self._attempts)
            offset = updates[-1].update_id + 1 if first_left is None else first_left
            if gate is not None and offset != saved:
                if not await gate.save_offset(offset):
                    return  # the lease moved: the next poller starts from the ledger's
                saved = offset
            self._attempts.confirmed_before(offset)  # the next getUpdates confirms them
            if first_left is None:
                retry = 0.0
            else:  # the ledger may be busy or closing: ask again, later, from that update
                retry = min(max(retry * 2, FIRST_RETRY_SECONDS), MAX_BACKOFF_SECONDS)
                await self._pause(retry)
        if (
            offset is not None
            and offset != told
            and not self._health.down
            and (gate is None or gate.holds())
        ):
            await self._confirm(offset)

    def _leave_to_another_host(self) -> bool:
        """With several hosts: this host cannot reach Telegram, so it stops polling and lets
        the lease go, for a host that can (gateway/sessions/receivers.py waits for Telegram
        to answer this host again before it asks for the lease)."""
        if self._gate is None or not self._health.down:
            return False
        log.warning(
            "Telegram cannot be reached from this host: polling is left to another host "
            "until it answers here again (check this host's network, DNS and proxy)"
        )
        return True

    async def _fetch(self, offset: int | None) -> tuple[Update, ...] | None:
        """The next updates (a long poll); None if :meth:`stop` cut it short."""
        call = asyncio.ensure_future(
            self._bot.get_updates(
                offset=offset, timeout=self._timeout, allowed_updates=ALLOWED_UPDATES
            )
        )
        self._call = call
        try:
            return await call
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if (
                call.cancelled()
                and self._stopped.is_set()
                and not (current and current.cancelling())
            ):
                return None
            raise
        finally:
            self._call = None

    async def _confirm(self, offset: int) -> None:
        """Tell Telegram what was taken: an offset is only heard with a getUpdates."""
        try:
            await self._bot.get_updates(
                offset=offset, timeout=0, limit=1, allowed_updates=ALLOWED_UPDATES
            )
        except TelegramError as exc:  # they are handled again, idempotently, by the next one
            log.warning("the updates taken last were not confirmed to Telegram: %s", exc)

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less if :meth:`stop` comes first."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopped.wait()

    def _failed(self, exc: TelegramError, backoff: float) -> float:
        if isinstance(exc, Conflict):
            log.warning("another getUpdates or a webhook competes with this gateway: %s", exc)
        elif is_network_failure(exc):
            self._health.failed()
            log.info("getUpdates failed: %s", exc)
        else:
            log.warning("getUpdates refused: %s", exc)
        return min(max(backoff * 2, 0.25), MAX_BACKOFF_SECONDS)

    async def _call_until_ok(self, call: Callable[[], Awaitable[object]]) -> None:
        backoff = 0.0
        while not self._stopped.is_set():
            try:
                await call()
                return
            except InvalidToken:
                log.critical("Telegram refused the bot token: no updates will be taken")
                raise
            except TelegramError as exc:
                backoff = self._failed(exc, backoff)
                if self._leave_to_another_host():
                    return
                await self._pause(backoff)
