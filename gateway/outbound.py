"""Outbound text: a turn's live text (:class:`TurnStream`), notices sent outside a session's
runner (:class:`Notifier`), and a 429's wait (:func:`with_rate_limit`).

A turn's text is its timeline's sections (gateway/timeline.py), each shown as its own
message, split without breaking code fences when it grows past the platform's limit: what
the agent says after a card comes after it. Each conversation shows it through its own outlet
(gateway/outlets.py), at its own platform's pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from gateway.commands import spell_commands
from gateway.domain import ConversationRef
from gateway.errors import PlatformError
from gateway.events import ToolActivity, ToolKind, ToolPhase
from gateway.platform import Platform, RateLimited
from gateway.textsplit import GrowingSplit, split_text
from gateway.timeline import Timeline

__all__ = ["MAX_RATE_LIMIT_WAIT", "Notifier", "TurnStream", "with_rate_limit"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_RATE_LIMIT_WAIT = 60.0  # seconds of 429s waited out for one notice, or a turn's end


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
    """Sends a notice to conversations, side by side (a 429 in one does not hold the others);
    a platform failure is logged, never raised. For replies made outside a session's runner
    (commands, recovery); a runner's notices go through its :class:`Outbound`."""

    def __init__(self, platforms: Mapping[str, Platform]) -> None:
        self._platforms = platforms

    async def send(self, conversations: list[ConversationRef], text: str) -> None:
        async with asyncio.TaskGroup() as tasks:
            for conversation in conversations:
                platform = self._platforms.get(conversation.platform)
                if platform is not None:
                    tasks.create_task(self._send(platform, conversation, text))

    async def _send(self, platform: Platform, conversation: ConversationRef, text: str) -> None:
        spelled = spell_commands(text, platform.spell_command)
        for chunk in split_text(spelled, platform.limits.text_max_chars):
            try:
                await with_rate_limit(partial(platform.send_text, conversation, chunk))
            except PlatformError as exc:
                log.warning("notice to %s failed: %s", conversation.key(), exc)
                return


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


def _now() -> datetime:
    return datetime.now(UTC)


class TurnStream:
    """The live text of one turn: its timeline, and the outlets that show it."""

    def __init__(self, *, clock: Callable[[], datetime] = _now) -> None:
        self.timeline = Timeline(clock=clock)
        # the hot path, one call per streamed delta: the timeline's own method, which sets
        # the wake of every outlet showing the turn (its watchers)
        self.delta: Callable[[str, str], None] = self.timeline.delta
        self.saving = asyncio.Lock()  # one save of the timeline at a time (the runner's)
        self._splits: dict[tuple[int, int], GrowingSplit] = {}  # by section and text limit
        self._chunks: dict[tuple[int, int], tuple[int, list[str]]] = {}

    # --- what the agent did (synchronous, cheap: called for every event) ------------------

    def message(self, item_id: str, text: str) -> None:
        """The item's final text: authoritative over the deltas seen."""
        self.timeline.message(item_id, text)

    def activity(self, event: ToolActivity) -> None:
        self.timeline.tool(f"tool:{event.item_id}", _activity_line(event))

    def interaction_opened(self, interaction_id: str) -> None:
        """A card opened: what comes next is a new message, after it."""
        self.timeline.interaction_opened(interaction_id)

    # --- reading it -----------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self.timeline.version

    def text(self) -> str:
        return self.timeline.text()

    def chunks(self, section: int, limit: int) -> list[str]:
        """The messages of a section for a platform whose texts hold ``limit`` characters."""
        key = (section, limit)
        version = self.timeline.version
        cached = self._chunks.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        text = self.timeline.section_text(section)
        splitter = self._splits.get(key)
        if splitter is None:
            splitter = self._splits[key] = GrowingSplit(limit)
        chunks = splitter.split(text) if text else []
        self._chunks[key] = (version, chunks)
        return chunks

    def watch(self, wake: asyncio.Event) -> None:
        self.timeline.watchers.append(wake)
        wake.set()

    def unwatch(self, wake: asyncio.Event) -> None:
        with contextlib.suppress(ValueError):
            self.timeline.watchers.remove(wake)
