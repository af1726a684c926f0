"""When an update counts as taken, whether it came by long polling or by webhook.

An update is confirmed to Telegram (a later ``offset``, or a 2xx answer to its webhook POST)
only once it was *taken*: handled (a prompt durably queued, a click decided or answered), or
deliberately refused with a reply. Until then Telegram gives it again.

- An update whose handling raised (the ledger busy or closing, a bug of ours) is not taken,
  and neither is any later update of its chat: one chat's updates are taken in order.
- An update that failed :data:`MAX_ATTEMPTS` times fails on a bug of ours, not on a busy
  ledger: it is refused (``UpdateHandler.refuse`` tells the person it was not handled),
  logged, and counts as taken, so that the chat's later updates go on.
- Updates of other chats taken meanwhile come again with the one that failed (an offset
  confirms every update before it). :class:`Attempts` remembers them and they are not
  handled twice: a form's toggle would flip back, a command would answer twice. What a
  restarted gateway is given again is handled again, idempotently where it matters (the
  prompt queue keys on the Telegram message id; a click on a decided card is answered
  "already decided").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TypeVar

from telegram import Update

from platforms.telegram.updates import UpdateHandler, chat_of

__all__ = ["MAX_ATTEMPTS", "Attempts", "take_batch", "take_one"]

log = logging.getLogger(__name__)
V = TypeVar("V")

MAX_ATTEMPTS = 5
REMEMBERED = 1024  # updates remembered as taken or failing, oldest forgotten first


class Attempts:
    """Which updates not yet confirmed to Telegram were taken, and how often each failed."""

    def __init__(self, limit: int = MAX_ATTEMPTS) -> None:
        self.limit = limit
        self._taken: dict[int, None] = {}  # an ordered set: the oldest is forgotten first
        self._failures: dict[int, int] = {}

    def was_taken(self, update_id: int) -> bool:
        return update_id in self._taken

    def taken(self, update_id: int) -> None:
        self._failures.pop(update_id, None)
        self._taken[update_id] = None
        _forget_oldest(self._taken)

    def failed(self, update_id: int) -> int:
        """Count one failed attempt at ``update_id``; how many there were."""
        count = self._failures.pop(update_id, 0) + 1
        self._failures[update_id] = count
        _forget_oldest(self._failures)
        return count

    def confirmed_before(self, offset: int) -> None:
        """Telegram no longer gives any update before ``offset``: forget them."""
        for table in (self._taken, self._failures):
            for update_id in [u for u in table if u < offset]:
                del table[update_id]


def _forget_oldest(table: dict[int, V]) -> None:
    while len(table) > REMEMBERED:
        del table[next(iter(table))]


async def take_one(handler: UpdateHandler, update: Update, attempts: Attempts) -> bool:
    """Handle ``update`` unless it was taken already; whether it is taken now."""
    update_id = update.update_id
    if attempts.was_taken(update_id):
        return True  # given again with an update that failed: not handled twice
    try:
        await handler.handle(update)
    except Exception:
        failures = attempts.failed(update_id)
        if failures < attempts.limit:
            log.warning(
                "update %s failed (attempt %d of %d); Telegram gives it again",
                update_id,
                failures,
                attempts.limit,
                exc_info=True,
            )
            return False
        log.exception("update %s failed %d times: refused, the person is told", update_id, failures)
        try:
            await handler.refuse(update)
        except Exception:  # the refusal is a courtesy: the update is given up all the same
            log.exception("the refusal of update %s was not sent", update_id)
    attempts.taken(update_id)
    return True


async def take_batch(
    handler: UpdateHandler, updates: Sequence[Update], attempts: Attempts
) -> int | None:
    """Take ``updates`` (one chat's in order, chats side by side); the id of the first update
    not taken, from which Telegram must give them again (None: every one was taken)."""
    by_chat: dict[int | None, list[Update]] = {}
    for update in updates:
        by_chat.setdefault(chat_of(update), []).append(update)
    async with asyncio.TaskGroup() as tasks:
        chats = [tasks.create_task(_in_order(handler, each, attempts)) for each in by_chat.values()]
    left = [first for first in (chat.result() for chat in chats) if first is not None]
    return min(left, default=None)


async def _in_order(
    handler: UpdateHandler, updates: list[Update], attempts: Attempts
) -> int | None:
    """One chat's updates in order; the first not taken (the later ones wait for it)."""
    for update in updates:
        if not await take_one(handler, update, attempts):
            return update.update_id
    return None
