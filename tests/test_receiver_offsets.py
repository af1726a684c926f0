"""The Telegram poller's offset in the ledger (gateway/store/receiver_offsets.py) on the real
PostgreSQL cluster: written only by the receiver lease's holder with its fence, never moved
back, and a write racing another host's taking of the lease either lands before it or not
at all (the lease row's lock orders them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config.ledger_url import PgTarget
from gateway.store.leases import acquire, connect
from gateway.store.receiver_offsets import read_offset, write_offset
from gateway.store.store import Store
from tests.pg_cluster import PgCluster

TTL = 30.0
LEASE = "telegram:999000"


@pytest.fixture
async def conn(
    tmp_path: Path, pg_database: PgCluster
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with Store.open(tmp_path, postgresql=PgTarget(url=pg_database.dsn)):
        pass  # the migrations
    conn = await connect(PgTarget(url=pg_database.dsn))
    async with conn:
        yield conn


async def test_only_the_holder_with_its_fence_writes_the_offset_and_it_never_goes_back(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    assert await read_offset(conn, LEASE) is None
    fence = await acquire(conn, LEASE, "a", TTL)
    assert fence == 1
    assert await write_offset(conn, LEASE, "a", fence, 10)
    assert not await write_offset(conn, LEASE, "b", fence, 20)  # not the holder
    assert await write_offset(conn, LEASE, "a", fence, 7)  # a stale batch: kept at 10
    assert await read_offset(conn, LEASE) == 10
    await conn.execute(
        "UPDATE leases SET expires_at = now() - interval '1 second' WHERE name = %s", (LEASE,)
    )
    assert not await write_offset(conn, LEASE, "a", fence, 30)  # lapsed: nothing
    assert await acquire(conn, LEASE, "b", TTL) == 2
    assert not await write_offset(conn, LEASE, "a", fence, 30)  # the fence moved
    assert await write_offset(conn, LEASE, "b", 2, 12)
    assert await read_offset(conn, LEASE) == 12


async def test_a_write_racing_a_new_holder_waits_for_it_and_then_writes_nothing(
    conn: psycopg.AsyncConnection[Any], pg_database: PgCluster
) -> None:
    fence = await acquire(conn, LEASE, "a", TTL)
    assert fence is not None and await write_offset(conn, LEASE, "a", fence, 5)
    async with await psycopg.AsyncConnection.connect(pg_database.dsn) as other:
        # another host takes the lease (its transaction not yet committed); the row is
        # unexpired as the old holder's snapshot sees it
        await other.execute(
            "UPDATE leases SET holder = 'b', fence = fence + 1 WHERE name = %s", (LEASE,)
        )
        writing = asyncio.create_task(write_offset(conn, LEASE, "a", fence, 9))
        async with (
            await psycopg.AsyncConnection.connect(pg_database.dsn, autocommit=True) as watcher,
            asyncio.timeout(10),
        ):
            while not (
                await (
                    await watcher.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND query LIKE '%%receiver_offsets%%'"
                    )
                ).fetchone()
            ):
                pass  # until the write waits on the lease row's lock
        await other.commit()
        assert not await writing  # it saw the new fence
    assert await read_offset(conn, LEASE) == 5
