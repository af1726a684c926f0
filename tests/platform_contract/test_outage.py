"""The platform drops its connection (or answers 5xx) and comes back: a card that failed to
send is sent again once, and can be decided; a reply that streamed or ended during the outage
is shown whole and exact in its one message once the platform is back."""

from __future__ import annotations

import asyncio

import pytest

from platforms.turn_end import DONE
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


@pytest.mark.parametrize("back_mid_turn", [False, True], ids=["ended-while-down", "back-mid-turn"])
async def test_a_reply_streamed_in_an_outage_is_exact_once_the_platform_is_back(
    driver: Driver, back_mid_turn: bool
) -> None:
    # the rest of the reply streams while the platform answers 5xx (Slack and Discord: their
    # connections dropped too). ended-while-down: the turn's end waits for the platform to be
    # back (Inbox.on_platform_back), then shows the final text that failed
    # (gateway/sessions/outlets.py).
    # back-mid-turn: the text catches up in the same message before the turn ends.
    driver.require(Case.OUTAGE)
    whole = "".join(STREAMED)
    async with driver.running():
        await driver.say("stream")
        first = await driver.text(lambda text: text == STREAMED[0])
        await driver.drop()
        if back_mid_turn:
            driver.launcher.may_end.clear()
        driver.launcher.turn_over.clear()
        driver.launcher.go_on.set()
        if back_mid_turn:
            await driver.refused_while_down()
            await driver.back()
            caught_up = await driver.text(lambda text: text == whole)
            assert caught_up.key == first.key
            assert not driver.launcher.turn_over.is_set()  # the turn still runs
            driver.launcher.may_end.set()
        async with asyncio.timeout(DEADLINE):
            await driver.launcher.turn_over.wait()
        if not back_mid_turn:  # the turn ended while the platform was down
            await driver.refused_while_down()
            await driver.back()
        final = await driver.text(lambda text: text == whole)
        seen = await driver.seen()
    assert final.key == first.key
    # once, in its one message; the turn's end may add its "✓ Done." (platforms/turn_end.py:
    # its last words came by an edit), which is told after the text, so it may not be seen yet
    assert [s.text for s in seen if s.text != DONE] == [whole]
