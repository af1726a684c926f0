"""Every benchmark (bench/) still runs, at a toy size, and what it counts is right.

No timing is asserted here (TESTING.md: speed and memory targets live in the benchmarks, as
figures); only that each benchmark runs through the real gateway and that the facts it
reports are true: every decision reached the agent exactly once, the streamed text arrived
exactly, no platform that is not configured was imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import (
    agent_startup,
    concurrency,
    files_in,
    idle,
    interactions,
    ledger_pages,
    policy,
    startup,
    throughput,
)
from bench.__main__ import markdown
from bench.figures import Figure, machine, percentile
from gateway.config.ledger_url import PgTarget
from tests.pg_cluster import PgCluster

pytestmark = pytest.mark.timeout(180)


def figure(figures: list[Figure], name_part: str) -> Figure:
    [found] = [item for item in figures if name_part in item.name]
    return found


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 1001)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (
        500.0,
        990.0,
        1000.0,
    )
    assert percentile([7.0], 0.99) == 7.0


@pytest.mark.parametrize("agent", ["codex", "acp", "opencode"])
async def test_interactions_at_a_toy_size(tmp_path: Path, agent: str) -> None:
    figures = await interactions.measure(tmp_path, count=8, warmup=1, agent=agent)
    assert figure(figures, "exactly once").met is True
    assert "n=8" in figure(figures, "request line -> card").value
    assert "n=8" in figure(figures, "click -> response").value


async def test_interactions_counts_the_ledger_calls_of_each_approval(tmp_path: Path) -> None:
    figures = await interactions.measure(tmp_path, count=4, warmup=1, calls=True)
    # the click's decision: BEGIN, the locked read, the compare-and-set, the decision's row,
    # its audit, COMMIT; the moved request is not read back (SQLite)
    assert figure(figures, "per approval: InteractionLedger.decide").value == (
        "1.00 calls, 6.00 statements, 0.00 round trips"
    )
    assert not any(f.name == "per approval: SessionLedger.get" for f in figures)
    assert figure(figures, "per approval: all ledger calls").value.endswith(" round trips")


async def test_policy_at_a_toy_size(tmp_path: Path) -> None:
    figures = await policy.measure(tmp_path, count=4, warmup=1, rules=50)
    assert figure(figures, "exactly once").met is True  # the rules in force: each still decided
    assert "n=4" in figure(figures, "click -> response line read by the agent, 50 rules").value
    assert figure(figures, "walk of 50 rules").value.endswith(" µs")
    assert figure(figures, "click -> response line read by the agent: p99 of two").value.endswith(
        " ms"
    )  # the noise floor beside the rules' Δp99


@pytest.mark.parametrize("agent", ["codex", "opencode"])
async def test_throughput_at_a_toy_size(tmp_path: Path, agent: str) -> None:
    figures = await throughput.measure(tmp_path, deltas=500, agent=agent)
    assert figure(figures, "final text shown exactly").met is True
    assert "events/s" in figure(figures, "through the gateway").value
    assert "events/s" in figure(figures, "json.loads loop").value


async def test_concurrency_at_a_toy_size(tmp_path: Path) -> None:
    figures = await concurrency.measure(tmp_path, sessions=3, trips=2)
    assert figure(figures, "exactly once").met is True
    assert "n=6" in figure(figures, "click -> response").value


async def test_concurrency_of_people_who_read_their_cards_at_a_toy_size(tmp_path: Path) -> None:
    """The warm-up's approvals are made and delivered, and left out of the figures."""
    figures = await concurrency.measure(tmp_path, sessions=3, trips=2, think=0.01)
    once = figure(figures, "exactly once")
    assert once.met is True and "6/6 at the agent" in once.value
    assert "ledger: 9/9 with one ok delivery" in once.value  # the 3 of the warm-up too
    assert "n=6" in figure(figures, "click -> response").value
    assert figure(figures, "click -> response").target == "p99 < 20 ms"


@pytest.mark.real_agent("opencode")
@pytest.mark.real_agent("codex-acp")
async def test_agent_startup_at_a_toy_size(
    opencode_bin: str, codex_acp_bin: str, tmp_path: Path
) -> None:
    figures = await agent_startup.measure(
        tmp_path, runs=1, opencode=Path(opencode_bin), codex_acp=Path(codex_acp_bin)
    )
    assert "median of 1" in figure(figures, "listening line").value
    assert "median of 1" in figure(figures, "listening, events, session").value
    assert "MB" in figure(figures, "opencode serve RSS").value
    assert "median of 1" in figure(figures, "initialize -> session/new").value
    assert "MB" in figure(figures, "codex-acp RSS").value


async def test_startup_imports_only_configured_platforms(tmp_path: Path) -> None:
    figures = await startup.measure(tmp_path, runs=1, agents=False)
    checks = [item for item in figures if "other platforms imported" in item.name]
    assert checks, "no platform module found under platforms/"
    assert all(item.met for item in checks), [item.value for item in checks]
    assert not [item for item in figures if item.value.startswith("does not start")]


def test_the_table_says_where_and_when() -> None:
    table = markdown(
        [Figure(benchmark="b", name="n", value="1 | 2", target="t", met=False)],
        machine(),
        "python -m bench",
    )
    assert "cores" in table and "load average" in table
    assert "| b | n | 1 \\| 2 | t ✗ missed |" in table


async def test_interactions_on_slack_at_a_toy_size(tmp_path: Path) -> None:
    figures = await interactions.measure(tmp_path, count=3, warmup=1, platform="slack")
    assert figure(figures, "exactly once").met is True
    assert "n=3" in figure(figures, "click -> response").value


async def test_interactions_on_discord_at_a_toy_size(tmp_path: Path) -> None:
    figures = await interactions.measure(tmp_path, count=3, warmup=1, platform="discord")
    assert figure(figures, "exactly once").met is True
    assert "(n=3)" in figure(figures, "interaction -> callback").value


async def test_slack_pacing_at_a_toy_size() -> None:
    from bench import slack_pacing

    found = await slack_pacing.measure("outbox", 2, 2)
    assert (found["429s"], found["failed"]) == (0, 0), found
    assert found["final_after_s"] is not None  # every thread's exact final text shown


async def test_discord_pacing_at_a_toy_size() -> None:
    from bench import discord_pacing

    found = await discord_pacing.measure("outbox", 2, 2)
    assert (found["429s"], found["failed"]) == (0, 0), found
    assert found["final_after_s"] is not None  # every thread's exact final text shown


async def test_paced_turns_at_a_toy_size() -> None:
    from bench import paced_turns

    found = await paced_turns.measure(turns=1, seconds=1.0, every=0.1)
    assert found["429s"] == 0, found
    assert found["deltas_per_turn"] == 10 and found["edits_per_turn_max"] >= 0
    assert [f.name for f in paced_turns.figures_of(found)][-1] == "429s"


async def test_files_in_at_a_toy_size_saves_the_file_whole(tmp_path: Path) -> None:
    figures = await files_in.measure(tmp_path, megabytes=1)
    assert figure(figures, "Telegram document").met is True  # the bytes the fake sent


async def test_ledger_pages_at_a_toy_size(tmp_path: Path) -> None:
    figures = await ledger_pages.measure(tmp_path, interactions=300, reads=3)
    assert figure(figures, "ledger filled").value.startswith("300 closed requests")
    assert "n=3" in figure(figures, "console's first page, indexed").value
    assert "n=3" in figure(figures, "/pending, no index").value
    assert figure(figures, "prune: every").value.startswith("300 requests in ")


async def test_idle_at_a_toy_size(tmp_path: Path) -> None:
    result = await idle.measure(tmp_path, sessions=3, window=0.5, dsn=None)
    assert result.sessions == 3 and result.store == "sqlite"  # each opened: its echo shown
    assert result.window_s >= 0.5 and result.cpu_s >= 0
    assert sum(result.by_method.values()) <= result.writer_calls  # the tally saw the writer's
    figures = idle.figures(result)
    assert "% of one core" in figure(figures, "gateway CPU").value
    assert "a second" in figure(figures, "ledger calls on the writer").value


async def test_ledger_pages_on_postgresql_at_a_toy_size(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    figures = await ledger_pages.measure(
        tmp_path, interactions=200, reads=2, postgresql=PgTarget(url=pg_database.dsn)
    )
    assert figure(figures, "ledger filled").value.startswith("200 closed requests")
    assert "n=2" in figure(figures, "/pending, indexed").value
    assert figure(figures, "prune: every").value.startswith("200 requests in ")
