"""A message typed in a thread while a card there waits for a decision, on Discord with the
scripted agent: the first is told in full that it is queued and not a decision, the next
ones get a reaction (✍), which notifies nobody, instead of a reply; a turn that starts shows
"typing…" in its thread."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DISCORD_LIMITS, QUEUED_REACTION, DiscordPlatform
from platforms.registry import parse_config
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_discord import ALICE, APP_ID, BOT, BOT_ID, TOKEN, FakeDiscord

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_message_queued_behind_a_card_gets_a_reaction_not_a_reply(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"
argv = ["codex"]

[projects.demo.auth.discord]
allow_from = [{json.dumps(ALICE.id)}]

[platforms.discord]
token = "{TOKEN}"
application_id = "{APP_ID}"
channels = ["{fake.general.id}"]
api_base_url = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
""",
        "discord-queued.toml",
    )
    settings = config.platforms.get("discord", DiscordConfig)
    assert settings is not None
    platforms = {"discord": DiscordPlatform(settings)}
    launcher = ScriptedLauncher(requests_for(DISCORD_LIMITS))
    async with (
        connected(platforms),  # type: ignore[arg-type]
        Gateway(config, platforms=platforms, launcher=launcher),  # type: ignore[arg-type]
    ):
        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> approve", mentions=(BOT,))
        thread = await fake.wait_for(lambda: fake.channels.get(said.id))
        card = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(thread) if m.labels), None)
        )
        assert thread.id in fake.typing  # the turn started: "typing…" in its thread

        def notices() -> list[str]:
            return [
                m.content
                for m in fake.bot_messages(thread)
                if not m.embeds and m.content.startswith("Queued as a message")
            ]

        first = await fake.say(ALICE, thread, f"<@{BOT.id}> also check the tests", mentions=(BOT,))
        await fake.wait_for(notices)
        more = await fake.say(ALICE, thread, f"<@{BOT.id}> and the docs", mentions=(BOT,))
        await fake.wait_for(lambda: more.reactions)
        assert more.reactions == {QUEUED_REACTION: [BOT_ID]}
        assert first.reactions == {}  # the first was answered in full, not marked
        await fake.click(ALICE, card, "Allow once")
        await fake.wait_for(lambda: not card.labels)
        assert len(notices()) == 1
    assert more.reactions == {QUEUED_REACTION: [BOT_ID]}  # "noted" stays true once it ran
    assert fake.refused == []
