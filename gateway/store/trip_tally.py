"""What the ledger's calls were for: calls and network round trips per store method.

A :class:`TripTally` set on a connection (``Database.tally``, ``ReadOnlyDatabase.tally``)
is told of every call run on it, under the name of the closure that ran (the store method
it belongs to, e.g. ``InteractionLedger.decide``), with the network round trips it took on
PostgreSQL (0 on SQLite) and the statements it ran (``execute`` calls, BEGIN and COMMIT
included, on both backends). Off unless a bench sets one: ``bench.cross_host --trips`` and
``bench.interactions --calls`` print the table per approval (docs/decisions.md "Many hosts,
fewer ledger round trips", "Fewer ledger calls and statements per approval").
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CountedConn", "TripTally", "label_of"]


def label_of(work: Callable[..., Any]) -> str:
    """``InteractionLedger.decide`` for a closure ``InteractionLedger.decide.<locals>.run``."""
    while isinstance(work, functools.partial):
        work = work.func
    name = getattr(work, "__qualname__", None) or type(work).__qualname__
    return name.split(".<locals>")[0]


@dataclass
class TripTally:
    """Calls and round trips per label; ``where`` prefixes each label (e.g. the host)."""

    calls: dict[str, int] = field(default_factory=dict)
    round_trips: dict[str, int] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)
    where: str = ""
    # recorded on the lanes' threads, several at once on PostgreSQL's pool
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, work: Callable[..., Any], round_trips: int, statements: int = 0) -> None:
        label = f"{self.where}{label_of(work)}"
        with self._lock:
            self.calls[label] = self.calls.get(label, 0) + 1
            self.round_trips[label] = self.round_trips.get(label, 0) + round_trips
            self.statements[label] = self.statements.get(label, 0) + statements

    def clear(self) -> None:
        self.calls.clear()
        self.round_trips.clear()
        self.statements.clear()


class CountedConn:
    """A connection that counts the statements run on it (only while a tally is set);
    everything else is the connection's own."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.statements = 0

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        self.statements += 1
        return self._conn.execute(sql, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)
