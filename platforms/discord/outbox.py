"""Discord's limits and errors for the shared paced outbox (platforms/outbox.py).

Discord (discord.com/developers/docs/topics/rate-limits) allows about 5 messages or edits
per 5 s per channel (a thread is a channel of its own) and 50 requests a second for the
bot. discord.py paces each route's bucket by the ``X-RateLimit-*`` headers, but its buckets
are FIFO: a stream of edits would hold a card behind it. So a lane per channel goes in
front of them: cards, then notices, then stream edits, a waiting edit of a message replaced
by the newer one (the shared outbox does both), and discord.py rarely has to wait at all.

What a failed call means (:func:`classify`):

- :class:`discord.RateLimited` (discord.py would have waited longer than
  ``max_ratelimit_timeout``) and a 429 discord.py did not retry (one without ``Via``: not
  Discord's own answer): wait and try again, first in its lane (``RetryLater``);
- the network (aiohttp's errors, a timeout), a 5xx discord.py gave up on: Discord is
  unreachable (``Unreachable``);
- 10008 (Unknown Message: deleted, or never there): :class:`MessageGone`, a refusal for
  good the core does not ask again;
- any other answer: refused (``Refused``), with Discord's code (50083, an archived thread,
  is handled by the platform before it gets here: unarchive, then edit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import discord

from gateway.errors import PlatformError
from gateway.platform import PlatformUnreachable
from gateway.rate_budget import ALONE, RateBudget
from platforms.outbox import (
    MONOTONIC,
    Clock,
    MessageGone,
    Outbox,
    Pacing,
    Refused,
    RetryLater,
    Unreachable,
    Verdict,
    Window,
)

__all__ = [
    "ARCHIVED_THREAD",
    "UNKNOWN_MESSAGE",
    "DiscordMessageGone",
    "DiscordOutbox",
    "DiscordRefused",
    "classify",
    "discord_pacing",
]

ARCHIVED_THREAD = 50083  # "Thread is archived": unarchive before the edit
UNKNOWN_MESSAGE = 10008  # the message was deleted (or never there)
MISSING_PERMISSIONS = 50013
MISSING_ACCESS = 50001


class DiscordRefused(PlatformError):
    """Discord answered and refused a call (its HTTP status and JSON error code)."""

    def __init__(self, status: int, code: int, text: str) -> None:
        super().__init__(f"discord refused: HTTP {status}, code {code}: {text[:200]}")
        self.status, self.code = status, code


class DiscordMessageGone(DiscordRefused, MessageGone):
    """Discord's 10008 (Unknown Message) on a message the gateway sent: it was deleted."""


def discord_pacing(
    *, per_channel: int = 5, seconds: float = 5.0, per_second: int = 50
) -> Pacing[str]:
    return Pacing(
        lane=(Window(calls=per_channel, seconds=seconds),),
        shared=(Window(calls=per_second, seconds=1.0, headroom=5),),  # room for callbacks
    )


def _retry_after(exc: discord.HTTPException) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("X-RateLimit-Reset-After")
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


def classify(exc: Exception) -> Verdict | None:
    """What a discord.py call's exception means to the outbox; None if it is not Discord's."""
    if isinstance(exc, discord.RateLimited):
        return RetryLater(seconds=max(0.0, float(exc.retry_after)))
    if isinstance(exc, discord.DiscordServerError):
        return Unreachable(error=PlatformUnreachable(f"discord: HTTP {exc.status}"))
    if isinstance(exc, discord.HTTPException):
        if exc.status == 429:
            return RetryLater(seconds=_retry_after(exc))
        if exc.code == UNKNOWN_MESSAGE:
            return Refused(error=DiscordMessageGone(exc.status, exc.code, exc.text))
        return Refused(error=DiscordRefused(exc.status, exc.code, exc.text))
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | ConnectionError):
        return Unreachable(error=PlatformUnreachable(f"discord: {type(exc).__name__}"))
    if isinstance(exc, discord.GatewayNotFound):
        return Unreachable(error=PlatformUnreachable("discord: gateway not found"))
    return None


class DiscordOutbox(Outbox[str]):
    """The shared outbox with a lane per channel id (a thread's own id) and Discord's limits."""

    def __init__(
        self,
        tasks: asyncio.TaskGroup,
        pacing: Pacing[str] | None = None,
        *,
        on_unreachable: Callable[[], None] = lambda: None,
        on_success: Callable[[], None] = lambda: None,
        clock: Clock = MONOTONIC,
        budget: RateBudget = ALONE,
    ) -> None:
        super().__init__(
            tasks,
            pacing or discord_pacing(),
            classify=classify,
            name="discord",
            on_unreachable=on_unreachable,
            on_success=on_success,
            clock=clock,
            budget=budget,
        )
