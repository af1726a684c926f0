"""The console's first page and ``/pending`` on a ledger with many closed requests, without
and with the indexes they read (migrations 20 and 28); then a prune of that ledger (issue 36).

    python -m bench.ledger_pages [--interactions 1000000] [--reads 200]
                                 [--store sqlite|postgresql] [--json]

A SQLite ledger gets ``--interactions`` closed requests (written straight into its tables,
one a second, 800 days back, in a session whose agent process ended) and three pending ones
in a live session. The reads are the store's own: ``list_open_and_closed(closed_limit=50)``
(the console's first page) and ``list_pending_view(session)`` (``/pending``), ``--reads`` times
each (at most 10 without the index), first with the two indexes dropped (the code before
issue 36: a scan of the whole table and a sort), then with them made again. Last,
``store.retention.prune`` of every closed request (past both clocks), while a live session
writes one audit entry after another: the prune's time and batches, and what each of the
live session's writes waited. Figures, not assertions. ``--store postgresql`` does the same
on a throwaway PostgreSQL cluster (tests/pg_cluster.py) instead of a SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.figures import Figure, Latency, emit
from gateway.config.ledger_url import PgTarget
from gateway.domain import AgentKind
from gateway.store.codec import encode_detail
from gateway.store.database import Conn
from gateway.store.retention import PruneCounts, RetentionRules
from gateway.store.store import Store
from tests.store_helpers import approval

__all__ = ["measure"]

NAME = "ledger_pages"
FIRST_PAGE = 50
UNINDEXED_READS = 10
_CHUNK = 20_000
_DETAIL = encode_detail(approval().detail)
# the indexes the two reads use, as migrations 20 and 28 made them (gateway/store/migrations.py)
_INDEXES = {
    "interactions_created": "CREATE INDEX interactions_created ON interactions(created_at, id)",
    "interactions_live": "CREATE INDEX interactions_live ON interactions(created_at, id)"
    " WHERE state = 'pending' OR state = 'decided' OR state = 'delivered'",
}


async def _fill(store: Store, count: int) -> str:
    """``count`` closed requests in an ended session, three pending in a live one; the live
    session's id."""
    closed = await store.sessions.create(project="bench", agent_kind=AgentKind.CODEX_APP_SERVER)
    ended = await store.sessions.begin_epoch(
        closed.id, pid=1, pgid=1, process_start_time=1, agent_version="bench"
    )
    live = await store.sessions.create(project="bench", agent_kind=AgentKind.CODEX_APP_SERVER)
    epoch = await store.sessions.begin_epoch(
        live.id, pid=2, pgid=2, process_start_time=2, agent_version="bench"
    )
    for n in range(3):
        await store.interactions.create(live.id, epoch, approval(f"bench:{n}"))
    start = datetime.now(UTC) - timedelta(days=800)
    for first in range(0, count, _CHUNK):
        chunk = functools.partial(
            _insert_closed,
            first=first,
            last=min(count, first + _CHUNK),
            session_id=closed.id,
            epoch=ended,
            start=start,
        )
        await store.writer.write(chunk)
    await store.sessions.end_epoch(closed.id, ended, exit_description="bench")
    await store.writer.write(lambda conn: conn.execute("ANALYZE"))
    return live.id


def _insert_closed(
    conn: Conn, *, first: int, last: int, session_id: str, epoch: int, start: datetime
) -> None:
    for n in range(first, last):
        at = (start + timedelta(seconds=n)).isoformat(timespec="microseconds")
        conn.execute(
            "INSERT INTO interactions (id, session_id, runtime_epoch, native_key, kind,"
            " title, summary, detail_json, actions_json, questions_json, state, version,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, 'approval', ?,"
            " 'the agent wants to run a command', ?, '[]', '[]', 'resolved', 3, ?, ?)",
            (f"b{n:09d}", session_id, epoch, f"k{n}", "Run ls?", _DETAIL, at, at),
        )


def _run(conn: Conn, *, sql: str) -> None:
    conn.execute(sql)


async def _reads(store: Store, session_id: str, reads: int) -> tuple[Latency, Latency]:
    page: list[int] = []
    pending: list[int] = []
    for _ in range(reads):
        began = time.perf_counter_ns()
        live, closed = await store.interactions.list_open_and_closed(closed_limit=FIRST_PAGE)
        page.append(time.perf_counter_ns() - began)
        assert len(live) == 3 and len(closed) == FIRST_PAGE
        began = time.perf_counter_ns()
        assert len(await store.interactions.list_pending_view(session_id)) == 3
        pending.append(time.perf_counter_ns() - began)
    return Latency.of_ns(page), Latency.of_ns(pending)


async def _prune(store: Store, rules: RetentionRules, done: asyncio.Event) -> PruneCounts | None:
    try:
        return await store.retention.prune(rules)
    finally:
        done.set()


async def _live_writes(store: Store, done: asyncio.Event) -> Latency:
    """A live session's store calls (an audit entry each, one after another) while the prune
    runs: what each waited."""
    waited: list[int] = []
    while not done.is_set() or not waited:
        began = time.perf_counter_ns()
        await store.audit.record("bench.live_write", actor="bench")
        waited.append(time.perf_counter_ns() - began)
    return Latency.of_ns(waited)


async def _page_reads(store: Store, done: asyncio.Event) -> Latency:
    """The console's first page, read again and again while the prune runs (on a reader:
    it never waits for a batch)."""
    waited: list[int] = []
    while not done.is_set() or not waited:
        began = time.perf_counter_ns()
        await store.interactions.list_open_and_closed(closed_limit=FIRST_PAGE)
        waited.append(time.perf_counter_ns() - began)
    return Latency.of_ns(waited)


async def measure(
    root: Path, *, interactions: int, reads: int, postgresql: PgTarget | None = None
) -> list[Figure]:
    figures: list[Figure] = []
    async with Store.open(root / "data", postgresql=postgresql) as store:
        began = time.perf_counter()
        session_id = await _fill(store, interactions)
        filled = time.perf_counter() - began
        figures.append(
            Figure(
                benchmark=NAME,
                name="ledger filled",
                value=f"{interactions} closed requests in {filled:.1f} s",
            )
        )
        for name in _INDEXES:
            await store.writer.write(functools.partial(_run, sql=f"DROP INDEX {name}"))
        # without the index a read takes about 10 µs per row (a scan and a sort): a few do
        page_before, pending_before = await _reads(store, session_id, min(reads, UNINDEXED_READS))
        for statement in _INDEXES.values():
            await store.writer.write(functools.partial(_run, sql=statement))
        page_after, pending_after = await _reads(store, session_id, reads)
        for what, before, after in (
            ("console's first page", page_before, page_after),
            ("/pending", pending_before, pending_after),
        ):
            figures.append(
                Figure(benchmark=NAME, name=f"{what}, no index (before)", value=before.text())
            )
            figures.append(
                Figure(
                    benchmark=NAME,
                    name=f"{what}, indexed",
                    value=f"{after.text()}; p50 {before.p50 / after.p50:.0f}x faster",
                    target="p99 < 50 ms",
                    met=after.p99 < 50,
                )
            )
        rules = RetentionRules(texts=timedelta(days=30), audit=timedelta(days=365), batch=100)
        batches_before = store.writer.trips
        done = asyncio.Event()
        began = time.perf_counter()
        async with asyncio.TaskGroup() as all_three:
            pruning = all_three.create_task(_prune(store, rules, done))
            writing = all_three.create_task(_live_writes(store, done))
            reading = all_three.create_task(_page_reads(store, done))
        pruned, live, pages = pruning.result(), writing.result(), reading.result()
        took = time.perf_counter() - began
        batches = store.writer.trips - batches_before - live.count
        assert pruned is not None and pruned.interactions == interactions
        figures.append(
            Figure(
                benchmark=NAME,
                name="prune: every closed request past both clocks",
                value=f"{pruned.interactions} requests in {took:.1f} s, {batches} batches,"
                f" {1000 * took / max(batches, 1):.1f} ms a batch",
            )
        )
        figures.append(
            Figure(
                benchmark=NAME,
                name="a live session's write during the prune",
                value=live.text(),
            )
        )
        figures.append(
            Figure(
                benchmark=NAME,
                name="console's first page during the prune (a reader)",
                value=pages.text(),
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_pages", description=__doc__)
    parser.add_argument("--interactions", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.store == "postgresql":  # a throwaway cluster on a Unix socket (tests/pg_cluster.py)
        from tests.pg_cluster import bench_ledger

        with bench_ledger("bench-ledger-", parser.error) as (root, dsn):
            figures = asyncio.run(
                measure(
                    root,
                    interactions=args.interactions,
                    reads=args.reads,
                    postgresql=PgTarget(url=dsn),
                )
            )
    else:
        with tempfile.TemporaryDirectory(prefix="bench-ledger-") as root:
            figures = asyncio.run(
                measure(Path(root), interactions=args.interactions, reads=args.reads)
            )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
