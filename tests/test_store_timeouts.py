"""The ledger's timeouts on a real PostgreSQL cluster (issue 28): a peer frozen inside a
transaction, a backend that stops answering, a network that holds the packets. The host's
other work goes on within the timeouts, the stuck call fails with a StoreError that says so,
and the ledger serves again once the database answers.

A call given up before its COMMIT was sent is run again once on a new connection (nothing of
it was written); one that fails again is the caller's StoreError. Each test uses timeouts of
a second or two (``[gateway] store_*_seconds`` in production).
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from gateway.config.ledger_url import PgTarget, PgTimeouts
from gateway.errors import StoreError
from gateway.store.database import Conn
from gateway.store.store import Store
from tests.harness.pg_proxy import PgProxy
from tests.pg_cluster import PgCluster, fresh_database
from tests.store_helpers import SteppingClock, running_session

pytestmark = pytest.mark.timeout(60)

QUICK = PgTimeouts(statement=1.0, lock=0.5, idle_in_transaction=2.0, connect=2.0)


@pytest.fixture
def database(pg_cluster: PgCluster, ledger_template: str) -> Iterator[PgCluster]:
    with fresh_database(pg_cluster, template=ledger_template) as fresh:
        yield fresh


@pytest.fixture
async def store(database: PgCluster, tmp_path: Path) -> AsyncIterator[Store]:
    target = PgTarget(url=database.dsn, timeouts=QUICK)
    async with Store.open(tmp_path, postgresql=target, clock=SteppingClock()) as opened:
        yield opened


@contextmanager
def frozen(backend_pid: int) -> Iterator[None]:
    """A PostgreSQL backend stopped (SIGSTOP) for the block: it holds what it holds, answers
    nothing, and runs none of its own timers."""
    os.kill(backend_pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(backend_pid, signal.SIGCONT)


def _show(conn: Conn) -> dict[str, str]:
    names = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
    return {name: conn.execute(f"SHOW {name}").fetchone()[name] for name in names}


def _backend_pid(conn: Conn) -> int:
    return int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])


async def test_every_connection_of_the_ledger_has_the_server_side_timeouts(store: Store) -> None:
    expected = {
        "statement_timeout": "1s",
        "lock_timeout": "500ms",
        "idle_in_transaction_session_timeout": "2s",
    }
    assert await store.writer.read(_show) == expected
    assert await store.reader.read(_show) == expected


async def test_a_peer_frozen_holding_a_lock_fails_that_call_and_not_the_others(
    store: Store, database: PgCluster
) -> None:
    held, _ = await running_session(store)
    other, _ = await running_session(store)
    async with await psycopg.AsyncConnection.connect(database.dsn, autocommit=True) as peer:
        await peer.execute("BEGIN")
        await peer.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (held.id,))
        with frozen(peer.info.backend_pid):
            with pytest.raises(StoreError, match="lock timeout"):
                await store.sessions.close(held.id, reason="the peer holds it")
            # the other session's writes and every read go on meanwhile
            closed = await store.sessions.close(other.id, reason="not held")
            assert closed.is_closed
            still = await store.sessions.get(held.id)
            assert still is not None and not still.is_closed
        await peer.execute("ROLLBACK")
    assert (await store.sessions.close(held.id, reason="free again")).is_closed


async def test_a_backend_that_stops_answering_is_given_up_and_replaced(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    session, _ = await running_session(store)
    pid = await store.writer.read(_backend_pid)
    with frozen(pid):
        # given up at the deadline before its COMMIT was sent (nothing of it written): run
        # again, once, on a new connection, to a backend that answers
        closed = await store.sessions.close(session.id, reason="the backend is frozen")
        assert closed.is_closed
        assert "did not answer within 2 s" in caplog.text  # what the log says happened
        assert await store.writer.read(_backend_pid) != pid


async def test_a_network_that_holds_the_packets_is_given_up_and_the_ledger_serves_after(
    database: PgCluster, tmp_path: Path
) -> None:
    async with PgProxy(database) as proxy:
        target = PgTarget(url=proxy.dsn, timeouts=QUICK)
        async with Store.open(tmp_path, postgresql=target, clock=SteppingClock()) as store:
            session, _ = await running_session(store)
            connections = proxy.connections
            proxy.hold()
            with pytest.raises(StoreError, match="did not answer within 2 s"):
                await store.sessions.close(session.id, reason="nothing gets through")
            proxy.release()
            assert (await store.sessions.close(session.id, reason="through again")).is_closed
            assert proxy.connections > connections  # the stuck one was replaced
