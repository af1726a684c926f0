"""``[gateway] log_level`` as a user sees it: what ``agent-gateway run`` writes to stderr.

The gateway runs as a user runs it (``python -m gateway run`` in a subprocess) with the web
console, or with Telegram against the fake Bot API; each run is stopped with SIGINT once it
serves. At ``debug`` the SDKs that write secrets below WARNING (httpx: every URL, with the
bot token in it; python-telegram-bot: the same URL, and every update received) stay quiet.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.console_harness import CONSOLE_TABLES
from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import message_update, private_chat
from tests.telegram_harness import ALICE

pytestmark = pytest.mark.timeout(60)

DEADLINE = 30.0
RUNNING = "agent-gateway running"
DEBUG_LINE = re.compile(r"^\S+ \S+ DEBUG \S+: ", re.MULTILINE)


def write_config(tmp_path: Path, log_level: str | None, platform: str = CONSOLE_TABLES) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    level = f'log_level = "{log_level}"' if log_level is not None else ""
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
[gateway]
data_dir = "{tmp_path / "data"}"
{level}

[projects.demo]
work_dir = "{work}"
agent = "codex-app-server"
argv = ["/nonexistent/codex"]

{platform}
""",
        encoding="utf-8",
    )
    return config


class Stderr:
    """The lines the gateway has written to stderr so far, awaitable."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Condition()

    async def read(self, stream: asyncio.StreamReader) -> None:
        while line := (await stream.readline()).decode():
            async with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    async def line_with(self, fragment: str) -> str:
        async with self._changed:
            await self._changed.wait_for(lambda: any(fragment in line for line in self.lines))
        return next(line for line in self.lines if fragment in line)


async def run_until(config: Path, serving: Callable[[Stderr], Awaitable[None]]) -> str:
    """Run the gateway until ``serving`` returns, then SIGINT; everything it wrote."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "run", "--config", str(config)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None and process.stdout is not None
    stderr = Stderr()
    reader = asyncio.create_task(stderr.read(process.stderr))
    try:
        async with asyncio.timeout(DEADLINE):
            await serving(stderr)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            out = await process.stdout.read()
            await reader
            code = await process.wait()
    everything = "".join(stderr.lines) + out.decode()
    assert code == 0, everything
    return everything


async def console_serves(stderr: Stderr) -> None:
    # printed (never logged) when the console serves, at any log level; the gateway's own
    # "running" line follows in the same step, before a signal can be handled
    await stderr.line_with("agent-gateway console:")


@pytest.mark.parametrize(
    ("log_level", "info", "debug"),
    [(None, True, False), ("warning", False, False), ("debug", True, True)],
)
async def test_log_level_decides_what_the_gateway_writes(
    tmp_path: Path, log_level: str | None, info: bool, debug: bool
) -> None:
    output = await run_until(write_config(tmp_path, log_level), console_serves)
    assert (RUNNING in output) is info, output
    assert bool(DEBUG_LINE.search(output)) is debug, output


async def test_at_debug_the_telegram_sdks_stay_quiet_and_the_token_is_not_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "bot.token").write_text(TOKEN + "\n")
    async with FakeTelegram() as fake:
        telegram = f"""
[projects.demo.auth.telegram]
allow_from = ["{ALICE.id}"]

[platforms.telegram]
token_file = "bot.token"
base_url = "{fake.base_url}"
poll_timeout_seconds = 5
"""

        async def answers_help(stderr: Stderr) -> None:
            await fake.wait_for(lambda: fake.commands, DEADLINE)
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "/help"))
            await fake.wait_for(lambda: next(iter(fake.bot_messages(ALICE.id)), None), DEADLINE)

        output = await run_until(write_config(tmp_path, "debug", telegram), answers_help)
    assert DEBUG_LINE.search(output), output
    assert TOKEN.split(":")[1] not in output
    sdk_lines = re.findall(
        r"^\S+ \S+ (?:DEBUG|INFO) (?:httpx|httpcore|telegram)\S*: .*$", output, re.M
    )
    assert sdk_lines == []
