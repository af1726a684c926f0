"""Event-driven sessions (issue 36): an idle host makes no write of its own; a rare,
read-only safety sweep asks the ledger once what there is to do and wakes only the runners
concerned; a wake-up lost while the listener was disconnected is acted on once it is back.

Through the whole gateway on the memory platform, the scripted agent
(tests/scripted_launcher.py) standing in for the agents, on SQLite and on the real
PostgreSQL cluster (tests/pg_cluster.py). A write is any call on the ledger's writer
(``Store.writer.write``), counted by store method; the host lease's renewals are on a
connection of their own and are not among them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config.model import ExpiryPolicy
from gateway.domain import ConversationRef, Decision, InteractionState
from gateway.sessions import engine
from gateway.sessions.runner import SessionRunner
from gateway.store.store import Store
from gateway.store.trip_tally import label_of
from tests.gateway_flows import session_of, settles
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A, both_running, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS, open_card, scripted_config, scripted_gateway
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(90)

NEVER = ExpiryPolicy()
APPROVE = Decision(action_id="accept")
DELIVERED = r'Approved \("Approve"\) by Alice at .* · sent to the agent · done'
SWEEPS = 3  # safety sweeps forced inside each window


def rooms(channel: str, count: int) -> list[ConversationRef]:
    return [
        ConversationRef(platform="memory", space="team", channel=channel, thread=f"t{n}")
        for n in range(count)
    ]


def count_writes(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the store method of every call on ``store``'s writer that writes."""
    writes: list[str] = []
    original = store.writer.write

    async def counted(work: Callable[..., Any], **options: Any) -> Any:
        writes.append(label_of(work))
        return await original(work, **options)

    monkeypatch.setattr(store.writer, "write", counted)
    return writes


async def idle_sessions(gw: Running, conversations: Iterable[ConversationRef]) -> list[str]:
    """A turn run in each conversation; returns the sessions, once each runner's agent is
    live and waits for work (nothing claimed, no turn)."""
    conversations = list(conversations)
    for conversation in conversations:
        await gw.memory.say(conversation, ALICE, f"hi {conversation.thread}")
    sessions: list[str] = []
    for conversation in conversations:
        await gw.text_where(f"echo: hi {conversation.thread}".__eq__, conversation)
        session = await session_of(gw, conversation)
        runner = gw.gateway.existing_runner(session.id)
        assert runner is not None
        await asyncio.wait_for(runner.waiting_for_work.wait(), gw.deadline)
        assert runner.agent is not None  # its agent lives on, idle
        sessions.append(session.id)
    return sessions


def calls(part: object, method: str, count: int, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set once ``part.method`` (a store method) has been called ``count`` times
    from now on."""
    done = asyncio.Event()
    made = 0
    original = getattr(part, method)

    async def counted(*args: Any, **options: Any) -> Any:
        nonlocal made
        result = await original(*args, **options)
        made += 1
        if made >= count:
            done.set()
        return result

    monkeypatch.setattr(part, method, counted)
    return done


def runner_of(gw: Running, session_id: str) -> SessionRunner:
    runner = gw.gateway.existing_runner(session_id)
    assert runner is not None
    return runner


# --- SQLite: one host ----------------------------------------------------------------------


async def test_an_idle_host_writes_nothing_while_its_safety_sweeps_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _launcher):
        sessions = await idle_sessions(gw, rooms("room", 6))
        writes = count_writes(gw.gateway.store, monkeypatch)
        for _ in range(SWEEPS):
            work = await gw.gateway.sweep_now()
            assert work is not None and work.nothing
        assert writes == []
        for session_id in sessions:  # still idle: nothing was claimed or run
            assert runner_of(gw, session_id).waiting_for_work.is_set()


async def test_the_safety_sweep_delivers_a_stranded_decision_and_wakes_only_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        await idle_sessions(gw, rooms("idle", 3))
        [room] = rooms("room", 1)
        asked = await open_card(gw, room, "approve")
        # committed with nothing written: its clicker cancelled as the commit landed
        decided = await gw.gateway.store.interactions.decide(
            asked.interaction.id,
            expected_version=asked.interaction.version,
            actor=ALICE,
            decision=APPROVE,
        )
        assert decided.state is InteractionState.DECIDED and decided.delivery is None
        writes = count_writes(gw.gateway.store, monkeypatch)
        work = await gw.gateway.sweep_now()
        assert work is not None
        assert work.stranded == (asked.interaction.session_id,)
        assert work.waiting == ()
        await settles(gw, asked, DELIVERED)
        assert launcher.received == [APPROVE]
        # the writes were the delivery's, none another session's claim
        assert "PromptQueue.claim_next" not in writes, writes
        after = await gw.gateway.sweep_now()
        assert after is not None and after.nothing


async def test_the_safety_sweep_starts_a_prompt_whose_wake_up_was_lost(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _launcher):
        [room] = rooms("room", 1)
        [session_id] = await idle_sessions(gw, [room])
        # queued in the ledger with no wake-up (as another host's, whose NOTIFY was lost)
        await gw.gateway.store.prompts.enqueue(
            session_id,
            conversation=room,
            platform_message_id="lost-1",
            author=ALICE,
            text="unseen",
            max_depth=10,
        )
        assert runner_of(gw, session_id).waiting_for_work.is_set()  # nobody told it
        work = await gw.gateway.sweep_now()
        assert work is not None and work.waiting == (session_id,)
        await gw.text_where(lambda text: text == "echo: unseen", room)


async def test_an_idle_ledger_s_retention_rounds_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = scripted_config(tmp_path, fast=NEVER)
    retention = config.gateway.retention.model_copy(update={"every_minutes": 0.001})
    config = config.model_copy(
        update={"gateway": config.gateway.model_copy(update={"retention": retention})}
    )
    async with scripted_gateway(config) as (gw, _launcher):
        await idle_sessions(gw, rooms("room", 2))
        writes = count_writes(gw.gateway.store, monkeypatch)
        rounds = calls(gw.gateway.store.retention, "due", SWEEPS, monkeypatch)
        await asyncio.wait_for(rounds.wait(), gw.deadline)
        assert writes == []  # nothing is old enough: no batch, no lease
        assert gw.gateway.last_prune is None


# --- PostgreSQL: two hosts -----------------------------------------------------------------


async def test_idle_hosts_on_a_shared_ledger_write_nothing_but_their_leases(
    tmp_path: Path, pg_database: PgCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the hosts' own periodic work, made frequent: the safety sweep and the drafts' purge
    monkeypatch.setattr(engine, "SAFETY_SWEEP_SECONDS", 0.05)
    monkeypatch.setattr(engine, "DRAFT_PURGE_SECONDS", 0.05)
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        await idle_sessions(a, rooms("a", 4))
        await idle_sessions(b, rooms("b", 4))
        writes_a = count_writes(a.gateway.store, monkeypatch)
        writes_b = count_writes(b.gateway.store, monkeypatch)
        rounds = [
            calls(host.gateway.store.host_work, "of_host", SWEEPS, monkeypatch) for host in (a, b)
        ] + [
            calls(host.gateway.store.form_drafts, "purgeable", SWEEPS, monkeypatch)
            for host in (a, b)
        ]
        assert a.gateway.host_lease is not None
        renewed = a.gateway.host_lease.renewed
        renewed.clear()
        # the window: every host's sweep and purge ran SWEEPS times, and a's lease renewed
        await asyncio.wait_for(
            asyncio.gather(renewed.wait(), *(done.wait() for done in rounds)), a.deadline
        )
        # and each host's scheduler passes (every 30 s), with no schedule and no run to take
        # over from a dead host (before: an empty UPDATE each pass, take_orphaned_runs)
        for host in (a, b):
            assert host.gateway.scheduler is not None
            for _ in range(SWEEPS):
                assert await host.gateway.scheduler.tick() == []
        assert writes_a == []
        assert writes_b == []


async def test_a_prompts_wake_up_runs_it_without_a_look_for_decisions(
    tmp_path: Path, pg_database: PgCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NOTIFY says what woke the host (migration 25): a prompt queued by another host
    makes the runner read its queue only, not look for decisions to deliver too."""
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        [session_id] = await idle_sessions(a, [ON_A])
        sweeps: list[str] = []
        original_sweep = a.gateway.broker.sweep

        async def sweep(session_id: str, epoch: int) -> int:
            sweeps.append(session_id)
            return await original_sweep(session_id, epoch)

        monkeypatch.setattr(a.gateway.broker, "sweep", sweep)
        # a message received by b for a's session: a is woken by the ledger, and runs it
        await b.memory.say(ON_A, ALICE, "next")
        await a.text_where(lambda text: text == "echo: next", ON_A)
        await asyncio.wait_for(runner_of(a, session_id).waiting_for_work.wait(), a.deadline)
        assert sweeps == []  # before: one look for decisions per message
        assert b.memory.messages() == []


async def hold_listener_down(a: Running, dsn: str) -> None:
    """a's wake-up listener loses its connection and is held down: a NOTIFY to a is lost."""
    a.gateway.listener_may_return.clear()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        cursor = await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query = 'LISTEN \"host_a\"'"
        )
        assert [row[0] for row in await cursor.fetchall()] == [True]
    await asyncio.wait_for(a.gateway.listener_lost.wait(), a.deadline)


async def test_a_decision_a_command_and_a_message_sent_while_the_listener_was_away_are_acted_on(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")  # a's turn waits for this decision
        await hold_listener_down(a, pg_database.dsn)
        # all received by b for a's session, each NOTIFY to a lost: a decision, a command
        # only a can answer (where the agent runs), and a message queued behind the turn
        ack = await b.memory.click(ON_A, ALICE, asked.token("Approve"))
        assert ack.accepted, ack.text
        await b.memory.say(ON_A, ALICE, "/grants")
        await b.memory.say(ON_A, ALICE, "after the card")
        assert on_a.received == []  # a heard nothing
        a.gateway.listener_may_return.set()  # it listens again: its catch-up sweeps once
        await settles(a, asked, DELIVERED)
        assert on_a.received == [APPROVE]
        await a.text_where(lambda text: text == "Grants in force: none.", ON_A)
        await a.text_where(lambda text: text == "echo: after the card", ON_A)
        assert on_b.received == []


async def test_a_wake_up_lost_while_the_listener_was_away_is_acted_on_once_it_is_back(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        [session_id] = await idle_sessions(a, [ON_A])
        await hold_listener_down(a, pg_database.dsn)
        # received by b for a's session: queued, its wake-up lost
        await b.memory.say(ON_A, ALICE, "while away")
        prompts = await a.gateway.store.prompts.list_queued(session_id)
        assert [p.text for p in prompts] == ["while away"]
        assert runner_of(a, session_id).waiting_for_work.is_set()  # a heard nothing
        a.gateway.listener_may_return.set()  # it listens again: its catch-up sweeps
        await a.text_where(lambda text: text == "echo: while away", ON_A)
        assert b.memory.messages() == []
