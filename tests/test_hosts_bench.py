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
