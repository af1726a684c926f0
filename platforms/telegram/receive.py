"""Taking updates by long polling, at least once, and knowing whether Telegram is reachable.

python-telegram-bot's ``Updater`` confirms a batch of updates (the next ``offset``) as soon as
it has queued them, before they are handled: a crash in between loses them. The
:class:`Poller` here confirms an update only after it was handled, so a crash means the
update is seen again, and handling is idempotent (the prompt queue keys on the Telegram
message id; a click on a decided card is answered "already decided"). Updates of one chat
are handled in order; chats of one batch are handled side by side.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from platforms.telegram.outbox import is_network_failure, retry_seconds
from platforms.telegram.updates import UpdateHandler, chat_of

__all__ = ["ALLOWED_UPDATES", "Health", "Poller", "handle_batch"]

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message", "callback_query")
MAX_BACKOFF_SECONDS = 5.0


class Health:
    """Whether Telegram answers; ``on_back`` runs once each time it answers again."""

    def __init__(self, on_back: Callable[[], None]) -> None:
        self._on_back = on_back
        self._down = asyncio.Event()

    @property
    def down(self) -> bool:
        return self._down.is_set()

    def failed(self) -> None:
        self._down.set()

    def ok(self) -> None:
        if self._down.is_set():
            self._down.clear()
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


async def handle_batch(handler: UpdateHandler, updates: Sequence[Update]) -> None:
    """Handle ``updates``: one chat's in order, chats side by side; a failure is logged."""
    by_chat: dict[int | None, list[Update]] = {}
    for update in updates:
        by_chat.setdefault(chat_of(update), []).append(update)
    async with asyncio.TaskGroup() as tasks:
        for chat_updates in by_chat.values():
            tasks.create_task(_in_order(handler, chat_updates))


async def _in_order(handler: UpdateHandler, updates: list[Update]) -> None:
    for update in updates:
        try:
            await handler.handle(update)
        except Exception:  # one bad update must not stop the others
            log.exception("update %s failed", update.update_id)


class Poller:
    def __init__(self, bot: Bot, handler: UpdateHandler, health: Health, timeout: int) -> None:
        self._bot = bot
        self._handler = handler
        self._health = health
        self._timeout = timeout

    async def run(self) -> None:
        await self._call_until_ok(lambda: self._bot.delete_webhook(drop_pending_updates=False))
        offset: int | None = None
        backoff = 0.0
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=offset, timeout=self._timeout, allowed_updates=ALLOWED_UPDATES
                )
            except InvalidToken:
                log.critical("Telegram refused the bot token: no updates will be taken")
                raise
            except RetryAfter as exc:
                await asyncio.sleep(retry_seconds(exc))  # Telegram's own instruction
                continue
            except TelegramError as exc:
                backoff = self._failed(exc, backoff)
                await asyncio.sleep(backoff)  # backing off from a failing server
                continue
            backoff = 0.0
            self._health.ok()
            if updates:
                await handle_batch(self._handler, updates)
                offset = updates[-1].update_id + 1  # confirmed only now that it is handled

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
        while True:
            try:
                await call()
                return
            except TelegramError as exc:
                backoff = self._failed(exc, backoff)
                await asyncio.sleep(backoff)
