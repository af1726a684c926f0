"""Outbound text: notices to every conversation of a session, and the live turn message.

The agent's text of a turn is one message per conversation, edited as it streams, at most
once per ``min_edit_interval_seconds`` of the platform (coalesced; identical edits skipped),
split without breaking code fences when it grows past the platform's limit; the final text
is always delivered whole. A 429 is honoured by waiting what the platform says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TypeVar

from gateway.commands import spell_commands
from gateway.domain import ConversationRef
from gateway.errors import PlatformError
from gateway.events import ToolActivity, ToolKind, ToolPhase
from gateway.platform import MessageRef, Platform, RateLimited
from gateway.textsplit import GrowingSplit, split_text

__all__ = ["Notifier", "TurnStream", "with_rate_limit"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_RATE_LIMIT_WAIT = 60.0


async def with_rate_limit(call: Callable[[], Awaitable[T]]) -> T:
    """Honour a platform's 429: wait what it says (bounded in total), then try again."""
    waited = 0.0
    while True:
        try:
            return await call()
        except RateLimited as exc:
            if waited + exc.retry_after > MAX_RATE_LIMIT_WAIT:
                raise
            waited += exc.retry_after
            await asyncio.sleep(exc.retry_after)  # the platform's own instruction


class Notifier:
    """Sends a notice to conversations; a platform failure is logged, never raised."""

    def __init__(self, platforms: Mapping[str, Platform]) -> None:
        self._platforms = platforms

    async def send(self, conversations: list[ConversationRef], text: str) -> None:
        for conversation in conversations:
            platform = self._platforms.get(conversation.platform)
            if platform is None:
                continue
            spelled = spell_commands(text, platform.spell_command)
            for chunk in split_text(spelled, platform.limits.text_max_chars):
                try:
                    await with_rate_limit(partial(platform.send_text, conversation, chunk))
                except PlatformError as exc:
                    log.warning("notice to %s failed: %s", conversation.key(), exc)


def _activity_line(event: ToolActivity) -> str:
    if event.tool is ToolKind.COMMAND:
        subject = f"`{event.title}`"
    elif event.tool is ToolKind.FILE_CHANGE:
        subject = ", ".join(event.paths) or event.title
    else:
        subject = event.title
    if event.phase is not ToolPhase.COMPLETED:
        return f"▸ {subject}"
    if event.status in ("declined", "rejected", "denied"):
        return f"✗ {subject} ({event.status})"
    if event.exit_code not in (None, 0) or event.status == "failed":
        code = f"exit {event.exit_code}" if event.exit_code is not None else "failed"
        return f"✗ {subject} ({code})"
    return f"✓ {subject}"


class TurnStream:
    """The live message of one turn in every conversation of the session."""

    def __init__(self, platforms: Mapping[str, Platform], conversations: list[ConversationRef]):
        self._platforms = platforms
        self._conversations = conversations
        # item id → its text in pieces, in order of appearance; the pieces are joined when the
        # text is shown: appending each delta to one string copies the whole text every time
        # (a million deltas took hours; bench/throughput.py, docs/decisions.md)
        self._slots: dict[str, list[str]] = {}
        self._shown: dict[ConversationRef, list[tuple[MessageRef | None, str]]] = {}
        self._splits: dict[int, GrowingSplit] = {}  # by the platform's text limit
        self._dirty = asyncio.Event()
        self._flushing = asyncio.Lock()  # the flusher task and the runner both flush
        self.deltas = 0

    # --- what the agent did (synchronous, cheap: called for every event) ------------------

    def delta(self, item_id: str, text: str) -> None:
        pieces = self._slots.get(item_id)
        if pieces is None:
            self._slots[item_id] = [text]
        else:
            pieces.append(text)
        self.deltas += 1
        self._dirty.set()

    def message(self, item_id: str, text: str) -> None:
        """The item's final text: authoritative over the deltas seen."""
        self._slots[item_id] = [text]
        self._dirty.set()

    def activity(self, event: ToolActivity) -> None:
        self._slots[f"tool:{event.item_id}"] = [_activity_line(event)]
        self._dirty.set()

    def text(self) -> str:
        parts = []
        for pieces in self._slots.values():
            if len(pieces) > 1:
                pieces[:] = ["".join(pieces)]
            if pieces[0].strip():
                parts.append(pieces[0])
        return "\n\n".join(parts)

    # --- showing it -----------------------------------------------------------------------

    async def run(self, min_interval: float) -> None:
        """Flush at most once per ``min_interval`` while the turn runs (an owned task)."""
        while True:
            await self._dirty.wait()
            await self.flush()
            await asyncio.sleep(min_interval)  # the platform's edit rate, not a wait for state

    async def flush(self) -> None:
        # one flush at a time: two at once would both send the first message of the turn
        async with self._flushing:
            self._dirty.clear()
            text = self.text()
            if not text:
                return
            for conversation in self._conversations:
                platform = self._platforms.get(conversation.platform)
                if platform is not None:
                    await self._show(platform, conversation, text)

    async def _show(self, platform: Platform, conversation: ConversationRef, text: str) -> None:
        shown = self._shown.setdefault(conversation, [])
        limit = platform.limits.text_max_chars
        splitter = self._splits.setdefault(limit, GrowingSplit(limit))
        for index, chunk in enumerate(splitter.split(text)):
            try:
                if index < len(shown):
                    ref, before = shown[index]
                    if before == chunk:
                        continue
                    if ref is None:
                        ref = await with_rate_limit(
                            partial(platform.send_text, conversation, chunk)
                        )
                    else:
                        await with_rate_limit(partial(platform.edit_text, ref, chunk))
                    shown[index] = (ref, chunk)
                else:
                    ref = await with_rate_limit(partial(platform.send_text, conversation, chunk))
                    shown.append((ref, chunk))
            except PlatformError as exc:
                # keep what was shown; the next flush (or the final one) tries again
                log.warning("stream to %s failed: %s", conversation.key(), exc)
                if index >= len(shown):
                    shown.append((None, ""))
                self._dirty.set()
                return
