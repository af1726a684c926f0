"""Files in (issue 32): a file sent on Telegram, from the fake Bot API to the agent's disk.

    python -m bench.files_in [--megabytes 20] [--json]

The fake Bot API runs in a process of its own (bench/files_server.py), so that the file's
bytes are not in the gateway's memory but come over HTTP, as from Telegram: ``getFile``, then
the download from the bot's file URL, streamed into the work dir's inbox. The gateway (the
real Telegram platform, python-telegram-bot, the SQLite ledger, a scripted agent) runs here.
Reported: the time from the update's push to the saved file named in the agent's prompt, the
throughput, and the gateway's peak RSS while the file came against its peak before (idle,
connected): the download is streamed, so the difference is a few MB whatever the file's size
(target: under 16 MB).
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

from bench.figures import Figure, Usage, emit
from gateway.sessions.engine import Gateway
from platforms.registry import parse_config
from platforms.telegram.config import TelegramConfig
from platforms.telegram.platform import TelegramPlatform
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import TOKEN

__all__ = ["measure"]

NAME = "files_in"
TARGET_GROWTH_MB = 16.0
ROOT = Path(__file__).resolve().parent.parent


def _config(root: Path, port: int, megabytes: int) -> str:
    limit = (megabytes + 1) * 1024 * 1024
    return f"""
[gateway]
data_dir = {json.dumps(str(root / "data"))}

[projects.demo]
work_dir = {json.dumps(str(root / "work"))}
agent = "codex-app-server"

[projects.demo.files]
max_file_bytes = {limit}
max_prompt_bytes = {limit}

[projects.demo.auth.telegram]
allow_from = ["111"]

[platforms.telegram]
token = "{TOKEN}"
base_url = "http://127.0.0.1:{port}"
poll_timeout_seconds = 5
"""


async def measure(root: Path, *, megabytes: int) -> list[Figure]:
    (root / "work").mkdir()
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.files_server",
        "--megabytes",
        str(megabytes),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        port = int((await server.stdout.readline()).decode().split()[1])
        config = parse_config(_config(root, port, megabytes), "bench-files.toml")
        settings = config.platforms.get("telegram", TelegramConfig)
        assert settings is not None
        launcher = ScriptedLauncher({})
        async with (
            TelegramPlatform(settings) as telegram,
            Gateway(config, platforms={"telegram": telegram}, launcher=launcher),
        ):
            idle = Usage.since(Usage.snapshot()).peak_rss_mb
            began = time.monotonic()
            server.stdin.write(b"send\n")
            await server.stdin.drain()
            digest = (await server.stdout.readline()).decode().split()[1]
            async with asyncio.timeout(300):
                await launcher.turn_over.wait()  # the agent was given the prompt, and answered
            took = time.monotonic() - began
            after = Usage.since(Usage.snapshot()).peak_rss_mb
        saved = root / "work" / ".agent-gateway" / "inbox" / "big.bin"
        whole = hashlib.sha256(saved.read_bytes()).hexdigest() == digest
    finally:
        server.stdin.close()
        await server.wait()
    growth = after - idle
    return [
        Figure(
            benchmark=NAME,
            name=f"a {megabytes} MB Telegram document to the agent's disk",
            value=f"{took:.2f} s ({megabytes / took:.0f} MB/s); saved whole: {whole}",
            met=whole,
        ),
        Figure(
            benchmark=NAME,
            name="gateway peak RSS while it came, against idle",
            value=f"{after:.0f} MB against {idle:.0f} MB (+{growth:.1f} MB)",
            target=f"+ < {TARGET_GROWTH_MB:.0f} MB",
            met=growth < TARGET_GROWTH_MB,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.files_in", description=__doc__)
    parser.add_argument("--megabytes", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-files-") as root:
        figures = asyncio.run(measure(Path(root), megabytes=args.megabytes))
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
