"""Scheduled work on the fake Discord with the real discord.py and the scripted agent
(issue 35): a schedule made in a channel gets a thread of its own, made from a message at the
top of the channel and named after it, where every run speaks and runs; the thread a person
works in stays theirs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.clock import FileClock
from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from platforms.registry import parse_config
from tests.discord_gateway import bot_says
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_discord import ALICE, APP_ID, BOT, TOKEN, Channel, FakeDiscord, Sent

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def config_text(fake: FakeDiscord, tmp_path: Path) -> str:
    (tmp_path / "work").mkdir()
    return f"""
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
"""


def said(fake: FakeDiscord, channel: Channel) -> list[str]:
    return [m.content for m in fake.bot_messages(channel)]


async def first_saying(fake: FakeDiscord, channel: Channel, starts: str) -> Sent:
    return await fake.wait_for(
        lambda: next((m for m in fake.bot_messages(channel) if m.content.startswith(starts)), None)
    )


async def test_a_schedule_made_in_a_channel_gets_a_thread_of_its_own(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    clock = FileClock(tmp_path / "clock")
    clock.set(datetime(2026, 6, 1, 6, 0, tzinfo=UTC))
    config = parse_config(config_text(fake, tmp_path), "discord-schedules.toml")
    settings = config.platforms.get("discord", DiscordConfig)
    assert settings is not None
    platforms = {"discord": DiscordPlatform(settings)}
    launcher = ScriptedLauncher(REQUESTS)
    async with (
        connected(platforms),  # type: ignore[arg-type]
        Gateway(
            config,
            platforms=platforms,  # type: ignore[arg-type]
            launcher=launcher,
            schedule_clock=clock,
        ) as gateway,
    ):
        hello = await fake.say(ALICE, fake.general, f"<@{BOT.id}> hello", mentions=(BOT,))
        await bot_says(fake, hello.id, "echo: hello")
        await launcher.turn_over.wait()
        theirs = fake.channels[hello.id]

        await fake.slash(ALICE, fake.general, "every", {"cron": "0 9 * * *", "text": "check CI"})
        made = await first_saying(fake, fake.general, "⏰ Schedule S1 made")
        root = await first_saying(fake, fake.general, "⏰ S1: check CI")
        thread = fake.channels[root.id]
        assert thread.name == "⏰ S1: check CI"
        link = f"https://discord.com/channels/{fake.general.guild_id}/{thread.id}"
        assert made.content.splitlines()[2] == f"Its runs speak in a thread of its own: {link}"
        assert said(fake, thread) == [
            "⏰ Schedule S1's runs speak here, each in a fresh session: what its agent asks"
            " waits here for the project's approvers."
        ]

        clock.set(datetime(2026, 6, 1, 9, 0, tzinfo=UTC))
        assert gateway.scheduler is not None
        await gateway.scheduler.tick()
        await bot_says(fake, thread.id, "echo: check CI")
        assert said(fake, thread)[1] == "⏰ scheduled: check CI"

        await fake.say(ALICE, theirs, f"<@{BOT.id}> and mine", mentions=(BOT,))
        await bot_says(fake, theirs.id, "echo: and mine")
        assert not [text for text in said(fake, theirs) if "check CI" in text]
