"""Policy overhead: the interactions bench with 50 policy rules in force, beside none.

    python -m bench.policy [--count 1000] [--warmup 50] [--rules 50] [--blocks 10]
                           [--platform memory] [--json]

The round trips of :mod:`bench.interactions` on two gateways (each its own ledger), one
with no policy and one with ``rules`` rules (bench/gateway_setup.py ``policy_rules``: each
request walks all of them, since only the last matches, and the click is checked against
the matching rule's approvers). Target (issue 17): the rules move p99 by at most a
millisecond, both ways.

They run side by side with a third gateway without rules (the control), in ``blocks``
rotating blocks: run one after the other, the load of a shared machine drifting between the
runs moved p99 by more than the rules do (+1.2 ms one way, -1.0 ms the other on the same
code). The control's p99 beside the first's is the noise floor: a Δp99 of the rules within
it is not the rules' doing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

from bench.approvals import Trip, approve_all, round_trip_figures
from bench.figures import Figure, emit
from bench.gateway_setup import (
    bench_gateway,
    bench_interaction,
    bench_rules_config,
    count_ok_deliveries,
    read_stamps,
)
from gateway.interactions.policy import governing_rule

__all__ = ["measure"]

NAME = "policy"
TARGET_MS = 1.0
FIGURES = ("request line -> card at the platform", "click -> response line read by the agent")


async def _side_by_side(
    root: Path, *, count: int, warmup: int, platform: str, rules: int, blocks: int
) -> list[list[Figure]]:
    """The figures of three gateways measured in rotating blocks so that all meet the same
    load: without rules, with ``rules`` rules, and a second one without (the control: what
    two identical gateways differ by on this machine now)."""
    setups = (("none", 0), ("rules", rules), ("control", 0))
    async with contextlib.AsyncExitStack() as stack:
        sides = []
        for name, count_of_rules in setups:
            (root / name).mkdir(parents=True, exist_ok=True)
            sides.append(
                await stack.enter_async_context(
                    bench_gateway(root / name, platform, rules=count_of_rules)
                )
            )
        trips: list[list[Trip]] = [[] for _ in sides]
        for gw in sides:
            if warmup:
                await approve_all(gw, gw.platform.room(0), warmup, "warmup")
        sizes = [count // blocks + (1 if n < count % blocks else 0) for n in range(blocks)]
        for block, size in enumerate(sizes):
            shift = block % len(sides)  # each goes first as often as the others
            for side in [(shift + n) % len(sides) for n in range(len(sides))]:
                gw = sides[side]
                trips[side].extend(await approve_all(gw, gw.platform.room(0), size, f"m{block}"))
    return [
        round_trip_figures(
            NAME,
            trips[side],
            read_stamps(gw.stamp_dir),
            count_ok_deliveries(gw.ledger),
            target_ms=None,
        )
        for side, gw in enumerate(sides)
    ]


def walk_cost(rules: int, *, calls: int = 2000) -> Figure:
    """The rule walk itself (what a request's open pays once; a click reads it remembered):
    ``governing_rule`` over the bench's rules for a bench command, in microseconds."""
    config = bench_rules_config(rules)
    interaction = bench_interaction()
    policy = config.projects["bench"].policy
    start = time.perf_counter_ns()
    for _ in range(calls):
        governing_rule(policy, interaction)
    each_us = (time.perf_counter_ns() - start) / calls / 1000
    return Figure(
        benchmark=NAME,
        name=f"first-match walk of {rules} rules, per request",
        value=f"{each_us:.1f} µs",
    )


def _p99(figures: list[Figure], name: str) -> float:
    [found] = [f for f in figures if f.name == name]
    return float(found.value.split("p99 ")[1].split(" ms")[0])


async def measure(
    root: Path,
    *,
    count: int,
    warmup: int,
    rules: int = 50,
    platform: str = "memory",
    blocks: int = 10,
) -> list[Figure]:
    bare, ruled, control = await _side_by_side(
        root,
        count=count,
        warmup=warmup,
        platform=platform,
        rules=rules,
        blocks=max(1, min(blocks, count)),
    )
    figures: list[Figure] = []
    for name in (
        "request line -> card at the platform",
        "click -> response line read by the agent",
    ):
        before, after = _p99(bare, name), _p99(ruled, name)
        [none_fig] = [f for f in bare if f.name == name]
        [rules_fig] = [f for f in ruled if f.name == name]
        figures.append(Figure(benchmark=NAME, name=f"{name}, no policy", value=none_fig.value))
        figures.append(Figure(benchmark=NAME, name=f"{name}, {rules} rules", value=rules_fig.value))
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"{name}: p99 moved by the rules",
                value=f"{after - before:+.2f} ms",
                target=f"|Δp99| ≤ {TARGET_MS:g} ms",
                met=abs(after - before) <= TARGET_MS,
            )
        )
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"{name}: p99 of two gateways without rules (the noise floor)",
                value=f"{_p99(control, name) - before:+.2f} ms",
            )
        )
    figures.append(walk_cost(rules))
    [once] = [f for f in ruled if "exactly once" in f.name]
    figures.append(
        Figure(
            benchmark=NAME,
            name=f"{once.name}, {rules} rules",
            value=once.value,
            target=once.target,
            met=once.met,
        )
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.policy", description=__doc__)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--rules", type=int, default=50)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--platform", default="memory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-policy-") as root:
        figures = asyncio.run(
            measure(
                Path(root),
                count=args.count,
                warmup=args.warmup,
                rules=args.rules,
                platform=args.platform,
                blocks=args.blocks,
            )
        )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
