"""The platform drops its connection (or answers 5xx) and comes back: a card that failed to
send is sent again once, and can be decided; a reply that streamed or ended during the outage
is shown whole and exact in its one message once the platform is back."""

from __future__ import annotations

import asyncio

import pytest

from tests.platform_contract.contract import DEADLINE, STREAMED, Case, Driver

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


async def test_a_reply_finished_while_the_platform_was_down_ends_exact_when_it_is_back(
    driver: Driver,
) -> None:
    # the turn's end waits for the platform to be back (Inbox.on_platform_back), then shows
    # the final text that failed in the outage (gateway/outlets.py)
    driver.require(Case.OUTAGE)
    whole = "".join(STREAMED)
    async with driver.running():
        await driver.say("stream")
        first = await driver.text(lambda text: text == STREAMED[0])
        await driver.drop()
        driver.launcher.turn_over.clear()
        driver.launcher.go_on.set()
        async with asyncio.timeout(DEADLINE):
            await driver.launcher.turn_over.wait()  # the turn ended while the platform was down
        await driver.refused_while_down()
        await driver.back()
        final = await driver.text(lambda text: text == whole)
        seen = await driver.seen()
    assert final.key == first.key
    assert [s.text for s in seen] == [whole]


async def test_an_outage_in_the_middle_of_a_turn_loses_nothing(driver: Driver) -> None:
    # the platform answers 5xx (Slack and Discord: their connections dropped too) while the
    # rest of the reply streams; it comes back before the turn ends: the text catches up in
    # the same message, and the turn's end leaves it exact, sent once
    driver.require(Case.OUTAGE)
    whole = "".join(STREAMED)
    async with driver.running():
        await driver.say("stream")
        first = await driver.text(lambda text: text == STREAMED[0])
        await driver.drop()
        driver.launcher.may_end.clear()
        driver.launcher.turn_over.clear()
        driver.launcher.go_on.set()  # the rest of the reply comes while the platform is down
        await driver.refused_while_down()
        await driver.back()
        caught_up = await driver.text(lambda text: text == whole)  # the turn still runs
        assert not driver.launcher.turn_over.is_set()
        driver.launcher.may_end.set()
        async with asyncio.timeout(DEADLINE):
            await driver.launcher.turn_over.wait()
        final = await driver.text(lambda text: text == whole)
        seen = await driver.seen()
    assert first.key == caught_up.key == final.key
    assert [s.text for s in seen] == [whole]
