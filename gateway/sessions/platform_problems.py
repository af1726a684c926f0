"""Problems the platforms reported that no retry will mend, kept for the web console.

A platform says each problem once (Slack: once per channel and error, platforms/slack/
outbox.py) through :class:`gateway.platform.HearsProblems`; the gateway keeps the latest
:data:`KEPT` of them, in the order they came, with when. They live as long as the process:
what changes them (a new token, the app invited back) needs a restart or comes back by
itself, and the log has them too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from gateway.store.database import Clock

__all__ = ["KEPT", "PlatformProblem", "PlatformProblems"]

KEPT = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class PlatformProblem:
    platform: str
    text: str
    at: datetime


class PlatformProblems:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._kept: OrderedDict[tuple[str, str], PlatformProblem] = OrderedDict()
        self._listeners: list[Callable[[], None]] = []

    def listen(self, changed: Callable[[], None]) -> None:
        """Call ``changed`` each time a new problem is kept (the console's live pages)."""
        self._listeners.append(changed)

    def add(self, platform: str, text: str) -> None:
        """Keep ``text`` once (said again, it keeps its first time)."""
        key = (platform, text)
        if key in self._kept:
            return
        self._kept[key] = PlatformProblem(platform=platform, text=text, at=self._clock())
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        for changed in self._listeners:
            changed()

    def listed(self) -> tuple[PlatformProblem, ...]:
        return tuple(self._kept.values())
