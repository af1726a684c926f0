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
from collections.abc import Callable, Coroutine
from typing import Any

import discord
import yarl
from discord import app_commands

from gateway.errors import ConfigError, GatewayError, PlatformError
from platforms.discord.clicks import Clicks
from platforms.discord.commands import COMMANDS, CommandSpec
from platforms.discord.config import DiscordConfig
from platforms.discord.messages import Messages
from platforms.discord.widgets import CardButton, MessageButton, PageButton

__all__ = [
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
        """The gateway's commands (platforms/discord/commands.py), synced in the configured
        guilds, else globally."""
        for spec in COMMANDS:
            self.tree.add_command(self._command(spec))
        if self.guild_ids:
            for guild in self.guild_ids:
                target = discord.Object(id=int(guild))
                self.tree.copy_global_to(guild=target)
                await self.tree.sync(guild=target)
            self.tree.clear_commands(guild=None)
        else:
            await self.tree.sync()

    def _command(self, spec: CommandSpec) -> app_commands.Command[Any, Any, None]:
        """``spec`` as discord.py's command: its options described as the spec says
        (discord.py would write "…"), a request id completed as it is typed."""
        messages, name = self.messages, spec.name
        run = _callback(messages, name)
        described = app_commands.describe(**{o.name: o.description for o in spec.options})
        requests = [o.name for o in spec.options if o.requests]
        if requests:

            async def complete(
                interaction: discord.Interaction[Any], current: str
            ) -> list[app_commands.Choice[str]]:
                found = await messages.request_choices(interaction, name, current)
                return [app_commands.Choice(name=shown, value=value) for shown, value in found]

            run = app_commands.autocomplete(**{option: complete for option in requests})(run)
        return app_commands.Command(
            name=name, description=spec.description, callback=described(run)
        )

    async def on_message(self, message: discord.Message) -> None:
        await self.messages.on_discord_message(message)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        if interaction.type is discord.InteractionType.modal_submit:
            await self.clicks.on_modal(interaction)
        elif interaction.type is discord.InteractionType.component:
            await self.clicks.on_unlisted_click(interaction)


Callback = Callable[..., Coroutine[Any, Any, None]]


def _callback(messages: Messages, name: str) -> Callback:
    """The function discord.py reads a command's parameters from (their names are the
    options' names in platforms/discord/commands.py), handing the command on as text."""
    if name == "approve":

        async def approve(
            interaction: discord.Interaction[Any], request: str, action: str = ""
        ) -> None:
            await messages.on_slash(interaction, name, request, action)

        return approve
    if name == "deny":

        async def deny(
            interaction: discord.Interaction[Any], request: str, message: str = ""
        ) -> None:
            await messages.on_slash(interaction, name, request, message)

        return deny
    if name == "answer":

        async def answer(interaction: discord.Interaction[Any], request: str, answer: str) -> None:
            await messages.on_slash(interaction, name, request, answer)

        return answer

    if name == "withdraw":

        async def withdraw(interaction: discord.Interaction[Any], request: str) -> None:
            await messages.on_slash(interaction, name, request)

        return withdraw
    if name == "plan":

        async def plan(interaction: discord.Interaction[Any], text: str) -> None:
            await messages.on_slash(interaction, name, text)

        return plan
    if name == "revoke":

        async def revoke(interaction: discord.Interaction[Any], grant: str) -> None:
            await messages.on_slash(interaction, name, grant)

        return revoke

    if name == "model":

        async def model(interaction: discord.Interaction[Any], model: str = "") -> None:
            await messages.on_slash(interaction, name, model)

        return model
    if name == "mode":

        async def mode(interaction: discord.Interaction[Any], mode: str = "") -> None:
            await messages.on_slash(interaction, name, mode)

        return mode
    if name == "every":

        async def every(interaction: discord.Interaction[Any], cron: str, text: str) -> None:
            await messages.on_slash(interaction, name, cron, text)

        return every
    if name == "at":

        async def at(interaction: discord.Interaction[Any], when: str, text: str) -> None:
            await messages.on_slash(interaction, name, when, text)

        return at
    if name == "unschedule":

        async def unschedule(interaction: discord.Interaction[Any], schedule: str) -> None:
            await messages.on_slash(interaction, name, schedule)

        return unschedule
    if name == "sessions":

        async def sessions(interaction: discord.Interaction[Any], page: str = "") -> None:
            await messages.on_slash(interaction, name, page)

        return sessions
    if name == "switch":

        async def switch(interaction: discord.Interaction[Any], session: str) -> None:
            await messages.on_slash(interaction, name, session)

        return switch
    if name == "new":

        async def new(interaction: discord.Interaction[Any], name: str = "") -> None:
            await messages.on_slash(interaction, "new", name)

        return new
    if name == "name":

        async def name_it(interaction: discord.Interaction[Any], name: str) -> None:
            await messages.on_slash(interaction, "name", name)

        return name_it

    async def plain(interaction: discord.Interaction[Any]) -> None:
        await messages.on_slash(interaction, name)

    return plain


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
