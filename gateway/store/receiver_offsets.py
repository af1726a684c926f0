"""Where a receiver holding a lease starts, kept in the ledger (issue 19, design point 6).

One row of ``receiver_offsets`` (migration 13, PostgreSQL only) per receiver lease: for the
Telegram poller (lease ``telegram:<bot id>``) the offset of the first update not yet taken.
The holder writes it after each batch's effects are committed, and only while it holds the
lease with its fence: the statement locks the lease row (``FOR SHARE``), so it either runs
before another host's acquire moves the fence (which then waits for it, and its poller reads
the offset after) or finds the fence moved and writes nothing. A new holder starts from it.
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["read_offset", "write_offset"]

_WRITE = """
WITH held AS (
    SELECT 1 FROM leases
    WHERE name = %(lease)s AND holder = %(holder)s AND fence = %(fence)s
      AND expires_at >= now()
    FOR SHARE
)
INSERT INTO receiver_offsets AS o (lease, next_offset)
SELECT %(lease)s, %(offset)s FROM held
ON CONFLICT (lease) DO UPDATE SET next_offset = greatest(o.next_offset, excluded.next_offset)
"""


async def read_offset(conn: psycopg.AsyncConnection[Any], lease: str) -> int | None:
    """The offset the last holder of ``lease`` wrote; None if none ever did."""
    cursor = await conn.execute(
        "SELECT next_offset FROM receiver_offsets WHERE lease = %s", (lease,)
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def write_offset(
    conn: psycopg.AsyncConnection[Any], lease: str, holder: str, fence: int, offset: int
) -> bool:
    """Record ``offset`` for ``lease``; False (nothing written) once ``holder`` no longer
    holds it with ``fence`` (another host took it, or it lapsed)."""
    cursor = await conn.execute(
        _WRITE, {"lease": lease, "holder": holder, "fence": fence, "offset": offset}
    )
    return cursor.rowcount == 1
