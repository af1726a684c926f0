"""Concurrency: many sessions at once, each a bench agent asking for approvals in a row.

    python -m bench.concurrency [--sessions 200] [--trips 5] [--think SECONDS]
                                [--platform memory] [--json]

Each session is its own conversation, its own agent process and its own person. All
sessions start together. Reported: every decision delivered exactly once (counted at the
agents and in the ledger), the latencies of all round trips (bench/approvals.py says where
each clock is read), the gateway's peak RSS (target under 300 MB) and the CPU of the gateway
process and of the agents.

Without ``--think`` each person allows every card the moment it appears: a closed loop as
fast as the machine goes, whose latencies are the queue of 200 sessions behind each other on
one event loop, one ledger and the machine's cores (no target: they measure saturation).
``--think S`` is a team at work (issue 36's target, p99 under 20 ms): every session first
makes one approval that is not counted (its agent started, its card seen), then each person
starts the measured turn, and reads each card before the click, after a time drawn evenly
between 0 and 2 S (the same draws on every run), so the 200 sessions offer about 200 / S
approvals a second and the figures say what one person waits for while the others work.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from bench.approvals import Trip, approve_all, round_trip_figures
from bench.figures import Figure, Usage, emit
from bench.gateway_setup import bench_gateway, count_ok_deliveries, read_stamps

__all__ = ["measure"]

NAME = "concurrency"
TARGET_RSS_MB = 300.0
TARGET_MS = 20.0  # with people who read their cards (--think): issue 36


async def measure(
    root: Path,
    *,
    sessions: int,
    trips: int,
    platform: str = "memory",
    think: float | None = None,
) -> list[Figure]:
    start = Usage.snapshot()
    start_ns = time.monotonic_ns()
    draws = random.Random(36)  # the same reading times on every run
    reading = None if think is None else (lambda: draws.uniform(0.0, 2 * think))
    async with bench_gateway(root, platform) as gw:
        if think is not None:  # every agent started and one card seen, none of it counted
            async with asyncio.TaskGroup() as tasks:
                for i in range(sessions):
                    tasks.create_task(approve_all(gw, gw.platform.room(i), 1, f"w{i}"))
            start_ns = time.monotonic_ns()
        measured = Usage.snapshot()

        async def session(i: int) -> list[Trip]:
            if reading is not None:  # people start their turns at their own moments
                await asyncio.sleep(reading())
            return await approve_all(gw, gw.platform.room(i), trips, f"s{i}", think=reading)

        async with asyncio.TaskGroup() as tasks:
            runs = [tasks.create_task(session(i)) for i in range(sessions)]
        usage = Usage.since(measured)
    stopped = Usage.since(start)  # the agents have exited: their CPU is counted now
    done: list[Trip] = [trip for run in runs for trip in run.result()]
    counted = {f"s{i}" for i in range(sessions)}  # the warm-up's answers are not figures
    stamps = [s for s in read_stamps(gw.stamp_dir) if s.get("tag") in counted]
    target_ms = None if think is None else TARGET_MS
    figures = round_trip_figures(
        NAME, done, stamps, count_ok_deliveries(gw.ledger), target_ms=target_ms
    )
    first_card_s = (min(t.card_ns for t in done) - start_ns) / 1e9
    how = "at once" if think is None else f"each card read 0-{2 * think:g} s"
    return [
        Figure(
            benchmark=NAME,
            name=f"{sessions} sessions x {trips} approvals ({how})",
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
    parser.add_argument(
        "--think",
        type=float,
        default=None,
        help="mean seconds a person reads a card before the click (after one uncounted approval)",
    )
    parser.add_argument("--platform", default="memory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-concurrency-") as root:
        figures = asyncio.run(
            measure(
                Path(root),
                sessions=args.sessions,
                trips=args.trips,
                platform=args.platform,
                think=args.think,
            )
        )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
