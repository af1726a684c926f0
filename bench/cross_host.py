"""``python -m bench.cross_host``: click → agent across two hosts, beside one host, in one run.

Two Gateway objects in this process, hosts "a" and "b", share one PostgreSQL ledger on a
throwaway cluster (tests/pg_cluster.py: a Unix socket, no network latency); project "pa"
runs on a, around the scripted agent (tests/scripted_launcher.py). Each approval opens a
card on a, and is clicked alternately on a (one host) and on b (the receiver commits, the
ledger's NOTIFY wakes a, a's sweep writes it). The figure is the time from the click to the
write reaching a's agent (its held write gate), the first ``--warmup`` of each left out.
Not in ``python -m bench``: it needs PostgreSQL, which ``scripts/setup.sh`` installs.

``--trips`` adds what the ledger's calls were for, per approval (one host, across hosts):
calls and network round trips per store method, on each host (``gateway.store.trip_tally``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from gateway.sessions.engine import Gateway
from gateway.store.trip_tally import TripTally
from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A, host_gateway, memory_of, two_hosts
from tests.pg_cluster import bench_ledger
from tests.scripted_gateway import open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import approval

DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'


WHERE = ("one host", "across hosts")


def _tally_into(tallies: dict[str, TripTally], gateways: dict[str, Gateway]) -> None:
    """Point every ledger connection of ``gateways`` at ``tallies`` (host name -> tally)."""
    for host, gateway in gateways.items():
        gateway.store.writer.tally = tallies[host]
        gateway.store.reader.tally = tallies[host]


async def measure(
    root: Path,
    dsn: str,
    count: int,
    warmup: int,
    trips: dict[str, dict[str, TripTally]] | None = None,
) -> dict[str, list[float]]:
    """The click -> agent figures; with ``trips`` (filled here) where -> host -> tally of
    the measured approvals."""
    config = two_hosts(root, dsn)
    asks = {f"approve{n}": approval(f"bench:approve{n}", title="Run ls?") for n in range(count)}
    on_a = ScriptedLauncher(asks)
    figures: dict[str, list[float]] = {"one host": [], "across hosts": []}
    async with (
        host_gateway(config, root, "a", on_a) as gateway_a,
        host_gateway(config, root, "b", ScriptedLauncher({})) as gateway_b,
    ):
        a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
        gateways = {"a": gateway_a, "b": gateway_b}
        unmeasured = {host: TripTally(where=f"{host}: ") for host in gateways}
        if trips is not None:
            for where in WHERE:
                trips[where] = {host: TripTally(where=f"{host}: ") for host in gateways}
        for n in range(count):
            where = WHERE[n % 2]
            if trips is not None:
                _tally_into(trips[where] if n >= 2 * warmup else unmeasured, gateways)
            asked = await open_card(a, ON_A, f"approve{n}")
            on_a.writes.waiting.clear()
            on_a.writes.hold()
            memory = memory_of(gateway_b) if n % 2 else a.memory
            start = time.perf_counter()
            click = asyncio.create_task(memory.click(ON_A, ALICE, asked.token("Approve")))
            await on_a.writes.waiting.wait()
            if n >= 2 * warmup:
                figures[where].append((time.perf_counter() - start) * 1000)
            on_a.writes.release()
            if not (await click).accepted:
                raise RuntimeError(f"approval {n} was refused")
            await settles(a, asked, DELIVERED)
    if len(on_a.received) != count:
        raise RuntimeError(f"{len(on_a.received)} writes for {count} approvals")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cross_host", description=__doc__)
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--trips", action="store_true", help="what the ledger calls were for")
    args = parser.parse_args()
    trips: dict[str, dict[str, TripTally]] = {}
    with bench_ledger("bench-hosts-", parser.error) as (root, dsn):
        figures = asyncio.run(
            measure(root, dsn, args.count, args.warmup, trips if args.trips else None)
        )
    for where, values in figures.items():
        q = statistics.quantiles(values, n=100)
        print(f"click -> agent, {where}: n={len(values)} p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms")
    print(f"writes: {args.count} for {args.count} approvals (exactly once)")
    for where, by_host in trips.items():
        print_trips(where, by_host, len(figures[where]))


def print_trips(where: str, by_host: dict[str, TripTally], approvals: int) -> None:
    """Per approval: each store method's calls and network round trips, on each host."""
    print(f"\nledger per approval, {where} (calls, network round trips):")
    total_calls = total_trips = 0
    for tally in by_host.values():
        for label in sorted(tally.calls, key=lambda name: -tally.round_trips[name]):
            calls, round_trips = tally.calls[label], tally.round_trips[label]
            total_calls += calls
            total_trips += round_trips
            print(f"  {label:60} {calls / approvals:5.2f} {round_trips / approvals:6.2f}")
    print(f"  {'total':60} {total_calls / approvals:5.2f} {total_trips / approvals:6.2f}")


if __name__ == "__main__":
    main()
