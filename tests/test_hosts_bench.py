"""bench/hosts.py at a toy size: three host processes, every approval decided, written to
its agent and recorded once, a peak RSS for each host."""

from __future__ import annotations

from pathlib import Path

from bench import hosts
from tests.pg_cluster import PgCluster


async def test_the_three_host_bench_runs_and_counts_every_approval_once(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    result = await hosts.measure(tmp_path, pg_database.dsn, sessions=2, approvals=2)
    assert result.expected == 12
    assert result.decisions == result.deliveries_ok == 12
    assert result.received == {"h0": 4, "h1": 4, "h2": 4}
    assert len(result.latencies_ms) == 12
    assert set(result.peak_rss_mb) == {"h0", "h1", "h2"}
    assert all(mb > 0 for mb in result.peak_rss_mb.values())


async def test_an_open_loop_run_then_a_closed_one_on_the_same_ledger_count_their_own(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    offered = await hosts.measure_offered(
        tmp_path / "rate", pg_database.dsn, sessions=2, rate=4, seconds=1
    )
    assert offered.offered == 12  # 4 a second for 1 s on each of 3 hosts, each settled
    assert len(offered.arrival_ms) == 12 and 0 <= offered.waited <= 12
    [click, arrival, done] = hosts.offered_figures(offered)
    assert "(n=12)" in click.value and "waited for a free session" in arrival.value
    assert done.value.startswith("12 approvals in ")
    # a closed-loop run after it on the same ledger: its own decisions, not the earlier ones
    closed = await hosts.measure(tmp_path / "sat", pg_database.dsn, sessions=1, approvals=1)
    assert closed.decisions == closed.deliveries_ok == 3
    assert "busy sessions per host" in hosts.saturation_figure(closed).name
