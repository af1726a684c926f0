"""Telegram's limits and errors for the shared paced outbox (platforms/outbox.py).

Telegram answers a bot that writes too fast with HTTP 429 and ``retry_after``; the limits
(TESTING.md) are one message or edit a second per chat, 20 a minute per group and 30 a
second per bot. python-telegram-bot's ``AIORateLimiter`` paces groups and the bot, but not
a private chat's one a second, and it knows nothing of priorities: the shared
:class:`~platforms.outbox.Outbox` does both, one lane per chat id, with Telegram's limits
as :class:`Pace` and Telegram's errors sorted by :func:`classify`:

- ``RetryAfter`` (a 429): the lane waits ``retry_after`` and the call is tried again;
- a network failure (``NetworkError`` but not ``BadRequest``): Telegram is unreachable, which
  the platform is told (its health probe then waits for Telegram to answer again);
- "message to edit not found" (deleted) and "message can't be edited": the message is gone
  (:class:`~platforms.outbox.MessageGone`, a refusal for good the core does not ask again);
- any other ``TelegramError``: Telegram refused the call (:func:`translate`).
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from gateway.errors import PlatformError
from gateway.platform import PlatformUnreachable, RateLimited
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
    "CHAT_ACTION",
    "MESSAGE_GONE",
    "Pace",
    "TelegramMessageGone",
    "TelegramOutbox",
    "classify",
    "is_group_chat",
    "is_network_failure",
    "retry_seconds",
    "translate",
]


CHAT_ACTION = "sendChatAction"  # "typing…": shown in the chat, but no message of it
NOT_MESSAGES = frozenset({CHAT_ACTION})


@dataclass(frozen=True, kw_only=True, slots=True)
class Pace:
    """Telegram's limits, as Telegram states them."""

    per_chat_seconds: float = 1.0
    group_per_minute: int = 20
    bot_per_second: int = 30
    margin_seconds: float = 0.05  # added to every interval
    bot_headroom: int = 2  # calls of the bot's second left unused (answers to clicks)

    def pacing(self) -> Pacing[int]:
        return Pacing(
            # a chat's pace is of messages: "typing…" is no message (it still counts for the bot)
            lane=(Window(calls=1, seconds=self.per_chat_seconds, ignores=NOT_MESSAGES),),
            group=(Window(calls=self.group_per_minute, seconds=60.0, ignores=NOT_MESSAGES),),
            is_group=is_group_chat,
            shared=(Window(calls=self.bot_per_second, seconds=1.0, headroom=self.bot_headroom),),
            margin_seconds=self.margin_seconds,
        )


def is_group_chat(chat_id: int) -> bool:
    """Groups, supergroups and channels have negative ids (Bot API: Chat.id)."""
    return chat_id < 0


def retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns about the int form of retry_after
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def is_network_failure(exc: TelegramError) -> bool:
    """Telegram could not be reached (as opposed to Telegram refusing the request)."""
    return isinstance(exc, NetworkError) and not isinstance(exc, BadRequest)


# Bot API answers (400 Bad Request) that mean the message to edit is gone for good
MESSAGE_GONE = ("message to edit not found", "message can't be edited")


class TelegramMessageGone(MessageGone):
    """Telegram will never edit that message: it was deleted, or may no longer be edited."""


def translate(exc: TelegramError) -> PlatformError:
    if isinstance(exc, RetryAfter):
        error: PlatformError = RateLimited(retry_seconds(exc))
    elif isinstance(exc, BadRequest) and any(gone in exc.message.lower() for gone in MESSAGE_GONE):
        error = TelegramMessageGone(f"telegram: {exc.message}")
    elif isinstance(exc, Forbidden):
        error = PlatformError(f"telegram refused: {exc.message}")
    elif is_network_failure(exc):
        error = PlatformUnreachable(f"telegram: {exc.message}")
    else:
        error = PlatformError(f"telegram: {exc.message}")
    error.__cause__ = exc
    return error


def classify(exc: Exception) -> Verdict | None:
    """What a Bot API call's exception means to the outbox; None if it is not Telegram's."""
    if isinstance(exc, RetryAfter):
        return RetryLater(seconds=retry_seconds(exc))
    if isinstance(exc, TelegramError):
        error = translate(exc)
        return Unreachable(error=error) if is_network_failure(exc) else Refused(error=error)
    return None


class TelegramOutbox(Outbox[int]):
    """The shared outbox with a lane per chat id, Telegram's :class:`Pace` and errors."""

    def __init__(
        self,
        tasks: asyncio.TaskGroup,
        pace: Pace | None = None,
        *,
        on_network_failure: Callable[[], None] = lambda: None,
        on_success: Callable[[], None] = lambda: None,
        on_token_refused: Callable[[], None] = lambda: None,
        clock: Clock = MONOTONIC,
        budget: RateBudget = ALONE,
    ) -> None:
        self.pace = pace or Pace()

        def classified(exc: Exception) -> Verdict | None:
            if isinstance(exc, InvalidToken):  # 401: the token was revoked or changed
                on_token_refused()
            return classify(exc)

        super().__init__(
            tasks,
            self.pace.pacing(),
            classify=classified,
            name="telegram",
            on_unreachable=on_network_failure,
            on_success=on_success,
            clock=clock,
            budget=budget,
        )
