"""Discord end to end with the real Claude Code: its two questions (one single-choice, one
multi-select) in one modal, the multi-select as a checkbox group; a submission missing an
answer refused and the modal reopened with what was given; Claude reads the answers once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from tests.claude_env import ClaudeHome
from tests.discord_gateway import card_in, discord_gateway_config, on_discord, seen
from tests.servers.discord_wire import CHECKBOX_GROUP, RADIO_GROUP, TEXT_INPUT
from tests.servers.fake_anthropic import CHECKS, COLOR, DONE
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord, Interaction

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

COLOR_ANSWER = '"Which color should the button be?"="Blue"'
CHECKS_ANSWER = '"Which checks should run?"="Lint, Tests"'


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def inputs(opened: Interaction) -> list[tuple[int, str]]:
    assert opened.modal is not None
    return [
        (top["component"]["type"], top["component"]["custom_id"])
        for top in opened.modal["components"]
        if "component" in top
    ]


def picked(opened: Interaction, custom_id: str) -> list[str]:
    assert opened.modal is not None
    for top in opened.modal["components"]:
        child = top.get("component") or {}
        if child.get("custom_id") == custom_id:
            return [o["value"] for o in child.get("options") or [] if o.get("default")]
    raise AssertionError(f"no {custom_id} in the modal")


async def test_a_multi_select_is_a_checkbox_group_and_a_missing_answer_is_asked_again(
    claude_bin: str,
    claude_home: ClaudeHome,
    fake_anthropic: fm.FakeAnthropic,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_anthropic.enqueue([fm.ask_user_question([COLOR, CHECKS]), DONE])
    config = discord_gateway_config(
        fake, claude_home, claude_bin, tmp_path / "data", agent="claude-code"
    )
    async with on_discord(config):
        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> ask me", mentions=(BOT,))
        card = await card_in(fake, said.id)
        # beside the form, Claude's "Answer" (no answers of its own) is not a button; the way
        # to answer first, refusing last
        assert card.labels == ["Answer…", "Do not answer", "Do not answer and stop the turn"]
        assert "Which checks should run?" in seen(card)
        opened = await fake.click(ALICE, card, "Answer…")
        await fake.wait_for(lambda: opened.modal)
        assert inputs(opened) == [
            (RADIO_GROUP, "q0"),
            (TEXT_INPUT, "q0.other"),
            (CHECKBOX_GROUP, "q1"),  # the multi-select
            (TEXT_INPUT, "q1.other"),
        ]
        refused = await fake.submit(ALICE, opened, {"q1": ["0", "2"]})  # no color
        await fake.wait_for(lambda: refused.original)
        assert refused.original is not None
        assert refused.original.content == "“Color” needs an answer."
        assert card.labels[0] == "Answer…"  # nothing decided, nothing sent
        assert len(fake_anthropic.model_requests()) == 1

        again = await fake.click(ALICE, refused.original, "Answer again")
        await fake.wait_for(lambda: again.modal)
        assert picked(again, "q1") == ["0", "2"]  # what was given, shown again
        sent = await fake.submit(ALICE, again, {"q0": "1", "q1": ["0", "2"]})
        await fake.wait_for(lambda: sent.followups)
        await fake.wait_for(lambda: not card.labels and "Answered" in seen(card))
        await fake.wait_for(
            lambda: [m for m in fake.bot_messages(fake.channels[said.id]) if "Done." in m.content]
        )
    results = [str(r.get("content")) for r in fake_anthropic.model_requests()[-1].tool_results()]
    assert len(results) == 1  # the answer reached Claude once
    assert COLOR_ANSWER in results[0] and CHECKS_ANSWER in results[0]
