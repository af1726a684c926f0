"""What people do in Slack, taken: bolt's listeners, acked at once, the work done on lanes the
platform owns.

slack-sdk runs each Socket Mode envelope in a future nobody awaits, and bolt runs a listener
detached once it acked. So a listener here acks (bolt does it for events), reads the payload
purely (inbound.py) and hands the rest to :class:`Lanes`: one lane per conversation, so one
conversation's messages reach the gateway in the order they came, tasks the platform owns and
waits for when input stops (:meth:`Lanes.drain`). A click is acked at once too (a trigger_id
lives 3 s, and Slack shows a failure past 3 s); what the core answers goes to the clicker
as an ephemeral message, and the card's edit says the outcome to everyone.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import Any

__all__ = ["MAX_LANES", "MAX_QUEUED", "Lanes"]

log = logging.getLogger(__name__)

MAX_LANES = 1024  # conversations with work queued at once
MAX_QUEUED = 256  # work items waiting in one lane

Work = Callable[[], Awaitable[None]]


class Lanes:
    """Work in order per key, keys side by side, in tasks of the platform's task group."""

    def __init__(self, tasks: asyncio.TaskGroup) -> None:
        self._tasks = tasks
        self._lanes: dict[Hashable, deque[Work]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.closed = False

    def put(self, key: Hashable, work: Work) -> bool:
        """Queue ``work`` after the earlier work of ``key``; False if refused (closed, full)."""
        if self.closed:
            return False
        lane = self._lanes.get(key)
        if lane is not None:
            if len(lane) >= MAX_QUEUED:
                log.warning("slack lane full: work dropped")
                return False
            lane.append(work)
            return True
        if len(self._lanes) >= MAX_LANES:
            log.warning("slack: too many conversations busy at once: work dropped")
            return False
        self._lanes[key] = deque([work])
        self._start(self._drain(key))
        return True

    def spawn(self, work: Work) -> bool:
        """Run ``work`` now, on no lane (a click: it must not wait behind a message)."""
        if self.closed:
            return False
        self._start(self._guard(work))
        return True

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
                work = lane[0]
                await self._guard(work)
                lane.popleft()
        finally:
            del self._lanes[key]

    @staticmethod
    async def _guard(work: Work) -> None:
        try:
            await work()
        except Exception:  # one person's failure must not end the platform
            log.exception("slack: handling an event failed")

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
