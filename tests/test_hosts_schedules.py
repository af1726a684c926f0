"""Scheduled work on two hosts sharing one PostgreSQL ledger (issue 35): each run happens once
whichever hosts look at it, and a restart after every host was down runs a missed run once
within the grace period, and records and says one missed beyond it. The scheduler's clock is
the clock file the environment names (gateway/clock.py), read by both hosts."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.clock import CLOCK_FILE_ENVIRONMENT, FileClock
from gateway.config.ledger_url import PgTarget
from gateway.sessions.faults import CRASH_EXIT_CODE
from gateway.store.schedules import RunState
from tests.gateway_harness import ALICE, Running
from tests.harness.driver import (
    end_leftover_agents,
    gateway_process,
    open_ledger,
    room,
    scripted_project,
    write_config,
)
from tests.hosts_harness import ON_A, both_running, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(90)

START = datetime(2026, 6, 1, 6, 0, tzinfo=UTC)


def said(hosts: tuple[Running, Running], text: str) -> int:
    """How many times ``text`` was said in ON_A, on both hosts' platforms."""
    return sum(host.memory.texts(ON_A).count(text) for host in hosts)


async def ticks(hosts: tuple[Running, Running]) -> None:
    """Both hosts' schedulers make a pass at the same time."""
    passes = []
    for host in hosts:
        assert host.gateway.scheduler is not None
        passes.append(host.gateway.scheduler.tick())
    await asyncio.gather(*passes)


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileClock:
    made = FileClock(tmp_path / "clock")
    made.set(START)
    monkeypatch.setenv(CLOCK_FILE_ENVIRONMENT, str(made.path))  # the gateways' clock seam
    return made


async def test_each_run_happens_once_with_both_hosts_up(
    tmp_path: Path, pg_database: PgCluster, clock: FileClock
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        # made through host b, for project pa (host a's)
        await b.memory.say(ON_A, ALICE, "/every 0 * * * * check CI")
        await b.wait_for(lambda: b.memory.texts(ON_A) or None)
        assert b.memory.texts(ON_A)[0].startswith("⏰ Schedule S1 made: every 0 * * * * (UTC)")
        for hour in (7, 8, 9):
            on_a.turn_over.clear()
            clock.set(START.replace(hour=hour))
            await ticks((a, b))
            await ticks((a, b))
            await a.wait_for(
                lambda h=hour: a.memory.texts(ON_A).count("echo: check CI") == h - 6 or None
            )
            # the run's turn is over in the ledger before the next is due: else the next
            # is skipped ("still working"), as it should be
            await asyncio.wait_for(on_a.turn_over.wait(), 30)
        assert said((a, b), "⏰ scheduled: check CI") == 3
        runs = await a.gateway.store.schedules.runs(1)
        assert [run.due_at.hour for run in runs] == [9, 8, 7]
        claimed = await a.gateway.store.audit.entries(event="schedule.claimed")
        assert len(claimed) == 3


async def test_a_restart_runs_a_missed_run_within_the_grace_once_and_skips_one_beyond(
    tmp_path: Path, pg_database: PgCluster, clock: FileClock
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        await a.memory.say(ON_A, ALICE, "/every 0 7 * * * morning report")
        await a.memory.say(ON_A, ALICE, "/every 30 7 * * * half past report")
        await a.wait_for(lambda: len(a.memory.texts(ON_A)) >= 2 or None)
    # every host is down from 06:00 to 08:10: 07:00 is 70 minutes late (beyond the default
    # grace of 60), 07:30 is 40 minutes late (within it)
    clock.set(START + timedelta(hours=2, minutes=10))
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        await ticks((a, b))
        await a.wait_for(lambda: a.memory.texts(ON_A).count("echo: half past report") or None)
        await ticks((a, b))
        assert said((a, b), "⏰ scheduled: half past report") == 1
        assert said((a, b), "⏰ scheduled: morning report") == 0
        skipped = (
            "⏰ Schedule S1: the run of 2026-06-01 07:00 UTC was skipped: missed: no host was"
            " running at the time, and the grace period had passed."
        )
        assert said((a, b), skipped) == 1
        morning = await a.gateway.store.schedules.get(1)
        assert morning is not None and morning.next_at == datetime(2026, 6, 2, 7, 0, tzinfo=UTC)


async def test_a_run_whose_claiming_host_dies_after_the_claim_is_taken_over_once(
    tmp_path: Path, pg_database: PgCluster, clock: FileClock
) -> None:
    """Real gateway processes on hosts a and b (tests/harness/gateway_proc.py), both reading
    the clock file. Host a, alone, claims the 07:00 run of project pb (host b's) and dies at
    once (the crash point ``schedule_claimed``: the claim committed, no session made yet).
    Host b, started after, takes the run over once a's lease is gone and runs it, without
    waiting for a; a, back, does not run it again; the 08:00 run happens once with both up.
    The scripted agent's prompt log says what each run asked."""
    prompts = tmp_path / "prompts.jsonl"
    projects = [
        scripted_project("pa", "normal", tmp_path / "work-a", channel="a"),
        scripted_project("pb", "normal", tmp_path / "work-b", channel="b", prompt_log=prompts),
    ]
    config = write_config(
        tmp_path / "hosts.toml",
        tmp_path / "data",
        projects,
        store=PgTarget(url=pg_database.dsn),
        hosts={"pa": "a", "pb": "b"},
        host_lease_seconds=3.0,
    )
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("[gateway]\n", "[gateway]\nschedule_poll_seconds = 0.1\n"))
    logs = tmp_path / "logs"
    on_b = room("b")
    a_dir, b_dir = tmp_path / "data-a", tmp_path / "data-b"
    try:
        async with gateway_process(
            config, logs, host="a", data_dir=a_dir, crash_at="schedule_claimed"
        ) as a:
            await a.say(on_b, "alice", "/every 0 * * * * check CI")
            await a.text_containing("⏰ Schedule S1 made", on_b)
            clock.set(START.replace(hour=7))
            assert await a.exited() == CRASH_EXIT_CODE
        async with open_ledger(tmp_path / "data") as store:
            [claimed] = await store.schedules.runs(1)
        assert (claimed.host, claimed.state) == ("a", RunState.CLAIMED)
        async with gateway_process(config, logs, host="b", data_dir=b_dir) as b:
            await b.text_containing("echo: check CI", on_b)  # a is still down
            async with gateway_process(config, logs, host="a", data_dir=a_dir) as a:
                clock.set(START.replace(hour=8))
                await b.wait_for(
                    lambda: b.texts(on_b).count("echo: check CI") == 2 or None,
                    what="the 08:00 run's answer",
                )
                shown = a.texts(on_b) + b.texts(on_b)
                assert shown.count("⏰ scheduled: check CI") == 2
        asked = [json.loads(line)["text"] for line in prompts.read_text().splitlines()]
        assert asked == ["check CI", "check CI"]  # 07:00 once, 08:00 once
        async with open_ledger(tmp_path / "data") as store:
            runs = await store.schedules.runs(1)
            taken = await store.audit.entries(event="schedule.taken_over")
        assert [run.due_at.hour for run in runs] == [8, 7]
        assert runs[1].host == "b"
        assert [entry.details["host"] for entry in taken] == ["b"]
    finally:
        await end_leftover_agents(tmp_path / "data")


async def test_a_run_whose_host_is_sigkilled_while_its_card_waits_is_not_run_again(
    tmp_path: Path, pg_database: PgCluster, clock: FileClock
) -> None:
    """Real gateway processes: the 07:00 run's agent, on host a, asks for an approval; a is
    SIGKILLed while the card waits. Host b reaps it; the 08:00 run, claimed by b, is skipped
    and said (a, which runs the conversation's session, is down); a, back, runs the 09:00
    run. The agent was asked twice: the run cut short by the kill is never run again."""
    prompts = tmp_path / "prompts.jsonl"
    projects = [
        scripted_project("pa", "normal", tmp_path / "work-a", channel="a", prompt_log=prompts),
        scripted_project("pb", "normal", tmp_path / "work-b", channel="b"),
    ]
    config = write_config(
        tmp_path / "hosts.toml",
        tmp_path / "data",
        projects,
        store=PgTarget(url=pg_database.dsn),
        hosts={"pa": "a", "pb": "b"},
        host_lease_seconds=3.0,
    )
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("[gateway]\n", "[gateway]\nschedule_poll_seconds = 0.1\n"))
    logs = tmp_path / "logs"
    on_a = room("a")
    a_dir, b_dir = tmp_path / "data-a", tmp_path / "data-b"
    try:
        async with gateway_process(config, logs, host="b", data_dir=b_dir) as b:
            async with gateway_process(config, logs, host="a", data_dir=a_dir) as a:
                await a.say(on_a, "alice", "/every 0 * * * * approve the deploy")
                await a.text_containing("⏰ Schedule S1 made", on_a)
                clock.set(START.replace(hour=7))
                await a.card_where(lambda card: bool(card["actions"]), on_a)
                a.kill()
                await a.exited()
            await b.text_containing("Host a stopped answering the ledger", on_a)
            clock.set(START.replace(hour=8))
            skipped = await b.text_containing("⏰ Schedule S1: the run of", on_a)
            assert skipped == (
                "⏰ Schedule S1: the run of 2026-06-01 08:00 UTC was skipped: host a, which runs"
                " the conversation's session, is not running."
            )
            before = b.texts(on_a).count("⏰ scheduled: approve the deploy")
            async with gateway_process(config, logs, host="a", data_dir=a_dir) as a:
                clock.set(START.replace(hour=9))
                # said by whichever host claimed it; its card by a, which runs the session
                await a.card_where(lambda card: bool(card["actions"]), on_a)  # a new process
                shown = a.texts(on_a) + b.texts(on_a)
                assert shown.count("⏰ scheduled: approve the deploy") == before + 1
        asked = [json.loads(line)["text"] for line in prompts.read_text().splitlines()]
        assert asked == ["approve the deploy", "approve the deploy"]  # 07:00 and 09:00
        async with open_ledger(tmp_path / "data") as store:
            runs = await store.schedules.runs(1)
        assert [run.due_at.hour for run in runs] == [9, 8, 7]
        # 09:00 ran (its turn ended by a's shutdown, or not yet settled); 08:00 was skipped
        assert runs[0].state in (RunState.STARTED, RunState.FAILED)
        assert runs[1].state is RunState.SKIPPED
    finally:
        await end_leftover_agents(tmp_path / "data")
