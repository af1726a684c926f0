"""Every call a chat platform makes into a conversation goes through one paced lane.

A chat platform answers a client that writes too fast with HTTP 429 and a time to wait; its
limits count calls per conversation, per kind of conversation and per app. An
:class:`Outbox` keeps a platform within them before it is refused, and sends what matters
first:

- a *lane* is a key the platform chooses (Telegram: the chat id; Slack, Discord: the
  channel id). It runs one call at a time, and starts the next only when every
  :class:`Window` that counts the call allows it. Times are taken when a call *returns*, so a
  request that was slow on its way cannot land closer to the next one than the limit; a call
  still in flight counts against the windows of every lane (``shared``);
- the next call is the most urgent queued one: cards and prompts (``CARD``), then notices
  (``TEXT``), then edits of the live turn message (``STREAM``); within a priority, in order;
- a call given with the ``key`` of a call still waiting in its lane replaces that call (the
  newest edit of a message wins, and nobody waits twice);
- what the call raises is sorted by the platform's own function (``classify``), so that no
  SDK is known here: :class:`RetryLater` holds the lane that long and the call is tried again,
  first in its lane (up to :data:`MAX_ATTEMPTS`, then :class:`~gateway.platform.RateLimited`);
  :class:`Unreachable` and :class:`Refused` fail the call with the PlatformError they carry,
  and the first also tells the platform (``on_unreachable``); anything else (an answer the
  SDK could not read, a bug) is logged and fails the call as PlatformError. All are chained.
  A refusal that means the message to edit is gone (deleted, or one the platform will no
  longer edit) carries :class:`~gateway.platform.MessageGone` (re-exported here), whatever
  the platform calls it (Slack's ``message_not_found``, Telegram's "message to edit not
  found", Discord's 10008): the core fails that card copy and does not ask again, and
  posts a turn's text anew.

A lane holds at most :data:`MAX_QUEUED` calls; one more is refused with PlatformError.

The rules are data (:class:`Pacing`): windows of N calls in any T seconds, counted for each
lane (``lane``), for each lane that ``is_group`` says is a group (``group``, on top), or for
all lanes together (``shared``); a window may count only the calls of some methods, and may
leave ``headroom`` calls to what does not go through the outbox (answers to clicks). Each
platform's limits, as this data:

- Telegram (Bot API FAQ; TESTING.md): 1 message or edit a second per chat, 20 a minute per
  group (negative chat ids), 30 a second per bot::

      Pacing(lane=(Window(calls=1, seconds=1),), group=(Window(calls=20, seconds=60),),
             is_group=lambda chat_id: chat_id < 0,
             shared=(Window(calls=30, seconds=1, headroom=2),))

- Slack (api.slack.com/apis/rate-limits): ``chat.postMessage`` about 1 a second per channel;
  ``chat.update`` is Tier 3, 50 a minute per workspace for all channels together (lanes are
  channel ids; calls give their method)::

      Pacing(lane=(Window(calls=1, seconds=1),),
             shared=(Window(calls=50, seconds=60, methods=frozenset({"chat.update"})),))

- Discord (discord.com/developers/docs/topics/rate-limits): 5 messages or edits per 5 s per
  channel, 50 requests a second for the bot::

      Pacing(lane=(Window(calls=5, seconds=5),), shared=(Window(calls=50, seconds=1),))
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, Protocol, TypeVar, cast

from gateway.errors import PlatformError
from gateway.platform import MessageGone, RateLimited
from gateway.rate_budget import ALONE, Bucket, RateBudget, Ticket

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_QUEUED",
    "MONOTONIC",
    "Classify",
    "Clock",
    "MessageGone",
    "Outbox",
    "Pacing",
    "Priority",
    "Refused",
    "RetryLater",
    "Unreachable",
    "Verdict",
    "Window",
]

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

MAX_ATTEMPTS = 8
MAX_QUEUED = 500


class Priority(IntEnum):
    CARD = 0
    TEXT = 1
    STREAM = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """At most ``calls`` calls in any ``seconds``, ``headroom`` of them left unused; only the
    calls of ``methods`` count (None: every call), never those of ``ignores``."""

    calls: int
    seconds: float
    headroom: int = 0
    methods: frozenset[str] | None = None
    ignores: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.calls - self.headroom < 1 or self.seconds <= 0:
            raise ValueError(f"a window must let one call through: {self}")

    @property
    def budget(self) -> int:
        return self.calls - self.headroom

    def counts(self, method: str) -> bool:
        return (self.methods is None or method in self.methods) and method not in self.ignores


def _no_groups(lane: Any) -> bool:
    return False


@dataclass(frozen=True, kw_only=True)  # no slots: Pacing[str](...) sets __orig_class__
class Pacing(Generic[K]):
    """A platform's limits (see the module docstring for Telegram's, Slack's, Discord's)."""

    lane: tuple[Window, ...] = ()  # each lane on its own
    group: tuple[Window, ...] = ()  # each lane that is_group names, on top of ``lane``
    is_group: Callable[[K], bool] = _no_groups
    shared: tuple[Window, ...] = ()  # all lanes together (the bot, the app, the workspace)
    margin_seconds: float = 0.05  # added to every window


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryLater:
    """The platform said: too many calls, try again in ``seconds`` (a 429)."""

    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Unreachable:
    """The platform could not be reached (the network); ``error`` fails the call."""

    error: PlatformError


@dataclass(frozen=True, kw_only=True, slots=True)
class Refused:
    """The platform answered and refused the call; ``error`` fails it."""

    error: PlatformError


Verdict = RetryLater | Unreachable | Refused
# what an exception of the call means; None: not the platform's (logged as unexpected)
Classify = Callable[[Exception], Verdict | None]


class Clock(Protocol):
    """Monotonic seconds, and waiting for them (tests give a clock of their own)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class _Monotonic:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)  # the platform's own limit, not a wait for state


MONOTONIC: Clock = _Monotonic()


@dataclass(eq=False, slots=True)
class _Log:
    """When the calls one window counts returned, and how many of them are in flight."""

    window: Window
    times: deque[float] = field(default_factory=deque)
    in_flight: int = 0

    def prune(self, now: float, margin: float) -> bool:
        """Forget the calls out of the window; whether none is left."""
        span = self.window.seconds + margin
        while self.times and self.times[0] <= now - span:
            self.times.popleft()
        return not self.times and not self.in_flight

    def ready_at(self, now: float, margin: float) -> float | None:
        """When one more call may start; None while only a call in flight can free it."""
        self.prune(now, margin)
        # the calls that must leave the window first, less one: index of the last of them
        over = len(self.times) + self.in_flight - self.window.budget
        if over < 0:
            return now
        if over >= len(self.times):
            return None
        return self.times[over] + self.window.seconds + margin


@dataclass(eq=False, slots=True)
class _LanePace:
    """A lane's windows and 429 hold; kept while the lane is quiet, until they are empty."""

    logs: tuple[_Log, ...]
    retry_until: float = 0.0


@dataclass(eq=False, kw_only=True)
class _Job:
    priority: Priority
    seq: int
    call: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    key: Hashable | None
    method: str
    attempts: int = 0


@dataclass(eq=False)
class _Lane:
    jobs: list[_Job] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    # set when a call is queued: a lane waiting for a later call's window looks again (the
    # new call may go now)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def best(self) -> _Job:
        return min(self.jobs, key=lambda j: (j.priority, j.seq))

    def waiting(self, key: Hashable) -> _Job | None:
        return next((job for job in self.jobs if job.key == key), None)


class Outbox(Generic[K]):
    """Paced lanes of calls for one platform (``name`` is said in its errors and logs)."""

    def __init__(
        self,
        tasks: asyncio.TaskGroup,
        pacing: Pacing[K],
        *,
        classify: Classify,
        name: str,
        on_unreachable: Callable[[], None] = lambda: None,
        on_success: Callable[[], None] = lambda: None,
        clock: Clock = MONOTONIC,
        budget: RateBudget = ALONE,
    ) -> None:
        self._tasks = tasks
        self._budget = budget
        self.pacing = pacing
        self._classify = classify
        self._name = name
        self._on_unreachable = on_unreachable
        self._on_success = on_success
        self._clock = clock
        self._lanes: dict[K, _Lane] = {}
        self._paces: dict[K, _LanePace] = {}
        self._shared = tuple(_Log(window) for window in pacing.shared)
        self._returned = asyncio.Event()  # set (and replaced) each time a call returns
        self._seq = itertools.count()
        self._closed = False
        self.rate_limited = 0  # 429s seen (there should be none)

    async def run(
        self,
        lane_key: K,
        priority: Priority,
        call: Callable[[], Awaitable[T]],
        *,
        key: Hashable | None = None,
        method: str = "",
    ) -> T:
        """Make ``call`` in the lane ``lane_key``; its result, or PlatformError. ``key``
        names what the call changes (a waiting call of the same key is replaced);
        ``method`` is what windows with ``methods`` count."""
        if self._closed:
            raise PlatformError(f"{self._name} platform is closed")
        lane = self._lanes.get(lane_key)
        if lane is None:
            self._forget_quiet_lanes()
            lane = self._lanes[lane_key] = _Lane()
            lane.task = self._tasks.create_task(self._drain(lane_key, lane))
        job = lane.waiting(key) if key is not None else None
        if job is not None:
            job.call = call  # the newest edit of a message replaces the one still waiting
            job.method = method
            job.priority = min(job.priority, priority)
        else:
            if len(lane.jobs) >= MAX_QUEUED:
                raise PlatformError(f"{self._name} outbox of {lane_key} is full")
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            job = _Job(
                priority=priority,
                seq=next(self._seq),
                call=call,
                future=future,
                key=key,
                method=method,
            )
            lane.jobs.append(job)
        lane.arrived.set()
        # shielded: a caller that gives up must not cancel a call others wait for
        return cast(T, await asyncio.shield(job.future))

    def close(self) -> None:
        """Refuse new calls, fail the waiting ones and end the lanes."""
        self._closed = True
        for lane in self._lanes.values():
            for job in lane.jobs:
                self._fail_closed(job)
            lane.jobs.clear()
            if lane.task is not None:
                lane.task.cancel()

    def _fail_closed(self, job: _Job) -> None:
        if not job.future.done():
            job.future.set_exception(PlatformError(f"{self._name} platform is closed"))

    def _pace_of(self, lane_key: K) -> _LanePace:
        pace = self._paces.get(lane_key)
        if pace is None:
            pacing = self.pacing
            windows = pacing.lane + (pacing.group if pacing.is_group(lane_key) else ())
            pace = self._paces[lane_key] = _LanePace(logs=tuple(_Log(w) for w in windows))
        return pace

    def _forget_quiet_lanes(self) -> None:
        """The pace of a lane whose windows are empty is no longer needed (bounded memory)."""
        now, margin = self._clock.now(), self.pacing.margin_seconds
        quiet = [
            lane_key
            for lane_key, pace in self._paces.items()
            if lane_key not in self._lanes
            and pace.retry_until <= now
            and all([log.prune(now, margin) for log in pace.logs])
        ]
        for lane_key in quiet:
            del self._paces[lane_key]

    # --- the lane -------------------------------------------------------------------------

    async def _drain(self, lane_key: K, lane: _Lane) -> None:
        try:
            while lane.jobs:
                # chosen again after every wait: a card that came meanwhile goes first; the
                # most urgent call that may go now goes (one waiting for a window that counts
                # only its method, Slack's chat.update budget, holds back no other call)
                now = self._clock.now()
                lane.arrived.clear()
                job, at = self._next(lane_key, lane, now)
                if job is not None:
                    # the bot's budget other hosts spend too (ALONE: taken at once)
                    buckets = self._buckets(lane_key, job)
                    taken = await self._budget.take(buckets, f"hold:{lane_key}")
                    if not isinstance(taken, Ticket):
                        # not woken by a new call: each look costs the budget a trip, and
                        # the most urgent call is chosen again after the wait
                        await self._clock.sleep(taken)
                        continue
                    if job in lane.jobs:
                        lane.jobs.remove(job)
                        await self._attempt(lane_key, lane, job, taken)
                    else:  # failed meanwhile (closed): nothing went
                        self._budget.returned(taken)
                elif at is None:
                    await self._until_either(self._returned.wait(), lane)
                else:
                    await self._until_either(self._clock.sleep(at - now), lane)
        finally:
            if self._lanes.get(lane_key) is lane:
                del self._lanes[lane_key]
            for job in lane.jobs:  # only when cancelled
                self._fail_closed(job)

    async def _until_either(self, waiting: Awaitable[Any], lane: _Lane) -> None:
        """Wait for ``waiting`` (a window's time, a call's return) or a new call in the
        lane, whichever comes first."""
        if lane.arrived.is_set():
            close = getattr(waiting, "close", None)
            if close is not None:
                close()  # a coroutine never awaited
            return
        first = asyncio.ensure_future(waiting)
        arrival = asyncio.ensure_future(lane.arrived.wait())
        try:
            await asyncio.wait({first, arrival}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (first, arrival):
                task.cancel()
            await asyncio.wait({first, arrival})

    def _next(self, lane_key: K, lane: _Lane, now: float) -> tuple[_Job | None, float | None]:
        """The most urgent call that may start now, else (None, when the first may; None
        while only a call in flight can make room). Where every window counts every
        method (Telegram), that is the most urgent call or nothing, in order."""
        soonest: float | None = None
        for job in sorted(lane.jobs, key=lambda j: (j.priority, j.seq)):
            at = self._ready_at(lane_key, job, now)
            if at is None:
                continue
            if at <= now:
                return job, None
            soonest = at if soonest is None else min(soonest, at)
        return None, soonest

    def _counting(self, lane_key: K, job: _Job) -> list[_Log]:
        logs = (*self._pace_of(lane_key).logs, *self._shared)
        return [log for log in logs if log.window.counts(job.method)]

    def _ready_at(self, lane_key: K, job: _Job, now: float) -> float | None:
        """When ``job`` may start; None while only a call in flight can make room."""
        at = self._pace_of(lane_key).retry_until
        for log in self._counting(lane_key, job):
            ready = log.ready_at(now, self.pacing.margin_seconds)
            if ready is None:
                return None
            at = max(at, ready)
        return at

    def _buckets(self, lane_key: K, job: _Job) -> list[Bucket]:
        """The windows that count ``job``, as the shared budget's buckets (a window's key
        is its place in the pacing: the same on every host of one version)."""
        pacing, margin = self.pacing, self.pacing.margin_seconds
        scopes = [("lane", pacing.lane), ("shared", pacing.shared)]
        if pacing.is_group(lane_key):
            scopes.insert(1, ("group", pacing.group))
        return [
            Bucket(
                key=f"{scope}:{i}" if scope == "shared" else f"{scope}:{lane_key}:{i}",
                calls=window.budget,
                seconds=window.seconds + margin,
            )
            for scope, windows in scopes
            for i, window in enumerate(windows)
            if window.counts(job.method)
        ]

    async def _attempt(self, lane_key: K, lane: _Lane, job: _Job, ticket: Ticket) -> None:
        logs = self._counting(lane_key, job)
        for log in logs:  # counted from now on: no other lane takes its place meanwhile
            log.in_flight += 1
        retry_after: float | None = None
        try:
            result = await job.call()
        except asyncio.CancelledError:
            self._fail_closed(job)
            raise
        except Exception as exc:
            retry_after = self._failed(lane_key, lane, job, exc)
        else:
            self._on_success()
            if not job.future.done():
                job.future.set_result(result)
        finally:
            self._budget.returned(ticket, retry_after=retry_after)
            now = self._clock.now()
            for log in logs:
                log.in_flight -= 1
                log.times.append(now)
            self._returned.set()
            self._returned = asyncio.Event()

    def _failed(self, lane_key: K, lane: _Lane, job: _Job, exc: Exception) -> float | None:
        """Retry or fail ``job``; a 429's retry-after, else None."""
        verdict = self._classify(exc)
        error: PlatformError
        match verdict:
            case RetryLater(seconds=seconds):
                self.rate_limited += 1
                log.warning("%s 429 in %s: retry after %g s", self._name, lane_key, seconds)
                pace = self._pace_of(lane_key)
                pace.retry_until = self._clock.now() + seconds + self.pacing.margin_seconds
                job.attempts += 1
                if job.attempts < MAX_ATTEMPTS:
                    job.seq = -1 - job.attempts  # first in its priority once the lane may go on
                    lane.jobs.append(job)
                    return seconds
                error = RateLimited(seconds)
            case Unreachable(error=error):
                self._on_unreachable()
            case Refused(error=error):
                pass
            case None:
                log.error("%s call in %s failed unexpectedly", self._name, lane_key, exc_info=exc)
                error = PlatformError(f"{self._name}: unexpected {type(exc).__name__}: {exc}")
        if error.__cause__ is None:
            error.__cause__ = exc
        if not job.future.done():
            job.future.set_exception(error)
        return verdict.seconds if isinstance(verdict, RetryLater) else None
