"""Interaction overhead: what the gateway adds to one approval, ledger writes included.

    python -m bench.interactions [--count 1000] [--warmup 50] [--platform memory]
                                 [--agent codex|acp|opencode] [--store postgresql] [--json]
                                 [--calls]

One session, one bench agent (bench/agents/: the Codex app-server one, or with ``--agent acp``
the ACP one), ``count`` command approvals in a row (after ``warmup`` that are
not counted): from the agent's request line to the card at the platform, and from the click
to the response line read by the agent (bench/approvals.py says where each clock is read).
Target: p99 under 10 ms for both. ``--agent opencode`` drives the scripted OpenCode server
(bench/agents/opencode_bench_agent.py) instead: a request is an SSE event, a response an HTTP
POST.

``--store postgresql`` keeps the ledger in a throwaway PostgreSQL cluster
(tests/pg_cluster.py: ``initdb`` on a Unix socket, stopped at the end) instead of SQLite, and
adds the ledger's network round trips per approval.

``--calls`` adds the ledger calls per approval by store method, with the statements each ran
(BEGIN and COMMIT included) and on PostgreSQL its network round trips
(gateway/store/trip_tally.py): exact counts, not noisy as the CPU is (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
from pathlib import Path

from bench.approvals import approve_all, round_trip_figures
from bench.figures import Figure, Usage, emit, percentile
from bench.gateway_setup import AGENTS, bench_gateway, count_ok_deliveries, read_stamps
from gateway.store.store import Store
from gateway.store.trip_tally import TripTally

__all__ = ["measure"]

NAME = "interactions"
TARGET_MS = 10.0


async def measure(
    root: Path,
    *,
    count: int,
    warmup: int,
    platform: str = "memory",
    agent: str = "codex",
    store: str | None = None,
    calls: bool = False,
) -> list[Figure]:
    async with bench_gateway(root, platform, agent=agent, store=store) as gw:
        room = gw.platform.room(0)
        if warmup:
            await approve_all(gw, room, warmup, "warmup")
        callbacks = getattr(gw.platform, "callback_ms", None)
        if callbacks is not None:
            callbacks.clear()  # the measured clicks only
        ledger = gw.gateway.store
        trips_before = ledger.writer.trips + ledger.reader.runner.trips
        thread_before = _thread_trips(ledger)
        network_before = _network_trips(ledger)
        tally = TripTally() if calls else None
        ledger.writer.tally = ledger.reader.tally = tally
        start = Usage.snapshot()
        trips = await approve_all(gw, room, count, "measured")
        usage = Usage.since(start)
        ledger.writer.tally = ledger.reader.tally = None
        ledger_trips = ledger.writer.trips + ledger.reader.runner.trips - trips_before
        thread_trips = _thread_trips(ledger) - thread_before
        network = _network_trips(ledger) - network_before
    figures = round_trip_figures(
        NAME, trips, read_stamps(gw.stamp_dir), count_ok_deliveries(gw.ledger), target_ms=TARGET_MS
    )
    rate = count / usage.wall if usage.wall > 0 else 0.0
    return [
        *figures,
        *_callback_figures(callbacks),
        *([] if tally is None else _call_figures(tally, count)),
        Figure(
            benchmark=NAME,
            name="ledger calls per approval",
            value=f"{ledger_trips / count:.1f}"
            + (
                f" ({thread_trips / count:.1f} of them trips to a ledger thread)"
                if store is None
                else " (each a trip to a ledger thread)"
            )
            + ("" if store is None else f", {network / count:.1f} network round trips"),
        ),
        Figure(
            benchmark=NAME,
            name="sequential round trips",
            value=(
                f"{rate:.0f}/s; gateway CPU {usage.cpu_text()},"
                f" {1000 * usage.cpu_self / count:.2f} ms per approval"
            ),
        ),
    ]


def _thread_trips(ledger: Store) -> int:
    """The calls that went to a ledger thread (on SQLite the writer's run on the loop)."""
    return sum(lane.runner.trips for lane in ledger.writer.lanes) + ledger.reader.runner.trips


def _network_trips(store: Store) -> int:
    return (store.writer.round_trips or 0) + (store.reader.round_trips or 0)


def _call_figures(tally: TripTally, count: int) -> list[Figure]:
    """Per approval: the calls, statements and round trips of each store method, most
    statements first, then the totals."""
    labels = sorted(tally.calls, key=lambda label: (-tally.statements[label], label))
    return [
        Figure(
            benchmark=NAME,
            name=f"per approval: {label}",
            value=(
                f"{tally.calls[label] / count:.2f} calls,"
                f" {tally.statements[label] / count:.2f} statements,"
                f" {tally.round_trips[label] / count:.2f} round trips"
            ),
        )
        for label in labels
        if tally.calls[label] >= count / 100  # what every approval does, not a rare sweep
    ] + [
        Figure(
            benchmark=NAME,
            name="per approval: all ledger calls",
            value=(
                f"{sum(tally.calls.values()) / count:.2f} calls,"
                f" {sum(tally.statements.values()) / count:.2f} statements,"
                f" {sum(tally.round_trips.values()) / count:.2f} round trips"
            ),
        )
    ]


def _callback_figures(callback_ms: list[float] | None) -> list[Figure]:
    """Where the platform answers each click with a callback of its own (Discord's defer,
    due within 3 s): how long after the interaction it was taken."""
    if not callback_ms:
        return []
    ordered = sorted(callback_ms)
    p99 = percentile(ordered, 0.99)
    return [
        Figure(
            benchmark=NAME,
            name="interaction -> callback",
            value=(
                f"p50 {percentile(ordered, 0.5):.2f} ms, p99 {p99:.2f} ms,"
                f" max {ordered[-1]:.2f} ms (n={len(ordered)})"
            ),
            target="p99 < 3000 ms (the platform's deadline)",
            met=p99 < 3000,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.interactions", description=__doc__)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--platform", default="memory")
    parser.add_argument("--agent", choices=sorted(AGENTS), default="codex")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--calls", action="store_true", help="the ledger calls per approval, by store method"
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-interactions-"))
        store = None
        if args.store == "postgresql":
            from tests.pg_cluster import find_pg_bindir, throwaway_cluster

            bindir = find_pg_bindir()
            if bindir is None:
                parser.error("--store postgresql needs PostgreSQL (scripts/setup.sh)")
            store = stack.enter_context(throwaway_cluster(bindir)).dsn
        figures = asyncio.run(
            measure(
                Path(root),
                count=args.count,
                warmup=args.warmup,
                platform=args.platform,
                agent=args.agent,
                store=store,
                calls=args.calls,
            )
        )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
