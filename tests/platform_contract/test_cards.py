"""A card round trip with every action kind: the card offers the agent's exact actions; after
a press the person is told what they did, and the card says who decided what, once, with no
buttons left; the agent got exactly that action."""

from __future__ import annotations

import re

import pytest

from tests.platform_contract.contract import ACTIONS, Case, Driver, Seen

pytestmark = pytest.mark.timeout(60)


async def new_card(driver: Driver, before: set[str]) -> Seen:
    """The next card with buttons that was not shown before."""
    return await driver.card(lambda s: s.key not in before and bool(s.buttons))


async def settled(driver: Driver, card: Seen) -> Seen:
    """``card`` once its decision is delivered and its buttons are gone."""
    return await driver.wait_for(
        lambda seen: next(
            (
                s
                for s in seen
                if s.key == card.key and not s.buttons and "sent to the agent" in s.status
            ),
            None,
        )
    )


RECEIPTS = {
    "Allow once": "Approved: Allow once. ",
    "Deny": "Denied. ",
    "Deny and stop": "Denied and stopped. ",
    "Allow for session": "Approved: Allow for session. ",
}


async def test_every_action_kind_round_trip(driver: Driver) -> None:
    driver.require(Case.CARD_ROUND_TRIP)
    alice = driver.shown_as["alice"]
    # the grant for the session last: it could answer a later request itself
    order = ["Allow once", "Deny", "Deny and stop", "Allow for session"]
    async with driver.running():
        for n, label in enumerate(order, start=1):
            before = {s.key for s in await driver.seen()}
            await driver.say("approve" if n == 1 else f"approve {n}")
            card = await new_card(driver, before)
            assert card.labels == [action.label for action in ACTIONS]
            # the content hash is behind "details" (nobody votes), never on the status line
            assert card.status == "Waiting for a decision", card
            assert re.fullmatch(r"content hash [0-9a-f]{10}", card.details), card
            answer = await driver.press(card, label)
            # each fact once: a label that only says the verdict ("Deny") is not repeated
            assert answer.startswith(RECEIPTS[label]) and "Sent to the agent" in answer, answer
            done = await settled(driver, card)
            assert f'("{label}") by {alice}' in done.status, done
            assert done.text.count(done.status) == 1, done  # one status line: the new one
            assert "Waiting for a decision" not in done.text
            assert "content hash" not in done.status and done.details == card.details, done
        seen = await driver.seen()
    for label in order:
        deciding = [s for s in seen if f'("{label}") by {alice}' in s.text]
        assert len(deciding) == 1, f"{label!r} decided on {len(deciding)} messages"
    assert all(not s.buttons for s in seen if s.card)
    assert [d.action_id for d in driver.received] == [
        "accept",
        "decline",
        "cancel",
        "acceptForSession",
    ]
