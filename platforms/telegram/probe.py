"""What ``agent-gateway check`` asks Telegram before anything runs, without the SDK.

A token that looks right (``1:x`` does) is only known good once Telegram answers for it:
``getMe`` says which bot it is, or that the token is refused (401), or that Telegram cannot
be reached at the configured ``base_url``. In webhook mode ``getWebhookInfo`` adds where
Telegram now sends updates and the last delivery error it saw. One line each, in words.

The token is part of every Bot API address: it is never printed nor logged. An error from
the HTTP client is reduced to its kind and the host it concerns.

Only aiohttp (already the gateway's) is imported: ``check`` loads no SDK.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp

from platforms.telegram.config import TelegramConfig

__all__ = ["check"]

TIMEOUT = aiohttp.ClientTimeout(total=10)


class _Refused(Exception):
    """Telegram answered, and not ok."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status


async def check(settings: TelegramConfig) -> tuple[bool, list[str]]:
    """For ``agent-gateway check`` (the registry's ``probe``): OK, and the lines to print."""
    base = str(settings.base_url).rstrip("/")
    token = settings.token.get_secret_value()
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
            me = await _call(http, base, token, "getMe")
            lines = [f"telegram: the token is bot @{me.get('username')} (id {me.get('id')})"]
            if settings.mode == "webhook":
                info = await _call(http, base, token, "getWebhookInfo")
                lines += _webhook_lines(settings, info)
            return True, lines
    except _Refused as exc:
        if exc.status == 401:
            return False, [
                "telegram: Telegram refused the bot token (401 Unauthorized): copy it again "
                "from @BotFather (/token) into TELEGRAM_BOT_TOKEN (or token_file)"
            ]
        return False, [f"telegram: Telegram answered {exc.status}: {exc}"]
    except (aiohttp.ClientError, TimeoutError) as exc:
        host = urlsplit(base).hostname
        why = "no answer within 10 s" if isinstance(exc, TimeoutError) else type(exc).__name__
        return False, [
            f"telegram: cannot reach Telegram at {host} ({why}): check the network, a proxy, "
            "or base_url; `run` retries, but nothing is received meanwhile"
        ]


async def _call(http: aiohttp.ClientSession, base: str, token: str, method: str) -> Any:
    async with http.post(f"{base}/bot{token}/{method}") as response:
        try:
            body = await response.json(content_type=None)
        except ValueError:
            raise _Refused(response.status, "an answer that is not JSON") from None
    if not isinstance(body, dict) or not body.get("ok"):
        said = body.get("description", "") if isinstance(body, dict) else ""
        raise _Refused(response.status, str(said).replace(token, "<token>"))
    return body.get("result") or {}


def _webhook_lines(settings: TelegramConfig, info: dict[str, Any]) -> list[str]:
    """What Telegram says of the webhook: `run` sets it to ``webhook_url``; a last error
    says Telegram could not deliver to it (a proxy, a certificate, the address): said, not
    failed (it may be an old one, from before a fix)."""
    wanted = str(settings.webhook_url or "")
    now = str(info.get("url") or "")
    lines = []
    if not now:
        lines.append(f"telegram: no webhook set yet; `run` sets it to {wanted}")
    elif now != wanted:
        lines.append(f"telegram: the webhook is {now}; `run` sets it to {wanted}")
    else:
        lines.append(f"telegram: the webhook is {now}")
    error = info.get("last_error_message")
    if error:
        lines.append(
            f"telegram: Telegram's last delivery to the webhook failed: {error} (check the "
            "reverse proxy in front of webhook_listen and its certificate)"
        )
    return lines
