"""A Telegram album is one prompt (issue 32).

Several photos or documents sent together come as several messages sharing a
``media_group_id``, the caption on one of them (any one), each in an update of its own, not
always in one ``getUpdates`` answer. Each part is kept here as it comes; once no part of the
album came for :data:`ALBUM_WINDOW_SECONDS`, the parts are handed to the core as one
:class:`~gateway.platform.InboundMessage` (:func:`combine`): the caption is its text, the
files keep the order sent (by message id), and its id is the album's (``album-<id>``: one
dedupe key for the prompt queue, so an album given again is queued once).

In a group under ``group_mode = "mentions"`` an album is for the bot when one of its parts
is (its caption mentions the bot); the parts without words come with it.

The parts' updates are confirmed to Telegram when kept here, before the album reaches the
core: an album is lost if the gateway dies within the window (a second). What the core
refuses then is said in the chat (``on_failed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.platform import InboundMessage

__all__ = ["ALBUM_WINDOW_SECONDS", "AlbumPart", "Albums", "Spawn", "combine"]

log = logging.getLogger(__name__)
ALBUM_WINDOW_SECONDS = 1.0
MAX_ALBUMS = 64  # albums gathered at once; past it the oldest is handed on at once
MAX_PARTS = 10  # Telegram's own limit of an album


@dataclass(frozen=True, kw_only=True, slots=True)
class AlbumPart:
    message: InboundMessage
    addressed: bool  # the part, on its own, is for the bot


@dataclass(kw_only=True, slots=True)
class _Gathering:
    parts: list[AlbumPart] = field(default_factory=list)
    came: asyncio.Event = field(default_factory=asyncio.Event)
    over: bool = False  # handed on now: as many parts as an album has, or too many albums


def combine(album_id: str, parts: list[AlbumPart]) -> InboundMessage | None:
    """The one message an album's parts make, or None when no part is for the bot."""
    if not any(p.addressed for p in parts):
        return None
    ordered = sorted(parts, key=lambda p: int(p.message.message_id))
    first = ordered[0].message
    text = next((p.message.text for p in ordered if p.message.text), "")
    return replace(
        first,
        text=text,
        message_id=f"album-{album_id}",
        attachments=tuple(a for p in ordered for a in p.message.attachments),
    )


Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class Albums:
    """The albums being gathered; ``spawn`` runs a task owned by the platform."""

    def __init__(
        self,
        *,
        deliver: Callable[[InboundMessage], Awaitable[None]],
        on_failed: Callable[[InboundMessage], Awaitable[None]],
        spawn: Spawn,
        window: float = ALBUM_WINDOW_SECONDS,
    ) -> None:
        self._deliver = deliver
        self._on_failed = on_failed
        self._spawn = spawn
        self._window = window
        self._gathering: dict[tuple[str, str], _Gathering] = {}

    def add(self, chat: str, album_id: str, part: AlbumPart) -> None:
        key = (chat, album_id)
        gathering = self._gathering.get(key)
        if gathering is None:
            if len(self._gathering) >= MAX_ALBUMS:
                self._close(next(iter(self._gathering)))
            gathering = self._gathering[key] = _Gathering()
            self._spawn(self._gather(key, gathering))
        gathering.parts.append(part)
        gathering.came.set()
        if len(gathering.parts) >= MAX_PARTS:
            self._close(key)

    def _close(self, key: tuple[str, str]) -> None:
        """Hand the album on now; a later part of it starts an album of its own."""
        gathering = self._gathering.pop(key)
        gathering.over = True
        gathering.came.set()

    async def _gather(self, key: tuple[str, str], gathering: _Gathering) -> None:
        while not gathering.over:
            gathering.came.clear()
            try:
                async with asyncio.timeout(self._window):
                    await gathering.came.wait()
            except TimeoutError:
                break
        if self._gathering.get(key) is gathering:
            del self._gathering[key]
        message = combine(key[1], gathering.parts)
        if message is None:
            return
        try:
            await self._deliver(message)
        except Exception:
            log.exception("album %s in chat %s: not taken by the gateway", key[1], key[0])
            with contextlib.suppress(Exception):
                await self._on_failed(message)
