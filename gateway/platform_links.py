"""Connecting the platforms of ``agent-gateway run``, and keeping at it.

A gateway started before the network is up, or while one platform is out, must not die:
every platform is connected on its own; one that cannot reach its servers is tried again
with backoff (:data:`FIRST_RETRY` doubling to :data:`MAX_RETRY`), logged with what to check,
while the others serve; until it connects, its calls fail as an outage would
(:class:`NotConnected`, a PlatformUnreachable: the core keeps what failed and sends it again
when the platform is back). Once it connects the gateway is told (``on_platform_back``), as
after any outage, and brings its cards up to date. A platform that refuses the
configuration (a revoked token: a ConfigError) is not retried: it stops, said in the log and
to the console's problems; the gateway runs on with the others, and refuses to start only
when none is left. The same refusal while running (a token revoked then: a platform that is
:class:`RefusedWhileRunning`) stops that platform the same way; when it was the last one,
:attr:`PlatformLinks.none_left` is set and ``run`` ends with a non-zero status.

One owner: :func:`linked` runs the retries as tasks of its own, cancelled and the platforms
closed (those that connected) when its block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager

from gateway.errors import ConfigError
from gateway.platform import HearsProblems, Inbox, Platform, RefusedWhileRunning

__all__ = ["FIRST_RETRY", "MAX_RETRY", "PlatformLinks", "linked"]

log = logging.getLogger(__name__)

FIRST_RETRY = 1.0  # seconds before the first retry of a platform that could not connect
MAX_RETRY = 60.0  # the longest wait between two retries


class PlatformLinks:
    """Which platforms are connected, which are being retried, which stopped, and why."""

    def __init__(self, platforms: Mapping[str, Platform]) -> None:
        self._platforms = platforms
        self.connected: set[str] = set()
        self.retrying: dict[str, str] = {}  # platform: why it is not connected yet
        self.stopped: dict[str, str] = {}  # platform: why it was given up (a refusal)
        self._inbox: Inbox | None = None
        self._told: list[tuple[str, str]] = []  # problems said before the gateway attached
        self.late: list[str] = []  # connected by a retry, in that order
        self.none_left = asyncio.Event()  # every platform stopped: `run` ends, non-zero
        self._watches: list[asyncio.Task[None]] = []  # one per connected platform (watch)

    def attach(self, inbox: Inbox) -> None:
        """The gateway runs: it hears the problems said so far, and of each platform that
        connects from now on."""
        self._inbox = inbox
        for platform, text in self._told:
            self._problem(platform, text)
        self._told.clear()

    def _problem(self, platform: str, text: str) -> None:
        if self._inbox is None:
            self._told.append((platform, text))
        elif isinstance(self._inbox, HearsProblems):
            self._inbox.platform_problem(platform, text)

    def refused(self, name: str, exc: ConfigError, *, said: bool = True) -> None:
        """``name`` refused its configuration: given up. ``said`` False: not yet logged
        (at start, where it is said only if other platforms run on)."""
        self.retrying.pop(name, None)
        self.stopped[name] = str(exc)
        if said:
            self.say_stopped(name)

    def say_stopped(self, name: str) -> None:
        why = self.stopped[name]
        others = "; the others run on" if self.connected or self.retrying else ""
        log.error("%s stopped: %s (fix the config and restart%s)", name, why, others)
        self._problem(name, f"Stopped: {why}. Fix the configuration and restart the gateway.")

    def linked(self, name: str) -> None:
        """``name`` connected: watched from now on for a refusal while it runs."""
        self.retrying.pop(name, None)
        self.connected.add(name)
        platform = self._platforms[name]
        if isinstance(platform, RefusedWhileRunning):
            self._watches.append(asyncio.create_task(self._watch(name, platform)))

    async def _watch(self, name: str, platform: RefusedWhileRunning) -> None:
        exc = await platform.refused()
        self.connected.discard(name)
        self.refused(name, exc)
        if not self.connected and not self.retrying:
            log.critical("no platform is left running: the gateway stops")
            self.none_left.set()

    async def unwatch(self) -> None:
        for task in self._watches:
            task.cancel()
        await asyncio.gather(*self._watches, return_exceptions=True)

    async def keep_trying(self, name: str, first: float, most: float) -> None:
        """Connect ``name`` again until it connects or refuses; then tell the gateway."""
        platform = self._platforms[name]
        wait = first
        while True:
            await asyncio.sleep(wait)  # the backoff: the platform's servers are not there
            try:
                await platform.connect()
            except ConfigError as exc:
                self.refused(name, exc)
                return
            except Exception as exc:  # any failure to reach it: tried again
                wait = min(wait * 2, most)
                self.retrying[name] = _why(exc)
                log.warning("%s still cannot connect (%s): next try in %g s", name, _why(exc), wait)
                continue
            self.linked(name)
            self.late.append(name)
            log.info("%s connected", name)
            if self._inbox is not None:
                await self._inbox.on_platform_back(name)
            return


def _why(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


@asynccontextmanager
async def linked(
    platforms: Mapping[str, Platform], *, first: float = FIRST_RETRY, most: float = MAX_RETRY
) -> AsyncIterator[PlatformLinks]:
    """Connect every platform for the block (those that cannot: tried again meanwhile), and
    close each one that connected after it. Raises the ConfigError of the first platform
    that refused if none is left to run."""
    links = PlatformLinks(platforms)
    retries: list[asyncio.Task[None]] = []
    refusals: list[ConfigError] = []
    async with AsyncExitStack() as stack:
        for name, platform in platforms.items():
            try:
                await platform.connect()
            except ConfigError as exc:
                links.refused(name, exc, said=False)
                refusals.append(exc)
                continue
            except Exception as exc:  # an outage at start: tried again meanwhile
                links.retrying[name] = _why(exc)
                log.warning(
                    "%s cannot connect (%s): check the network, a proxy, or its base URL in "
                    "the config; tried again in %g s while the others run",
                    name,
                    _why(exc),
                    first,
                )
                retries.append(asyncio.create_task(links.keep_trying(name, first, most)))
                continue
            links.linked(name)
            stack.push_async_callback(platform.close)
        if not links.connected and not links.retrying:
            if len(refusals) == 1:  # the one platform configured: its own words, once
                raise refusals[0]
            raise ConfigError("no platform could start: " + "; ".join(map(str, refusals)))
        for name in links.stopped:  # the others run on: said in the log and on the console
            links.say_stopped(name)
        try:
            yield links
        finally:
            await links.unwatch()
            for task in retries:
                task.cancel()
            for task in retries:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for name in links.late:  # connected by a retry: closed here (the others by stack)
                await platforms[name].close()
