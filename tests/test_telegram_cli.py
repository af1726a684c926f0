"""``agent-gateway run`` with ``[platforms.telegram]``: the gateway takes Telegram updates
(here from the fake Bot API) and answers them; the bot token never reaches its output."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import message_update, private_chat
from tests.telegram_harness import ALICE

pytestmark = pytest.mark.timeout(60)

DEADLINE = 30.0


def write_config(tmp_path: Path, fake: FakeTelegram, token: str, *, poll: int) -> Path:
    """A config for ``run``: Telegram (``token``: its token line) against ``fake``."""
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
[gateway]
data_dir = "{tmp_path / "data"}"

[projects.demo]
work_dir = "{tmp_path / "work"}"
agent = "codex-app-server"
argv = ["/nonexistent/codex"]

[projects.demo.auth.telegram]
allow_from = ["{ALICE.id}"]

[platforms.telegram]
{token}
base_url = "{fake.base_url}"
poll_timeout_seconds = {poll}
""",
        encoding="utf-8",
    )
    return config


async def test_run_builds_the_telegram_platform_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "bot.token").write_text(TOKEN + "\n")
    async with FakeTelegram() as fake:
        config = write_config(tmp_path, fake, 'token_file = "bot.token"', poll=5)
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "gateway", "run", "--config", str(config)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert process.stderr is not None and process.stdout is not None
        try:
            await fake.wait_for(lambda: fake.commands or None, DEADLINE)
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "/help"))
            help_text = await fake.wait_for(
                lambda: next((m for m in fake.bot_messages(ALICE.id)), None), DEADLINE
            )
            assert help_text.text.startswith("Commands:")
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            async with asyncio.timeout(DEADLINE):
                err, out = await asyncio.gather(process.stderr.read(), process.stdout.read())
                code = await process.wait()
    assert code == 0, err.decode()
    assert TOKEN not in err.decode() + out.decode()
    assert TOKEN.split(":")[1] not in err.decode() + out.decode()


async def test_run_stops_with_an_error_when_its_only_platform_refuses_the_token_later(
    tmp_path: Path,
) -> None:
    """A token revoked while the gateway runs: Telegram answers 401 to the next call; the
    platform stops, said in the log, and with no platform left `run` exits non-zero
    instead of running on deaf (issue 30)."""
    (tmp_path / "work").mkdir()
    async with FakeTelegram() as fake:
        config = write_config(tmp_path, fake, f'token = "{TOKEN}"', poll=1)
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "gateway", "run", "--config", str(config)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert process.stdout is not None
        try:
            await fake.wait_for(lambda: fake.commands or None, DEADLINE)
            fake.token = "999000:revoked"  # BotFather's /revoke: the old token is refused
            async with asyncio.timeout(DEADLINE):
                out = await process.stdout.read()
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    log = out.decode()
    assert code == 1, log
    assert "telegram stopped: platforms.telegram.token: Telegram refused the bot token" in log
    assert "no platform is left running" in log
    assert TOKEN.split(":")[1] not in log
