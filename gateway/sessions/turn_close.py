"""Closing, where it was shown, a turn a previous gateway process died in the middle of.

/stop and an agent's crash close a turn live: its outlet edits a tool line shown running
("▸ `make test`") to say how it ended. A gateway that was killed, or whose host was fenced
out, had no chance to: its recovery reads the turn back from the ledger (its timeline, saved
every second, and the platform messages that show it, ``turn_messages``), closes the lines
left running, saves that, and edits each message whose text changed. Best effort: a message
the platform no longer edits is logged, never raised (the recovery notice says the rest).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import partial

from gateway.errors import PlatformError
from gateway.platform import MessageRef, Platform, PlatformLimits
from gateway.sessions.outbound import TurnStream, closed_line, with_rate_limit
from gateway.store.records import TimelineEntry
from gateway.store.store import Store
from gateway.timeline import EntryKind, ShownPart

__all__ = ["RESTART_WORDS", "close_shown_turn"]

log = logging.getLogger(__name__)

RESTART_WORDS = "stopped: the gateway restarted"


async def close_shown_turn(
    store: Store, platforms: Mapping[str, Platform], turn_id: int, words: str = RESTART_WORDS
) -> int:
    """Close the turn's tool lines left running, in the ledger and in every message that
    shows them. Returns how many messages were edited."""
    entries, shown = await store.timeline.of_turn(turn_id)
    closing = {
        _tool_id(entry): closed
        for entry in entries
        if entry.kind is EntryKind.TOOL and (closed := closed_line(entry.text, words))
    }
    if not closing:
        return 0
    stream = _replayed(entries)
    wanted = {
        (part.section, platform.limits)
        for part in shown
        if (platform := platforms.get(part.conversation.platform)) is not None
    }
    before = {key: stream.chunks(*key) for key in wanted}
    for item_id, closed in closing.items():
        stream.timeline.tool(item_id, closed)
    unsaved = stream.timeline.unsaved()
    await store.timeline.save(turn_id, unsaved.writes)
    return await _edit(platforms, shown, before, stream)


def _tool_id(entry: TimelineEntry) -> str:
    """The item a tool entry is replayed under (its own, else one from its place)."""
    return entry.item_id or f"tool:{entry.seq}"


def _replayed(entries: Iterable[TimelineEntry]) -> TurnStream:
    """A turn's stream as the ledger has it: the same sections, the same text; marked saved,
    so that what changes next is what the next save writes."""
    stream = TurnStream()
    timeline = stream.timeline
    for entry in entries:
        match entry.kind:
            case EntryKind.TEXT:
                timeline.delta(entry.item_id or f"text:{entry.seq}", entry.text)
            case EntryKind.TOOL:
                timeline.tool(_tool_id(entry), entry.text)
            case EntryKind.INTERACTION:
                timeline.interaction_opened(entry.interaction_id or f"interaction:{entry.seq}")
    timeline.saved(timeline.unsaved())  # what the ledger holds: nothing of it to write again
    return stream


async def _edit(
    platforms: Mapping[str, Platform],
    shown: Iterable[ShownPart],
    before: Mapping[tuple[int, PlatformLimits], list[str]],
    stream: TurnStream,
) -> int:
    edited = 0
    for part in shown:
        platform = platforms.get(part.conversation.platform)
        if platform is None:
            continue
        key = (part.section, platform.limits)
        old, new = before.get(key, []), stream.chunks(*key)
        if part.part >= len(new) or (part.part < len(old) and old[part.part] == new[part.part]):
            continue
        ref = MessageRef(conversation=part.conversation, message_id=part.message_id)
        try:
            await with_rate_limit(partial(platform.edit_text, ref, new[part.part]))
        except PlatformError as exc:
            log.warning("the turn's message in %s was not closed: %s", part.conversation.key(), exc)
            continue
        edited += 1
    return edited
