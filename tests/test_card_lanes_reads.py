"""The card lanes drawing from a write's own read of the card (issue 36): a write that changed
a request and read its copies in the same statement hands that read to the lanes, which then
read nothing. The draws are what a person would see on the platform: each copy ends showing
the newest version any read found, never an older one drawn last, and never drawn twice for
one version.

The lanes are the real ones (gateway/sessions/card_lanes.py), their ledger a dictionary: the
read counts its calls, the draw records the copy as the platform would show it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from gateway.domain import ConversationRef, InteractionState
from gateway.interactions.machine import Interaction
from gateway.sessions.card_lanes import CardLanes, Seen
from gateway.store import codec
from gateway.store.interaction_rows import new_interaction
from gateway.store.records import CardCopy, CopyState
from tests.store_helpers import approval

ROOM = ConversationRef(platform="memory", space=None, channel="room")
NOW = datetime(2026, 12, 6, tzinfo=UTC)


def asked() -> Interaction:
    request = approval()
    texts = (
        codec.encode_detail(request.detail),
        codec.encode_actions(request.actions),
        codec.encode_questions(request.questions),
    )
    return new_interaction(
        "req1", session_id="s1", epoch=1, turn_id=None, request=request, texts=texts,
        now=NOW.isoformat(),
    )  # fmt: skip


def at(interaction: Interaction, version: int, state: InteractionState) -> Interaction:
    return replace(interaction, version=version, state=state)


@dataclass
class Ledger:
    """The request as the ledger has it, its one copy, and every read and draw made."""

    interaction: Interaction
    copy: CardCopy
    held: asyncio.Event | None = None  # set: a read comes back (as it began)
    drawing: asyncio.Event | None = None  # set: a draw under way ends
    reads: int = 0
    drawn: list[int] = field(default_factory=list)  # the versions drawn, in order
    reading: asyncio.Event = field(default_factory=asyncio.Event)  # a read began
    drew: asyncio.Event = field(default_factory=asyncio.Event)  # a draw was made
    read_back: asyncio.Event = field(default_factory=asyncio.Event)  # a read came back

    async def read(self, interaction_id: str) -> tuple[Interaction | None, list[CardCopy]]:
        self.reads += 1
        found = self.interaction, [self.copy]
        self.reading.set()
        if self.held is not None:
            await self.held.wait()
        self.read_back.set()  # the router goes on with it before anything else runs
        return found

    def behind(self, interaction: Interaction, copy: CardCopy) -> bool:
        return copy.rendered_version is None or copy.rendered_version < interaction.version


@asynccontextmanager
async def lanes_of(ledger: Ledger) -> AsyncIterator[CardLanes]:
    lanes: CardLanes

    async def draw(interaction: Interaction, copy: CardCopy) -> None:
        async with lanes.drawing(copy.id) as drawing:
            ledger.drawn.append(interaction.version)
            ledger.drew.set()
            if ledger.drawing is not None:
                await ledger.drawing.wait()
            ledger.copy = replace(
                copy, state=CopyState.EDITED, rendered_version=interaction.version
            )
            drawing.left = ledger.copy

    lanes = CardLanes(["memory"], read=ledger.read, behind=ledger.behind, draw=draw)
    running = asyncio.create_task(lanes.run())
    await asyncio.sleep(0)  # one turn of the loop: run() holds the lanes' task group
    try:
        yield lanes
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


def shown(version: int) -> CardCopy:
    return CardCopy(
        id=7,
        interaction_id="req1",
        conversation=ROOM,
        message_ref="m1",
        state=CopyState.SENT,
        rendered_version=version,
        error=None,
        updated_at=NOW,
    )


async def test_a_card_marked_with_its_writes_read_is_drawn_without_a_read() -> None:
    decided = at(asked(), 3, InteractionState.DELIVERED)
    ledger = Ledger(decided, shown(1))
    async with lanes_of(ledger) as lanes:
        lanes.mark("req1", Seen(decided, (ledger.copy,), lanes.draws()))
        await lanes.idle()
    assert ledger.drawn == [3]
    assert ledger.reads == 0


async def test_of_two_writes_reads_the_newer_version_is_drawn_whatever_their_order() -> None:
    # two writes of one card on two connections may return in either order
    delivered = at(asked(), 3, InteractionState.DELIVERED)
    closed = at(asked(), 4, InteractionState.RESOLVED)
    ledger = Ledger(closed, shown(1))
    async with lanes_of(ledger) as lanes:
        since = lanes.draws()
        lanes.mark("req1", Seen(closed, (ledger.copy,), since))
        lanes.mark("req1", Seen(delivered, (ledger.copy,), since))
        await lanes.idle()
    assert ledger.drawn == [4]
    assert ledger.reads == 0


async def test_a_mark_that_asks_for_a_read_is_not_replaced_by_a_writes_read() -> None:
    # another host's change (its NOTIFY) asked for a read: what this host's write read may
    # be older than what the ledger has by the time the router takes the card
    elsewhere = at(asked(), 5, InteractionState.RESOLVED)
    ledger = Ledger(elsewhere, shown(1))
    async with lanes_of(ledger) as lanes:
        lanes.mark("req1")
        lanes.mark("req1", Seen(at(asked(), 3, InteractionState.DELIVERED), (shown(1),), 0))
        await lanes.idle()
    assert ledger.drawn == [5]
    assert ledger.reads == 1


async def test_a_draw_that_ended_after_the_count_is_not_made_again() -> None:
    # the write read the copy before a draw of the same version ended: the copy is taken
    # as that draw left it, not drawn a second time for one version
    delivered = at(asked(), 3, InteractionState.DELIVERED)
    ledger = Ledger(delivered, shown(1))
    async with lanes_of(ledger) as lanes:
        since = lanes.draws()
        read_then = (ledger.copy,)  # what the write's statement saw
        lanes.mark("req1")  # an earlier mark, drawn while the write ran
        await lanes.idle()
        assert ledger.drawn == [3]
        lanes.mark("req1", Seen(delivered, read_then, since))
        await lanes.idle()
    assert ledger.drawn == [3]


async def test_a_read_the_router_began_before_a_write_never_draws_over_it() -> None:
    # the lane is busy drawing version 2; the router's read began at version 3, and before it
    # came back a write of version 4 handed the lane its own read: the card ends at 4
    ledger = Ledger(at(asked(), 2, InteractionState.DECIDED), shown(1), held=asyncio.Event())
    ledger.drawing = asyncio.Event()
    async with lanes_of(ledger) as lanes:
        lanes.mark("req1", Seen(ledger.interaction, (ledger.copy,), lanes.draws()))
        await ledger.drew.wait()  # version 2 is being drawn
        ledger.interaction = at(asked(), 3, InteractionState.DELIVERED)
        lanes.mark("req1")
        await ledger.reading.wait()  # the router reads version 3
        ledger.interaction = closed = at(asked(), 4, InteractionState.RESOLVED)
        lanes.mark("req1", Seen(closed, (shown(1),), lanes.draws()))
        assert ledger.held is not None
        ledger.held.set()  # the router's read of version 3 comes back
        await ledger.read_back.wait()
        ledger.drawing.set()
        await lanes.idle()
    assert ledger.drawn == [2, 4]
    assert ledger.copy.rendered_version == 4
