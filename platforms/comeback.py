"""Back after an outage, for a platform whose calls go out through its own outbox.

When a call cannot reach the platform's servers, the outbox says so (``on_unreachable``);
from then on :class:`Comeback` asks the servers a cheap question at the platform's own pace
until one answers (or any other call succeeds: ``on_success``), and then tells the gateway
(``Inbox.on_platform_back``), which sends again what failed meanwhile. One owner: the
platform, which hands it its task group and cancels it when it closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gateway.platform import Inbox

__all__ = ["Comeback"]

log = logging.getLogger(__name__)


def _always(exc: Exception) -> bool:
    return True


class Comeback:
    """``probe`` is the cheap question (Slack's ``auth.test``, Discord's application info),
    asked every ``every`` seconds while down; an error it raises that ``transient`` does not
    accept is a bug and is raised. ``inbox`` gives the gateway to tell, or None while the
    platform is not attached or is stopping (then nobody is told)."""

    def __init__(
        self,
        platform: str,
        probe: Callable[[], Awaitable[object]],
        *,
        every: float,
        inbox: Callable[[], Inbox | None],
        transient: Callable[[Exception], bool] = _always,
    ) -> None:
        self._platform = platform
        self._probe = probe
        self._every = every
        self._inbox = inbox
        self._transient = transient
        self.down = False
        self._asking: asyncio.Task[None] | None = None

    def lost(self, tasks: asyncio.TaskGroup) -> None:
        """A call did not reach the servers: start asking (once, however many calls fail)."""
        if self.down:
            return
        self.down = True
        self._asking = tasks.create_task(self._ask_until_back(tasks))

    def reached(self, tasks: asyncio.TaskGroup | None) -> None:
        """A call reached the servers: if they were down, the gateway is told they are back."""
        if not self.down:
            return
        self.down = False
        inbox = self._inbox()
        if tasks is not None and inbox is not None:
            tasks.create_task(self._announce(inbox))

    def cancel(self) -> None:
        if self._asking is not None:
            self._asking.cancel()

    async def _ask_until_back(self, tasks: asyncio.TaskGroup) -> None:
        while self.down:
            await asyncio.sleep(self._every)  # the platform's pace, not a wait for our state
            try:
                await self._probe()
            except Exception as exc:
                if not self._transient(exc):
                    raise
                continue
            self.reached(tasks)

    async def _announce(self, inbox: Inbox) -> None:
        try:
            await inbox.on_platform_back(self._platform)
        except Exception:
            log.exception("resending failed cards after %s came back", self._platform)
