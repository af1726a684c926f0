"""Host failure (issue 19, design point 9) on the real PostgreSQL cluster: each host holds the
lease host:<name>; when a host's lease lapses another fences it out and reaps it (its pending
cards orphaned, "host a stopped", its conversations told), and the host, on its return, ends
its agents and takes no input until it started over. Two Gateway objects in one process; a
SIGSTOP is the frozen renewer of host a (``LeaseHolder.pause``); the lease is short."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import psycopg

from gateway.config.ledger_url import PgTarget
from gateway.domain import ConversationRef, TurnStatus
from gateway.interactions.machine import InteractionState
from platforms.memory.platform import Rendered
from tests.gateway_harness import ALICE, Running
from tests.harness.driver import (
    end_leftover_agents,
    gateway_process,
    open_ledger,
    process_alive,
    room,
    scripted_project,
    write_config,
)
from tests.hosts_harness import ON_A, both_running, host_gateway, memory_of, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS, open_card
from tests.scripted_launcher import ScriptedLauncher

LEASE = 3.0  # seconds: the reap comes within it once a's renews stop (a loaded machine
# stalls an event loop for a fraction of a second: a lease much shorter would lapse by itself)
REAPED = r"Host a stopped answering the ledger before anyone answered"


def texts_with(host: Running, conversation: ConversationRef, words: str) -> list[str] | None:
    """The texts shown in ``conversation`` that say ``words``; None while there are none."""
    return [t for t in host.memory.texts(conversation) if words in t] or None


async def test_a_frozen_host_is_reaped_and_on_its_return_ends_its_agents_and_starts_over(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)
    stopped = asyncio.Event()

    async def on_stop() -> None:
        stopped.set()

    on_a, on_b = ScriptedLauncher(REQUESTS, on_stop=on_stop), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")
        lease_a = a.gateway.host_lease
        assert lease_a is not None and not a.gateway.fenced
        lease_a.pause()  # a is frozen: its renews stop

        def reaped() -> Rendered | None:  # a's card, edited by b (one bot: the same message)
            for shown in b.memory.cards(ON_A):
                card = shown.card
                if shown.ref.message_id == asked.shown.ref.message_id and card is not None:
                    if re.search(REAPED, card.status_line):
                        return shown
            return None

        card = await b.memory.wait_for(reaped)
        assert card.card is not None and card.card.actions == ()  # no button left
        record = await b.gateway.store.interactions.get(asked.interaction.id)
        assert record is not None and record.state is InteractionState.ORPHANED
        [told] = await b.memory.wait_for(lambda: texts_with(b, ON_A, "Host a stopped"))
        assert "its open requests can no longer be answered" in told

        # a, past its deadline, takes nothing: neither the click nor a message
        assert a.gateway.fenced
        ack = await a.memory.click(ON_A, ALICE, asked.token("Approve"))
        assert not ack.accepted
        assert "lost its hold on the ledger" in ack.text
        # nor does it tell a person a form may open: the same words as the click
        opened = await a.memory.open_form(ON_A, ALICE, asked.token("Approve"))
        assert (opened.accepted, opened.text) == (False, ack.text)
        await a.memory.say(ON_A, ALICE, "hello")
        assert texts_with(a, ON_A, "nothing was taken")
        assert not stopped.is_set()  # frozen: nothing ran yet

        lease_a.resume()  # continued: it finds its fence moved
        await stopped.wait()  # its agent ended
        await a.gateway.started_over.wait()
        assert not a.gateway.fenced
        # the turn it showed running there is told ended: no "typing…" for a turn gone
        signals = [signal.status for signal in a.memory.turns if signal.conversation == ON_A]
        assert signals.count(None) == 1 and signals[-1] is TurnStatus.FAILED, signals
        assert on_a.received == []  # nothing was written to its agent
        assert await a.gateway.store.sessions.live_epochs(host="a") == []

        # started over as after a restart: the next message starts its agent again
        await a.memory.say(ON_A, ALICE, "hello again")
        await a.memory.wait_for(lambda: texts_with(a, ON_A, "echo: hello again"))


async def test_a_sigkilled_host_process_is_reaped_and_its_agent_ended_when_it_returns(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """Real `agent-gateway` processes (tests/harness/gateway_proc.py) on hosts a and b, the
    scripted Codex agent of a in "linger" mode (it outlives its gateway, as an agent busy
    with a command would)."""
    target = PgTarget(url=pg_database.dsn)
    projects = [
        scripted_project("pa", "linger", tmp_path / "work-a", channel="a"),
        scripted_project("pb", "normal", tmp_path / "work-b", channel="b"),
    ]
    config = write_config(
        tmp_path / "hosts.toml",
        tmp_path / "data",
        projects,
        store=target,
        hosts={"pa": "a", "pb": "b"},
        host_lease_seconds=LEASE,
    )
    logs = tmp_path / "logs"
    on_a = room("a")
    try:
        async with gateway_process(config, logs, host="b", data_dir=tmp_path / "data-b") as b:
            async with gateway_process(config, logs, host="a", data_dir=tmp_path / "data-a") as a:
                await a.say(on_a, "alice", "approve this")
                shown = await a.card_where(lambda card: bool(card["actions"]), on_a)
                async with open_ledger(tmp_path / "data") as store:
                    [epoch] = await store.sessions.live_epochs(host="a")
                assert epoch.pid is not None and epoch.process_start_time is not None
                a.kill()
                await a.exited()
            reaped = await b.card_where(
                lambda card: "Host a stopped answering" in card["status_line"], on_a
            )
            assert reaped.id == shown.id  # a's card, edited by b
            assert reaped.card is not None and reaped.card["actions"] == []
            await b.text_containing("Host a stopped answering the ledger", on_a)
            # a's agent is on a's machine: b signals nothing, it still runs
            assert process_alive(epoch.pid, int(epoch.process_start_time))
            async with gateway_process(config, logs, host="a", data_dir=tmp_path / "data-a"):
                # a's lease taken again and its recovery done: the leftover agent ended
                assert not process_alive(epoch.pid, int(epoch.process_start_time))
    finally:
        await end_leftover_agents(tmp_path / "data")


async def test_a_sigstopped_host_process_is_reaped_and_when_continued_ends_its_agent(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """The real SIGSTOP: a's gateway process frozen past its lease with a card pending. b
    reaps it; a click and a message sent to a while it is frozen wait in its input, and
    when it is continued (SIGCONT) it refuses both, ends its agent, starts over, and the
    next message runs in a new agent."""
    target = PgTarget(url=pg_database.dsn)
    prompts = tmp_path / "prompts.jsonl"
    projects = [
        scripted_project("pa", "normal", tmp_path / "work-a", channel="a", prompt_log=prompts),
        scripted_project("pb", "normal", tmp_path / "work-b", channel="b"),
    ]
    config = write_config(
        tmp_path / "hosts.toml",
        tmp_path / "data",
        projects,
        store=target,
        hosts={"pa": "a", "pb": "b"},
        host_lease_seconds=LEASE,
    )
    logs = tmp_path / "logs"
    on_a = room("a")
    try:
        async with gateway_process(config, logs, host="b", data_dir=tmp_path / "data-b") as b:
            async with gateway_process(config, logs, host="a", data_dir=tmp_path / "data-a") as a:
                await a.say(on_a, "alice", "approve this")
                shown = await a.card_where(lambda card: bool(card["actions"]), on_a)
                assert shown.card is not None
                first = shown.card["actions"][0]
                assert first["effect"] == "allow", first
                allow = first["token"]
                [copy] = await a.until_cards_recorded()  # b edits the card a sent
                async with open_ledger(tmp_path / "data") as store:
                    [epoch] = await store.sessions.live_epochs(host="a")
                assert epoch.pid is not None and epoch.process_start_time is not None
                a.freeze()
                try:
                    reaped = await b.card_where(
                        lambda card: "Host a stopped answering" in card["status_line"], on_a
                    )
                    assert reaped.id == shown.id and reaped.card is not None
                    assert reaped.card["actions"] == []
                    await b.text_containing("Host a stopped answering the ledger", on_a)
                    # a click and a message reach a while it is frozen: they wait in its input
                    click = asyncio.create_task(a.click(on_a, "alice", allow))
                    said = asyncio.create_task(a.say(on_a, "alice", "hello"))
                    assert process_alive(epoch.pid, int(epoch.process_start_time))
                finally:
                    a.thaw()
                ack = await click
                assert not ack["accepted"]
                assert "lost its hold on the ledger" in ack["text"]
                await said
                await a.text_containing("nothing was taken", on_a)
                await a.started_over()
                assert a.leases_lost == 1
                assert not process_alive(epoch.pid, int(epoch.process_start_time))
                async with open_ledger(tmp_path / "data") as store:
                    record = await store.interactions.get(copy["interaction"])
                    assert await store.sessions.live_epochs(host="a") == []
                assert record is not None and record.state is InteractionState.ORPHANED
                assert record.decision is None  # the click decided nothing
                # started over: the next message runs, in a new agent
                await a.say(on_a, "alice", "hello again")
                await a.text_containing("echo: hello again", on_a)
                said_to = [json.loads(line) for line in prompts.read_text().splitlines()]
                assert [p["text"] for p in said_to] == ["approve this", "hello again"]
                assert said_to[1]["pid"] != epoch.pid
    finally:
        await end_leftover_agents(tmp_path / "data")


async def test_a_host_that_cannot_reach_the_ledger_takes_nothing_and_resumes_when_it_can(
    tmp_path: Path, pg_cluster: PgCluster, pg_database: PgCluster
) -> None:
    """Design point 10: the host's database refuses its connections (ALLOW_CONNECTIONS
    false, its connections ended) with a card pending: a click is answered "the ledger is
    unreachable", nothing is decided or written to the agent; once the database takes
    connections again the host's probe (taking its lease again) succeeds and it starts over."""
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)
    on_a = ScriptedLauncher(REQUESTS)
    name = pg_database.dbname
    async with host_gateway(config, tmp_path, "a", on_a) as gateway_a:
        a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
        asked = await open_card(a, ON_A, "approve")
        with psycopg.connect(pg_cluster.dsn, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            await gateway_a.lease_lost.wait()  # its next renew found no database
            ack = await a.memory.click(ON_A, ALICE, asked.token("Approve"))
            assert not ack.accepted
            assert ack.text == "The ledger is unreachable; try again in a moment."
            await a.memory.say(ON_A, ALICE, "hello")
            assert texts_with(a, ON_A, "The ledger is unreachable")
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await gateway_a.started_over.wait()
        assert on_a.received == []  # nothing was written to the agent
        record = await gateway_a.store.interactions.get(asked.interaction.id)
        assert record is not None and record.decision is None  # nothing was decided
        await a.memory.say(ON_A, ALICE, "hello again")
        await a.memory.wait_for(lambda: texts_with(a, ON_A, "echo: hello again"))
