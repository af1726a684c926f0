"""``agent-gateway run`` with ``[platforms.console]``: the console starts beside the gateway
and its address with the access token is printed once to the terminal, never logged."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.console_harness import CONSOLE_TABLES

pytestmark = pytest.mark.timeout(60)

DEADLINE = 30.0


def write_config(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
[gateway]
data_dir = "{tmp_path / "data"}"

[projects.demo]
work_dir = "{work}"
agent = "codex-app-server"
argv = ["/nonexistent/codex"]

{CONSOLE_TABLES}
""",
        encoding="utf-8",
    )
    return config


async def test_run_serves_the_console_and_prints_its_token_once(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None and process.stdout is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(DEADLINE):
            while not any("agent-gateway console:" in line for line in seen):
                line = (await process.stderr.readline()).decode()
                assert line, f"the gateway ended early: {''.join(seen)}"
                seen.append(line)
        [announced] = [line for line in seen if "agent-gateway console:" in line]
        found = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=(\S+)", announced)
        assert found is not None, announced
        url, token = found.groups()
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            async with http.get(url) as response:
                assert response.status == 401
            async with http.get(f"{url}?token={token}") as response:
                assert response.status == 200
                assert "Start a conversation" in await response.text()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            rest_err, rest_out = await asyncio.gather(process.stderr.read(), process.stdout.read())
            code = await process.wait()
    assert code == 0
    everything = "".join(seen) + rest_err.decode() + rest_out.decode()
    assert everything.count(token) == 1
