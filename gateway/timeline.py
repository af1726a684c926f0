"""A turn as an ordered timeline: what the agent said, the tools it ran and the moments it
asked, under one sequence (docs/decisions.md, "A turn is an ordered timeline").

Sans-IO: the runner feeds it the agent's events; a surface reads it as *sections* (the text
between two interactions: a chat platform shows each as its own message, so what the agent
says after a decision comes after its card); the ledger stores what changed since the last
save (:meth:`Timeline.unsaved`), a streamed answer's new text as an appended part, so that a
save costs the new text, never a row per delta nor the whole text again.

- An agent message (its ``item_id``) is a TEXT entry, its deltas appended at its end. Once an
  interaction opened after it, more deltas of the same item start a new TEXT entry after
  the interaction.
- A tool is one TOOL entry whose line is replaced as it runs and completes: it stays where
  it started, before the card of the approval it may have waited for.
- An interaction opening is an INTERACTION entry: it closes the section before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from gateway.domain import ConversationRef

__all__ = ["EntryKind", "EntryWrite", "Flag", "ShownPart", "Timeline", "Unsaved"]


class EntryKind(StrEnum):
    TEXT = "text"
    TOOL = "tool"
    INTERACTION = "interaction"


@dataclass(frozen=True, kw_only=True, slots=True)
class EntryWrite:
    """What one save writes of one entry: the entry itself when ``new``, then its text:
    ``text`` appended as part ``part``, or, when ``replace``, its parts replaced by
    ``text`` (part 0)."""

    seq: int
    kind: EntryKind
    at: datetime
    item_id: str | None
    interaction_id: str | None
    new: bool
    replace: bool
    part: int
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ShownPart:
    """A platform message that shows part ``part`` of section ``section`` of a turn (the
    section split to the platform's limit): what a recovery edits to close the turn there."""

    conversation: ConversationRef
    section: int
    part: int
    message_id: str


@dataclass(eq=False, kw_only=True, slots=True)
class _Entry:
    seq: int
    kind: EntryKind
    at: datetime
    section: int
    item_id: str | None = None
    interaction_id: str | None = None
    # the text in pieces, joined when read: appending each delta to one string copied the
    # whole text every time (docs/decisions.md, Benchmarks)
    pieces: list[str] = field(default_factory=list)
    rewrites: int = 0  # times the text changed other than at its end
    # what the ledger has of it
    stored: bool = False
    saved_rewrites: int = 0
    saved_chars: int = 0
    saved_parts: int = 0

    def text(self) -> str:
        pieces = self.pieces
        if len(pieces) > 1:
            pieces[:] = ["".join(pieces)]
        return pieces[0] if pieces else ""


@dataclass(frozen=True, eq=False, slots=True)
class Unsaved:
    """A save to make (:meth:`Timeline.unsaved`); once written, :meth:`Timeline.saved`."""

    writes: tuple[EntryWrite, ...]
    _marks: tuple[tuple[_Entry, int, int, int], ...]  # entry, rewrites, chars, parts


def _now() -> datetime:
    return datetime.now(UTC)


class Flag(Protocol):
    """Whatever wants to know of a change (an ``asyncio.Event``: a surface's task waits on
    it), set on every change."""

    def set(self) -> None: ...


class Timeline:
    """One turn's entries in the order they happened (``seq`` = their index)."""

    def __init__(self, *, clock: Callable[[], datetime] = _now) -> None:
        self._clock = clock
        self.entries: list[_Entry] = []
        self._sections: list[list[_Entry]] = [[]]  # the text and tool entries of each
        self._closed_text: dict[int, str] = {}  # joined text of sections before the last
        # sections before the last whose text changed (a tool completed after its card), in
        # order: a surface reads on from where it was, and shows again only those
        self.closed_changes: list[int] = []
        # entries to save other than by their appended deltas (new, replaced, or closed by a
        # card with deltas of their own); the entries taking deltas are always looked at
        self._unsaved: dict[_Entry, None] = {}
        self._texts: dict[str, _Entry] = {}  # item -> its TEXT entry in the last section
        self._parts: dict[str, list[_Entry]] = {}  # item -> all its TEXT entries, in order
        self._tools: dict[str, _Entry] = {}
        self._interactions: set[str] = set()
        self.version = 0  # moves with every change: a surface knows what it has shown
        self.watchers: list[Flag] = []

    # --- what the agent did (called for every event: cheap) -------------------------------

    def delta(self, item_id: str, text: str) -> None:
        entry = self._texts.get(item_id)
        if entry is None:
            entry = self._new_text(item_id)
        entry.pieces.append(text)
        self.version += 1
        for watcher in self.watchers:
            watcher.set()

    def message(self, item_id: str, text: str) -> None:
        """The item's final text: authoritative over its deltas. Split across cards, the
        part after the last card gets what follows the parts before it."""
        parts = self._parts.get(item_id)
        if not parts:
            self._new_text(item_id).pieces.append(text)
            self._changed()
            return
        *before, last = parts
        shown_before = "".join(part.text() for part in before)
        if text.startswith(shown_before):
            self._replace(last, text[len(shown_before) :])
        else:  # not a continuation of what was shown: the first part holds it all
            self._replace(parts[0], text)
            for part in parts[1:]:
                self._replace(part, "")

    def tool(self, item_id: str, line: str) -> None:
        """A tool's line, shown where the tool started."""
        entry = self._tools.get(item_id)
        if entry is None:
            entry = self._append(EntryKind.TOOL, item_id=item_id)
            self._tools[item_id] = entry
            self._sections[-1].append(entry)
            entry.pieces.append(line)
            self._changed()
        else:
            self._replace(entry, line)

    def interaction_opened(self, interaction_id: str) -> bool:
        """The agent asked: a new section starts. False if this interaction is already in
        the timeline (the agent asked the same request again)."""
        if interaction_id in self._interactions:
            return False
        self._interactions.add(interaction_id)
        self._append(EntryKind.INTERACTION, interaction_id=interaction_id)
        self._sections.append([])
        self._unsaved.update(dict.fromkeys(self._texts.values()))
        self._texts.clear()
        self._changed()
        return True

    # --- reading it -----------------------------------------------------------------------

    @property
    def sections(self) -> int:
        return len(self._sections)

    def section_text(self, index: int) -> str:
        """The text of a section: its entries' texts, blank ones left out."""
        closed = index < len(self._sections) - 1
        if closed:
            cached = self._closed_text.get(index)
            if cached is not None:
                return cached
        # isspace, not strip: strip copies a text that ends in a line break (megabytes)
        texts = [t for entry in self._sections[index] if (t := entry.text()) and not t.isspace()]
        joined = "\n\n".join(texts)
        if closed:
            self._closed_text[index] = joined
        return joined

    def sections_to_show(self, since: tuple[int, int]) -> tuple[list[int], tuple[int, int]]:
        """The sections that may have changed since a surface's mark (``(0, 0)`` at first),
        in order, and the mark to keep once they are shown: the last section and the new
        ones, and the earlier ones changed since. Never all of a turn of many cards."""
        logged, first = since
        last = len(self._sections) - 1
        changed = set(self.closed_changes[logged:]) | set(range(first, last + 1))
        return sorted(changed), (len(self.closed_changes), last)

    def text(self) -> str:
        """The whole turn as one text (sections in order)."""
        texts = [self.section_text(i) for i in range(len(self._sections))]
        return "\n\n".join(text for text in texts if text)

    def interaction_ids(self) -> list[str]:
        return [e.interaction_id for e in self.entries if e.interaction_id is not None]

    # --- saving it ------------------------------------------------------------------------

    def unsaved(self) -> Unsaved:
        """What the ledger lacks: new entries, text appended since the last save, texts
        replaced since."""
        writes: list[EntryWrite] = []
        marks: list[tuple[_Entry, int, int, int]] = []
        looked = {**self._unsaved, **dict.fromkeys(self._texts.values())}
        for entry in sorted(looked, key=lambda e: e.seq):
            text = entry.text()
            if not entry.stored or entry.rewrites != entry.saved_rewrites:
                new_text, part, replace = text, 0, entry.stored
            elif len(text) > entry.saved_chars:
                new_text, part, replace = text[entry.saved_chars :], entry.saved_parts, False
            else:
                continue
            writes.append(
                EntryWrite(
                    seq=entry.seq,
                    kind=entry.kind,
                    at=entry.at,
                    item_id=entry.item_id,
                    interaction_id=entry.interaction_id,
                    new=not entry.stored,
                    replace=replace,
                    part=part,
                    text=new_text,
                )
            )
            parts = part + (1 if new_text else 0)
            marks.append((entry, entry.rewrites, len(text), parts))
        return Unsaved(tuple(writes), tuple(marks))

    def saved(self, save: Unsaved) -> None:
        """``save`` is in the ledger. A text replaced while it was being written is written
        whole again by the next save."""
        for entry, rewrites, chars, parts in save._marks:
            entry.stored = True
            entry.saved_rewrites = rewrites
            entry.saved_chars = chars
            entry.saved_parts = parts
            pieces = entry.pieces
            unchanged = entry.rewrites == rewrites and (
                (len(pieces) == 1 and len(pieces[0]) == chars) or (not pieces and not chars)
            )
            if unchanged:  # else a delta or a replacement came while it was being written
                self._unsaved.pop(entry, None)

    # --- internals ------------------------------------------------------------------------

    def _append(
        self, kind: EntryKind, *, item_id: str | None = None, interaction_id: str | None = None
    ) -> _Entry:
        entry = _Entry(
            seq=len(self.entries),
            kind=kind,
            at=self._clock(),
            section=len(self._sections) - 1,
            item_id=item_id,
            interaction_id=interaction_id,
        )
        self.entries.append(entry)
        self._unsaved[entry] = None
        return entry

    def _new_text(self, item_id: str) -> _Entry:
        entry = self._append(EntryKind.TEXT, item_id=item_id)
        self._texts[item_id] = entry
        self._parts.setdefault(item_id, []).append(entry)
        self._sections[-1].append(entry)
        return entry

    def _replace(self, entry: _Entry, text: str) -> None:
        if entry.text() == text:
            return
        entry.pieces[:] = [text]
        entry.rewrites += 1
        self._unsaved[entry] = None
        if entry.section < len(self._sections) - 1:
            self._closed_text.pop(entry.section, None)
            self.closed_changes.append(entry.section)
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        for watcher in self.watchers:
            watcher.set()
