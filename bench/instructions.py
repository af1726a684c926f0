"""Instructions per approval: the gateway's CPU as a count that does not vary with the machine.

    python -m bench.instructions [--store postgresql] [--small 20] [--large 220] [--json]
    python -m bench.instructions --at REV [--store postgresql]   # another commit, same way

CPU seconds per approval (``bench.interactions``) vary by up to a factor of two on this
shared machine from one minute to the next, more than most changes they are meant to judge.
This runs ``bench.interactions`` twice under valgrind's callgrind (``--small`` and
``--large`` approvals, the same warm-up) and divides the difference of the instructions its
process executed by the difference of the approvals: start-up, imports and warm-up cancel
out, and what is left is the instructions one approval costs the gateway's process (the
in-process fake platform and the bench's clocks included, as in ``bench.interactions``'s CPU;
the agent and PostgreSQL are other processes, not counted). Two runs of the same code agree
to about 0.1%.

What it does not count: the kernel's side (system calls, waking threads, context switches;
on PostgreSQL its network round trips), nor cache misses. A change that removes round trips
or thread trips saves more CPU time than its instructions say; the CPU pairs of
``bench.interactions`` stay the figure the issues ask for (docs/benchmarks.md).

``--syscalls``: instead, the ledger's system calls per approval (strace's count, the same
run to run): SQLite writes each page a commit changed to its write-ahead log as a frame, two
``pwrite`` calls, and takes and gives back its locks with ``fcntl``; these cost kernel time
that the instructions above leave out. Only SQLite's calls are counted (``pwrite64``,
``pread64``, ``fcntl``, ``fdatasync``): the agent's process, traced too, makes none of them.
Needs strace (Debian's package ``strace``).

``--at REV``: measure that commit instead (a ``git worktree`` of it beside this checkout,
removed after; the bench's own files are taken from the commit). Needs valgrind (Debian's
package ``valgrind``); not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["instructions_per_approval", "syscalls_per_approval"]

ROOT = Path(__file__).resolve().parent.parent
_COLLECTED = re.compile(rb"Collected : (\d+)")
LEDGER_SYSCALLS = ("pwrite64", "pread64", "fcntl", "fdatasync")
_SUMMARY_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def instructions_per_approval(
    checkout: Path, store: str = "sqlite", *, small: int = 20, large: int = 220, warmup: int = 20
) -> int:
    """The instructions one approval costs the gateway's process in ``checkout``."""
    counts = [_collected(checkout, store, count, warmup) for count in (small, large)]
    return (counts[1] - counts[0]) // (large - small)


def _collected(checkout: Path, store: str, count: int, warmup: int) -> int:
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    done = _under(argv, checkout, store, count, warmup)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"valgrind said no count:\n{_tail(done)}")
    return int(found.group(1))


def _under(
    tool: list[str], checkout: Path, store: str, count: int, warmup: int
) -> subprocess.CompletedProcess[bytes]:
    """``bench.interactions`` in ``checkout`` run under ``tool`` (its argv up to the program)."""
    bench = ["-m", "bench.interactions", f"--count={count}", f"--warmup={warmup}"]
    argv = [*tool, sys.executable, *bench, f"--store={store}"]
    done = subprocess.run(argv, cwd=checkout, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"bench.interactions under {tool[0]} failed ({done.returncode}):\n{_tail(done)}"
        )
    return done


def _tail(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stderr.decode(errors="replace")[-2000:]


def syscalls_per_approval(
    checkout: Path, store: str = "sqlite", *, small: int = 20, large: int = 220, warmup: int = 20
) -> dict[str, float]:
    """The ledger's system calls (``LEDGER_SYSCALLS``) one approval costs, by name."""
    counts = [_syscalls(checkout, store, count, warmup) for count in (small, large)]
    return {
        name: (counts[1].get(name, 0) - counts[0].get(name, 0)) / (large - small)
        for name in LEDGER_SYSCALLS
    }


def _syscalls(checkout: Path, store: str, count: int, warmup: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="bench-strace-") as scratch:
        summary = Path(scratch) / "summary"
        traced = ",".join(LEDGER_SYSCALLS)
        _under(
            ["strace", "-f", "-c", "-o", str(summary), "-e", f"trace={traced}"],
            checkout,
            store,
            count,
            warmup,
        )
        return {
            found.group(2): int(found.group(1))
            for line in summary.read_text().splitlines()
            if (found := _SUMMARY_ROW.match(line))
        }


@contextlib.contextmanager
def _worktree(rev: str) -> Iterator[Path]:
    """A checkout of ``rev`` beside this one, sharing its installed agents (``.cache``)."""
    with tempfile.TemporaryDirectory(prefix="bench-at-") as parent:
        where = Path(parent) / "checkout"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
            check=True,
            capture_output=True,
        )
        try:
            (where / ".cache").symlink_to(ROOT / ".cache")
            yield where
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
                check=False,
                capture_output=True,
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--large", type=int, default=220)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--at", metavar="REV", help="measure this commit instead")
    parser.add_argument("--syscalls", action="store_true", help="the ledger's system calls")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.large <= args.small:
        parser.error("--large must be more than --small")
    tool = "strace" if args.syscalls else "valgrind"
    if shutil.which(tool) is None:
        parser.error(f"needs {tool} (apt-get install {tool})")
    where = args.at or "this checkout"
    with contextlib.ExitStack() as stack:
        checkout = ROOT if args.at is None else stack.enter_context(_worktree(args.at))
        if args.syscalls:
            calls = syscalls_per_approval(
                checkout, args.store, small=args.small, large=args.large, warmup=args.warmup
            )
            _print_syscalls(where, args.store, calls, as_json=args.json)
            return
        per_approval = instructions_per_approval(
            checkout, args.store, small=args.small, large=args.large, warmup=args.warmup
        )
    if args.json:
        print(json.dumps({"at": where, "store": args.store, "instructions": per_approval}))
    else:
        print(f"instructions  {where}, {args.store}: {per_approval:,} per approval")


def _print_syscalls(where: str, store: str, calls: dict[str, float], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"at": where, "store": store, "syscalls": calls}))
        return
    each = ", ".join(f"{name} {count:.1f}" for name, count in calls.items())
    print(f"syscalls  {where}, {store}: {sum(calls.values()):.1f} per approval ({each})")


if __name__ == "__main__":
    main()
