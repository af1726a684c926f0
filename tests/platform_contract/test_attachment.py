"""A command too long for a card goes as an attached file, whole; the buttons say so, and they
appear only once the file is there (Telegram: the file is a message of its own, sent first)."""

from __future__ import annotations

import pytest

from tests.platform_contract.contract import Case, Driver, long_command

pytestmark = pytest.mark.timeout(60)


async def test_a_command_too_long_for_a_card_is_attached_before_the_buttons(
    driver: Driver,
) -> None:
    driver.require(Case.ATTACHMENT)
    command = long_command(driver.limits)
    assert len(command) > driver.limits.card_max_chars
    async with driver.running():
        await driver.say("long")
        card = await driver.card(lambda s: bool(s.buttons))
        seen = await driver.seen()
        answer = await driver.press(card, "Allow once")
        assert answer.startswith("Approved: Allow once"), answer
    with_file = [n for n, s in enumerate(seen) if s.files]
    assert len(with_file) == 1, seen  # one file, once
    [(name, content)] = seen[with_file[0]].files
    assert content == command and name.endswith(".sh")
    assert with_file[0] <= seen.index(card)  # the file is there before (or with) the buttons
    assert all(label.endswith("(see attached command)") for label in card.labels), card.labels
    assert [d.action_id for d in driver.received] == ["accept"]
