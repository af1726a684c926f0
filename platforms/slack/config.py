"""``[platforms.slack]``: the Slack platform's settings and their help.

Imported by ``agent-gateway check`` whenever a config has this table, so it imports pydantic
and ``gateway`` only, never slack-bolt or slack-sdk (which ``run`` imports with the platform).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.platform_tables import (
    HttpUrl,
    NonEmpty,
    PlatformConfig,
    PlatformTable,
    non_empty_secret,
)

__all__ = ["HELP", "TABLE", "ChannelMode", "SlackConfig"]

HELP = """\
[platforms.slack]
# The app's Bot User OAuth Token (xoxb-...), from the environment or a file (bot_token_file).
bot_token = "${SLACK_BOT_TOKEN}"
# socket | http. socket: Socket Mode, no public address needed; needs the app-level token
# (xapp-..., with connections:write). http: Slack posts to request_url (the public https
# address of the gateway); needs signing_secret (or signing_secret_file), and requests not
# signed with it, or older than 5 minutes, are refused.
mode = "socket"
app_token = "${SLACK_APP_TOKEN}"
# signing_secret = "${SLACK_SIGNING_SECRET}"
# Where the HTTP receiver listens (behind your https reverse proxy), and its path.
# listen = "127.0.0.1"
# port = 3000
# path = "/slack/events"
# The Web API's address (a proxy, or a test fake).
base_url = "https://slack.com/api/"
# The workspace (team) id the app is installed in; events from any other team (a guest in
# a shared channel) are refused.
team_id = "T0123456789"
# Channels: "mentions" starts a session only from a message that mentions the app, then
# takes bare replies in the threads where a session lives; "all" takes every top-level
# message too. Direct messages always take every message.
channel_mode = "mentions"
# The slash command of the app (as in its manifest: agent-gateway slack-manifest).
command = "/agent"
"""


class ChannelMode(StrEnum):
    """Which messages of a Slack channel the app takes."""

    ALL = "all"
    MENTIONS = "mentions"


class SlackConfig(PlatformConfig):
    bot_token: SecretStr
    mode: Literal["socket", "http"] = "socket"
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    listen: NonEmpty = "127.0.0.1"
    port: int = Field(default=3000, ge=0, le=65535)
    path: str = Field(default="/slack/events", pattern=r"^/[A-Za-z0-9/_.-]*$")
    base_url: HttpUrl = "https://slack.com/api/"
    team_id: str = Field(pattern=r"^[TE][A-Z0-9]{2,20}$")
    channel_mode: ChannelMode = ChannelMode.MENTIONS
    command: str = Field(default="/agent", pattern=r"^/[a-z0-9_-]{1,31}$")

    _secrets = field_validator("bot_token", "app_token", "signing_secret")(non_empty_secret)

    @model_validator(mode="after")
    def _tokens_fit_the_mode(self) -> SlackConfig:
        if not self.bot_token.get_secret_value().startswith("xoxb-"):
            raise ValueError("bot_token: the Bot User OAuth Token starts with xoxb-")
        if self.mode == "socket":
            if self.app_token is None:
                raise ValueError('mode = "socket" needs app_token (or app_token_file)')
        if self.app_token is not None and not self.app_token.get_secret_value().startswith("xapp-"):
            raise ValueError("app_token: the app-level token starts with xapp-")
        if self.mode == "http" and self.signing_secret is None:
            raise ValueError('mode = "http" needs signing_secret (or signing_secret_file)')
        if self.signing_secret is not None and not re.fullmatch(
            r"[A-Za-z0-9_-]{8,128}", self.signing_secret.get_secret_value()
        ):
            raise ValueError("signing_secret: 8-128 characters of A-Z, a-z, 0-9, _ and -")
        return self

    @property
    def api_url(self) -> str:
        """``base_url`` as slack-sdk joins method names to it (ending in a slash)."""
        return self.base_url if self.base_url.endswith("/") else self.base_url + "/"


TABLE = PlatformTable(model=SlackConfig, help=HELP)
