"""A gateway restarted with a card on screen: the next one edits that card to say it was
orphaned (the agent process that asked has ended), with no buttons left, and says so once."""

from __future__ import annotations

import pytest

from tests.platform_contract.contract import Case, Driver, before_hash

pytestmark = pytest.mark.timeout(60)


async def test_a_card_on_screen_at_a_restart_is_edited_to_say_orphaned(driver: Driver) -> None:
    driver.require(Case.RESTART)
    async with driver.running():
        await driver.say("approve")
        card = await driver.card(lambda s: bool(s.buttons))
    async with driver.running():
        orphaned = await driver.card(
            lambda s: s.key == card.key and "before anyone answered" in s.status
        )
        seen = await driver.seen()
    assert orphaned.buttons == ()
    assert before_hash(orphaned.status) == (
        "The gateway ended the agent process before anyone answered: no answer can reach it"
        " now · your next message starts the agent again"
    )
    assert [s.key for s in seen if s.card] == [card.key]  # the same card, not a new one
    assert sum(orphaned.status in s.text for s in seen) == 1


async def test_a_card_the_stopping_gateway_could_not_edit_is_edited_by_the_next(
    driver: Driver,
) -> None:
    """As after a crash: the platform could not be reached while the gateway stopped, so the
    card still offers its buttons; the next gateway's recovery edits it."""
    driver.require(Case.RESTART)
    driver.require(Case.OUTAGE)
    async with driver.running():
        await driver.say("approve")
        card = await driver.card(lambda s: bool(s.buttons))
        await driver.drop()
    assert (await driver.now(card.key)).buttons == card.buttons  # left as it was
    await driver.back()
    async with driver.running():
        orphaned = await driver.card(
            lambda s: s.key == card.key and "before anyone answered" in s.status
        )
        seen = await driver.seen()
    assert orphaned.buttons == ()
    assert [s.key for s in seen if s.card] == [card.key]
