"""Races that SQLite's single writer hides, on PostgreSQL (issue 18): two stores on one
database (each with its own connections and threads, as two gateway hosts have) writing at
once, and a connection cut in the middle of a decision."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import psycopg
import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import Decision, Resolution
from gateway.errors import AlreadyDecided
from gateway.interactions.machine import Interaction
from gateway.store.database import RETRIES, Conn
from gateway.store.dialect import FOR_UPDATE
from gateway.store.store import Store
from tests.pg_cluster import PgCluster, fresh_database
from tests.store_helpers import ALICE, BOB, TELEGRAM, SteppingClock, approval, running_session

pytestmark = pytest.mark.timeout(60)


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


async def test_two_hosts_deciding_one_interaction_at_once_make_one_decision(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    first, second, _ = two_stores
    session, epoch = await running_session(first)
    for k in range(10):
        opened = await first.interactions.create(session.id, epoch, approval(f"codex:{k}"))
        interaction_id = opened.interaction.id
        outcomes = await asyncio.gather(
            first.interactions.decide(
                interaction_id,
                expected_version=1,
                actor=ALICE,
                decision=Decision(action_id="accept"),
            ),
            second.interactions.decide(
                interaction_id,
                expected_version=1,
                actor=BOB,
                decision=Decision(action_id="decline"),
            ),
            return_exceptions=True,
        )
        decided = [o for o in outcomes if isinstance(o, Interaction)]
        refused = [o for o in outcomes if isinstance(o, AlreadyDecided)]
        assert len(decided) == 1 and len(refused) == 1, outcomes
        rows = await second.writer.read(
            lambda conn, i=interaction_id: conn.execute(
                "SELECT actor_user_id FROM decisions WHERE interaction_id = ?", (i,)
            ).fetchall()
        )
        assert len(rows) == 1


async def test_two_hosts_enqueuing_into_one_session_keep_positions_unique_and_ordered(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    first, second, _ = two_stores
    session, _ = await running_session(first)
    results = await asyncio.gather(
        *(
            (first if k % 2 else second).prompts.enqueue(
                session.id,
                conversation=TELEGRAM,
                platform_message_id=f"m{k}",
                author=ALICE,
                text=f"message {k}",
                max_depth=100,
            )
            for k in range(20)
        )
    )
    assert all(result.prompt is not None for result in results)
    queued = await first.prompts.list_queued(session.id)
    assert [prompt.position for prompt in queued] == list(range(1, 21))
    assert len({prompt.platform_message_id for prompt in queued}) == 20


async def test_a_deadlock_between_two_hosts_is_run_again_whole(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    # each locks one session's row, then (once both hold one) the other's: PostgreSQL ends
    # one transaction with 40P01, and the store runs that one again from its BEGIN
    first, second, _ = two_stores
    one, _ = await running_session(first)
    other, _ = await running_session(first, project="other")
    holding = {"first": threading.Event(), "second": threading.Event()}
    attempts = {"first": 0, "second": 0}

    def crossing(name: str, mine: str, theirs: str, peer: str) -> Callable[[Conn], None]:
        def work(conn: Conn) -> None:
            attempts[name] += 1
            lock = f"SELECT id FROM sessions WHERE id = ?{FOR_UPDATE}"
            conn.execute(lock, (mine,)).fetchone()
            if attempts[name] == 1:
                holding[name].set()
                assert holding[peer].wait(30)
            conn.execute(lock, (theirs,)).fetchone()

        return work

    await asyncio.gather(
        first.writer.write(crossing("first", one.id, other.id, "second")),
        second.writer.write(crossing("second", other.id, one.id, "first")),
    )
    # one ran once; PostgreSQL ended the other, which ran again (a second deadlock with the
    # survivor is possible before it took its locks: retries pause a random moment)
    ran_once, ran_again = sorted(attempts.values())
    assert ran_once == 1 and 2 <= ran_again <= RETRIES


async def _backend_pid(store: Store) -> int:
    def pid(conn: Conn) -> int:
        return int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])

    return await store.writer.read(pid)


async def test_a_connection_cut_in_the_middle_of_a_decision_is_run_again_once(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    """The writer's backend is ended while a decision waits before its COMMIT was sent: the
    server rolls the half-done decision back, and the store runs it again, once, on a new
    connection (nothing of it had been written): one decision, one audit entry."""
    store, _, target = two_stores
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, approval())
    interaction_id = opened.interaction.id
    writer_pid = await _backend_pid(store)
    with contextlib.closing(psycopg.connect(target.url, autocommit=True)) as other:
        # the decision's last write is its audit entry: hold it there, after the interaction
        # moved and the decision row was written, and cut the writer's connection
        other.execute("BEGIN")
        other.execute("LOCK TABLE audit IN EXCLUSIVE MODE")
        deciding = asyncio.create_task(
            store.interactions.decide(
                interaction_id,
                expected_version=1,
                actor=ALICE,
                decision=Decision(action_id="accept"),
            )
        )
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'"
        )
        while other.execute(waiting, (writer_pid,)).fetchone() != (1,):
            assert not deciding.done(), deciding
            await asyncio.sleep(0.005)  # polls the server's view of the writer, not a delay
        other.execute("SELECT pg_terminate_backend(%s)", (writer_pid,))
        other.execute("ROLLBACK")
        decided = await deciding
        rows = other.execute(
            "SELECT (SELECT count(*) FROM decisions WHERE interaction_id = %s),"
            " (SELECT count(*) FROM audit WHERE interaction_id = %s"
            "  AND event = 'interaction.decided')",
            (interaction_id, interaction_id),
        ).fetchone()
    assert decided.decision is not None and decided.decision.actor == ALICE
    assert rows == (1, 1)
    assert await _backend_pid(store) != writer_pid


async def test_a_move_that_waited_for_another_host_s_write_shows_what_that_write_recorded(
    two_stores: tuple[Store, Store, PgTarget],
) -> None:
    """A move's locked read that waits for another host's write gets that host's row but
    the facts (joins) as its statement's snapshot had them: the store reads the request
    again under the lock, so the move returns what the ledger holds, the other host's
    failed write included, and nothing is read back where no lock waited (issue 36)."""
    store, _, target = two_stores
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, approval("codex:held"))
    interaction_id = opened.interaction.id
    await store.interactions.decide(
        interaction_id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    writer_pid = await _backend_pid(store)
    with contextlib.closing(psycopg.connect(target.url, autocommit=True)) as other:
        # the other host records a failed write (its fact and the version bumped), and has
        # not committed yet when the agent's close comes here
        other.execute("BEGIN")
        other.execute(
            "UPDATE interactions SET version = version + 1 WHERE id = %s", (interaction_id,)
        )
        other.execute(
            "INSERT INTO deliveries (interaction_id, outcome, error, at)"
            " VALUES (%s, 'failed', 'broken pipe', %s)",
            (interaction_id, store.writer.now()),
        )
        closing = asyncio.create_task(
            store.interactions.close_from_agent(
                session.id, epoch, "codex:held", how=Resolution.ANSWERED
            )
        )
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'"
        )
        while other.execute(waiting, (writer_pid,)).fetchone() != (1,):
            assert not closing.done(), closing
            await asyncio.sleep(0.005)  # polls the server's view of the writer, not a delay
        other.execute("COMMIT")
        closed = await closing
    assert closed is not None
    assert closed.interaction.delivery is not None
    assert closed.interaction.delivery.error == "broken pipe"
    assert closed.interaction.version == 4
    assert closed.interaction == await store.interactions.get(interaction_id)
