"""``[platforms.discord]``: the Discord platform's settings, their help, and the bot's invite.

Imported by ``agent-gateway check`` whenever a config has this table, so it imports pydantic
and ``gateway`` only, never discord.py (which ``run`` imports with the platform).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import IntFlag
from typing import Annotated, Any
from urllib.parse import urlencode

from pydantic import Field, SecretStr, StringConstraints, field_validator, model_validator

from gateway.config.platform_tables import HttpUrl, PlatformConfig, PlatformTable, non_empty_secret
from gateway.errors import ConfigError

__all__ = [
    "HELP",
    "NEEDED_PERMISSIONS",
    "TABLE",
    "DiscordConfig",
    "Permission",
    "Snowflake",
    "invite_url",
    "written_application_id",
]

HELP = """\
[platforms.discord]
# The bot's token (Developer Portal > your application > Bot), from the environment...
token = "${DISCORD_BOT_TOKEN}"
# ...or read from a file (give one of token and token_file):
# token_file = "/run/secrets/discord-bot-token"
# The application's id (General Information > Application ID): for the invite URL
# (agent-gateway discord-invite, which asks Discord for it with the token if it is not
# here), and checked against the token's by agent-gateway check.
application_id = "123456789012345678"
# Servers (guilds) to register the slash commands in (at once); none: registered globally
# (Discord may take up to an hour to show them everywhere).
guild_ids = []
# The channels the bot works in, by id (parent channels: a session in one of their threads
# counts). Messages in other channels are ignored; direct messages are always taken.
channels = []
# Bare replies (without mentioning the bot) in a session's thread need the privileged
# Message Content intent: turn it on in the Developer Portal (Bot > Privileged Gateway
# Intents), then here. Off: only mentions, commands and DMs are read.
message_content = false
# How long discord.py may wait out one rate limit before the call fails, in seconds (>= 30).
max_ratelimit_timeout = 60
# The REST API and gateway addresses (a proxy, or a test fake).
api_base_url = "https://discord.com/api/v10"
gateway_url = "wss://gateway.discord.gg/"
"""

Snowflake = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,19}$")]
WsUrl = Annotated[str, StringConstraints(pattern=r"^wss?://[^\s/]+(/\S*)?$")]


class Permission(IntFlag):
    """The Discord permission bits the bot uses (discord.com/developers/docs/topics/permissions)."""

    ADD_REACTIONS = 1 << 6  # ✍ on a message queued behind a card
    VIEW_CHANNEL = 1 << 10  # see the channel and its messages arriving
    SEND_MESSAGES = 1 << 11  # replies, cards, notices in a channel
    EMBED_LINKS = 1 << 14  # a card is an embed
    ATTACH_FILES = 1 << 15  # a command or diff too long for its card
    READ_MESSAGE_HISTORY = 1 << 16  # reply to a message, start a thread from it
    CREATE_PUBLIC_THREADS = 1 << 35  # a session's thread, made from the message that began it
    SEND_MESSAGES_IN_THREADS = 1 << 38  # everything said in a session's thread


NEEDED_PERMISSIONS = (
    Permission.ADD_REACTIONS
    | Permission.VIEW_CHANNEL
    | Permission.SEND_MESSAGES
    | Permission.EMBED_LINKS
    | Permission.ATTACH_FILES
    | Permission.READ_MESSAGE_HISTORY
    | Permission.CREATE_PUBLIC_THREADS
    | Permission.SEND_MESSAGES_IN_THREADS
)


class DiscordConfig(PlatformConfig):
    token: SecretStr
    application_id: Snowflake | None = None  # absent: the token's, asked of Discord
    guild_ids: tuple[Snowflake, ...] = ()
    channels: tuple[Snowflake, ...] = ()
    message_content: bool = False
    # discord.py clamps it to 30 s; a smaller value is refused rather than silently raised
    max_ratelimit_timeout: float = Field(default=60.0, ge=30.0, le=3600.0)
    api_base_url: HttpUrl = "https://discord.com/api/v10"
    gateway_url: WsUrl = "wss://gateway.discord.gg/"

    _secrets = field_validator("token")(non_empty_secret)

    @model_validator(mode="after")
    def _token_is_bare(self) -> DiscordConfig:
        token = self.token.get_secret_value()
        if token.lower().startswith("bot "):
            raise ValueError('token: give the token alone, without "Bot " before it')
        if any(char.isspace() for char in token):
            raise ValueError("token: a bot token has no spaces or line breaks")
        return self

    @field_validator("guild_ids", "channels")
    @classmethod
    def _once_each(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(ids))

    @property
    def api_base(self) -> str:
        """``api_base_url`` as discord.py's ``Route.BASE`` takes it (no trailing slash)."""
        return self.api_base_url.rstrip("/")


def invite_url(application_id: str, permissions: int = NEEDED_PERMISSIONS) -> str:
    """The OAuth2 URL that adds the bot to a server with exactly ``permissions`` and its
    slash commands (``bot applications.commands``)."""
    query = urlencode(
        {
            "client_id": application_id,
            "scope": "bot applications.commands",
            "permissions": str(int(permissions)),
        }
    )
    return f"https://discord.com/oauth2/authorize?{query}"


def written_application_id(raw: Mapping[str, Any]) -> str | None:
    """``[platforms.discord] application_id`` as the config file writes it (its TOML, read
    alone: no token, no environment needed), or None if it is not there."""
    platforms = raw.get("platforms")
    table = platforms.get("discord") if isinstance(platforms, Mapping) else None
    if not isinstance(table, Mapping):
        raise ConfigError("the config has no [platforms.discord] table")
    value = table.get("application_id")
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[1-9][0-9]{0,19}", value):
        raise ConfigError(
            "platforms.discord.application_id: the application's id is a number in quotes "
            '(Developer Portal > General Information > Application ID), e.g. "1234567890"'
        )
    return value


TABLE = PlatformTable(model=DiscordConfig, help=HELP)
