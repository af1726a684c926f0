"""The two-person rule on every platform (issue 17): every copy of a card shows the tally
("1 of 2: alice approved"), the same person's second vote is counted once, the second
approver's vote decides, and a request nobody answered is also asked in a channel (a copy of
the card, with the notice where it was first asked), where a vote counts."""

from __future__ import annotations

import re

import pytest

from tests.platform_contract.contract import Case, Driver, Seen, before_hash

pytestmark = pytest.mark.timeout(60)


def tallied(driver: Driver, *who: str) -> str:
    names = ", ".join(driver.shown_as[person] for person in who)
    return f"{len(who)} of 2: {names} approved"


async def test_every_copy_shows_the_tally_and_a_second_vote_of_one_person_counts_once(
    driver: Driver,
) -> None:
    async with driver.running():
        await driver.say("two")
        card = await driver.card(lambda s: bool(s.buttons))
        # several people vote: the hash is on the card's face, for each to see they approve
        # the same content, and not again behind "details"
        hashed = re.fullmatch(r"Waiting for a decision · (content hash [0-9a-f]{10})", card.status)
        assert hashed is not None and card.details == "", card
        counted = await driver.press(card, "Allow once")
        # the receipt names what the vote approves, as the card's face does
        said = f"{tallied(driver, 'alice')} ({hashed[1]})"
        assert counted == f"Your vote is counted: {said}.", counted
        now = await driver.card(lambda s: s.key == card.key and "1 of 2" in s.status)
        assert before_hash(now.status) == f"Waiting for a decision · {tallied(driver, 'alice')}"
        assert now.status.endswith(f" · {hashed[1]}") and now.details == "", now
        assert now.labels == card.labels  # still open: one person is not two
        again = await driver.press(now, "Allow once")
        assert again == f"Your vote was already counted: {said}.", again
    assert driver.received == []


async def test_the_second_approvers_vote_decides_and_every_voter_is_listed(
    driver: Driver,
) -> None:
    driver.require(Case.SECOND_VOTE)
    async with driver.running():
        await driver.say("two")
        card = await driver.card(lambda s: bool(s.buttons))
        await driver.press(card, "Allow once")
        now = await driver.card(lambda s: s.key == card.key and "1 of 2" in s.status)
        decided = await driver.press(now, "Allow once", who="carol")
        assert decided.startswith("Approved: Allow once"), decided
        done = await driver.card(lambda s: s.key == card.key and not s.buttons)
    assert done.status.startswith('Approved ("Allow once") by ' + driver.shown_as["carol"])
    assert tallied(driver, "alice", "carol") in done.status, done.status
    assert [d.action_id for d in driver.received] == ["accept"]  # one write


def open_copy(seen: Seen) -> bool:
    return bool(seen.buttons) and "1 of 2" in seen.status


async def test_unanswered_it_is_asked_in_a_channel_too_and_a_vote_there_counts(
    driver: Driver,
) -> None:
    driver.require(Case.ESCALATION)
    async with driver.running():
        await driver.say("escalate")
        card = await driver.card(lambda s: bool(s.buttons))
        await driver.press(card, "Allow once")
        # nobody else answered within 1 s: a copy in the channel, with the tally
        copy = await driver.card_in_channel(open_copy)
        assert before_hash(copy.status) == f"Waiting for a decision · {tallied(driver, 'alice')}"
        assert copy.labels == card.labels
        notice = await driver.text(lambda text: text.startswith("⏫"))
        assert "was not answered within 1 s: also asked in #" in notice.text, notice
        assert not [s for s in await driver.in_channel() if not s.card]  # the card alone
        decided = await driver.click_in_channel(copy, copy.button("Allow once").token, who="carol")
        assert decided.startswith("Approved: Allow once"), decided
        done = await driver.card(lambda s: s.key == card.key and not s.buttons)
        there = await driver.card_in_channel(lambda s: s.key == copy.key and not s.buttons)
    for shown in (done, there):
        assert tallied(driver, "alice", "carol") in shown.status, shown.status
    assert [d.action_id for d in driver.received] == ["accept"]
