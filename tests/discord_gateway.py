"""The gateway on the fake Discord with a real agent: its config, the running gateway, and
what a person reads there (a card's embed, the bot's last words in a thread)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from adapters.launch import ConfiguredLauncher
from gateway.config.model import Config
from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from platforms.registry import parse_config
from tests.claude_env import ClaudeHome
from tests.codex_env import CodexHome
from tests.servers.fake_discord import ALICE, APP_ID, TOKEN, FakeDiscord, Sent


def discord_gateway_config(
    fake: FakeDiscord,
    home: CodexHome | ClaudeHome,
    agent_bin: str,
    data_dir: Path,
    *,
    allow_from: tuple[str, ...] = (ALICE.id,),
    features: tuple[str, ...] = (),
    agent: str = "codex-app-server",
) -> Config:
    text = discord_gateway_config_text(
        fake, home, agent_bin, data_dir, allow_from=allow_from, features=features, agent=agent
    )
    return parse_config(text, "discord-codex.toml")


def discord_gateway_config_text(
    fake: FakeDiscord,
    home: CodexHome | ClaudeHome,
    agent_bin: str,
    data_dir: Path,
    *,
    allow_from: tuple[str, ...] = (ALICE.id,),
    features: tuple[str, ...] = (),
    agent: str = "codex-app-server",
) -> str:
    """A gateway's config: one project (Codex unless ``agent`` says otherwise, run as
    ``agent_bin``), Discord on the fake, ``allow_from`` user ids."""
    env = "\n".join(f"{k} = {json.dumps(v)}" for k, v in home.env.items())
    codex_only = (
        f'sandbox = "workspace-write"\nfeatures = {json.dumps(list(features))}'
        if agent == "codex-app-server"
        else ""
    )
    return f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(home.workspace))}
agent = {json.dumps(agent)}
argv = [{json.dumps(agent_bin)}]
{codex_only}

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.discord]
allow_from = {json.dumps(list(allow_from))}

[platforms.discord]
token = "{TOKEN}"
application_id = "{APP_ID}"
channels = ["{fake.general.id}"]
api_base_url = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
"""


@asynccontextmanager
async def on_discord(config: Config) -> AsyncIterator[Gateway]:
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
    """A message as a person reads it: its text, or its card's title, body and footer."""
    if not message.embeds:
        return message.content
    embed = message.embeds[0]
    parts = [embed.get("title", ""), embed.get("description", "")]
    parts += [f"{f.get('name', '')}: {f.get('value', '')}" for f in embed.get("fields") or []]
    parts.append((embed.get("footer") or {}).get("text", ""))
    return "\n".join(parts)


async def card_in(fake: FakeDiscord, thread_id: str) -> Sent:
    """The first card with buttons the bot posted in a thread."""

    def find() -> Sent | None:
        thread = fake.channels.get(thread_id)
        if thread is None:
            return None
        return next((m for m in fake.bot_messages(thread) if m.labels), None)

    return await fake.wait_for(find)


async def bot_says(fake: FakeDiscord, thread_id: str, ending: str) -> Sent:
    """The bot's plain message in a thread that ends with ``ending`` (the thread may not be
    made yet)."""

    def find() -> Sent | None:
        thread = fake.channels.get(thread_id)
        if thread is None:
            return None
        return next(
            (m for m in fake.bot_messages(thread) if not m.embeds and m.content.endswith(ending)),
            None,
        )

    return await fake.wait_for(find)
