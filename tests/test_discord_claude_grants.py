"""Discord end to end with the real Claude Code: a Bash card's buttons each say what they
grant, no two alike, and what a label cannot hold is said on the card (issue 29)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from tests.claude_env import ClaudeHome
from tests.discord_gateway import card_in, discord_gateway_config, on_discord, seen
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_each_grant_on_a_claude_card_says_what_it_grants(
    claude_bin: str,
    claude_home: ClaudeHome,
    fake_anthropic: fm.FakeAnthropic,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), fm.DONE])
    config = discord_gateway_config(
        fake, claude_home, claude_bin, tmp_path / "data", agent="claude-code"
    )
    async with on_discord(config):
        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> make hello.txt", mentions=(BOT,))
        card = await card_in(fake, said.id)
        assert len(card.labels) == len(set(card.labels)), card.labels
        assert "Allow + folder access for the session" in card.labels
        assert "Allow + accept all edits for the session" in card.labels
        read = seen(card).replace("\\", "")
        workspace = str(claude_home.workspace)
        folder = "**Allow + folder access for the session**: Allow it now, and the agent may use"
        assert f"{folder} {workspace} without asking" in read
        assert "file edits are accepted without asking, until this session ends" in read
        assert "Create hello.txt. It touches" in read  # two sentences, each with its stop
        await fake.click(ALICE, card, "Deny")
        await fake.wait_for(lambda: not card.labels and "Denied" in seen(card))
    assert not (claude_home.workspace / "hello.txt").exists()
