"""Outbound text: a turn's live text (:class:`TurnStream`), notices sent outside a session's
runner (:class:`Notifier`), and a 429's wait (:func:`with_rate_limit`).

A turn's text is its timeline's sections (gateway/timeline.py), each shown as its own
message, split without breaking code fences when it grows past the platform's limit: what
the agent says after a card comes after it. Each conversation shows it through its own outlet
(gateway/sessions/outlets.py), at its own platform's pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from gateway.domain import ConversationRef, TurnStatus
from gateway.errors import PlatformError
from gateway.events import ToolActivity, ToolKind, ToolPhase
from gateway.platform import (
    Platform,
    PlatformLimits,
    RateLimited,
    RepliesToMessages,
    gateway_speaking,
)
from gateway.render.commands import spell_commands
from gateway.render.textsplit import GrowingSplit, fit_rendered, split_text
from gateway.store.store import Store
from gateway.timeline import ShownPart, Timeline

__all__ = [
    "AGENT_ENDED_WORDS",
    "MAX_RATE_LIMIT_WAIT",
    "TOOL_ENDED_WORDS",
    "Notifier",
    "TurnStream",
    "card_messages",
    "closed_line",
    "with_rate_limit",
]

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

    async def send(
        self,
        conversations: list[ConversationRef],
        text: str,
        reply_to: Mapping[ConversationRef, str] | None = None,
    ) -> None:
        """``text`` to each conversation; where ``reply_to`` names a message there (a
        card), as a reply to it where the platform shows replies (Telegram)."""
        async with asyncio.TaskGroup() as tasks:
            for conversation in conversations:
                platform = self._platforms.get(conversation.platform)
                if platform is not None:
                    replied = (reply_to or {}).get(conversation)
                    tasks.create_task(self._send(platform, conversation, text, replied))

    async def _send(
        self,
        platform: Platform,
        conversation: ConversationRef,
        text: str,
        reply_to: str | None = None,
    ) -> None:
        spelled = spell_commands(text, platform.spell_command)
        with gateway_speaking():
            for chunk in platform_parts(spelled, platform.limits):
                send = partial(platform.send_text, conversation, chunk)
                if reply_to is not None and isinstance(platform, RepliesToMessages):
                    send = partial(platform.send_reply, conversation, chunk, reply_to)
                    reply_to = None  # the first part replies; the rest follow it
                try:
                    await with_rate_limit(send)
                except PlatformError as exc:
                    log.warning("notice to %s failed: %s", conversation.key(), exc)
                    return


async def card_messages(store: Store, *interaction_ids: str) -> dict[ConversationRef, str]:
    """Where the cards of ``interaction_ids`` are shown: each conversation's card message
    (its own copy there, not one drawn again; the first interaction named that is shown
    there), for a notice that replies to it."""
    found: dict[ConversationRef, str] = {}
    for interaction_id in interaction_ids:
        for copy in sorted(await store.cards.list_for(interaction_id), key=lambda c: c.again):
            if copy.message_ref is not None:
                found.setdefault(copy.conversation, copy.message_ref)
    return found


def platform_parts(text: str, limits: PlatformLimits) -> list[str]:
    """``text`` in messages the platform of ``limits`` takes: at most ``text_max_chars``
    each, as it counts them (``text_length``, escapes included)."""
    limit = limits.text_max_chars
    return fit_rendered(split_text(text, limit), limit, limits.text_length)


def _activity_line(event: ToolActivity, *, ended: str | None = None) -> str:
    """A tool's line, in Markdown (a command in backticks): "▸" while it runs, "✓" or "✗"
    once it ended. ``ended`` says, in a person's words, how it ended where the agent's own
    word would mislead: a refusal sent because nobody answered ("expired: nobody answered",
    where Codex says "declined"), a tool still running when its turn ended."""
    if event.tool is ToolKind.COMMAND:
        subject = f"`{event.title}`"
    elif event.tool is ToolKind.FILE_CHANGE:
        subject = ", ".join(event.paths) or event.title
    else:
        subject = event.title
    if ended is not None:
        return f"✗ {subject} ({ended})"
    if event.phase is not ToolPhase.COMPLETED:
        return f"▸ {subject}"
    if event.status in ("declined", "rejected", "denied"):
        return f"✗ {subject} ({event.status})"
    if event.exit_code not in (None, 0) or event.status == "failed":
        code = f"exit {event.exit_code}" if event.exit_code is not None else "failed"
        return f"✗ {subject} ({code})"
    return f"✓ {subject}"


def closed_line(line: str, words: str) -> str | None:
    """A tool's line shown running ("▸ subject"), closed in ``words`` (how it ended, where
    the tool never reported it: its turn ended under it); None for a line not running."""
    if not line.startswith("▸ "):
        return None
    return f"✗ {line.removeprefix('▸ ')} ({words})"


EXPIRED_WORDS = "expired: nobody answered"
# how a tool still running when its turn ended is shown (it never reports its end)
TOOL_ENDED_WORDS = {
    TurnStatus.COMPLETED: "not finished when the turn ended",
    TurnStatus.INTERRUPTED: "stopped: the turn was interrupted",
    TurnStatus.FAILED: "stopped: the turn failed",
}
AGENT_ENDED_WORDS = "stopped: the agent process ended"


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
        self._chunks: dict[tuple[int, PlatformLimits], tuple[int, list[str]]] = {}
        # each part split again for a platform that counts it rendered: by section and
        # limits, the source parts and their fitted parts (a part unchanged is not rendered
        # again to measure it)
        self._fitted: dict[tuple[int, PlatformLimits], list[tuple[str, list[str]]]] = {}
        self._tools: dict[str, ToolActivity] = {}  # each tool's last event, by item
        self._running: dict[str, None] = {}  # tools not completed, in the order they started
        self._waiting_on: dict[str, str] = {}  # interaction -> the tool that waits for it
        self._ended: dict[str, str] = {}  # item -> how it ended, in a person's words
        self._posted: list[ShownPart] = []  # messages posted for the turn, not yet saved

    # --- what the agent did (synchronous, cheap: called for every event) ------------------

    def message(self, item_id: str, text: str) -> None:
        """The item's final text: authoritative over the deltas seen."""
        self.timeline.message(item_id, text)

    def activity(self, event: ToolActivity) -> None:
        item = event.item_id
        self._tools[item] = event
        if event.phase is ToolPhase.COMPLETED:
            self._running.pop(item, None)
        else:
            self._running[item] = None
        line = _activity_line(event, ended=self._ended.get(item))
        self.timeline.tool(f"tool:{item}", line)

    def interaction_opened(self, interaction_id: str) -> None:
        """A card opened: what comes next is a new message, after it. The tool started last
        and still running is the one that waits for it (Codex announces the command, then
        asks)."""
        if self._running:
            self._waiting_on[interaction_id] = next(reversed(self._running))
        self.timeline.interaction_opened(interaction_id)

    def interaction_expired(self, interaction_id: str) -> None:
        """Nobody answered the card in time: the tool that waited for it is refused because
        of that, not by anyone (the agent reports it "declined")."""
        item = self._waiting_on.get(interaction_id)
        if item is None:
            return
        self._ended[item] = EXPIRED_WORDS
        event = self._tools.get(item)
        if event is not None and event.phase is ToolPhase.COMPLETED:
            self.timeline.tool(f"tool:{item}", _activity_line(event, ended=EXPIRED_WORDS))

    def end_running_tools(self, words: str) -> None:
        """The turn is over: a tool still shown running ended with it (``words`` say how)."""
        for item in list(self._running):
            ended = self._ended.setdefault(item, words)
            self.timeline.tool(f"tool:{item}", _activity_line(self._tools[item], ended=ended))
        self._running.clear()

    def posted(
        self, conversation: ConversationRef, section: int, part: int, message_id: str
    ) -> None:
        """A platform message now shows part ``part`` of ``section``: saved with the
        timeline, for a recovery that must close the turn where it was shown."""
        self._posted.append(
            ShownPart(conversation=conversation, section=section, part=part, message_id=message_id)
        )

    def take_posted(self) -> list[ShownPart]:
        """The messages posted since the last call (the saver's, which puts them back if
        its save fails)."""
        posted, self._posted = self._posted, []
        return posted

    def put_back(self, posted: list[ShownPart]) -> None:
        self._posted[:0] = posted

    # --- reading it -----------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self.timeline.version

    def text(self) -> str:
        return self.timeline.text()

    def chunks(self, section: int, limits: PlatformLimits) -> list[str]:
        """The messages of a section for a platform of ``limits``: at most
        ``text_max_chars`` each, as the platform counts them (``text_length``)."""
        key = (section, limits)
        version = self.timeline.version
        cached = self._chunks.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        text = self.timeline.section_text(section)
        limit = limits.text_max_chars
        split_key = (section, limit)
        splitter = self._splits.get(split_key)
        if splitter is None:
            splitter = self._splits[split_key] = GrowingSplit(limit)
        chunks = splitter.split(text) if text else []
        if limits.text_length is not len:
            chunks = self._fit(key, chunks, limits)
        self._chunks[key] = (version, chunks)
        return chunks

    def _fit(
        self, key: tuple[int, PlatformLimits], chunks: list[str], limits: PlatformLimits
    ) -> list[str]:
        before = self._fitted.get(key, [])
        now = []
        for index, chunk in enumerate(chunks):
            if index < len(before) and before[index][0] == chunk:
                now.append(before[index])
            else:
                now.append(
                    (chunk, fit_rendered([chunk], limits.text_max_chars, limits.text_length))
                )
        self._fitted[key] = now
        return [part for _, fitted in now for part in fitted]

    def watch(self, wake: asyncio.Event) -> None:
        self.timeline.watchers.append(wake)
        wake.set()

    def unwatch(self, wake: asyncio.Event) -> None:
        with contextlib.suppress(ValueError):
            self.timeline.watchers.remove(wake)
