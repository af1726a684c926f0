"""Webhook mode: Telegram POSTs each update to the gateway (aiohttp).

The receiver serves the path of ``webhook_url`` on ``webhook_listen:webhook_port`` (or on a
socket handed in), refuses (403) any request whose ``X-Telegram-Bot-Api-Secret-Token`` is
not the configured ``secret_token`` (compared in constant time), then registers the webhook
(setWebhook with that secret). An update is answered 200 only once it was taken
(taking.py: handled, or refused with a reply after failing every attempt); one whose handling
failed is answered 500, and a crash answers nothing, so Telegram gives it again. Updates of
one chat are handled in order. From :meth:`WebhookReceiver.stop` (the platform's
``stop_input``) every update is answered 503 and left for Telegram to give again (to the next
gateway); the updates being handled are finished before the server closes. So is every update
that reaches a host that cannot act now (several hosts: it lost its host lease or the ledger,
``fenced``): Telegram gives it again, and the load balancer to a host that can. No access
log is written: a URL is nobody's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import socket
import weakref
from collections.abc import Callable
from urllib.parse import urlsplit

from aiohttp import web
from telegram import Bot, Update
from telegram.error import TelegramError

from platforms.telegram.config import TelegramConfig
from platforms.telegram.receive import ALLOWED_UPDATES
from platforms.telegram.taking import Attempts, take_one
from platforms.telegram.updates import UpdateHandler, chat_of

__all__ = ["SECRET_HEADER", "WebhookReceiver"]

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_UPDATE_BYTES = 1024 * 1024


class WebhookReceiver:
    def __init__(
        self,
        config: TelegramConfig,
        bot: Bot,
        handler: UpdateHandler,
        *,
        sock: socket.socket | None = None,
        fenced: Callable[[], bool] = lambda: False,
    ) -> None:
        if config.webhook_url is None or config.secret_token is None:
            raise ValueError("webhook mode needs webhook_url and secret_token")
        self._config = config
        self._url = config.webhook_url
        self._secret = config.secret_token.get_secret_value().encode()
        self._bot = bot
        self._handler = handler
        self._sock = sock
        self._fenced = fenced
        self._attempts = Attempts()
        self._stopped = asyncio.Event()
        self._chats: weakref.WeakValueDictionary[int | None, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def stop(self) -> None:
        """Take no more updates; :meth:`run` returns once the updates being handled are
        done (the server waits for them as it closes)."""
        self._stopped.set()

    async def run(self) -> None:
        """Serve until stopped or cancelled (an owned task of the platform)."""
        app = web.Application(client_max_size=MAX_UPDATE_BYTES)
        app.router.add_post(urlsplit(self._url).path or "/", self._post)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site: web.BaseSite
            if self._sock is not None:
                site = web.SockSite(runner, self._sock)
            else:
                site = web.TCPSite(runner, self._config.webhook_listen, self._config.webhook_port)
            await site.start()
            await self._register()
            await self._stopped.wait()
        finally:
            await runner.cleanup()

    async def _register(self) -> None:
        backoff = 0.25
        while not self._stopped.is_set():
            try:
                await self._bot.set_webhook(
                    self._url,
                    secret_token=self._secret.decode(),
                    allowed_updates=ALLOWED_UPDATES,
                    drop_pending_updates=False,
                )
                return
            except TelegramError as exc:
                log.warning("setWebhook failed: %s", exc)
                with contextlib.suppress(TimeoutError):  # backing off from a failing server
                    async with asyncio.timeout(backoff):
                        await self._stopped.wait()
                backoff = min(backoff * 2, 30.0)

    async def _post(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            return web.Response(status=403, text="forbidden")
        if self._stopped.is_set():
            return _stopping()
        if self._fenced():
            return _cannot_act()
        try:
            data = await request.json()
            update = Update.de_json(data, self._bot)
        except (ValueError, TypeError, KeyError):
            return web.Response(status=400, text="not an update")
        chat = chat_of(update)
        lock = self._chats.get(chat)
        if lock is None:
            lock = self._chats[chat] = asyncio.Lock()
        async with lock:
            if self._stopped.is_set():  # it waited for its chat while the gateway stopped
                return _stopping()
            if self._fenced():
                return _cannot_act()
            taken = await take_one(self._handler, update, self._attempts)
        if not taken:
            return web.Response(status=500, text="not handled; give it again")
        return web.Response(text="ok")


def _stopping() -> web.Response:
    return web.Response(status=503, text="the gateway is stopping; give it again")


def _cannot_act() -> web.Response:
    return web.Response(status=503, text="this host cannot reach the ledger now; give it again")
