"""Card refreshes, one small lane per conversation (issue 36).

A card changes (a decision, its delivery, the agent's close, a vote): every copy of it must
be drawn again, each in its own conversation. A conversation's edits are paced by its
platform (Telegram's one edit a second per chat, Slack's per channel, a 429's retry-after),
so they go in a lane of their own: a paced chat holds up only itself, never another chat's
card, whatever platform either is on.

- :meth:`CardLanes.mark` puts the card in the *router*: one task that reads the card and its
  copies from the ledger (one read) and hands the card to the lane of each conversation
  whose copy is behind, with that read. A write that changed the card and read its copies
  in its own transaction hands that read to :meth:`CardLanes.mark` (a :class:`Seen`, with
  the draws counted before the write began: :meth:`CardLanes.draws`), and the router reads
  nothing: the card goes straight to the lanes (two ledger calls and two tasks fewer per
  approval: the delivery's record and the agent's close). Of two reads of a card waiting
  in a lane the newer version is kept, and a read the router is yet to make, or a lane is
  to make when it draws the card, is never replaced by a caller's;
- a conversation's lane draws its cards one at a time, in the order they were handed to
  it, and ends when it has nothing left (lanes do not outlive their work);
- nothing waits on purpose: edits coalesce instead. A card marked again while it waits in a
  lane keeps its place with the newer read; one marked while it is being drawn is drawn
  again after, from the latest state. A lane draws from the router's read, each copy as
  the last draw of it left it where one finished since the read began (the record that draw
  made); a copy whose draw left no record is read again. A copy is behind only if it shows
  an older version than the read (never an older state drawn over a newer one);
- one draw of a copy at a time (:meth:`CardLanes.drawing`: a new card shown at once by the
  session, a failed copy sent again, share this with the lanes); a draw that waited for
  another reads the copy again;
- a lane's ledger reads are bounded per platform (:data:`READS_AT_ONCE`), so that a burst of
  refreshes does not queue in front of a person's click; the platform calls themselves are
  paced by the platform's outbox (its lanes and its bot-wide windows, platforms/outbox.py);
- the ledger failing: the card is tried again after :data:`LEDGER_PAUSE_SECONDS`, in its lane.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.domain import ConversationRef
from gateway.errors import StoreError
from gateway.interactions.machine import Interaction
from gateway.store.records import CardCopy

__all__ = ["LEDGER_PAUSE_SECONDS", "READS_AT_ONCE", "CardLanes", "Drawing", "Seen"]

log = logging.getLogger(__name__)

LEDGER_PAUSE_SECONDS = 0.5  # a card refresh the ledger failed: tried again after this
READS_AT_ONCE = 4  # ledger reads of card refreshes at once, per platform
DRAWS_KEPT = 4096  # copies whose last draw is remembered (older ones: read again)

Read = Callable[[str], Awaitable[tuple[Interaction | None, list[CardCopy]]]]
Behind = Callable[[Interaction, CardCopy], bool]
Draw = Callable[[Interaction, CardCopy], Awaitable[None]]


@dataclass(slots=True)
class Drawing:
    """One draw of a copy under way: whether it waited for another (``waited``: what that
    one left must be read again), and the copy as this one recorded it (``left``)."""

    waited: bool
    left: CardCopy | None = None


@dataclass(frozen=True, slots=True)
class Seen:
    """A read of a card and its copies (the router's, for one conversation, or a write's
    own, for all): ``draws`` counted (:meth:`CardLanes.draws`) before it began."""

    interaction: Interaction
    copies: tuple[CardCopy, ...]
    draws: int


_NONE_WAITING = object()  # a lane's dirty cards: this one is not among them


class _Lane:
    """Cards to draw (interaction ids in the order marked, each with a read of it or None:
    read it when taken) and the task drawing them."""

    __slots__ = ("dirty", "task")

    def __init__(self) -> None:
        self.dirty: dict[str, Seen | None] = {}
        self.task: asyncio.Task[None] | None = None


class CardLanes:
    """The router and the conversations' lanes of one broker. ``read``: a card and its
    copies from the ledger; ``behind``: whether a copy must be drawn again; ``draw``: draw
    one copy (sent, edited or failed, and recorded)."""

    def __init__(self, platforms: list[str], *, read: Read, behind: Behind, draw: Draw) -> None:
        self._read = read
        self._behind = behind
        self._draw = draw
        self._router = _Lane()
        self._lanes: dict[ConversationRef, _Lane] = {}
        self._reads = {name: asyncio.Semaphore(READS_AT_ONCE) for name in platforms}
        self._group: asyncio.TaskGroup | None = None
        # draws finished, counted; each copy's last (the latest DRAWS_KEPT): its count and
        # the copy as it recorded it; the count of the last one forgotten (a copy not
        # remembered was drawn no later than that)
        self._draws = 0
        self._left: OrderedDict[int, tuple[int, CardCopy | None]] = OrderedDict()
        self._forgotten = 0
        self._drawing: dict[int, asyncio.Event] = {}  # copy id: set when its draw ends
        self._running = 0  # lane tasks running, the router's included
        self._idle = asyncio.Event()  # set while none runs
        self._idle.set()

    # --- what asks for a refresh ----------------------------------------------------------

    def mark(self, interaction_id: str, seen: Seen | None = None) -> None:
        """Bring every copy of this card up to date, each in its conversation's lane: from
        ``seen``, the caller's read of the card and all its copies, handed to the lanes
        now, or else from a read of the router's own. A read the router is yet to make is
        the newest: a caller's read of the card meanwhile is left to it."""
        router = self._router
        if seen is None:
            router.dirty[interaction_id] = None
            self._start(None, router)
        elif interaction_id not in router.dirty:
            self._hand(interaction_id, seen.interaction, seen.copies, seen.draws)

    def draws(self) -> int:
        """The draws finished so far: counted before a ledger call whose read of a card is
        handed to :meth:`mark` (a draw that ends after the count is taken as it left the
        copy, not as the read found it)."""
        return self._draws

    def mark_in(self, conversation: ConversationRef, interaction_id: str) -> None:
        """Bring the card's copies in ``conversation`` up to date (read when drawn)."""
        lane = self._lane(conversation)
        lane.dirty.setdefault(interaction_id, None)
        self._start(conversation, lane)

    def lanes(self) -> list[ConversationRef]:
        """The conversations whose lanes are running or waiting to (none when idle)."""
        return list(self._lanes)

    async def idle(self) -> None:
        """Until every card marked is drawn (no lane left running; while :meth:`run` runs)."""
        await self._idle.wait()

    async def run(self) -> None:
        """Own the lanes (the engine runs this for the broker's lifetime)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                self._start(None, self._router)
                for conversation, lane in list(self._lanes.items()):
                    self._start(conversation, lane)
                await asyncio.Event().wait()  # until cancelled: the lanes end with it
            finally:
                self._group = None

    # --- one draw of a copy at a time -----------------------------------------------------

    @contextlib.asynccontextmanager
    async def drawing(self, copy_id: int) -> AsyncIterator[Drawing]:
        """Hold the copy for one draw (the drawer says in ``left`` what it recorded)."""
        waited = False
        while (busy := self._drawing.get(copy_id)) is not None:
            waited = True
            await busy.wait()
        done = self._drawing[copy_id] = asyncio.Event()
        draw = Drawing(waited)
        try:
            yield draw
        finally:
            del self._drawing[copy_id]
            done.set()
            self._draws += 1
            self._left[copy_id] = (self._draws, draw.left)
            self._left.move_to_end(copy_id)
            while len(self._left) > DRAWS_KEPT:
                _, (forgotten, _) = self._left.popitem(last=False)
                self._forgotten = max(self._forgotten, forgotten)

    def _as_left(self, seen: Seen) -> tuple[CardCopy, ...] | None:
        """The copies of ``seen`` as the draws finished since it was read left them; None
        where one of those left no record (or is forgotten): read them again. (A draw
        under way now is waited for by :meth:`drawing`.)"""
        copies = []
        for copy in seen.copies:
            found = self._left.get(copy.id)
            if found is None:
                if self._forgotten > seen.draws:
                    return None
                copies.append(copy)
                continue
            count, left = found
            if count <= seen.draws:
                copies.append(copy)
            elif left is None:
                return None
            else:
                copies.append(left)
        return tuple(copies)

    # --- the tasks ------------------------------------------------------------------------

    def _lane(self, conversation: ConversationRef) -> _Lane:
        lane = self._lanes.get(conversation)
        if lane is None:
            lane = self._lanes[conversation] = _Lane()
        return lane

    def _start(self, conversation: ConversationRef | None, lane: _Lane) -> None:
        if lane.task is None and lane.dirty and self._group is not None:
            self._running += 1
            self._idle.clear()
            if conversation is None:
                lane.task = self._group.create_task(self._route())
            else:
                lane.task = self._group.create_task(self._run(conversation, lane))

    def _ended(self) -> None:
        self._running -= 1
        if not self._running:
            self._idle.set()

    async def _route(self) -> None:
        router = self._router
        try:
            while router.dirty:
                interaction_id, seen = next(iter(router.dirty.items()))
                del router.dirty[interaction_id]
                if seen is not None:  # read by the write that changed it
                    interaction, copies, draws = seen.interaction, seen.copies, seen.draws
                else:
                    draws = self._draws
                    try:
                        found, every = await self._read(interaction_id)
                    except StoreError as exc:
                        log.warning("card %s not read (%s): again soon", interaction_id, exc)
                        router.dirty[interaction_id] = None
                        await asyncio.sleep(LEDGER_PAUSE_SECONDS)  # a pause, not a wait
                        continue
                    if found is None:  # pragma: no cover - interactions are never deleted
                        continue
                    interaction, copies = found, tuple(every)
                self._hand(interaction_id, interaction, copies, draws)
        finally:
            router.task = None
            self._ended()

    def _hand(
        self,
        interaction_id: str,
        interaction: Interaction,
        copies: Sequence[CardCopy],
        draws: int,
    ) -> None:
        """A read of the card to the lane of each conversation whose copy is behind. Of two
        reads of a card waiting in a lane, the newer version is drawn (two writes of one
        card, on two connections, may end in either order; the router's read may have
        begun before a write whose own read came first); one to be read when drawn is."""
        for conversation, theirs in _by_conversation(copies).items():
            if not any(self._behind(interaction, copy) for copy in theirs):
                continue
            lane = self._lane(conversation)
            waiting = lane.dirty.get(interaction_id, _NONE_WAITING)
            if waiting is None:
                continue  # read when drawn: the newest
            if isinstance(waiting, Seen) and waiting.interaction.version > interaction.version:
                continue
            lane.dirty[interaction_id] = Seen(interaction, theirs, draws)
            self._start(conversation, lane)

    async def _run(self, conversation: ConversationRef, lane: _Lane) -> None:
        try:
            while lane.dirty:
                interaction_id, seen = next(iter(lane.dirty.items()))
                del lane.dirty[interaction_id]
                try:
                    await self._refresh(conversation, interaction_id, seen)
                except StoreError as exc:
                    # the ledger failed: the card is brought up to date once it answers
                    log.warning("card %s not refreshed (%s): again soon", interaction_id, exc)
                    lane.dirty.setdefault(interaction_id, None)
                    await asyncio.sleep(LEDGER_PAUSE_SECONDS)  # a pause, not a wait for state
        finally:
            # nothing left (or cancelled): the lane ends; a mark from now on starts another
            lane.task = None
            if not lane.dirty and self._lanes.get(conversation) is lane:
                del self._lanes[conversation]
            self._ended()

    async def _refresh(
        self, conversation: ConversationRef, interaction_id: str, seen: Seen | None
    ) -> None:
        copies_now = self._as_left(seen) if seen is not None else None
        if seen is not None and copies_now is not None:
            interaction, copies = seen.interaction, copies_now
        else:
            semaphore = self._reads.get(conversation.platform)
            async with semaphore if semaphore is not None else contextlib.nullcontext():
                found, every = await self._read(interaction_id)
            if found is None:  # pragma: no cover - interactions are never deleted
                return
            interaction = found
            copies = tuple(c for c in every if c.conversation == conversation)
        for copy in copies:
            if self._behind(interaction, copy):
                await self._draw(interaction, copy)


def _by_conversation(copies: Sequence[CardCopy]) -> dict[ConversationRef, tuple[CardCopy, ...]]:
    found: dict[ConversationRef, list[CardCopy]] = {}
    for copy in copies:
        found.setdefault(copy.conversation, []).append(copy)
    return {conversation: tuple(theirs) for conversation, theirs in found.items()}
