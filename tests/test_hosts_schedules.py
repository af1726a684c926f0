"""Scheduled work on two hosts sharing one PostgreSQL ledger (issue 35): each run happens once
whichever hosts look at it, and a restart after every host was down runs a missed run once
within the grace period, and records and says one missed beyond it. The scheduler's clock is
the clock file the environment names (gateway/clock.py), read by both hosts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.clock import CLOCK_FILE_ENVIRONMENT, FileClock
from tests.gateway_harness import ALICE, Running
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
            clock.set(START.replace(hour=hour))
            await ticks((a, b))
            await ticks((a, b))
            await a.wait_for(
                lambda h=hour: a.memory.texts(ON_A).count("echo: check CI") == h - 6 or None
            )
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
