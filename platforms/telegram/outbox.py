"""Every Bot API call that writes to a chat goes through one paced lane per chat.

Telegram answers a bot that writes too fast with HTTP 429 and ``retry_after``; the limits
(TESTING.md) are one message or edit a second per chat, 20 a minute per group and 30 a
second per bot. python-telegram-bot's ``AIORateLimiter`` paces groups and the bot, but not
a private chat's one a second, and it knows nothing of priorities. So each chat gets a lane:

- a lane runs one call at a time, and starts the next only when the chat, its group window
  and the bot's window allow it. Times are taken when a call *returns*, so a request that
  was slow on its way cannot land closer to the next one than the limit;
- the next call is the most urgent queued one: cards and prompts (``CARD``), then notices
  (``TEXT``), then edits of the live turn message (``STREAM``); within a priority, in order;
- an edit of a message that waits in the lane replaces the waiting one (``key``): the newest
  text wins and nobody waits twice;
- a 429 holds the lane for ``retry_after`` and the call is tried again, first in the lane
  (up to :data:`MAX_ATTEMPTS`, then :class:`~gateway.platform.RateLimited` is raised);
- other Bot API errors become :class:`~gateway.errors.PlatformError` (chained); a network
  failure also tells the platform that Telegram is unreachable.

A lane holds at most :data:`MAX_QUEUED` calls; one more is refused with PlatformError.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import itertools
import logging
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar, cast

from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError

from gateway.errors import PlatformError
from gateway.platform import RateLimited

__all__ = ["MAX_ATTEMPTS", "MAX_QUEUED", "Outbox", "Pace", "Priority", "retry_seconds", "translate"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_ATTEMPTS = 8
MAX_QUEUED = 500


class Priority(IntEnum):
    CARD = 0
    TEXT = 1
    STREAM = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Pace:
    per_chat_seconds: float = 1.0
    group_per_minute: int = 20
    bot_per_second: int = 30
    margin_seconds: float = 0.05  # added to every interval
    bot_headroom: int = 2  # calls of the bot's second left unused (answers to clicks)


def retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns about the int form of retry_after
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def is_network_failure(exc: TelegramError) -> bool:
    """Telegram could not be reached (as opposed to Telegram refusing the request)."""
    return isinstance(exc, NetworkError) and not isinstance(exc, BadRequest)


def translate(exc: TelegramError) -> PlatformError:
    if isinstance(exc, RetryAfter):
        error: PlatformError = RateLimited(retry_seconds(exc))
    elif isinstance(exc, Forbidden):
        error = PlatformError(f"telegram refused: {exc.message}")
    else:
        error = PlatformError(f"telegram: {exc.message}")
    error.__cause__ = exc
    return error


@dataclass(eq=False, kw_only=True)
class _Job:
    priority: Priority
    seq: int
    call: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    key: Hashable | None
    attempts: int = 0


@dataclass(eq=False)
class _Lane:
    jobs: list[_Job] = field(default_factory=list)
    retry_until: float = 0.0
    task: asyncio.Task[None] | None = None

    def best(self) -> _Job:
        job = min(self.jobs, key=lambda j: (j.priority, j.seq))
        self.jobs.remove(job)
        return job

    def waiting(self, key: Hashable) -> _Job | None:
        return next((job for job in self.jobs if job.key == key), None)


class Outbox:
    def __init__(
        self,
        tasks: asyncio.TaskGroup,
        pace: Pace | None = None,
        *,
        on_network_failure: Callable[[], None] = lambda: None,
        on_success: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tasks = tasks
        self.pace = pace or Pace()
        self._on_network_failure = on_network_failure
        self._on_success = on_success
        self._clock = clock
        self._lanes: dict[int, _Lane] = {}
        self._chat_times: dict[int, deque[float]] = {}
        self._bot_times: deque[float] = deque()
        self._in_flight = 0
        self._seq = itertools.count()
        self._closed = False
        self.rate_limited = 0  # 429s seen (there should be none)

    async def run(
        self,
        chat_id: int,
        priority: Priority,
        call: Callable[[], Awaitable[T]],
        *,
        key: Hashable | None = None,
    ) -> T:
        """Make ``call`` in ``chat_id``'s lane; its result, or PlatformError."""
        if self._closed:
            raise PlatformError("telegram platform is closed")
        lane = self._lanes.get(chat_id)
        if lane is None:
            self._forget_quiet_chats()
            lane = self._lanes[chat_id] = _Lane()
            lane.task = self._tasks.create_task(self._drain(chat_id, lane))
        job = lane.waiting(key) if key is not None else None
        if job is not None:
            job.call = call  # the newest edit of a message replaces the one still waiting
            job.priority = min(job.priority, priority)
        else:
            if len(lane.jobs) >= MAX_QUEUED:
                raise PlatformError(f"telegram outbox of chat {chat_id} is full")
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            job = _Job(priority=priority, seq=next(self._seq), call=call, future=future, key=key)
            lane.jobs.append(job)
        # shielded: a caller that gives up must not cancel a call others wait for
        return cast(T, await asyncio.shield(job.future))

    def close(self) -> None:
        """Refuse new calls, fail the waiting ones and end the lanes."""
        self._closed = True
        for lane in self._lanes.values():
            for job in lane.jobs:
                if not job.future.done():
                    job.future.set_exception(PlatformError("telegram platform is closed"))
            lane.jobs.clear()
            if lane.task is not None:
                lane.task.cancel()

    def _forget_quiet_chats(self) -> None:
        """Pacing state of chats quiet for a minute is no longer needed (bounded memory)."""
        horizon = self._clock() - 60 - self.pace.margin_seconds
        for chat_id in [c for c, t in self._chat_times.items() if not t or t[-1] <= horizon]:
            if chat_id not in self._lanes:
                del self._chat_times[chat_id]

    # --- the lane -------------------------------------------------------------------------

    async def _drain(self, chat_id: int, lane: _Lane) -> None:
        try:
            while lane.jobs:
                await self._chat_turn(chat_id, lane)
                await self._bot_turn()
                if not lane.jobs:
                    break
                job = lane.best()  # chosen after the wait: a card that came meanwhile goes first
                await self._attempt(chat_id, lane, job)
        finally:
            if self._lanes.get(chat_id) is lane:
                del self._lanes[chat_id]
            for job in lane.jobs:  # only when cancelled
                if not job.future.done():
                    job.future.set_exception(PlatformError("telegram platform is closed"))

    async def _attempt(self, chat_id: int, lane: _Lane, job: _Job) -> None:
        self._in_flight += 1
        try:
            result = await job.call()
        except RetryAfter as exc:
            seconds = retry_seconds(exc)
            self.rate_limited += 1
            log.warning("telegram 429 in chat %s: retry after %g s", chat_id, seconds)
            lane.retry_until = self._clock() + seconds + self.pace.margin_seconds
            job.attempts += 1
            if job.attempts >= MAX_ATTEMPTS:
                job.future.set_exception(translate(exc))
            else:
                job.seq = -1 - job.attempts  # first in its priority once the lane may go on
                lane.jobs.append(job)
        except TelegramError as exc:
            if is_network_failure(exc):
                self._on_network_failure()
            job.future.set_exception(translate(exc))
        except Exception as exc:  # an answer the SDK could not read, or a bug: still ours
            log.exception("telegram call in chat %s failed unexpectedly", chat_id)
            error = PlatformError(f"telegram: unexpected {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            job.future.set_exception(error)
        else:
            self._on_success()
            if not job.future.done():
                job.future.set_result(result)
        finally:
            self._in_flight -= 1
            now = self._clock()
            self._chat_times.setdefault(chat_id, deque()).append(now)
            self._bot_times.append(now)

    # --- pacing ---------------------------------------------------------------------------

    async def _chat_turn(self, chat_id: int, lane: _Lane) -> None:
        pace = self.pace
        while True:
            now = self._clock()
            times = self._chat_times.get(chat_id)
            if times is not None:
                while times and times[0] <= now - 60 - pace.margin_seconds:
                    times.popleft()
                if not times:
                    del self._chat_times[chat_id]
            at = lane.retry_until
            if times:
                at = max(at, times[-1] + pace.per_chat_seconds + pace.margin_seconds)
                if chat_id < 0 and len(times) >= pace.group_per_minute:
                    at = max(at, times[-pace.group_per_minute] + 60 + pace.margin_seconds)
            if at <= now:
                return
            await asyncio.sleep(at - now)  # the platform's own limit, not a wait for state

    async def _bot_turn(self) -> None:
        pace = self.pace
        budget = pace.bot_per_second - pace.bot_headroom
        while True:
            now = self._clock()
            times = self._bot_times
            while times and times[0] <= now - 1 - pace.margin_seconds:
                times.popleft()
            if len(times) + self._in_flight < budget:
                return
            wait = times[0] + 1 + pace.margin_seconds - now if times else 0.02
            await asyncio.sleep(max(wait, 0.01))
