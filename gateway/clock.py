"""The scheduler's clock, and the seam through which a test sets it in a gateway process.

Schedules are due at instants computed by this clock (gateway/schedule_times.py), so a test
can run a gateway to 01:59 on the night a clock springs forward and then to 03:00, without
waiting a day. Leases and every other time the ledger keeps are the database's own and
cannot be set this way: only the scheduler reads this clock.

Nothing here does anything unless the environment names a clock file:
``AGENT_GATEWAY_CLOCK_FILE=/path`` whose content is an ISO 8601 instant with its offset
(``2026-03-29T00:59:00+00:00``). The file is read at every look at the time, so a test moves
the clock by writing the file again (write a new file and rename it over the old one, so a
reader never sees half a time). A file that cannot be read or parsed is an error the
scheduler reports, never a guess.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["CLOCK_FILE_ENVIRONMENT", "Clock", "FileClock", "clock_from_environment", "utc_now"]

CLOCK_FILE_ENVIRONMENT = "AGENT_GATEWAY_CLOCK_FILE"

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class FileClock:
    """The instant written in a file, read again at every call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self) -> datetime:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
            moment = datetime.fromisoformat(text)
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"the clock file {self.path} holds no instant: {exc}") from exc
        if moment.tzinfo is None:
            raise RuntimeError(f"the clock file {self.path} holds a time without an offset")
        return moment.astimezone(UTC)

    def set(self, moment: datetime) -> None:
        """Write ``moment`` (aware) as the clock's time, atomically."""
        if moment.tzinfo is None:
            raise ValueError("the clock's time must be aware")
        partial = self.path.with_name(self.path.name + ".new")
        partial.write_text(moment.astimezone(UTC).isoformat(), encoding="utf-8")
        partial.replace(self.path)


def clock_from_environment() -> Clock:
    """The clock file the environment names, else the system's clock (UTC)."""
    named = os.environ.get(CLOCK_FILE_ENVIRONMENT, "").strip()
    return FileClock(Path(named)) if named else utc_now
