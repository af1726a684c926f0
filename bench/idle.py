"""``python -m bench.idle``: what a host with many idle sessions spends doing nothing.

    python -m bench.idle [--sessions 1000] [--window 30] [--store sqlite|postgresql] [--json]

One gateway process (tests/harness/gateway_proc.py: the real engine, the memory platform,
the in-process scripted agents of tests/scripted_launcher.py, so that a thousand sessions
are not a thousand interpreters). ``--sessions`` conversations each say one prompt, which
starts a session; its agent answers and the turn ends; the agent stays up. Then, for
``--window`` seconds, nobody says anything. Reported: the gateway process's CPU over the
window (``utime + stime`` of /proc/<pid>/stat) as a share of one core and per session; the
calls its ledger ran on the writer connection during the window, per second and by store
method (gateway/store/trip_tally.py); on PostgreSQL, their network round trips. Issue 36's
target: no per-session writes, and under 1% of a core for 1,000 idle sessions. Figures, not
assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Figure, emit
from bench.hosts import peak_rss_mb
from gateway.config.ledger_url import PgTarget
from tests.harness.driver import GatewayProcess, gateway_process, room, scripted_project
from tests.harness.driver import write_config as write_gateway_config

__all__ = ["Idle", "figures", "measure"]

NAME = "idle"
PROMPT = "hello"
OPENING_AT_ONCE = 50  # conversations opening their sessions at the same time
DEADLINE_S = 1800.0


@dataclass(frozen=True, kw_only=True)
class Idle:
    sessions: int
    store: str
    opened_s: float  # from the first prompt to the last answer shown
    window_s: float
    cpu_s: float  # the gateway process's CPU over the window
    writer_calls: int  # calls on the ledger's writer connection over the window
    round_trips: int  # their network round trips (PostgreSQL; 0 on SQLite)
    by_method: dict[str, int]  # store method -> calls over the window
    peak_rss_mb: float


def process_cpu_s(pid: int) -> float:
    """utime + stime of the process, in seconds (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _open(gw: GatewayProcess, thread: int) -> None:
    where = room("c0", thread=f"t{thread}")
    await gw.say(where, "alice", PROMPT)
    await gw.text_containing(f"echo: {PROMPT}", where)


async def measure(root: Path, sessions: int, window: float, dsn: str | None) -> Idle:
    project = scripted_project("p0", "normal", root / "work", channel="c0")
    config = write_gateway_config(
        root / "idle.toml",
        root / "data",
        [project],
        store=None if dsn is None else PgTarget(url=dsn),
    )
    async with (
        asyncio.timeout(DEADLINE_S),
        gateway_process(config, root / "logs", scripted_approvals=1) as gw,
    ):
        start = time.perf_counter()
        gate = asyncio.Semaphore(OPENING_AT_ONCE)

        async def opened(thread: int) -> None:
            async with gate:
                await _open(gw, thread)

        await asyncio.gather(*(opened(n) for n in range(sessions)))
        opened_s = time.perf_counter() - start
        # the last turns' ends recorded before the window opens (the harness pushes shown
        # messages, not turn ends: asked again until none runs)
        while (await gw.command("running"))["turns"]:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        before = await gw.command("tally", start=True)
        cpu_before, wall_before = process_cpu_s(gw.pid), time.perf_counter()
        await asyncio.sleep(window)  # the window itself: nobody says anything
        cpu_after, wall_after = process_cpu_s(gw.pid), time.perf_counter()
        after = await gw.command("tally")
        rss = peak_rss_mb(gw.pid)
    return Idle(
        sessions=sessions,
        store="sqlite" if dsn is None else "postgresql",
        opened_s=opened_s,
        window_s=wall_after - wall_before,
        cpu_s=cpu_after - cpu_before,
        writer_calls=int(after["writer_calls"]) - int(before["writer_calls"]),
        round_trips=int(after["round_trips"]) - int(before["round_trips"]),
        by_method={str(k): int(v) for k, v in after["calls"].items()},
        peak_rss_mb=rss,
    )


def figures(result: Idle) -> list[Figure]:
    share = 100 * result.cpu_s / result.window_s if result.window_s > 0 else 0.0
    top = sorted(result.by_method.items(), key=lambda item: -item[1])[:4]
    methods = ", ".join(f"{name} {count}" for name, count in top) or "none"
    per_second = result.writer_calls / result.window_s if result.window_s > 0 else 0.0
    trips = (
        f"; {result.round_trips / result.window_s:.1f} network round trips a second"
        if result.store == "postgresql"
        else ""
    )
    where = f"{result.sessions} idle sessions ({result.store})"
    return [
        Figure(
            benchmark=NAME,
            name=f"{where}: opened",
            value=f"in {result.opened_s:.1f} s ({result.sessions / result.opened_s:.0f}/s)",
        ),
        Figure(
            benchmark=NAME,
            name=f"{where}: gateway CPU over {result.window_s:.0f} s",
            value=(
                f"{share:.2f}% of one core ({result.cpu_s:.2f} s;"
                f" {1e6 * result.cpu_s / result.window_s / max(1, result.sessions):.1f} µs"
                " a second per session)"
            ),
            target="< 1% of a core",
            met=share < 1.0,
        ),
        Figure(
            benchmark=NAME,
            name=f"{where}: ledger calls on the writer",
            value=f"{per_second:.1f} a second ({result.writer_calls}: {methods}){trips}",
            target="no per-session writes",
            met=result.writer_calls < result.window_s,  # the host's lease, about
        ),
        Figure(benchmark=NAME, name=f"{where}: peak RSS", value=f"{result.peak_rss_mb:.0f} MB"),
    ]


@contextlib.contextmanager
def _ledger(store: str, parser: argparse.ArgumentParser) -> Iterator[tuple[Path, str | None]]:
    if store == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-idle-") as root:
            yield Path(root), None
        return
    from tests.pg_cluster import bench_ledger

    with bench_ledger("bench-idle-", parser.error) as (root, dsn):
        yield root, dsn


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.idle", description=__doc__)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--window", type=float, default=30.0, help="seconds")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with _ledger(args.store, parser) as (root, dsn):
        result = asyncio.run(measure(root, args.sessions, args.window, dsn))
    emit(figures(result), as_json=args.json)


if __name__ == "__main__":
    main()
