"""Discord end to end with the real Codex app-server: in a thread made from a mention, a
command is allowed once, another denied; the click is deferred at once, its person told the
outcome ephemerally, and every card says how it ended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says, card_in, discord_gateway_config, on_discord, seen
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_command_is_allowed_once_in_a_thread(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    async with on_discord(discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")):
        said = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> please create hello.txt", mentions=(BOT,)
        )
        card = await card_in(fake, said.id)
        assert "touch hello.txt" in seen(card)
        assert card.labels[0] == "Allow once"
        assert card.content == f"<@{ALICE.id}>: waiting for you."  # the initiator, pinged once
        allowed = card.allowed_mentions or {}
        assert allowed.get("parse") == [] and not allowed.get("roles")
        assert [str(user) for user in allowed["users"]] == [ALICE.id]
        click = await fake.click(ALICE, card, "Allow once")
        await fake.wait_for(lambda: click.followups)
        assert click.callback is not None and click.callback["type"] == 6  # deferred at once
        assert click.followups[0].content.startswith("Approved")
        assert click.followups[0].ephemeral
        await fake.wait_for(lambda: not card.labels and "sent to the agent" in seen(card))
        assert "by @alice" in seen(card)
        await bot_says(fake, said.id, "Done.")
    assert (codex_home.workspace / "hello.txt").exists()


async def test_a_denied_command_does_not_run(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch denied.txt", escalated=True), message("Understood.")))
    async with on_discord(discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")):
        said = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> please create denied.txt", mentions=(BOT,)
        )
        card = await card_in(fake, said.id)
        click = await fake.click(ALICE, card, "Deny")
        await fake.wait_for(lambda: click.followups)
        assert click.followups[0].content.startswith("Denied. ")
        await bot_says(fake, said.id, "Understood.")
        await fake.wait_for(lambda: not card.labels and "Denied" in seen(card))
        assert 'Denied ("Deny") by @alice' in seen(card)
    assert not (codex_home.workspace / "denied.txt").exists()
