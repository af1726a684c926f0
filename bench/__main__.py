"""``python -m bench``: run every benchmark, print the figures, write the markdown table.

    .venv/bin/python -m bench                      # every benchmark, full size (a few minutes)
    .venv/bin/python -m bench --quick              # toy sizes: does everything still run?
    .venv/bin/python -m bench --only throughput --platform memory --out /tmp/table.md

Each benchmark runs in a process of its own (``python -m bench.<name> --json``), so that its
peak RSS and CPU are its own. The table (with the date, ``uname -m``, nproc, the Python
version and the load average while the suite ran) is printed at the end and written to
``--out`` (default ``.cache/bench-results.md``); docs/benchmarks.md carries a copy. Figures, not
assertions: a missed target is marked, never raised.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.figures import Figure, figure_from_json, machine

ROOT = Path(__file__).resolve().parent.parent

# name -> (full-size arguments, toy-size arguments); "module:variant" runs bench.module
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "interactions": (["--count", "1000", "--warmup", "50"], ["--count", "20", "--warmup", "2"]),
    "policy": (["--count", "1000", "--warmup", "50"], ["--count", "20", "--warmup", "2"]),
    "throughput": (["--deltas", "1000000"], ["--deltas", "2000"]),
    "concurrency": (["--sessions", "200", "--trips", "5"], ["--sessions", "4", "--trips", "2"]),
    # issue 36: the same 200 sessions, each person reading each card 0-4 s (target p99 < 20 ms)
    "concurrency:team": (
        ["--sessions", "200", "--trips", "5", "--think", "2"],
        ["--sessions", "4", "--trips", "2", "--think", "0.05"],
    ),
    "startup": (["--runs", "3"], ["--runs", "1"]),
    "telegram_pacing": (["--seconds", "8"], ["--seconds", "2"]),
    "slack_pacing": (["--seconds", "20"], ["--seconds", "2"]),
    "paced_turns": (["--turns", "5", "--seconds", "5"], ["--turns", "1", "--seconds", "1"]),
    # three host processes on one PostgreSQL (a throwaway cluster: scripts/setup.sh installs it)
    "hosts": (["--sessions", "100", "--approvals", "5"], ["--sessions", "2", "--approvals", "2"]),
    # a file from the fake Bot API (a process of its own) to the agent's disk (issue 32)
    "files_in": (["--megabytes", "20"], ["--megabytes", "1"]),
    # issue 36: the console's first page and /pending on a big ledger, before/after the index
    "ledger_pages": (["--interactions", "1000000"], ["--interactions", "2000", "--reads", "5"]),
    # issue 36: a host with 1,000 idle sessions (scripted agents in its process): CPU, writes
    "idle": (["--sessions", "1000", "--window", "30"], ["--sessions", "5", "--window", "1"]),
}
TAKES_PLATFORM = frozenset({"interactions", "policy", "throughput", "concurrency"})


def _module(name: str) -> str:
    """``concurrency`` for ``concurrency:team``: the variant is only its arguments."""
    return name.partition(":")[0]


def run_one(name: str, args: Sequence[str]) -> list[Figure]:
    """One benchmark in its own process; a failure becomes a figure that says so."""
    argv = [sys.executable, "-m", f"bench.{_module(name)}", *args, "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    figures = []
    for line in done.stdout.splitlines():  # one figure a line, or a list of them
        if line.startswith(("{", "[")):
            found = json.loads(line)
            figures += [
                figure_from_json(raw) for raw in (found if isinstance(found, list) else [found])
            ]
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        figures.append(Figure(benchmark=name, name="FAILED", value=tail[-200:], met=False))
    return figures


def markdown(figures: Sequence[Figure], where: dict[str, str], command: str) -> str:
    head = (
        f"Measured {where['date']} on {where['machine']}, {where['nproc']} cores, "
        f"{where['implementation']} {where['python']}; load average {where['load']} "
        f"(1, 5, 15 min) when the suite ended. `{command}`\n\n"
    )
    rows = ["| benchmark | figure | measured | target |", "|---|---|---|---|"]
    for item in figures:
        verdict = {None: "", True: " ✓", False: " ✗ missed"}[item.met]
        value = item.value.replace("|", "\\|")
        rows.append(f"| {item.benchmark} | {item.name} | {value} | {item.target}{verdict} |")
    return head + "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="toy sizes (a smoke run)")
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS))
    parser.add_argument("--platform", default="memory", help="the chat platform to drive")
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "bench-results.md")
    args = parser.parse_args()
    figures: list[Figure] = []
    for name in args.only or list(BENCHMARKS):
        full, toy = BENCHMARKS[name]
        extra = ["--platform", args.platform] if _module(name) in TAKES_PLATFORM else []
        print(f"== {name}", flush=True)
        found = run_one(name, [*(toy if args.quick else full), *extra])
        for item in found:
            print(item.line(), flush=True)
        figures += found
    command = "python -m bench" + (" --quick" if args.quick else "")
    table = markdown(figures, machine(), command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(f"\n{table}\n(written to {args.out})")
    return 1 if any(item.name == "FAILED" for item in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
