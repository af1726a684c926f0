"""The platform drops its connection and comes back: a card that failed to send is sent again
once, and can be decided."""

from __future__ import annotations

import asyncio

import pytest

from tests.platform_contract.contract import Case, Driver

pytestmark = pytest.mark.timeout(60)


async def test_a_card_that_failed_to_send_is_sent_again_when_the_platform_is_back(
    driver: Driver,
) -> None:
    driver.require(Case.OUTAGE)
    async with driver.running():
        async with asyncio.TaskGroup() as tasks:
            dropped = tasks.create_task(driver.drop_at_next_card())
            await driver.say("approve")
        await dropped
        assert not [s for s in await driver.seen() if s.card]  # nothing shown yet
        await driver.back()
        card = await driver.card(lambda s: bool(s.buttons))
        answer = await driver.press(card, "Allow once")
        assert answer.startswith("Approved: Allow once."), answer
        await driver.text(lambda text: text == "Thanks: 0 answer(s) received.")
        seen = await driver.seen()
    assert [s.key for s in seen if s.card] == [card.key]  # sent again once
    assert [d.action_id for d in driver.received] == ["accept"]
