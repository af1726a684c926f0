"""Leases by the database's clock (gateway/store/leases.py) on the real PostgreSQL cluster
(tests/pg_cluster.py). A lapse is made by moving ``expires_at`` into the past (what the
database's clock does after the ttl), never by waiting for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config.ledger_url import PgTarget
from gateway.store.leases import LeaseHolder, acquire, connect, fence_out, lapsed, release, renew
from gateway.store.store import Store
from tests.harness.pg_proxy import PgProxy
from tests.pg_cluster import PgCluster

TTL = 30.0


@pytest.fixture
async def conn(
    tmp_path: Path, pg_database: PgCluster
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with Store.open(tmp_path, postgresql=PgTarget(url=pg_database.dsn)):
        pass  # the migrations
    conn = await connect(PgTarget(url=pg_database.dsn))
    async with conn:
        yield conn


async def lapse(conn: psycopg.AsyncConnection[Any], name: str) -> None:
    await conn.execute(
        "UPDATE leases SET expires_at = now() - interval '1 second' WHERE name = %s", (name,)
    )


async def test_one_holder_at_a_time_and_the_fence_moves_on_each_taking(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    assert await acquire(conn, "host:a", "a", TTL) == 1
    assert await acquire(conn, "host:a", "b", TTL) is None  # held
    assert await renew(conn, "host:a", "a", 1, TTL)
    await lapse(conn, "host:a")
    assert await lapsed(conn, "host:") == ["a"]
    assert await acquire(conn, "host:a", "b", TTL) == 2
    assert not await renew(conn, "host:a", "a", 1, TTL)  # the old fence renews nothing
    assert await lapsed(conn, "host:") == []


async def test_a_holder_takes_its_own_lease_again_and_shuts_its_old_self_out(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    assert await acquire(conn, "host:a", "a", TTL, take_own=True) == 1
    assert await acquire(conn, "host:a", "a", TTL) is None  # not without take_own
    assert await acquire(conn, "host:a", "a", TTL, take_own=True) == 2
    assert not await renew(conn, "host:a", "a", 1, TTL)
    assert await acquire(conn, "host:a", "b", TTL, take_own=True) is None  # not another's


async def test_release_lapses_the_lease_and_keeps_its_fence(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    assert await acquire(conn, "host:a", "a", TTL) == 1
    await release(conn, "host:a", "b", 1)  # not b's: nothing
    assert await acquire(conn, "host:a", "b", TTL) is None
    await release(conn, "host:a", "a", 1)
    assert await acquire(conn, "host:a", "b", TTL) == 2


async def test_a_reaper_fences_out_a_lapsed_holder_and_holds_off_its_return(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    assert await acquire(conn, "host:a", "a", TTL) == 1
    assert await fence_out(conn, "host:a") is None  # held: nothing moves
    await lapse(conn, "host:a")
    assert await acquire(conn, "reap:a", "b", TTL) == 1
    assert await lapsed(conn, "host:") == ["a"]
    assert await fence_out(conn, "host:a") == 2
    assert await lapsed(conn, "host:") == []  # reaped once
    assert not await renew(conn, "host:a", "a", 1, TTL)  # a, back, holds nothing
    held_off = await acquire(conn, "host:a", "a", TTL, take_own=True, unless_held="reap:a")
    assert held_off is None  # while b reaps
    await release(conn, "reap:a", "b", 1)
    assert await acquire(conn, "host:a", "a", TTL, take_own=True, unless_held="reap:a") == 3


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_holder_stops_when_its_fence_moves(
    conn: psycopg.AsyncConnection[Any], pg_database: PgCluster
) -> None:
    holder = LeaseHolder(PgTarget(url=pg_database.dsn), "host:a", "a", ttl=0.6)
    assert await holder.acquire()
    assert holder.holds()
    async with asyncio.TaskGroup() as tasks:
        kept = tasks.create_task(holder.keep())
        await lapse(conn, "host:a")
        assert await acquire(conn, "host:a", "b", TTL) == 2
        await kept  # its next renew is refused
    assert not holder.holds()
    await holder.close()


async def test_a_frozen_renewer_past_its_deadline_lets_go_without_renewing(
    conn: psycopg.AsyncConnection[Any], pg_database: PgCluster
) -> None:
    clock = FakeMonotonic()
    holder = LeaseHolder(PgTarget(url=pg_database.dsn), "host:a", "a", ttl=TTL, monotonic=clock)
    assert await holder.acquire()
    holder.pause()
    async with asyncio.TaskGroup() as tasks:
        kept = tasks.create_task(holder.keep())
        clock.now += TTL - TTL / 3  # the deadline, with the renewer frozen
        assert not holder.holds()  # leased work stops now, before the database's lapse
        holder.resume()
        await kept
    cursor = await conn.execute("SELECT fence FROM leases WHERE name = 'host:a'")
    assert await cursor.fetchone() == (1,)
    await holder.close()


async def test_a_renew_cut_off_is_tried_again_on_a_new_connection_within_the_deadline(
    conn: psycopg.AsyncConnection[Any], pg_database: PgCluster
) -> None:
    """The holder reaches the database through a proxy that cuts its connection: the next
    renew fails on it and is tried again on a new one, granted before the deadline. The
    lease was never lost (a refused renew still loses it at once: the test above)."""
    clock = FakeMonotonic()
    async with PgProxy(pg_database) as proxy:
        holder = LeaseHolder(PgTarget(url=proxy.dsn), "host:a", "a", ttl=TTL, monotonic=clock)
        assert await holder.acquire()
        proxy.cut()
        clock.now += TTL / 3  # the renew is due
        async with asyncio.TaskGroup() as tasks:
            kept = tasks.create_task(holder.keep())
            await holder.renewed.wait()
            assert holder.holds() and not holder.unreachable
            kept.cancel()
        assert proxy.connections == 2  # the first, cut, and the one the renew was granted on
        assert holder.timing.deadline() == clock.now + TTL - TTL / 3
        await holder.close()
    cursor = await conn.execute("SELECT holder, fence FROM leases WHERE name = 'host:a'")
    assert await cursor.fetchone() == ("a", 1)  # the same lease, renewed


async def test_a_renew_that_finds_no_database_until_the_deadline_loses_the_lease(
    conn: psycopg.AsyncConnection[Any], pg_database: PgCluster
) -> None:
    """The database stays unreachable (the proxy refuses every new connection): the renew
    is tried again and again while the deadline allows, and the lease is lost at it."""
    clock = FakeMonotonic()
    async with PgProxy(pg_database) as proxy:
        holder = LeaseHolder(PgTarget(url=proxy.dsn), "host:a", "a", ttl=TTL, monotonic=clock)
        assert await holder.acquire()
        proxy.refuse = True
        proxy.cut()
        clock.now += TTL / 3
        async with asyncio.TaskGroup() as tasks:
            kept = tasks.create_task(holder.keep())
            await proxy.refused(2)  # tried again on a new connection, twice
            assert holder.holds() and holder.unreachable  # not lost before the deadline
            clock.now += TTL - TTL / 3  # the deadline
            await kept
        assert not holder.holds() and holder.unreachable
        await holder.close()
