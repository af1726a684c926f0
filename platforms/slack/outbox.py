"""Slack's limits and errors for the shared paced outbox (platforms/outbox.py).

Slack (docs.slack.dev/apis/web-api/rate-limits) allows ``chat.postMessage`` about one a
second per channel, and ``chat.update`` is Tier 3: about 50 a minute per method for the
workspace, for every conversation together. A write past them is answered HTTP 429 with
``Retry-After``. One lane per channel id (a thread is its channel's), one budget of
``chat.update`` for them all; cards before notices before stream edits, a waiting edit of a
message replaced by the newer one (the shared outbox does both).

What a failed call means (:func:`classify`):

- 429: wait ``Retry-After`` and try again, first in its lane (``RetryLater``);
- the network (aiohttp's errors, a timeout): Slack is unreachable (``Unreachable``), the
  platform probes until it answers and then tells the gateway;
- a refusal that can never succeed (:data:`PERMANENT`: a revoked token, an uninstalled app,
  a message that may no longer be edited, an archived or deleted channel): refused at once,
  never retried (:class:`PermanentRefusal`), said in the log once per channel and error,
  with what to do (the broker marks the card copy failed; the platform asks no more edits
  of a message Slack refused to edit);
- any other error Slack answers: refused (``Refused``).

slack-sdk's own retry of 429s (``AsyncRateLimitErrorRetryHandler``) is not installed: it
sleeps inside the call, holding every other call of its lane without the priorities.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from gateway.errors import PlatformError
from gateway.platform import PlatformUnreachable, RefusedForGood
from gateway.rate_budget import ALONE, RateBudget
from platforms.outbox import (
    MONOTONIC,
    Clock,
    MessageGone,
    Outbox,
    Pacing,
    Priority,
    Refused,
    RetryLater,
    Unreachable,
    Verdict,
    Window,
)

__all__ = [
    "MESSAGE_GONE",
    "PERMANENT",
    "PermanentRefusal",
    "SlackMessageGone",
    "SlackOutbox",
    "classify",
    "error_of",
    "permanent_refusal",
    "refused_for_good",
    "slack_pacing",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Slack's answers that no retry will change
PERMANENT = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "app_uninstalled",
        "team_access_not_granted",
        "cant_update_message",
        "is_archived",
        "channel_not_found",
        "not_in_channel",
        "message_not_found",
    }
)


_SAID_MAX = 4096
_WHAT_TO_DO = {
    "invalid_auth": "check platforms.slack.bot_token",
    "not_authed": "check platforms.slack.bot_token",
    "token_revoked": "the bot token was revoked: install the app again, put the new token in",
    "token_expired": "the bot token expired: put a new one in platforms.slack.bot_token",
    "account_inactive": "the app's account is deactivated",
    "app_uninstalled": "the app was uninstalled: install it again",
    "team_access_not_granted": "the app has no access to this workspace",
    "is_archived": "the channel is archived",
    "channel_not_found": "the channel is gone, or the app cannot see it",
    "not_in_channel": "invite the app to the channel",
    "cant_update_message": "the message can no longer be edited: the card copy is failed",
    "message_not_found": "the message was deleted: the card copy is failed",
}


class PermanentRefusal(RefusedForGood):
    """Slack refused a call for good (``error``, one of :data:`PERMANENT`)."""

    def __init__(self, error: str) -> None:
        super().__init__(f"slack refused for good: {error}")
        self.error = error


class SlackMessageGone(PermanentRefusal, MessageGone):
    """The message to edit is gone for Slack (one of :data:`MESSAGE_GONE`)."""


MESSAGE_GONE = frozenset({"cant_update_message", "message_not_found"})


def permanent_refusal(error: str) -> PermanentRefusal:
    """Slack's refusal for good, a :class:`~platforms.outbox.MessageGone` when the message
    to edit is gone."""
    return SlackMessageGone(error) if error in MESSAGE_GONE else PermanentRefusal(error)


def slack_pacing(*, per_channel_seconds: float = 1.0, updates_per_minute: int = 50) -> Pacing[str]:
    return Pacing(
        # the channel's pace counts posts only: chat.update has no per-channel limit (bench
        # slack: a card waited for the edit of the one before it, 2 s a card instead of 1)
        lane=(
            Window(calls=1, seconds=per_channel_seconds, methods=frozenset({"chat.postMessage"})),
        ),
        shared=(
            Window(calls=updates_per_minute, seconds=60.0, methods=frozenset({"chat.update"})),
        ),
    )


def error_of(exc: SlackApiError) -> str:
    response = exc.response
    try:
        return str(response.get("error") or "")
    except Exception:  # an answer that is not JSON
        return ""


def _retry_after(exc: SlackApiError) -> float:
    headers = exc.response.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except ValueError:
        return 1.0


def classify(exc: Exception) -> Verdict | None:
    """What a Web API call's exception means to the outbox; None if it is not Slack's."""
    if isinstance(exc, SlackApiError):
        if exc.response.status_code == 429:
            return RetryLater(seconds=_retry_after(exc))
        error = error_of(exc) or f"HTTP {exc.response.status_code}"
        if error in PERMANENT:
            return Refused(error=permanent_refusal(error))  # said in the log by the outbox
        return Refused(error=PlatformError(f"slack refused: {error}"))
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | ConnectionError):
        return Unreachable(error=PlatformUnreachable(f"slack: {type(exc).__name__}"))
    if isinstance(exc, SlackClientError):
        return Refused(error=PlatformError(f"slack: {exc}"))
    return None


class SlackOutbox(Outbox[str]):
    """The shared outbox with a lane per channel id and Slack's limits and errors."""

    def __init__(
        self,
        tasks: asyncio.TaskGroup,
        pacing: Pacing[str] | None = None,
        *,
        on_unreachable: Callable[[], None] = lambda: None,
        on_success: Callable[[], None] = lambda: None,
        on_refused_for_good: Callable[[str], None] = lambda text: None,
        clock: Clock = MONOTONIC,
        budget: RateBudget = ALONE,
    ) -> None:
        super().__init__(
            tasks,
            pacing or slack_pacing(),
            classify=classify,
            name="slack",
            on_unreachable=on_unreachable,
            on_success=on_success,
            clock=clock,
            budget=budget,
        )
        self._said: set[tuple[str, str]] = set()  # (channel, error) already in the log
        self._on_refused_for_good = on_refused_for_good  # the same words, for the console

    async def run(
        self,
        lane_key: str,
        priority: Priority,
        call: Callable[[], Awaitable[T]],
        *,
        key: Hashable | None = None,
        method: str = "",
    ) -> T:
        """The shared outbox's ``run``; a refusal for good is said in the log once per
        channel and error (a revoked token is said in each channel it silences: which ones
        the person has to look at), and the same words go to ``on_refused_for_good`` (the
        console shows them); never retried."""
        try:
            return await super().run(lane_key, priority, call, key=key, method=method)
        except PermanentRefusal as exc:
            channel = lane_key.split("/", 1)[0]
            if (channel, exc.error) not in self._said:
                if len(self._said) >= _SAID_MAX:
                    self._said.clear()
                self._said.add((channel, exc.error))
                said = refused_for_good(method, channel, exc.error)
                log.error("%s", said)
                self._on_refused_for_good(said)
            raise


def refused_for_good(method: str, channel: str, error: str) -> str:
    """The one sentence of a refusal for good, for the log and the console."""
    what_to_do = _WHAT_TO_DO.get(error, "what it was for is marked failed")
    return (
        f"Slack refused {method or 'a call'} in channel {channel} for good ({error}): "
        f"not retried; {what_to_do}."
    )
