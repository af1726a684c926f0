"""A 429 storm: every call the platform gets is answered "too many requests" for a while.
What the person sees once it is over is exact: the reply's final text once, the card once,
with its buttons."""

from __future__ import annotations

import pytest

from tests.platform_contract.contract import STREAMED, Case, Driver, before_hash

pytestmark = pytest.mark.timeout(60)


async def test_after_a_429_storm_the_final_text_is_exact_and_the_card_is_shown_once(
    driver: Driver,
) -> None:
    driver.require(Case.STORM)
    whole = "".join(STREAMED)
    async with driver.running():
        driver.storm(1.5)
        await driver.say("stream")
        await driver.say("approve")
        driver.launcher.go_on.set()
        await driver.text(lambda text: text == whole)
        card = await driver.card(lambda s: bool(s.buttons))
        seen = await driver.seen()
    assert driver.too_many() > 0  # the storm was met
    assert [s.text for s in seen if not s.card] == [whole]
    assert [s.key for s in seen if s.card] == [card.key]
    assert before_hash(card.status) == "Waiting for a decision"


async def test_a_decision_taken_in_a_429_storm_ends_on_the_card_exactly_once(
    driver: Driver,
) -> None:
    driver.require(Case.STORM)
    alice = driver.shown_as["alice"]
    async with driver.running():
        await driver.say("approve")
        card = await driver.card(lambda s: bool(s.buttons))
        driver.storm(1.5)
        answer = await driver.press(card, "Deny")
        assert answer.startswith("Denied. "), answer
        done = await driver.card(lambda s: s.key == card.key and "done" in s.status)
        await driver.text(lambda text: text == "Thanks: 0 answer(s) received.")
        seen = await driver.seen()
    assert driver.too_many() > 0
    assert done.buttons == () and f'Denied ("Deny") by {alice}' in done.status
    assert [s.text for s in seen if not s.card] == ["Thanks: 0 answer(s) received."]
    assert [s.key for s in seen if s.card] == [card.key]
