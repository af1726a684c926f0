"""``message_content = true`` while the application lacks the privileged intent: Discord
closes the gateway with 4014 at start, and ``agent-gateway run`` exits 2 with one line that
names the key to change (no traceback), before it takes anything."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import discord_gateway_config_text
from tests.servers.fake_discord import FakeDiscord

pytestmark = [pytest.mark.timeout(120)]

DEADLINE = 60.0


async def test_a_refused_intent_exits_2_with_one_line_naming_message_content(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> None:
    async with FakeDiscord() as fake:
        assert not fake.message_content_enabled  # the portal's toggle is off
        config = tmp_path / "gateway.toml"
        text = discord_gateway_config_text(fake, codex_home, codex_bin, tmp_path / "data")
        config.write_text(text + "message_content = true\n", encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("agent-gateway")),  # the installed command
            "run",
            "--config",
            str(config),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(DEADLINE):
            out, err = await process.communicate()
        assert process.returncode == 2, err.decode()
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1, lines
        [line] = lines
        assert line.startswith("agent-gateway: ")
        assert "platforms.discord.message_content" in line
        assert "Traceback" not in err.decode() and out == b""
        assert 4014 in fake.closes  # it was Discord's refusal that said so
