"""A form: a single choice, a multi-select and a free-text answer, sent as each platform lets
a person answer (fields, toggles, a reply to a prompt); a secret only where the platform has a
private surface, never shown again; a required answer missing is refused and decides nothing."""

from __future__ import annotations

import pytest

from gateway.domain import Answer
from tests.platform_contract.contract import FORM, SECRET, Case, Driver, FormAnswers, before_hash

pytestmark = pytest.mark.timeout(60)


async def test_single_multi_and_other_answers_reach_the_agent_and_the_card(
    driver: Driver,
) -> None:
    driver.require(Case.FORM)
    alice = driver.shown_as["alice"]
    async with driver.running():
        await driver.say("form")
        card = await driver.card(lambda s: before_hash(s.status) == "Waiting for an answer")
        filled = FormAnswers(
            chosen={"env": ("Green",), "langs": ("Red", "Blue")}, typed={"note": "ship it"}
        )
        answer = await driver.answer_form(card, FORM, filled)
        assert answer is not None and answer.startswith("Answer sent to the agent."), answer
        done = await driver.card(lambda s: s.key == card.key and "sent to the agent" in s.status)
        await driver.text(lambda text: text == "Thanks: 3 answer(s) received.")
    assert driver.received[0].answers == {
        "env": Answer(option_ids=("green",)),
        "langs": Answer(option_ids=("red", "blue")),
        "note": Answer(other="ship it"),
    }
    assert done.buttons == ()
    assert f"by {alice}" in done.status and done.text.count(done.status) == 1
    assert "Red, Blue" in done.text and "ship it" in done.text


async def test_a_required_answer_missing_is_refused_and_decides_nothing(driver: Driver) -> None:
    driver.require(Case.FORM)
    async with driver.running():
        await driver.say("form")
        card = await driver.card(lambda s: before_hash(s.status) == "Waiting for an answer")
        partial = FormAnswers(chosen={"langs": ("Red",)}, typed={"note": "ship it"})
        answer = await driver.answer_form(card, FORM, partial)
        # refused with the reason, or (Telegram) nothing offers to send it without
        assert answer is None or "needs an answer" in answer, answer
        now = await driver.now(card.key)
    assert before_hash(now.status) == "Waiting for an answer"
    assert driver.received == []


async def test_a_secret_is_taken_on_a_private_surface_and_never_shown(driver: Driver) -> None:
    driver.require(Case.SECRET)
    assert driver.limits.has_private_surface
    secret = "hunter2-deploy-token"
    async with driver.running():
        await driver.say("secret")
        card = await driver.card(lambda s: before_hash(s.status) == "Waiting for an answer")
        await driver.answer_form(card, SECRET, FormAnswers(typed={"token": secret}))
        done = await driver.card(lambda s: s.key == card.key and "sent to the agent" in s.status)
        await driver.text(lambda text: text == "Thanks: 1 answer(s) received.")
        seen = await driver.seen()
    assert driver.received[0].answers == {"token": Answer(other=secret)}
    assert "(secret, not shown)" in done.text
    assert not [s for s in seen if secret in s.text]


async def test_without_a_private_surface_a_secret_question_has_nothing_to_type_into(
    driver: Driver,
) -> None:
    driver.require(Case.NO_PRIVATE_SURFACE)
    async with driver.running():
        await driver.say("secret")
        card = await driver.card(lambda s: before_hash(s.status) == "Waiting for an answer")
    assert card.buttons == ()  # no field, no button that would take it
    assert "Paste the deploy token" in card.text  # the question is still shown
    assert "never typed here" in card.text and "privately" in card.text
    assert driver.received == []
