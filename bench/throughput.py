"""Agent event throughput: agent message deltas through adapter -> engine -> platform, against
a bare asyncio read-and-parse loop of the same lines, in the same run.

    python -m bench.throughput [--deltas 1000000] [--platform memory] [--agent codex|opencode]
                               [--json]

The bench agent writes ``deltas`` item/agentMessage/delta lines as fast as its pipe takes
them (no item/completed after them, so the text the platform ends with is made of the deltas
alone), then completes the turn. Measured from the agent's first write to the moment the
platform shows the whole text; the text it shows must be exactly the agent's (same length,
same SHA-256). The bare loop reads the same lines from the same script with an asyncio
StreamReader and ``json.loads`` each one, nothing more.

``--agent opencode``: the scripted OpenCode server (bench/agents/opencode_bench_agent.py)
writes the same pieces as ``message.part.delta`` events on its SSE stream, read by the real
``OpenCodeAgent``; its bare loop is an aiohttp reader of the same stream that ``json.loads``
each ``data:`` line.

Targets: at least 50,000 events/s, at least 30% of the bare loop; memory stays bounded (the
peak RSS is reported beside the size of the text itself).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from adapters.opencode import basic_auth
from adapters.opencode_runtime import free_loopback_port
from bench.figures import Figure, Usage, emit, rss_now_mb
from bench.gateway_setup import AGENT, AGENTS, bench_gateway, read_stamps

__all__ = ["bare_loop", "bare_sse_loop", "measure"]

NAME = "throughput"
TARGET_RATE = 50_000
TARGET_SHARE = 0.30
_READ_LIMIT = 1 << 20


async def bare_loop(deltas: int) -> float:
    """Events per second of a bare asyncio loop reading and parsing the burst's lines."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(AGENT),
        "bare",
        str(deltas),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_READ_LIMIT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    start_ns = int((await proc.stderr.readline()).decode())
    parsed = 0
    while line := await proc.stdout.readline():
        json.loads(line)
        parsed += 1
    end_ns = time.monotonic_ns()
    await proc.wait()
    if parsed != deltas:
        raise RuntimeError(f"the bare loop parsed {parsed} lines of {deltas}")
    return deltas / ((end_ns - start_ns) / 1e9)


async def bare_sse_loop(root: Path, deltas: int) -> float:
    """Events per second of a bare aiohttp reader of the OpenCode bench server's burst."""
    stamps = root / "bare-stamps"
    stamps.mkdir(parents=True, exist_ok=True)
    port = free_loopback_port()
    env = {**os.environ, "OPENCODE_SERVER_PASSWORD": "bare", "BENCH_STAMP_DIR": str(stamps)}
    script = str(AGENTS["opencode"][1])
    argv = [sys.executable, script, "serve", "--hostname", "127.0.0.1", "--port", str(port)]
    proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        await proc.stdout.readline()  # "opencode server listening on ..."
        url = f"http://127.0.0.1:{port}"
        auth = {"Authorization": basic_auth("bare")}
        parsed = 0
        async with aiohttp.ClientSession(headers=auth) as http:
            async with http.get(f"{url}/event") as stream:
                async with http.post(f"{url}/session", json={}) as created:
                    session = (await created.json())["id"]
                prompt = {"parts": [{"type": "text", "text": f"deltas {deltas}"}]}
                async with http.post(f"{url}/session/{session}/prompt_async", json=prompt):
                    pass
                while parsed < deltas:
                    line = await stream.content.readline()
                    if not line:
                        break
                    if line.startswith(b"data: "):
                        event = json.loads(line[6:])
                        parsed += event.get("type") == "message.part.delta"
        end_ns = time.monotonic_ns()
    finally:
        proc.terminate()
        await proc.wait()
    if parsed != deltas:
        raise RuntimeError(f"the bare loop parsed {parsed} events of {deltas}")
    [burst] = [r for r in read_stamps(stamps) if r.get("ev") == "burst"]
    return deltas / ((end_ns - int(burst["start_ns"])) / 1e9)


async def measure(
    root: Path, *, deltas: int, platform: str = "memory", agent: str = "codex"
) -> list[Figure]:
    if agent == "opencode":
        bare_rate = await bare_sse_loop(root, deltas)
    else:
        bare_rate = await bare_loop(deltas)
    async with bench_gateway(root, platform, agent=agent) as gw:
        room = gw.platform.room(0)
        # one turn first, so that the agent process runs before the clock starts
        await gw.platform.say(room, gw.platform.person, "hello")
        await gw.platform.text_where(room, lambda text: text == "echo: hello")
        before = len("".join(gw.platform.texts(room)))
        rss_before = rss_now_mb()
        start = Usage.snapshot()
        await gw.platform.say(room, gw.platform.person, f"deltas {deltas}")
        burst_chars = _expected_chars(deltas)
        shown_ns = await gw.platform.text_reaches(room, before + burst_chars)
        usage = Usage.since(start)
        shown = "".join(gw.platform.texts(room))[before:]
    [burst] = [r for r in read_stamps(gw.stamp_dir) if r.get("ev") == "burst"]
    seconds = (shown_ns - int(burst["start_ns"])) / 1e9
    rate = deltas / seconds
    exact = (
        len(shown) == burst["chars"]
        and hashlib.sha256(shown.encode()).hexdigest() == burst["sha256"]
    )
    share = rate / bare_rate
    return [
        Figure(
            benchmark=NAME,
            name=f"{agent} deltas through the gateway ({deltas:,} events)",
            value=f"{rate:,.0f} events/s ({seconds:.2f} s)",
            target=f">= {TARGET_RATE:,}/s",
            met=rate >= TARGET_RATE,
        ),
        Figure(
            benchmark=NAME,
            name=(
                "bare aiohttp SSE read + json.loads loop"
                if agent == "opencode"
                else "bare asyncio read + json.loads loop"
            ),
            value=f"{bare_rate:,.0f} events/s",
        ),
        Figure(
            benchmark=NAME,
            name="gateway / bare loop",
            value=f"{share:.0%}",
            target=f">= {TARGET_SHARE:.0%}",
            met=share >= TARGET_SHARE,
        ),
        Figure(
            benchmark=NAME,
            name="final text shown exactly",
            value=f"{'yes' if exact else 'NO'} ({burst['chars']:,} characters)",
            target="exact",
            met=exact,
        ),
        Figure(
            benchmark=NAME,
            name="peak RSS (gateway process)",
            value=(
                f"{usage.peak_rss_mb:.0f} MB (before the burst {rss_before:.0f} MB;"
                f" the text itself {burst['chars'] / 1e6:.1f} MB)"
            ),
        ),
        Figure(benchmark=NAME, name="gateway CPU", value=usage.cpu_text()),
    ]


def _expected_chars(deltas: int) -> int:
    """The length of the burst's text (the bench agent's delta_piece, summed)."""
    digits = sum(len(str(i)) for i in range(deltas))
    return digits + 2 * deltas  # "w" and a space or a line break around each number


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    parser.add_argument("--deltas", type=int, default=1_000_000)
    parser.add_argument("--platform", default="memory")
    parser.add_argument("--agent", choices=["codex", "opencode"], default="codex")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as root:
        figures = asyncio.run(
            measure(Path(root), deltas=args.deltas, platform=args.platform, agent=args.agent)
        )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
