"""``agent-gateway run`` with ``[platforms.console]``: the console starts beside the gateway;
its access token is kept in the data dir (0600) and printed only to a terminal: under
systemd, or into a pipe, the address is printed without it and ``agent-gateway console-url``
gives it (issue 37). A fixed token survives restarts; ``console-token --rotate`` changes it
and logs out the browsers the old one opened."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
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


async def console_url(config: Path, *command: str) -> str:
    done = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *(command or ("console-url",)), "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await done.communicate()
    assert done.returncode == 0, out.decode()
    return out.decode().strip().splitlines()[-1]


class Served:
    """``agent-gateway run`` as systemd runs it (INVOCATION_ID set, output to the journal)."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.seen: list[str] = []
        self.process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Served:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "run", "--config", str(self.config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "INVOCATION_ID": "0123abcd"},
        )  # fmt: skip
        assert self.process.stdout is not None
        async with asyncio.timeout(DEADLINE):
            while not any("agent-gateway console:" in line for line in self.seen):
                line = (await self.process.stdout.readline()).decode()
                assert line, f"the gateway ended early: {''.join(self.seen)}"
                self.seen.append(line)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.process is not None and self.process.stdout is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            self.seen.append((await self.process.stdout.read()).decode())
            assert await self.process.wait() == 0

    @property
    def output(self) -> str:
        return "".join(self.seen)


async def status_with(url: str, token: str | None = None) -> int:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        address = url if token is None else f"{url}?token={token}"
        async with http.get(address) as response:
            return response.status


async def test_under_systemd_the_address_is_printed_without_its_token_and_console_url_has_it(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    async with Served(config) as served:
        [announced] = [line for line in served.seen if "agent-gateway console:" in line]
        found = re.search(r"(http://127\.0\.0\.1:\d+/) \(`agent-gateway console-url", announced)
        assert found is not None, announced
        url = found.group(1)
        printed = await console_url(config)
        assert printed.startswith(f"{url}?token=")
        token = printed.split("?token=")[1]
        assert await status_with(url) == 401
        assert await status_with(url, token) == 200
        token_file = tmp_path / "data" / "console-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token not in served.output  # the journal never has it
    async with Served(config):  # no fixed token: a new one at each start
        assert (await console_url(config)).split("?token=")[1] != token


async def test_a_fixed_token_survives_a_restart_and_rotating_it_logs_the_old_one_out(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    text = config.read_text().replace(
        "[platforms.console]\n", "[platforms.console]\nfixed_token = true\n"
    )
    config.write_text(text)
    async with Served(config):
        first = await console_url(config)
    async with Served(config):
        again = await console_url(config)
        assert again.split("?token=")[1] == first.split("?token=")[1]  # the bookmark works
        url, old = again.split("?token=")
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.get(again) as response:
                assert response.status == 200  # a browser logged in with the old token
            rotated = await console_url(config, "console-token", "--rotate")
            new = rotated.split("?token=")[1]
            assert new != old
            async with http.get(url) as response:
                assert response.status == 401  # that browser is logged out
        assert await status_with(url, old) == 401
        assert await status_with(url, new) == 200
