"""Discord end to end with the real Codex app-server: in a thread made from a mention, a
command is allowed once, another denied; the click is deferred at once, its person told the
outcome ephemerally, and every card says how it ended."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from adapters.launch import ConfiguredLauncher
from gateway.engine import Gateway
from gateway.platform import connected
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from platforms.registry import parse_config
from tests.codex_env import CodexHome
from tests.servers.fake_discord import ALICE, APP_ID, BOT, TOKEN, FakeDiscord, Sent
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@asynccontextmanager
async def on_discord(
    fake: FakeDiscord, home: CodexHome, codex_bin: str, tmp_path: Path
) -> AsyncIterator[Gateway]:
    env = "\n".join(f"{k} = {json.dumps(v)}" for k, v in home.env.items())
    config = parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(home.workspace))}
agent = "codex-app-server"
argv = [{json.dumps(codex_bin)}]
sandbox = "workspace-write"

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.discord]
allow_from = [{json.dumps(ALICE.id)}]

[platforms.discord]
token = "{TOKEN}"
application_id = "{APP_ID}"
channels = ["{fake.general.id}"]
api_base_url = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
""",
        "discord-codex.toml",
    )
    settings = config.platforms.get("discord", DiscordConfig)
    assert settings is not None
    platforms = {"discord": DiscordPlatform(settings)}
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    async with (
        connected(platforms),  # type: ignore[arg-type]
        Gateway(config, platforms=platforms, launcher=launcher) as gateway,  # type: ignore[arg-type]
    ):
        yield gateway


def seen(message: Sent) -> str:
    if not message.embeds:
        return message.content
    embed = message.embeds[0]
    parts = [embed.get("title", ""), embed.get("description", "")]
    parts.append((embed.get("footer") or {}).get("text", ""))
    return "\n".join(parts)


async def card_in(fake: FakeDiscord, thread_id: str) -> Sent:
    def find() -> Sent | None:
        thread = fake.channels.get(thread_id)
        if thread is None:
            return None
        return next((m for m in fake.bot_messages(thread) if m.labels), None)

    return await fake.wait_for(find)


async def bot_says(fake: FakeDiscord, thread_id: str, ending: str) -> Sent:
    return await fake.wait_for(
        lambda: next(
            (
                m
                for m in fake.bot_messages(fake.channels[thread_id])
                if not m.embeds and m.content.endswith(ending)
            ),
            None,
        )
    )


async def test_a_command_is_allowed_once_in_a_thread(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    async with on_discord(fake, codex_home, codex_bin, tmp_path):
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
    async with on_discord(fake, codex_home, codex_bin, tmp_path):
        said = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> please create denied.txt", mentions=(BOT,)
        )
        card = await card_in(fake, said.id)
        click = await fake.click(ALICE, card, "Deny")
        await fake.wait_for(lambda: click.followups)
        assert click.followups[0].content.startswith("Denied: Deny.")
        await bot_says(fake, said.id, "Understood.")
        await fake.wait_for(lambda: not card.labels and "Denied" in seen(card))
        assert 'Denied ("Deny") by @alice' in seen(card)
    assert not (codex_home.workspace / "denied.txt").exists()
