"""How many ledger calls one approval costs, and that the cards still show what is current.

Issue 36: each ledger call is a hop to the ledger's thread and back (on PostgreSQL a
statement or a pipeline's wait), most of the gateway's CPU per approval. Through the whole
gateway on the memory platform with the scripted agent (tests/scripted_launcher.py), with a
TripTally (gateway/store/trip_tally.py) on both ledger connections: the calls one approval
makes, by store method, from the click to its card settled, and the next request's card.
The session's name and project are read in the same call as the request each card draws
(the write that changed it, or the card lanes' read), so a /name is on the next drawing of
every card, with no call of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cards import FieldsBlock
from gateway.config.model import ExpiryPolicy
from gateway.store.database import Conn
from gateway.store.trip_tally import TripTally
from tests.gateway_flows import settles
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import open_card, scripted_config, scripted_gateway

pytestmark = pytest.mark.timeout(60)

NEVER = ExpiryPolicy()
DELIVERED = r'Approved \("Approve"\) by Alice at .* · sent to the agent · done'


async def rename(gw: Running, name: str) -> None:
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, f"/name {name}")
    await gw.wait_for(
        lambda: any("is now named" in t for t in gw.memory.texts(ROOM)[before:]) or None
    )


async def settled_in_ledger(gw: Running) -> None:
    """Wait until the writer has run every call queued before this one (the broker records
    a card's edit right after the platform took it, before this task runs again)."""

    def nothing(conn: Conn) -> None:
        return None

    await gw.gateway.store.writer.write(nothing)


async def test_a_rename_while_a_card_waits_is_on_the_card_once_it_is_settled(
    tmp_path: Path,
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        asked = await open_card(gw, ROOM, "approve")
        first = asked.first.blocks[0]
        assert not (isinstance(first, FieldsBlock) and first.fields[0][0] == "Session")
        await rename(gw, "birds")
        await gw.memory.click(ROOM, ALICE, asked.token("Approve"))
        await settles(gw, asked, DELIVERED)
        assert isinstance(asked.now.blocks[0], FieldsBlock)
        assert asked.now.blocks[0].fields == (("Session", "birds"),)


async def test_one_approval_costs_these_ledger_calls(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        await gw.memory.say(ROOM, ALICE, "hello")  # the session and its agent started
        await gw.text_where(lambda text: text == "echo: hello")
        await settled_in_ledger(gw)
        tally = TripTally()
        gw.gateway.store.writer.tally = tally
        gw.gateway.store.reader.tally = tally
        asked = await open_card(gw, ROOM, "approve")
        await gw.memory.click(ROOM, ALICE, asked.token("Approve"))
        await settles(gw, asked, DELIVERED)
        await settled_in_ledger(gw)
        gw.gateway.store.writer.tally = gw.gateway.store.reader.tally = None
    # the request's own calls (list_open, get and list_for are this test's, and the
    # runner's sweeps)
    mine = ("InteractionLedger.list_open", "InteractionLedger.get", "CardCopies.list_for")
    calls = {
        label: count
        for label, count in tally.calls.items()
        if label.startswith(("InteractionLedger.", "CardCopies.", "ClickViews.", "SessionLedger"))
        and label not in mine
    }
    # the card is drawn again once its decision is written and recorded, and after the
    # agent's close, each time from what that write read of it as it locked the request
    # (its copies, its session's name and project: no call of its own); only a write
    # slower than 0.1 s has the decision drawn first, from a read of the card lanes' own
    assert calls.pop("InteractionLedger.get_for_cards", 0) <= 1
    assert 2 <= calls.pop("CardCopies._update") <= 4  # the card sent, then each edit
    assert calls == {
        "SessionLedger.lookup": 1,  # the click's conversation
        "SessionLedger.lookup_route": 1,  # the prompt's
        "SessionLedger.list_bindings": 1,  # the turn's
        "InteractionLedger.create_with_copies": 1,  # the request, its card and its session
        "ClickViews.view": 1,
        "InteractionLedger.decide": 1,
        "InteractionLedger.record_delivery": 1,
        "InteractionLedger.close_from_agent": 1,
    }
