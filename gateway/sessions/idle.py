"""When an agent's process is idle enough to end (``idle_minutes``, issue 31).

An agent process holds memory while nobody uses it (an OpenCode server about 370 MB), and
every agent the gateway runs can resume its session natively (Codex ``thread/resume``,
Claude ``--resume``, OpenCode's session id, ACP ``session/load``): ending it after a quiet
while costs the next message only its start. The session's runner
(gateway/sessions/runner.py) watches its live epoch with an :class:`IdleWatch`: every agent
event, message queued and request opened touches it, and once ``idle_minutes`` pass with no
touch it asks whether the session is idle now (no turn running, no message waiting, no
request open of any origin, agent, plan or setting); if not, the clock starts again.

The end is quiet in the chat: the epoch's end says why (``/status``: "Agent: …, ended
(stopped after 30 idle minutes; your next message resumes it)"), and the log says it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

__all__ = ["IdleWatch", "idle_words"]


def idle_words(minutes: float) -> str:
    """Why an idle agent's process ended, as its epoch's end (``/status``) says it."""
    amount = f"{minutes:g} idle minute" + ("" if minutes == 1 else "s")
    return f"stopped after {amount}; your next message resumes it"


class IdleWatch:
    """The time since anything happened in a session's live epoch."""

    def __init__(self) -> None:
        self._touched = asyncio.Event()
        self.kept = 0  # times the quiet time was up but the session busy: the agent kept
        self._looked = asyncio.Condition()

    def touch(self) -> None:
        """Something happened (an agent event, a message queued, a request opened)."""
        self._touched.set()

    async def until_idle(self, seconds: float, idle_now: Callable[[], Awaitable[bool]]) -> None:
        """Return once ``seconds`` passed with no :meth:`touch` and ``idle_now()`` agrees;
        a touch, or a session busy when the time is up, starts the clock again."""
        while True:
            self._touched.clear()
            try:
                async with asyncio.timeout(seconds):
                    await self._touched.wait()
            except TimeoutError:
                if await idle_now():
                    return
                async with self._looked:
                    self.kept += 1
                    self._looked.notify_all()

    async def kept_at_least(self, times: int) -> None:
        """Until the session was found busy ``times`` times when its quiet time was up."""
        async with self._looked:
            await self._looked.wait_for(lambda: self.kept >= times)
