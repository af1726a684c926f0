"""Clicks the gateway must refuse: a forged one, a non-approver's, a stale one (a card of an
agent process a restart ended) and a late one. Each is answered as a person would expect,
audited, and decides nothing; the genuine click still decides."""

from __future__ import annotations

import pytest

from gateway.sessions.engine import Gateway
from tests.platform_contract.contract import FORM, Case, Driver, FormAnswers, Seen, before_hash

pytestmark = pytest.mark.timeout(60)


def forged(token: str) -> str:
    """The token with its tag changed: well formed, but not signed by the gateway."""
    tail = "AAAA" if not token.endswith("AAAA") else "BBBB"
    return token[:-4] + tail


async def rejections(gateway: Gateway) -> list[str]:
    entries = await gateway.store.audit.entries(event="click.rejected")
    return [entry.details["reason"] for entry in reversed(entries)]  # oldest first


async def still_waiting(driver: Driver, card: Seen) -> None:
    now = await driver.now(card.key)
    assert now.labels == card.labels and before_hash(now.status) == "Waiting for a decision", now
    assert driver.received == []


async def test_a_forged_click_is_refused_audited_and_decides_nothing(driver: Driver) -> None:
    driver.require(Case.CLICKS)
    async with driver.running() as gateway:
        await driver.say("approve")
        card = await driver.card(lambda s: bool(s.buttons))
        answer = await driver.click(card, forged(card.button("Allow once").token))
        assert answer == "This button is not valid."
        assert await rejections(gateway) == ["forged"]
        await still_waiting(driver, card)
        # the genuine button still decides, once; a late press of it is told who decided
        decided = await driver.press(card, "Deny and stop")
        assert decided.startswith("Denied and stopped. "), decided
        done = await driver.card(lambda s: s.key == card.key and not s.buttons)
        late = await driver.click(card, card.button("Allow once").token)
        assert late.startswith(f"Already decided by {driver.shown_as['alice']}"), late
    assert [d.action_id for d in driver.received] == ["cancel"]
    assert "Deny and stop" in done.status


async def test_a_non_approvers_click_is_refused_audited_and_decides_nothing(
    driver: Driver,
) -> None:
    driver.require(Case.NON_APPROVER)
    async with driver.running() as gateway:
        await driver.say("approve")
        card = await driver.card(lambda s: bool(s.buttons))
        answer = await driver.press(card, "Allow once", who="carol")
        assert answer == "You may not decide this request."
        assert await rejections(gateway) == ["not_approver"]
        await still_waiting(driver, card)


async def test_a_click_on_a_card_from_before_a_restart_is_stale(driver: Driver) -> None:
    driver.require(Case.CLICKS)
    async with driver.running():
        await driver.say("approve")
        card = await driver.card(lambda s: bool(s.buttons))
    async with driver.running() as gateway:
        orphaned = await driver.card(
            lambda s: s.key == card.key and "before anyone answered" in s.status
        )
        answer = await driver.click(card, card.button("Allow once").token)
        assert answer == "This request belongs to an agent process that has ended."
        assert await rejections(gateway) == ["stale"]
        assert (await driver.now(card.key)).status == orphaned.status
    assert orphaned.buttons == ()
    assert driver.received == []


async def test_a_non_approvers_answer_to_a_form_is_refused_and_decides_nothing(
    driver: Driver,
) -> None:
    driver.require(Case.NON_APPROVER)
    driver.require(Case.FORM)
    async with driver.running() as gateway:
        await driver.say("form", who="carol")
        card = await driver.card(lambda s: before_hash(s.status) == "Waiting for an answer")
        filled = FormAnswers(
            chosen={"env": ("Green",), "langs": ("Red",)}, typed={"note": "from carol"}
        )
        answer = await driver.answer_form(card, FORM, filled, who="carol")
        assert answer == "You may not decide this request."
        assert await rejections(gateway) == ["not_approver"]
        now = await driver.now(card.key)
    assert now.text == card.text and now.labels == card.labels  # the card did not change
    assert driver.received == []
