"""bench/cross_host.py at a toy size: every approval written once, both figures measured."""

from __future__ import annotations

from pathlib import Path

from bench import cross_host
from tests.pg_cluster import PgCluster


async def test_the_cross_host_bench_runs(tmp_path: Path, pg_database: PgCluster) -> None:
    figures = await cross_host.measure(tmp_path, pg_database.dsn, count=6, warmup=1)
    assert {where: len(values) for where, values in figures.items()} == {
        "one host": 2,
        "across hosts": 2,
    }
