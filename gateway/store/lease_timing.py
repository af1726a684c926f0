"""A lease's timing, without I/O (issue 19, design point 5).

A lease expires by the database's clock (``expires_at = now() + ttl``); the holder cannot
read that clock, so it keeps a deadline of its own on its monotonic clock: the time a renew
was *sent* (the database set ``expires_at`` no earlier than that) plus the ttl, minus one
renew period of margin for the two clocks' drift and a slow answer. The holder renews every
period (ttl/3) and stops its leased work the moment a renew is refused (the fence moved) or
that deadline passes, which is before the lease can lapse at the database. A renew that
finds no database (a cut connection) is tried again on a new connection every
:meth:`LeaseTiming.retry_in` until the deadline: the lease is lost only if none is granted
by then.

:class:`LeaseTiming` is that arithmetic only: the caller says when it sent a renew and what
came back, and asks whether it still holds and when to renew next. The SQL and the loop are
in ``gateway/store/leases.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RETRY_PAUSE_MAX", "LeaseTiming"]

RETRY_PAUSE_MAX = 0.5  # seconds between two attempts of a renew that found no database


@dataclass(slots=True)
class LeaseTiming:
    """One holder's view of one lease, on its monotonic clock (seconds)."""

    ttl: float
    _deadline: float | None = field(default=None, init=False)
    _next_renew: float | None = field(default=None, init=False)
    _lost: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.ttl <= 0:
            raise ValueError("a lease's ttl must be positive")

    @property
    def period(self) -> float:
        """How often the holder renews: a third of the lease."""
        return self.ttl / 3

    def granted(self, sent_at: float) -> None:
        """An acquire or renew sent at ``sent_at`` was granted."""
        self._lost = False
        self._deadline = sent_at + self.ttl - self.period
        self._next_renew = sent_at + self.period

    def refused(self) -> None:
        """A renew failed (the fence moved, the row is gone, the database did not answer):
        the lease is lost now, whatever the deadline says."""
        self._lost = True
        self._deadline = None
        self._next_renew = None

    def holds(self, now: float) -> bool:
        """Whether leased work may go on at ``now``."""
        return not self._lost and self._deadline is not None and now < self._deadline

    def deadline(self) -> float | None:
        """When leased work must stop if no renew is granted before; None: not held."""
        return self._deadline if not self._lost else None

    def retry_in(self, now: float) -> float | None:
        """After a renew that found no database at ``now``: seconds until the next attempt
        (a tenth of a period, at most half a second, never past the deadline), or None when
        there is no time left (lost: the deadline passed, or a renew was refused)."""
        deadline = self.deadline()
        if deadline is None or now >= deadline:
            return None
        return min(self.period / 10, RETRY_PAUSE_MAX, deadline - now)

    def renew_in(self, now: float) -> float:
        """Seconds until the next renew is due (0: now)."""
        if self._next_renew is None:
            return 0.0
        return max(0.0, self._next_renew - now)
