"""``python -m bench.cross_host``: click → agent across two hosts, beside one host, in one run.

Two Gateway objects in this process, hosts "a" and "b", share one PostgreSQL ledger on a
throwaway cluster (tests/pg_cluster.py: a Unix socket, no network latency); project "pa"
runs on a, around the scripted agent (tests/scripted_launcher.py). Each approval opens a
card on a, and is clicked alternately on a (one host) and on b (the receiver commits, the
ledger's NOTIFY wakes a, a's sweep writes it). The figure is the time from the click to the
write reaching a's agent (its held write gate), the first ``--warmup`` of each left out.
Not in ``python -m bench``: it needs PostgreSQL, which ``scripts/setup.sh`` installs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A, host_gateway, memory_of, two_hosts
from tests.pg_cluster import bench_ledger
from tests.scripted_gateway import open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import approval

DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'


async def measure(root: Path, dsn: str, count: int, warmup: int) -> dict[str, list[float]]:
    config = two_hosts(root, dsn)
    asks = {f"approve{n}": approval(f"bench:approve{n}", title="Run ls?") for n in range(count)}
    on_a = ScriptedLauncher(asks)
    figures: dict[str, list[float]] = {"one host": [], "across hosts": []}
    async with (
        host_gateway(config, root, "a", on_a) as gateway_a,
        host_gateway(config, root, "b", ScriptedLauncher({})) as gateway_b,
    ):
        a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
        for n in range(count):
            where = "across hosts" if n % 2 else "one host"
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
    args = parser.parse_args()
    with bench_ledger("bench-hosts-", parser.error) as (root, dsn):
        figures = asyncio.run(measure(root, dsn, args.count, args.warmup))
    for where, values in figures.items():
        q = statistics.quantiles(values, n=100)
        print(f"click -> agent, {where}: n={len(values)} p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms")
    print(f"writes: {args.count} for {args.count} approvals (exactly once)")


if __name__ == "__main__":
    main()
