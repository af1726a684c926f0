"""Figures, percentiles, resource usage and the machine: what every benchmark reports with.

A benchmark returns a list of :class:`Figure`; ``python -m bench`` prints them and writes
them as one markdown table. A figure with a target says whether the target was met; none of
this is an assertion: a missed target is reported, never raised.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "Figure",
    "Latency",
    "Usage",
    "emit",
    "figure_from_json",
    "machine",
    "percentile",
    "rss_now_mb",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    benchmark: str
    name: str
    value: str
    target: str = ""
    met: bool | None = None  # None: no target

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        verdict = {None: "", True: "  [met]", False: "  [MISSED]"}[self.met]
        target = f"  (target {self.target})" if self.target else ""
        return f"{self.benchmark:<13} {self.name:<44} {self.value}{target}{verdict}"


def figure_from_json(raw: dict[str, Any]) -> Figure:
    return Figure(**raw)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (p99 of 1,000 is the 990th)."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(round(fraction * len(sorted_values), 9)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True, kw_only=True, slots=True)
class Latency:
    """p50, p99 and max of a set of durations, in milliseconds."""

    count: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of_ns(cls, durations_ns: Sequence[int]) -> Latency:
        ordered = sorted(d / 1e6 for d in durations_ns)
        return cls(
            count=len(ordered),
            p50=percentile(ordered, 0.50),
            p99=percentile(ordered, 0.99),
            max=ordered[-1],
        )

    def text(self) -> str:
        return (
            f"p50 {self.p50:.2f} ms, p99 {self.p99:.2f} ms, max {self.max:.2f} ms (n={self.count})"
        )


def rss_now_mb() -> float:
    """The process's resident set now (VmRSS), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """CPU time and peak RSS of this process (and of its waited-for children)."""

    wall: float
    cpu_self: float
    cpu_children: float
    peak_rss_mb: float

    @staticmethod
    def snapshot() -> tuple[float, resource.struct_rusage, resource.struct_rusage]:
        return (
            time.monotonic(),
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )

    @classmethod
    def since(cls, start: tuple[float, resource.struct_rusage, resource.struct_rusage]) -> Usage:
        wall0, self0, kids0 = start
        wall1, self1, kids1 = cls.snapshot()
        return cls(
            wall=wall1 - wall0,
            cpu_self=(self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime),
            cpu_children=(kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime),
            peak_rss_mb=self1.ru_maxrss / 1024,  # Linux reports kilobytes
        )

    def cpu_text(self) -> str:
        share = 100 * self.cpu_self / self.wall if self.wall > 0 else 0.0
        return f"{self.cpu_self:.1f} s over {self.wall:.1f} s ({share:.0f}% of one core)"


def machine() -> dict[str, str]:
    """When and where the figures were taken."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": platform.machine(),  # what `uname -m` prints
        "nproc": str(os.cpu_count() or "?"),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "load": " ".join(f"{load:.1f}" for load in os.getloadavg()),  # 1, 5, 15 min
    }


def emit(figures: Sequence[Figure], *, as_json: bool) -> None:
    """Print a benchmark's figures: JSON lines for ``python -m bench``, else plain lines."""
    for item in figures:
        print(json.dumps(item.to_json()) if as_json else item.line(), flush=True)
