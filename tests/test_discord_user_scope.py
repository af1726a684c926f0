"""``scope = "user"`` on Discord, with the scripted agent: a person's session started by a
mention in a channel is theirs, so its card is shown in their DM too (opened with
``POST /users/@me/channels``); a click in the DM decides it, and every copy is edited."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DISCORD_LIMITS, DiscordPlatform
from platforms.registry import parse_config
from tests.discord_gateway import seen
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_discord import ALICE, APP_ID, BOT, TOKEN, FakeDiscord

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_persons_own_session_is_shown_in_their_dm_too(
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
scope = "user"

[projects.demo.auth.discord]
allow_from = [{json.dumps(ALICE.id)}]

[platforms.discord]
token = "{TOKEN}"
application_id = "{APP_ID}"
channels = ["{fake.general.id}"]
api_base_url = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
""",
        "discord-user-scope.toml",
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
        in_thread = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(thread) if m.labels), None)
        )
        # Alice's DM is a channel of its own: the platform asked Discord to open it
        assert [
            str(body.get("recipient_id")) for body in fake.calls_to("POST", "@me/channels")
        ] == [ALICE.id]
        dm = fake.dm(ALICE)
        in_dm = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(dm) if m.labels), None)
        )
        assert in_dm.labels == in_thread.labels
        click = await fake.click(ALICE, in_dm, "Allow once")
        await fake.wait_for(lambda: click.followups)
        assert click.followups[0].content.startswith("Approved")
        for copy in (in_dm, in_thread):  # every copy edited: decided, no buttons
            await fake.wait_for(lambda c=copy: not c.labels and "Approved" in seen(c))
        assert [d.action_id for d in launcher.received] == ["accept"]
    assert fake.refused == []
