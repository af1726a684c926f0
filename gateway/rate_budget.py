"""Rate budgets a bot's hosts share (issue 19, design point 7): the interface.

A platform's outbox (platforms/outbox.py) keeps its calls within the platform's limits by
windows of its own, in this process's memory. Several hosts that send with one bot token
each keep such windows, and each would spend the bot's whole budget: Telegram's one message
a second in a chat, Slack's one a second in a channel, Discord's five per five seconds would
be spent twice, and the second host's calls answered 429.

So before a call goes, the outbox asks its :class:`RateBudget` for a token of each
:class:`Bucket` that counts the call (one per window the call counts in: the chat's, the
group's, the bot's) and of the lane's hold (where a 429's retry-after is kept):

- :data:`ALONE`, a single host (the SQLite ledger): this process's windows are the whole
  budget, so every token is given at once, without a trip anywhere; the outbox behaves as it
  did before there were budgets;
- a shared ledger (PostgreSQL, several hosts): gateway/store/rate_buckets.py keeps a row per
  (platform, bot, bucket) and takes every token of a call in one statement by the database's
  clock, or answers how long to wait.

When the call returns, the outbox says so (:meth:`RateBudget.returned`), with the 429's
retry-after if it was refused: a window counts a call from when it *returned* (as the
outbox's own windows do), and a 429 holds the lane for every host.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ALONE", "Bucket", "RateBudget", "SharedRates", "Ticket", "bot_key"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Bucket:
    """At most ``calls`` calls in any ``seconds`` under ``key`` (unique within a bot); a
    bucket that does not ``count`` the call is only asked whether it is held (a 429)."""

    key: str
    calls: int
    seconds: float
    counts: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Ticket:
    """The tokens one call took: what :meth:`RateBudget.returned` gives back. ``mark`` is
    the budget's own (the in-flight entry it replaces by the return time; None: nothing)."""

    keys: tuple[str, ...]
    hold_key: str
    mark: float | None = None


class RateBudget(Protocol):
    """One bot's budget on one platform."""

    async def take(self, buckets: Sequence[Bucket], hold_key: str) -> Ticket | float:
        """A token of every counting bucket, all or none: the ticket, or the seconds to wait
        before asking again (a window is full, or ``hold_key`` is held by a 429)."""
        ...

    def returned(self, ticket: Ticket, *, retry_after: float | None = None) -> None:
        """The call of ``ticket`` returned now; ``retry_after``: refused with a 429 that
        says to wait that long (its lane is held that long for every host)."""
        ...


class SharedRates(Protocol):
    """The budgets of every bot of this host, by platform (a platform asks for its own)."""

    def budget(self, platform: str, bot: str) -> RateBudget: ...


class _Alone:
    """A single host: its outbox's own windows are the whole budget."""

    async def take(self, buckets: Sequence[Bucket], hold_key: str) -> Ticket | float:
        return Ticket(keys=(), hold_key=hold_key)

    def returned(self, ticket: Ticket, *, retry_after: float | None = None) -> None:
        pass


ALONE: RateBudget = _Alone()


def bot_key(token: str) -> str:
    """A name of the bot that its token's holders share and that does not reveal the token
    (a row key in a shared ledger is read by whoever reads the ledger)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]
