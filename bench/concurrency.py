"""Concurrency: many sessions at once, each a bench agent asking for approvals in a row.

    python -m bench.concurrency [--sessions 200] [--trips 5] [--platform memory] [--json]

Each session is its own conversation, its own agent process and its own person, who allows
every card as it appears. All sessions start together. Reported: every decision delivered
exactly once (counted at the agents and in the ledger), the latencies of all round trips
(bench/approvals.py says where each clock is read; no target: they queue behind each other
on one event loop and one ledger), the gateway's peak RSS (target under 300 MB) and the CPU
of the gateway process and of the agents.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.approvals import Trip, approve_all, round_trip_figures
from bench.figures import Figure, Usage, emit
from bench.gateway_setup import bench_gateway, count_ok_deliveries, read_stamps

__all__ = ["measure"]

NAME = "concurrency"
TARGET_RSS_MB = 300.0


async def measure(
    root: Path, *, sessions: int, trips: int, platform: str = "memory"
) -> list[Figure]:
    start = Usage.snapshot()
    start_ns = time.monotonic_ns()
    async with bench_gateway(root, platform) as gw:
        async with asyncio.TaskGroup() as tasks:
            runs = [
                tasks.create_task(approve_all(gw, gw.platform.room(i), trips, f"s{i}"))
                for i in range(sessions)
            ]
        usage = Usage.since(start)
    stopped = Usage.since(start)  # the agents have exited: their CPU is counted now
    done: list[Trip] = [trip for run in runs for trip in run.result()]
    figures = round_trip_figures(
        NAME, done, read_stamps(gw.stamp_dir), count_ok_deliveries(gw.ledger), target_ms=None
    )
    first_card_s = (min(t.card_ns for t in done) - start_ns) / 1e9
    return [
        Figure(
            benchmark=NAME,
            name=f"{sessions} sessions x {trips} approvals",
            value=(
                f"{len(done)} round trips in {usage.wall:.1f} s ({len(done) / usage.wall:.0f}/s);"
                f" the first card after {first_card_s:.1f} s"
            ),
        ),
        *figures,
        Figure(
            benchmark=NAME,
            name="peak RSS (gateway process)",
            value=f"{usage.peak_rss_mb:.0f} MB",
            target=f"< {TARGET_RSS_MB:.0f} MB",
            met=usage.peak_rss_mb < TARGET_RSS_MB,
        ),
        Figure(benchmark=NAME, name="gateway CPU", value=usage.cpu_text()),
        Figure(
            benchmark=NAME,
            name=f"CPU of the {sessions} agent processes",
            value=f"{stopped.cpu_children:.1f} s",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--trips", type=int, default=5)
    parser.add_argument("--platform", default="memory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-concurrency-") as root:
        figures = asyncio.run(
            measure(Path(root), sessions=args.sessions, trips=args.trips, platform=args.platform)
        )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
