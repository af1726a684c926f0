"""What people do in Slack, taken: the work of bolt's listeners done on lanes the platform
owns, each put returning when its work ended, so that the listener acks after it
(events.py: an envelope is acked once its effect is committed to the ledger).

slack-sdk runs each Socket Mode envelope in a future nobody awaits. So a listener here reads
the payload purely (inbound.py), hands the work to :class:`Lanes` (one lane per
conversation, so one conversation's messages reach the gateway in the order they came, tasks
the platform owns and waits for when input stops, :meth:`Lanes.drain`) and awaits the
:data:`Done` future it gets back: True once the work ended, False if it failed or was
cancelled (the envelope is then not acked, and Slack gives it again).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import Any

__all__ = ["MAX_LANES", "MAX_QUEUED", "Done", "Lanes", "NotTaken"]

log = logging.getLogger(__name__)

MAX_LANES = 1024  # conversations with work queued at once
MAX_QUEUED = 256  # work items waiting in one lane

Work = Callable[[], Awaitable[None]]


class NotTaken(Exception):
    """Raised by work that declines its envelope (this host is fenced): ended as not taken,
    without a failure in the log; the envelope is not acked and Slack gives it again."""


Done = asyncio.Future[bool]  # True: the work ended; False: it failed or was cancelled


class Lanes:
    """Work in order per key, keys side by side, in tasks of the platform's task group."""

    def __init__(self, tasks: asyncio.TaskGroup) -> None:
        self._tasks = tasks
        self._lanes: dict[Hashable, deque[tuple[Work, Done]]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.closed = False

    def put(self, key: Hashable, work: Work) -> Done | None:
        """Queue ``work`` after the earlier work of ``key``; when it ended, or None if
        refused (closed, full)."""
        if self.closed:
            return None
        done: Done = asyncio.get_running_loop().create_future()
        lane = self._lanes.get(key)
        if lane is not None:
            if len(lane) >= MAX_QUEUED:
                log.warning("slack lane full: work refused")
                return None
            lane.append((work, done))
            return done
        if len(self._lanes) >= MAX_LANES:
            log.warning("slack: too many conversations busy at once: work refused")
            return None
        self._lanes[key] = deque([(work, done)])
        self._start(self._drain(key))
        return done

    def spawn(self, work: Work) -> Done | None:
        """Run ``work`` now, on no lane (a click: it must not wait behind a message); when
        it ended, or None if refused (closed)."""
        if self.closed:
            return None
        done: Done = asyncio.get_running_loop().create_future()
        self._start(self._guard(work, done))
        return done

    def _start(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = self._tasks.create_task(coroutine)
        self._running.add(task)
        self._idle.clear()
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not self._running:
            self._idle.set()

    async def _drain(self, key: Hashable) -> None:
        lane = self._lanes[key]
        try:
            while lane:
                work, done = lane[0]
                await self._guard(work, done)
                lane.popleft()
        finally:
            del self._lanes[key]
            for _, done in lane:  # cancelled: what waited behind is not taken
                _settle(done, False)

    @staticmethod
    async def _guard(work: Work, done: Done) -> None:
        try:
            await work()
            _settle(done, True)
        except NotTaken as declined:
            log.info("slack: an event left for another host (%s)", declined)
            _settle(done, False)
        except Exception:  # one person's failure must not end the platform
            log.exception("slack: handling an event failed")
            _settle(done, False)
        finally:
            _settle(done, False)  # cancelled

    async def drain(self, grace: float) -> bool:
        """Take no more work and wait up to ``grace`` seconds for what runs; whether all ended
        (else it is cancelled)."""
        self.closed = True
        try:
            async with asyncio.timeout(grace):
                await self._idle.wait()
            return True
        except TimeoutError:
            for task in list(self._running):
                task.cancel()
            if self._running:
                await asyncio.wait(set(self._running))
            return False


def _settle(done: Done, ended: bool) -> None:
    if not done.done():
        done.set_result(ended)
