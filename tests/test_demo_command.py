"""``agent-gateway demo`` as a newcomer runs it: ``python -m gateway demo`` in a subprocess
with a temporary data dir and the console on a free port. The test reads the printed address,
opens it with its token, asks the demo agent for its command through the console, allows it,
sees the result, and stops the demo with Ctrl-C (SIGINT)."""

from __future__ import annotations

import asyncio
import re
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

pytestmark = pytest.mark.timeout(90)

DEADLINE = 30


def test_demo_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "demo", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for option in ("--data-dir", "--port", "--host", "--pace", "--public-url"):
        assert option in done.stdout


@asynccontextmanager
async def demo_process(data_dir: Path, *more: str) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "demo", "--data-dir", str(data_dir)),
        *("--port", "0", "--pace", "0", *more),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def printed_address(process: asyncio.subprocess.Process) -> tuple[str, list[str]]:
    """The address with the token, and every line printed up to it."""
    assert process.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(DEADLINE):
        while True:
            line = (await process.stdout.readline()).decode()
            assert line, "the demo ended before printing its address"
            lines.append(line)
            found = re.search(r"https?://\S+\?token=\S+", line)
            if found:
                return found.group(), lines


async def page_when(
    http: aiohttp.ClientSession, base: str, path: str, probe: Callable[[str], bool]
) -> str:
    """The page at ``path`` once ``probe`` accepts it: fetched again whenever the console's
    event stream says something changed (or sends its keepalive)."""
    async with asyncio.timeout(DEADLINE), http.get(base + "events") as events:
        while True:
            async with http.get(base + path) as response:
                assert response.status == 200
                page = await response.text()
            if probe(page):
                return page
            while not (await events.content.readline()).strip():
                pass


async def test_the_demo_serves_the_console_runs_the_agent_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "demo"
    async with demo_process(data_dir) as process:
        login, printed = await printed_address(process)
        base = login.split("?", 1)[0]
        headers = {"Origin": base.rstrip("/"), "Accept": "application/json"}
        # keep the cookie of an IP-address host (127.0.0.1), as a browser does
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.get(login) as response:
                assert response.status == 200
                home = await response.text()
            found = re.search(r'name="csrf" value="([^"]+)"', home)
            assert found is not None
            csrf = found.group(1)
            new = {"project": "demo", "text": "command", "csrf": csrf}
            async with http.post(base + "new", data=new, headers=headers) as response:
                started = await response.json()
            assert started["accepted"], started
            session_page = str(started["location"]).lstrip("/")
            page = await page_when(http, base, session_page, lambda p: "/act" in p)
            act = re.search(r'action="/(i/[^"]+/act)"', page)
            allow = re.search(r'name="token"[^>]*value="([^"]+)">Allow once<', page)
            assert act is not None and allow is not None
            click = {"token": allow.group(1), "csrf": csrf}
            async with http.post(base + act.group(1), data=click, headers=headers) as response:
                ack = await response.json()
            assert ack["accepted"], ack
            await page_when(http, base, session_page, lambda p: "is in my work dir now" in p)
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            code = await process.wait()
        assert process.stderr is not None
        logged = (await process.stderr.read()).decode()
    assert code == 0, logged
    token = login.split("token=", 1)[1]
    assert "".join(printed).count(token) == 1 and token not in logged
    work_dir = tmp_path / "demo-work"
    assert (work_dir / "hello.txt").read_text() == "hello\n"
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700


async def test_the_demo_behind_a_tls_proxy_prints_the_public_address(tmp_path: Path) -> None:
    """``demo --public-url``: the address people are given is the proxy's (issue 37)."""
    async with demo_process(tmp_path / "demo", "--public-url", "https://demo.example.test") as p:
        login, _ = await printed_address(p)
        p.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert await p.wait() == 0
    assert login.startswith("https://demo.example.test/?token=")
