"""``[platforms.telegram]``: the Telegram platform's settings and their help.

Imported by ``agent-gateway check`` whenever a config has this table, so it imports pydantic
and ``gateway`` only, never python-telegram-bot (which ``run`` imports with the platform).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, SecretStr, StringConstraints, field_validator, model_validator

from gateway.config.platform_tables import (
    HttpUrl,
    NonEmpty,
    PlatformConfig,
    PlatformTable,
    non_empty_secret,
)

__all__ = ["HELP", "TABLE", "GroupMode", "TelegramConfig"]

HELP = """\
[platforms.telegram]
# The bot token from @BotFather, from the environment...
token = "${TELEGRAM_BOT_TOKEN}"
# ...or read from a file (give one of token and token_file):
# token_file = "/run/secrets/telegram-bot-token"
# A self-hosted Bot API server, or a proxy.
base_url = "https://api.telegram.org"
# polling | webhook. polling: long polling, no public address needed.
# webhook: Telegram posts updates to webhook_url (the public https address of the gateway;
# the gateway serves its path); needs secret_token (or secret_token_file): Telegram sends
# it with every update and any request without it is refused.
mode = "polling"
# How long one getUpdates call waits for news (polling), in seconds.
poll_timeout_seconds = 30
# webhook_url = "https://gateway.example.com/telegram"
# secret_token = "${TELEGRAM_WEBHOOK_SECRET}"
# Where the webhook receiver listens (behind your https reverse proxy).
# webhook_listen = "127.0.0.1"
# webhook_port = 8443
# Groups: "mentions" takes only messages that mention the bot, reply to it, or are commands;
# "all" takes every message (the bot then needs privacy mode off, in @BotFather).
# Forum topics are one session each. Private chats always take every message.
group_mode = "mentions"
# The mode of single groups, by chat id:
# groups = { "-1001234567890" = "all" }
"""


class GroupMode(StrEnum):
    """Which messages of a Telegram group the bot takes."""

    ALL = "all"  # every message
    MENTIONS = "mentions"  # only messages that mention the bot, reply to it, or are commands


TelegramChatId = Annotated[str, StringConstraints(pattern=r"^-?[0-9]{1,20}$")]


class TelegramConfig(PlatformConfig):
    token: SecretStr
    base_url: HttpUrl = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    poll_timeout_seconds: int = Field(default=30, ge=1, le=50)
    webhook_url: HttpUrl | None = None
    # Telegram sends it in X-Telegram-Bot-Api-Secret-Token; a request without it is refused
    secret_token: SecretStr | None = None
    webhook_listen: NonEmpty = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=0, le=65535)
    group_mode: GroupMode = GroupMode.MENTIONS
    groups: dict[TelegramChatId, GroupMode] = Field(default_factory=dict)

    _secrets = field_validator("token", "secret_token")(non_empty_secret)

    @model_validator(mode="after")
    def _webhook_needs_url_and_secret(self) -> TelegramConfig:
        if self.mode == "webhook" and self.webhook_url is None:
            raise ValueError('mode = "webhook" needs webhook_url')
        if self.mode == "webhook" and self.secret_token is None:
            raise ValueError('mode = "webhook" needs secret_token (or secret_token_file)')
        if self.secret_token is not None and not re.fullmatch(
            r"[A-Za-z0-9_-]{1,256}", self.secret_token.get_secret_value()
        ):
            raise ValueError("secret_token: 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return self

    def group_mode_for(self, chat_id: str) -> GroupMode:
        """The configured mode of one group chat, else the default."""
        return self.groups.get(chat_id, self.group_mode)


TABLE = PlatformTable(model=TelegramConfig, help=HELP)
