"""A host's store on PostgreSQL holds a pool of writers and one of readers (issue 36): a slow
write holds up neither an unrelated write nor what people look at; the pool's sizes come from
the config; a host whose connections do not fit in the server's room says so at start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from gateway.config.ledger_url import PgPool, PgTarget
from gateway.domain import Decision, InteractionState
from gateway.store.budget import FIXED, ServerRoom, host_budget, read_room, room_problem
from gateway.store.database import Conn
from gateway.store.store import Store
from tests.pg_cluster import PgCluster, fresh_database
from tests.store_helpers import ALICE, SteppingClock, approval, running_session

pytestmark = pytest.mark.timeout(60)

SLOW = 36  # the advisory lock the test holds and the slow write waits for
ANSWER_WITHIN = 10.0  # seconds: far more than any call takes when it does not wait


@pytest.fixture
def ledger_db(pg_cluster: PgCluster, ledger_template: str) -> Iterator[PgCluster]:
    with fresh_database(pg_cluster, template=ledger_template) as database:
        yield database


@contextlib.asynccontextmanager
async def host_store(
    database: PgCluster, data_dir: Path, pool: PgPool | None = None
) -> AsyncIterator[Store]:
    target = PgTarget(url=database.dsn, pool=pool or PgPool())
    async with Store.open(data_dir, postgresql=target, clock=SteppingClock()) as store:
        yield store


async def test_a_write_blocked_on_a_lock_holds_up_no_other_write_nor_a_page(
    ledger_db: PgCluster, tmp_path: Path
) -> None:
    """A write of this host waits on a lock the test holds (as one behind another host's row
    lock would). Meanwhile, on the same host, a request is opened and decided in another
    session, and `/pending`, the console's list and the session's status answer; the slow
    write ends once the lock is let go."""
    async with host_store(ledger_db, tmp_path) as store:
        busy, _ = await running_session(store, project="busy")
        other, epoch = await running_session(store, project="other")
        loop = asyncio.get_running_loop()
        entered = asyncio.Event()

        def slow(conn: Conn) -> str:
            conn.execute("UPDATE sessions SET project = project WHERE id = ?", (busy.id,))
            loop.call_soon_threadsafe(entered.set)
            conn.execute("SELECT pg_advisory_xact_lock(?)", (SLOW,)).fetchone()
            return "done"

        with contextlib.closing(psycopg.connect(ledger_db.dsn, autocommit=True)) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (SLOW,))
            slow_write = asyncio.create_task(store.writer.write(slow))
            await entered.wait()
            async with asyncio.timeout(ANSWER_WITHIN):
                opened = await store.interactions.create(other.id, epoch, approval())
                decided = await store.interactions.decide(
                    opened.interaction.id,
                    expected_version=1,
                    actor=ALICE,
                    decision=Decision(action_id="accept"),
                )
                pending = await store.interactions.list_pending_view()
                _, closed = await store.interactions.list_open_and_closed(closed_limit=10)
                status = await store.sessions.get(other.id)
            assert decided.state is InteractionState.DECIDED
            assert [i.id for i in pending] == [opened.interaction.id]
            assert closed == []
            assert status is not None and status.id == other.id
            assert not slow_write.done()  # still waiting for the lock all along
            holder.execute("SELECT pg_advisory_unlock(%s)", (SLOW,))
            assert await slow_write == "done"


async def test_two_writes_of_one_host_on_one_row_take_turns(
    ledger_db: PgCluster, tmp_path: Path
) -> None:
    """Two writes of one host to the same row run on two connections: the second waits for
    the first's row lock (not for a lock of the gateway's), and both land."""
    async with host_store(ledger_db, tmp_path) as store:
        session, _ = await running_session(store)
        first_holds, release = asyncio.Event(), threading.Event()
        loop = asyncio.get_running_loop()

        def first(conn: Conn) -> None:
            locked = conn.execute(
                "UPDATE sessions SET project = project || '-1' WHERE id = ?", (session.id,)
            ).rowcount  # answered: the row is locked from here
            assert locked == 1
            loop.call_soon_threadsafe(first_holds.set)
            assert release.wait(ANSWER_WITHIN)

        def second(conn: Conn) -> None:
            conn.execute(
                "UPDATE sessions SET project = project || '-2' WHERE id = ?", (session.id,)
            )

        one = asyncio.create_task(store.writer.write(first))
        await first_holds.wait()
        two = asyncio.create_task(store.writer.write(second))

        def waiting_on_a_lock(conn: Conn) -> int:
            row = conn.execute(
                "SELECT count(*) AS n FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            return int(row["n"])

        while not await store.readers.read(waiting_on_a_lock, one_statement=True):
            assert not two.done()
            await asyncio.sleep(0.005)  # polls the server's view of the second write
        release.set()
        await asyncio.gather(one, two)
        project = await store.writer.read(
            lambda conn: conn.execute(
                "SELECT project FROM sessions WHERE id = ?", (session.id,)
            ).fetchone()["project"]
        )
        assert project == "demo-1-2"


async def test_the_pools_are_as_large_as_configured(ledger_db: PgCluster, tmp_path: Path) -> None:
    async with host_store(ledger_db, tmp_path, PgPool(writers=3, readers=2)) as store:
        room = await store.writer.read(read_room, one_statement=True)
        assert len(store.writer.lanes) == 3 and store.readers.size == 2
        # the writers, the click pre-check's reader and the readers' pool
        assert room.database_in_use == 3 + 1 + 2
        assert room.max_connections > 0


async def test_a_host_with_no_room_for_its_connections_says_so_at_start(
    ledger_db: PgCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with contextlib.closing(psycopg.connect(ledger_db.dsn, autocommit=True)) as admin:
        # room for this host's store (6 + 1 + 3 = 10), not for its whole budget (6 + 3 + 5)
        admin.execute(f'ALTER DATABASE "{ledger_db.dbname}" CONNECTION LIMIT 12')
    target = PgTarget(url=ledger_db.dsn)
    with caplog.at_level(logging.WARNING, logger="gateway.store.store"):
        async with Store.open(tmp_path, postgresql=target, leased_receivers=0) as store:
            assert await store.sessions.list_sessions() == []
    said = [r.getMessage() for r in caplog.records if "connections" in r.getMessage()]
    assert said == [
        "the PostgreSQL ledger allows 12 connections (the database's CONNECTION LIMIT), 0 are"
        f" held by others, and this host needs up to {6 + 3 + FIXED} (store_pool_size 6 +"
        f" store_read_pool_size 3 + {FIXED} of its own): lower store_pool_size or"
        " store_read_pool_size, or raise the limit (docs/deploy.md)"
    ]


async def test_a_host_with_room_says_nothing(
    ledger_db: PgCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = PgTarget(url=ledger_db.dsn)
    with caplog.at_level(logging.WARNING, logger="gateway.store.store"):
        async with Store.open(tmp_path, postgresql=target, leased_receivers=2):
            pass
    assert not [r for r in caplog.records if "connections" in r.getMessage()]


def test_the_budget_counts_every_connection_of_a_host() -> None:
    pool = PgPool(writers=6, readers=3)
    assert host_budget(pool, leased_receivers=2) == 6 + 3 + FIXED + 2
    # four hosts with the defaults fit in PostgreSQL's default 100 (3 reserved)
    assert 4 * host_budget(PgPool(), leased_receivers=2) <= 100 - 3


def test_the_room_counts_the_others_not_this_host() -> None:
    pool = PgPool(writers=6, readers=3)
    fits = ServerRoom(max_connections=100, reserved=3, in_use=10 + 70)
    assert room_problem(fits, pool, leased_receivers=2, open_now=10) is None
    full = ServerRoom(max_connections=100, reserved=3, in_use=10 + 82)
    said = room_problem(full, pool, leased_receivers=2, open_now=10)
    assert said is not None
    assert said.startswith(
        "the PostgreSQL ledger allows 97 connections (max_connections 100 less 3 reserved),"
        " 82 are held by others, and this host needs up to 16"
    )
