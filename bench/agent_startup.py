"""Agent start-up, for the agents whose pinned binary is installed (scripts/setup.sh): part of
``python -m bench.startup``.

- ``opencode serve``: from spawning it to its "listening on" line (its own process, as the
  launcher spawns it), and to a session the gateway can use (listening, the event stream's
  ``server.connected``, ``POST /session``) through the real ``OpenCodeAgent``; the resident
  memory of its process group once ready. A throw-away HOME with no provider configured: no
  model is called.
- codex-acp: from spawning it to the answer of ``session/new`` (``initialize`` first), through
  the real ``AgentRuntime`` and ``AcpCodec`` (the launcher's own path); the resident memory
  of its process group then (the npm launcher and the native binary). Its CODEX_HOME is
  TESTING.md's, pointed at the fake Responses API (which ``session/new`` does not call).

A binary that is not installed gives a figure that says so.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from adapters.acp import AcpCodec
from adapters.opencode import parse_listening_line
from adapters.opencode_runtime import (
    OpenCodeAgent,
    OpenCodeSettings,
    free_loopback_port,
    serve_argv,
)
from adapters.runtime import AgentRuntime
from adapters.stdio import AgentProcess, ProcessSpec
from bench.figures import Figure
from tests.codex_env import make_codex_home
from tests.servers.fake_responses import FakeResponses

__all__ = ["CODEX_ACP", "OPENCODE", "group_rss_mb", "measure"]

NAME = "startup"
_BIN = Path(__file__).resolve().parents[1] / ".cache" / "agents" / "node_modules" / ".bin"
OPENCODE = _BIN / "opencode"
CODEX_ACP = _BIN / "codex-acp"


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


def _ms(times: list[float]) -> str:
    median, worst = 1000 * statistics.median(times), 1000 * max(times)
    return f"{median:.0f} ms (median of {len(times)}; max {worst:.0f} ms)"


def _mb(sizes: list[float]) -> str:
    return f"{statistics.median(sizes):.0f} MB (median of {len(sizes)})"


async def measure(
    root: Path, *, runs: int, opencode: Path = OPENCODE, codex_acp: Path = CODEX_ACP
) -> list[Figure]:
    return [*await _opencode(root, runs, opencode), *await _codex_acp(root, runs, codex_acp)]


async def _opencode(root: Path, runs: int, binary: Path) -> list[Figure]:
    if not os.access(binary, os.X_OK):
        return [
            Figure(
                benchmark=NAME, name="opencode serve -> its listening line", value="not installed"
            )
        ]
    listening, ready, rss = [], [], []
    for run in range(runs):
        home = root / f"opencode-home{run}"
        work = root / f"opencode-work{run}"
        work.mkdir(parents=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        spec = ProcessSpec(
            argv=serve_argv([str(binary)], free_loopback_port()),
            cwd=work,
            env={**env, "OPENCODE_SERVER_PASSWORD": "bench"},
            stop_grace_seconds=2,
            eof_grace_seconds=0,
        )
        start = time.monotonic()
        async with AgentProcess.spawn(spec) as process:
            while (line := await process.read_line()) is not None:
                if parse_listening_line(line.decode("utf-8", "replace")) is not None:
                    listening.append(time.monotonic() - start)
                    break
        settings = OpenCodeSettings(command=[str(binary)], cwd=work, env=env, stop_grace_seconds=2)
        start = time.monotonic()
        async with OpenCodeAgent(settings) as agent:
            ready.append(time.monotonic() - start)
            assert agent.pgid is not None
            rss.append(group_rss_mb(agent.pgid))
    if not listening:
        return [
            Figure(
                benchmark=NAME, name="opencode serve -> its listening line", value="never listened"
            )
        ]
    return [
        Figure(benchmark=NAME, name="opencode serve -> its listening line", value=_ms(listening)),
        Figure(
            benchmark=NAME, name="opencode serve -> listening, events, session", value=_ms(ready)
        ),
        Figure(
            benchmark=NAME, name="opencode serve RSS, ready (its process group)", value=_mb(rss)
        ),
    ]


async def _codex_acp(root: Path, runs: int, binary: Path) -> list[Figure]:
    if not os.access(binary, os.X_OK):
        return [
            Figure(
                benchmark=NAME,
                name="codex-acp spawn, initialize -> session/new",
                value="not installed",
            )
        ]
    times, rss = [], []
    async with FakeResponses() as model:
        for _ in range(runs):
            with make_codex_home(model.base_url, approval_policy="untrusted") as home:
                spec = ProcessSpec(
                    argv=[str(binary)], cwd=home.workspace, env=home.env, stop_grace_seconds=2
                )
                codec = AcpCodec(cwd=str(home.workspace))
                start = time.monotonic()
                async with AgentRuntime(spec, codec, handshake_timeout=60) as runtime:
                    times.append(time.monotonic() - start)
                    rss.append(group_rss_mb(runtime.pgid))
    return [
        Figure(benchmark=NAME, name="codex-acp spawn, initialize -> session/new", value=_ms(times)),
        Figure(
            benchmark=NAME, name="codex-acp RSS, session open (its process group)", value=_mb(rss)
        ),
    ]
