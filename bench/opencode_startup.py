"""``opencode serve`` start-up, when the pinned binary is installed (scripts/setup.sh): the
time from spawning it to a session the gateway can use (its "listening on" line, the event
stream's ``server.connected``, ``POST /session``), through the real ``OpenCodeAgent``, and the
resident memory of its process group once ready.

    python -m bench.opencode_startup [--runs 3] [--json]

The server runs in a throw-away HOME with no provider configured: no model is called.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from adapters.opencode_runtime import OpenCodeAgent, OpenCodeSettings
from bench.figures import Figure, emit

__all__ = ["BINARY", "measure"]

NAME = "startup"
BINARY = (
    Path(__file__).resolve().parents[1] / ".cache" / "agents" / "node_modules" / ".bin" / "opencode"
)


def group_rss_mb(pgid: int) -> float:
    """The resident memory of every process in the group (from /proc), in MB."""
    total_kb = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat: the process group
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total_kb / 1024


async def measure(root: Path, *, runs: int, binary: Path = BINARY) -> list[Figure]:
    if not os.access(binary, os.X_OK):
        return [Figure(benchmark=NAME, name="opencode serve -> session", value="not installed")]
    times, rss = [], []
    for run in range(runs):
        home = root / f"home{run}"
        work = root / f"work{run}"
        work.mkdir(parents=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        settings = OpenCodeSettings(command=[str(binary)], cwd=work, env=env, stop_grace_seconds=2)
        start = time.monotonic()
        async with OpenCodeAgent(settings) as agent:
            times.append(time.monotonic() - start)
            assert agent.pgid is not None
            rss.append(group_rss_mb(agent.pgid))
    return [
        Figure(
            benchmark=NAME,
            name="opencode serve -> listening, events, session",
            value=(
                f"{1000 * statistics.median(times):.0f} ms"
                f" (median of {runs}; max {1000 * max(times):.0f} ms)"
            ),
        ),
        Figure(
            benchmark=NAME,
            name="opencode serve RSS, ready (its process group)",
            value=f"{statistics.median(rss):.0f} MB (median of {runs})",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.opencode_startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-opencode-") as root:
        figures = asyncio.run(measure(Path(root), runs=args.runs))
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
