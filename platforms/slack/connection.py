"""How the Slack platform reaches Slack: the bot token checked against its team
(``auth.test``), and events taken over Socket Mode (``AsyncSocketModeHandler``, the default)
or HTTP (bolt's ``web_app`` on our own aiohttp runner; bolt checks every request's signature
and its 5-minute window), then let go.

The ``slack_sdk`` and ``slack_bolt`` loggers stay at WARNING whatever ``log_level`` says: at
DEBUG they write every Socket Mode envelope, modal answers (secrets) included.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.errors import ConfigError, PlatformError
from platforms.slack.config import SlackConfig
from platforms.slack.outbox import error_of

__all__ = ["SDK_LOGGERS", "BotUser", "Receiver", "check_token", "quiet_sdk_loggers"]

SDK_LOGGERS = ("slack_sdk", "slack_bolt")


# bolt's AsyncApp reads SLACK_BOT_TOKEN from the environment whenever it is given no token,
# and warns that the token is unused when it is also given a client: in the documented setup
# (the token in SLACK_BOT_TOKEN, the gateway's own client, pointed at the configured API) it
# warned at every start about nothing to change. bolt has no way to say "no token": "" is
# read as none and the environment is read again.
_TOKEN_UNUSED = "As you gave `client` as well, `token` will be unused."


class _NotTheTokenUnused(logging.Filter):
    """Drops bolt's "token will be unused" warning: the gateway gives its client on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _TOKEN_UNUSED


_BOLT_APP_LOGGER = "slack_bolt.AsyncApp"  # bolt's get_bolt_logger(AsyncApp)


def quiet_sdk_loggers() -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    bolt_app = logging.getLogger(_BOLT_APP_LOGGER)
    if not any(isinstance(f, _NotTheTokenUnused) for f in bolt_app.filters):
        bolt_app.addFilter(_NotTheTokenUnused())


@dataclass(frozen=True, kw_only=True, slots=True)
class BotUser:
    """The app's bot user: its id (``<@U…>`` mentions it) and its name (``@name``)."""

    id: str
    name: str


async def check_token(client: AsyncWebClient, team_id: str) -> BotUser:
    """The bot's user, once ``auth.test`` took the token and it is of ``team_id``."""
    try:
        me = await client.auth_test()
    except SlackApiError as exc:
        error = error_of(exc)
        if error in ("invalid_auth", "not_authed", "token_revoked", "account_inactive"):
            raise ConfigError(f"platforms.slack.bot_token: Slack refused it ({error})") from exc
        raise PlatformError(f"slack auth.test failed: {error}") from exc
    except Exception as exc:
        raise PlatformError(f"slack: {type(exc).__name__} on auth.test") from exc
    team = str(me.get("team_id") or "")
    if team != team_id:
        raise ConfigError(
            f"platforms.slack.team_id: the bot token is of team {team}, not {team_id}"
        )
    return BotUser(id=str(me.get("user_id") or ""), name=str(me.get("user") or ""))


class Receiver:
    """Slack's events into a bolt app, by the configured ``mode``: a Socket Mode connection
    or an HTTP server (on ``http_socket`` if given, else ``listen``:``port``)."""

    def __init__(
        self,
        config: SlackConfig,
        client: AsyncWebClient,
        *,
        http_socket: socket.socket | None = None,
    ) -> None:
        self._config = config
        self._client = client
        self._http_socket = http_socket
        self._handler: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self.http_port: int | None = None
        self.listening = asyncio.Event()  # set once events are taken (HTTP: the port bound)

    async def start(self, app: AsyncApp, *, stopped: Callable[[], bool]) -> None:
        """Take events into ``app``; a Socket Mode connection made once ``stopped()`` is
        closed again at once."""
        if self._config.mode == "http":
            self._runner = web.AppRunner(app.web_app(path=self._config.path))
            await self._runner.setup()
            site: web.BaseSite
            if self._http_socket is not None:
                site = web.SockSite(self._runner, self._http_socket)
            else:
                site = web.TCPSite(self._runner, self._config.listen, self._config.port)
            await site.start()
            server = getattr(site, "_server", None)
            sockets = getattr(server, "sockets", None) or []
            self.http_port = sockets[0].getsockname()[1] if sockets else None
            self.listening.set()
            return
        assert self._config.app_token is not None
        handler = AsyncSocketModeHandler(
            app, app_token=self._config.app_token.get_secret_value(), web_client=self._client
        )
        await handler.connect_async()  # type: ignore[no-untyped-call]
        if stopped():
            await handler.close_async()  # type: ignore[no-untyped-call]
            return
        self._handler = handler
        self.listening.set()

    async def close_socket(self) -> None:
        """The Socket Mode connection closed: Slack gives what was not taken again."""
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]
            self._handler = None

    async def close(self) -> None:
        await self.close_socket()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
