"""A plan card as a person sees it on each surface: the plan's Markdown drawn (a heading, a
list, inline code, a fenced block), never raw; the agent's two actions; a plan too long for a
card attached whole as plan.md; after a press, who decided what in a person's words."""

from __future__ import annotations

import pytest

from tests.platform_contract.contract import (
    Case,
    Driver,
    Seen,
    before_hash,
    long_plan,
)

pytestmark = pytest.mark.timeout(60)

# The agent's Markdown marks a surface would show raw, had it not drawn the plan: a heading's
# hash, CommonMark's bold and italic, a fence. A mark of the surface's own markup is its way to
# draw (Slack's mrkdwn fences code, Discord draws **bold** and *italic*, the console driver
# reads a <pre> as a fence); the memory platform hands the card over as data, unrendered.
RAW_MARKS = {
    "telegram": ("# Ship", "**", "```", "*after*"),
    "console": ("# Ship", "**", "*after*"),
    "slack": ("# Ship", "**", "*after*"),
    "discord": ("# Ship",),
}


async def test_a_plan_card_shows_the_plan_drawn_and_says_who_approved_it(
    driver: Driver,
) -> None:
    driver.require(Case.PLAN)
    alice = driver.shown_as["alice"]
    async with driver.running():
        await driver.say("plan")
        card = await driver.card(lambda s: bool(s.buttons))
        labels = ["Approve the plan", "Keep planning"]
        if driver.message_button is not None:
            labels.append(driver.message_button.format("Keep planning"))
        assert card.labels == labels, card.labels
        assert before_hash(card.status) == "Waiting for a decision", card.status
        for words in ("Ship the release", "version", "pyproject.toml", "pytest -q", "Tag it"):
            assert words in card.text, (words, card.text)
        for mark in RAW_MARKS.get(driver.name, ()):
            assert mark not in card.text, (mark, card.text)
        assert not card.files
        answer = await driver.press(card, "Approve the plan")
        assert "Approve the plan" in answer, answer
        done = await driver.wait_for(lambda seen: _settled(seen, card))
    assert f'("Approve the plan") by {alice}' in done.status, done.status
    assert "Waiting for a decision" not in done.text
    assert [d.action_id for d in driver.received] == ["approve-plan"]


async def test_a_plan_too_long_for_a_card_is_attached_whole(driver: Driver) -> None:
    driver.require(Case.PLAN)
    markdown = long_plan(driver.limits)
    assert len(markdown) > driver.limits.card_max_chars
    async with driver.running():
        await driver.say("long plan")
        card = await driver.card(lambda s: bool(s.buttons))
        seen = await driver.seen()
        answer = await driver.press(card, "Keep planning")
        assert "Keep planning" in answer, answer
        await driver.wait_for(lambda now: _settled(now, card))
    with_file = [s for s in seen if s.files]
    assert len(with_file) == 1, seen  # one file, once
    [(name, content)] = with_file[0].files
    assert (name, content) == ("plan.md", markdown)
    assert all(label.endswith("(see attached plan)") for label in card.labels), card.labels
    assert [d.action_id for d in driver.received] == ["keep-planning"]


async def test_keep_planning_sends_the_persons_message_with_it(driver: Driver) -> None:
    driver.require(Case.PLAN_MESSAGE)
    alice = driver.shown_as["alice"]
    async with driver.running():
        await driver.say("plan")
        card = await driver.card(lambda s: bool(s.buttons))
        answer = await driver.press_with_message(card, "Keep planning", "  Tag it first.  ")
        assert answer.startswith("Sent back: Keep planning."), answer
        done = await driver.wait_for(lambda seen: _settled(seen, card))
    assert f'Sent back ("Keep planning") by {alice}' in done.status, done.status
    [decision] = driver.received
    assert (decision.action_id, decision.message) == ("keep-planning", "Tag it first.")


def _settled(seen: list[Seen], card: Seen) -> Seen | None:
    return next((s for s in seen if s.key == card.key and not s.buttons and s.status), None)
