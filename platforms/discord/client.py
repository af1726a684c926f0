"""discord.py's client, pointed at the configured Discord and started for the gateway.

discord.py reads its REST base and gateway URL from two class attributes
(``discord.http.Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY``): :func:`point_at` sets
both from the config (tests point them at the fake Discord). :func:`start` runs the client
in a task of its own and :func:`until_ready` waits for READY; a failed start is read from
that task and said as the key to change (a 4014 close: ``message_content``; a refused
token: ``token``).

In ``setup_hook`` the card buttons (DynamicItems) are registered, so a click on a card sent
by an earlier process still reaches the gateway, and the slash commands are synced.
discord.py's logger stays at WARNING whatever ``log_level`` says: at DEBUG it writes gateway
events and request bodies (modal answers, tokens).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
import yarl
from discord import app_commands

from gateway.errors import ConfigError, GatewayError, PlatformError
from platforms.discord.clicks import Clicks
from platforms.discord.config import DiscordConfig
from platforms.discord.inbound import COMMANDS
from platforms.discord.messages import Messages
from platforms.discord.widgets import CardButton, MessageButton, PageButton

__all__ = [
    "COMMAND_HELP",
    "GUILD_READY_SECONDS",
    "READY_SECONDS",
    "GatewayClient",
    "connect_for_events",
    "intents_for",
    "log_in",
    "point_at",
    "quiet_sdk_logger",
    "start",
    "start_error",
    "until_ready",
]

READY_SECONDS = 30.0
# discord.py fires READY only once no GUILD_CREATE came for this long (its default: 2 s,
# which was two thirds of `agent-gateway run` with Discord alone). Discord sends a bot's
# guilds right after READY; one later than this is still taken (discord.py's
# guild_available), and nothing here needs the guild cache at READY: sends and edits go by
# channel id, a message in a guild not yet cached still arrives.
GUILD_READY_SECONDS = 0.5
COMMAND_HELP = {
    "new": "Start a new session here",
    "stop": "Stop the agent's turn",
    "resume": "Resume a session",
    "clear": "Forget this conversation's session",
    "status": "What the session is doing",
    "pending": "The requests waiting for a decision",
    "help": "What the gateway understands",
    "model": "The model, or pick one of the project's",
    "mode": "The agent's permission mode, or set one of the project's",
}


def quiet_sdk_logger() -> None:
    logger = logging.getLogger("discord")
    logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    # the bot never joins voice: discord.py's warnings that PyNaCl and davey are missing
    # would be the first two lines of every start (and of a refused one's one-line error)
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False


def point_at(config: DiscordConfig) -> None:
    """discord.py's REST base and gateway URL, from the config."""
    discord.http.Route.BASE = config.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(config.gateway_url)


def intents_for(config: DiscordConfig) -> discord.Intents:
    """Guilds, guild and DM messages; message content only if configured (privileged)."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = config.message_content
    return intents


class GatewayClient(discord.Client):
    """Events to the gateway's handlers: messages and commands to ``messages``, clicks and
    modal submits to ``clicks``."""

    def __init__(
        self, config: DiscordConfig, *, messages: Messages, clicks: Clicks, **options: Any
    ) -> None:
        super().__init__(
            intents=intents_for(config),
            max_ratelimit_timeout=config.max_ratelimit_timeout,
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=GUILD_READY_SECONDS,
            **options,
        )
        self.guild_ids = config.guild_ids
        self.messages = messages
        self.clicks = clicks  # the DynamicItems' callbacks find it here
        self.tree = app_commands.CommandTree(self)

    async def setup_hook(self) -> None:
        self.add_dynamic_items(CardButton, MessageButton, PageButton)
        await self.sync_commands()

    async def sync_commands(self) -> None:
        """/new /stop /resume /clear /status /pending /help, each with optional text;
        synced in the configured guilds, else globally."""
        for name in COMMANDS:
            self.tree.add_command(self._command(name))
        if self.guild_ids:
            for guild in self.guild_ids:
                target = discord.Object(id=int(guild))
                self.tree.copy_global_to(guild=target)
                await self.tree.sync(guild=target)
            self.tree.clear_commands(guild=None)
        else:
            await self.tree.sync()

    def _command(self, name: str) -> app_commands.Command[Any, Any, None]:
        async def run(interaction: discord.Interaction[Any], text: str = "") -> None:
            await self.messages.on_slash(interaction, name, text)

        return app_commands.Command(
            name=name, description=COMMAND_HELP.get(name, name), callback=run
        )

    async def on_message(self, message: discord.Message) -> None:
        await self.messages.on_discord_message(message)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        if interaction.type is discord.InteractionType.modal_submit:
            await self.clicks.on_modal(interaction)
        elif interaction.type is discord.InteractionType.component:
            await self.clicks.on_unlisted_click(interaction)


async def log_in(client: discord.Client, token: str) -> None:
    """REST only (several hosts: another may hold the gateway connection): the token
    checked, the application read, the slash commands synced (``setup_hook``)."""
    try:
        await client.login(token)
    except Exception as exc:
        raise start_error(exc) from exc


async def connect_for_events(client: discord.Client, stop: asyncio.Event) -> None:
    """A logged-in client's gateway connection, until ``stop`` is set; then closed (the
    client's REST session stays open for sending). A connection refused for good (a 4014:
    the intent; a refused token) is raised as what to change."""
    connecting = asyncio.create_task(client.connect(reconnect=True), name="discord gateway")
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        connecting.cancel()
        await asyncio.wait({connecting})
        ws = client.ws
        if ws is not None and ws.open:
            await ws.close(code=1000)
    if not connecting.cancelled() and connecting.exception() is not None:
        raise start_error(connecting.exception())


def start(client: discord.Client, token: str) -> asyncio.Task[None]:
    """The client running in a task of its own, not a task group's: a failed start is read
    by :func:`until_ready`, not a group's end."""
    return asyncio.create_task(client.start(token), name="discord client")


async def until_ready(client: discord.Client, running: asyncio.Task[None]) -> None:
    """Wait for READY; a start that failed meanwhile is raised as what to change."""
    ready = asyncio.ensure_future(client.wait_until_ready())
    try:
        done, _ = await asyncio.wait(
            {running, ready}, timeout=READY_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        ready.cancel()
    if running in done:
        raise start_error(running.exception())
    if ready not in done:
        raise PlatformError(f"discord: not ready after {READY_SECONDS:g} s")


def start_error(error: BaseException | None) -> GatewayError:
    """Why the client stopped at start, as the key to change where there is one."""
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return _chained(
            ConfigError(
                "platforms.discord.message_content = true, but the application does not have "
                "the Message Content intent: turn it on in the Developer Portal (Bot > "
                "Privileged Gateway Intents), or set message_content = false"
            ),
            error,
        )
    if isinstance(error, discord.LoginFailure):
        return _chained(ConfigError("platforms.discord.token: Discord refused it"), error)
    return _chained(PlatformError(f"discord: the client stopped at start ({error!r})"), error)


def _chained(error: GatewayError, cause: BaseException | None) -> GatewayError:
    error.__cause__ = cause
    return error
