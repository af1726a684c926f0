"""Several read-only connections for the reads people look at (issue 36): one writer, and
readers that never wait behind it.

On SQLite (WAL) every store call used to go through the writer's one connection, lock and
thread, so the console's pages, ``/pending`` and the audit export waited behind writes (and
behind each other). :class:`ReaderPool` holds several read-only connections
(:class:`~gateway.store.database.ReadOnlyDatabase`, each on a thread of its own); a read
takes whichever is free, or waits for the first to be freed. Each read is one snapshot of
what was committed when it began: a display read may run beside a write and show the ledger
as it was just before it, which is what a page drawn a moment earlier shows too. Reads a
decision depends on stay on the writer (``store.clicks``), and a click's pre-check keeps a
connection of its own (``store.peek``), never taken by a page.

On PostgreSQL the pool is ``store_read_pool_size`` read-only connections (REPEATABLE READ
snapshots), beside the writers' own pool (gateway/store/database.py's lanes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from gateway.store.database import Conn, ReadOnlyDatabase

__all__ = ["READERS", "ReaderPool"]

T = TypeVar("T")

READERS = 3  # SQLite: the read-only connections of the pool (each a thread)


class ReaderPool:
    """``store.readers``: a read runs on the first free connection of ``readers``."""

    def __init__(self, readers: Sequence[ReadOnlyDatabase]) -> None:
        if not readers:
            raise ValueError("a reader pool needs a reader")
        self._free: asyncio.Queue[ReadOnlyDatabase] = asyncio.Queue()
        for reader in readers:
            self._free.put_nowait(reader)
        self.size = len(readers)

    async def read(self, work: Callable[[Conn], T], *, one_statement: bool = False) -> T:
        """As :meth:`Database.read`, on a free read-only connection (one snapshot)."""
        reader = await self._free.get()
        try:
            return await reader.read(work, one_statement=one_statement)
        finally:
            self._free.put_nowait(reader)
