"""Two hosts receive a conversation's first message at the same moment (issue 19): the
routing lock is per process, so the ledger decides. The route is a compare-and-set in the
transaction that makes the session: one session is made and routed, the other host's is
never kept, and that host uses the winner's. On the real PostgreSQL cluster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import AgentKind, ConversationRef
from gateway.store.database import Conn
from gateway.store.store import Store
from tests.gateway_harness import ALICE
from tests.hosts_harness import ON_A, both_running, two_hosts
from tests.pg_cluster import PgCluster, fresh_database
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import SteppingClock

pytestmark = pytest.mark.timeout(60)

KEY = ConversationRef(platform="memory", space="team", channel="a", thread="t1")


@pytest.fixture
async def two_stores(
    pg_cluster: PgCluster, ledger_template: str, tmp_path: Path
) -> AsyncIterator[tuple[Store, Store, PgTarget]]:
    with fresh_database(pg_cluster, template=ledger_template) as database:
        target = PgTarget(url=database.dsn)
        async with (
            Store.open(tmp_path / "a", postgresql=target, clock=SteppingClock()) as first,
            Store.open(tmp_path / "b", postgresql=target, clock=SteppingClock()) as second,
        ):
            yield first, second, target


async def _backend_pid(store: Store) -> int:
    def pid(conn: Conn) -> int:
        return int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])

    return await store.writer.read(pid)


async def _race(
    first: Store, second: Store, target: PgTarget, replacing: str | None
) -> list[tuple[str, bool]]:
    """Both stores make a session routed by KEY, held at the routes table until both wait."""
    pids = (await _backend_pid(first), await _backend_pid(second))
    with contextlib.closing(psycopg.connect(target.url, autocommit=True)) as other:
        other.execute("BEGIN")
        other.execute("LOCK TABLE routes IN EXCLUSIVE MODE")
        racing = [
            asyncio.create_task(
                store.sessions.create_routed(
                    KEY,
                    replacing=replacing,
                    project="pa",
                    agent_kind=AgentKind.CODEX_APP_SERVER,
                    initiator=ALICE,
                    host="a",
                )
            )
            for store in (first, second)
        ]
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s) AND wait_event_type = 'Lock'"
        )
        while other.execute(waiting, (list(pids),)).fetchone() != (2,):
            assert not any(task.done() for task in racing), racing
            await asyncio.sleep(0.005)  # polls the server's view of both writers, not a delay
        other.execute("COMMIT")
        outcomes = await asyncio.gather(*racing)
    return [(session.id, made) for session, made in outcomes]


async def _open_sessions(store: Store) -> list[str]:
    sessions = await store.sessions.list_sessions()
    return [s.id for s in sessions if not s.is_closed]


async def test_two_hosts_making_a_conversations_first_session_at_once_make_one(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    first, second, target = two_stores
    outcomes = await _race(first, second, target, replacing=None)
    assert sorted(made for _, made in outcomes) == [False, True]
    [winner] = {session_id for session_id, _ in outcomes}  # the loser was given the winner's
    assert await _open_sessions(first) == [winner]
    routed = await second.sessions.lookup_route(KEY)
    assert routed is not None and routed.id == winner


async def test_two_hosts_replacing_a_closed_session_at_once_make_one(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    first, second, target = two_stores
    [(old, made)] = [
        (s.id, m)
        for s, m in [
            await first.sessions.create_routed(
                KEY, replacing=None, project="pa", agent_kind=AgentKind.CODEX_APP_SERVER
            )
        ]
    ]
    assert made
    await first.sessions.close(old, reason="/new")
    outcomes = await _race(first, second, target, replacing=old)
    assert sorted(made for _, made in outcomes) == [False, True]
    [winner] = {session_id for session_id, _ in outcomes}
    assert winner != old
    assert await _open_sessions(second) == [winner]


async def test_a_first_message_received_by_two_hosts_at_once_runs_in_one_session(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        # two people's first messages in one conversation, one through each host, at once
        await asyncio.gather(a.memory.say(ON_A, ALICE, "one"), b.memory.say(ON_A, ALICE, "two"))
        await a.text_where(lambda text: text == "echo: one", ON_A)
        await a.text_where(lambda text: text == "echo: two", ON_A)
        sessions = await a.gateway.store.sessions.list_sessions()
        assert len(sessions) == 1, sessions
        assert sessions[0].host == "a"
        assert b.gateway.existing_runner(sessions[0].id) is None
