"""bench/pg_drivers.py at a toy size: every driver did the whole approval, and the round
trips it reports are the statements (or the pipeline's waits) it ran."""

from __future__ import annotations

import psycopg

from bench import pg_drivers
from tests.pg_cluster import PgCluster


async def test_each_driver_runs_every_approval_to_its_end(pg_cluster: PgCluster) -> None:
    figures = await pg_drivers.measure(pg_cluster, count=3, warmup=1, rounds=1)
    values = {figure.name.split(":")[0]: figure.value for figure in figures}
    assert pg_drivers.statement_trips(pg_drivers.APPROVAL) == 56
    assert pg_drivers.pipelined_trips(pg_drivers.APPROVAL) == 14
    assert "56 trips per approval" in values["asyncpg"]
    assert "56 trips per approval" in values["psycopg"]
    assert "14 trips per approval" in values["psycopg (pipeline)"]
    assert "14 trips per approval" in values["psycopg sync on a thread (pipeline)"]
    for label, _ in pg_drivers.DRIVERS:
        dsn = pg_cluster.dsn_for(f"bench_{label}_0")
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cur = await conn.execute(
                "SELECT count(*) FILTER (WHERE i.state = 'resolved'), count(d.*), count(r.*),"
                " count(*) FILTER (WHERE m.state = 'edited')"
                " FROM interactions i LEFT JOIN decisions d ON d.interaction_id = i.id"
                " LEFT JOIN resolutions r ON r.interaction_id = i.id"
                " LEFT JOIN interaction_messages m ON m.interaction_id = i.id"
            )
            assert await cur.fetchone() == (4, 4, 4, 4), label  # warmup + count, each whole
