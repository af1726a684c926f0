"""A whole gateway with the web console beside the memory platform, for the console tests.

The console acts as ``local:alice`` (``[platforms.console] identity``), an approver of the
project; the memory platform's people are those of tests/gateway_harness.py.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from adapters.launch import ConfiguredLauncher
from gateway.config.model import Config
from gateway.platform import PlatformLimits
from gateway.sessions.agents import AgentLauncher
from gateway.sessions.engine import Gateway
from platforms.console.config import ConsoleConfig
from platforms.console.platform import CONSOLE_LIMITS, ConsolePlatform
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config

__all__ = [
    "CONSOLE_TABLES",
    "ConsoleRunning",
    "client",
    "console_gateway",
    "logged_in",
    "origin",
    "plain_config",
]

CONSOLE_TABLES = """
[platforms.console]
identity = "local:alice"

[projects.demo.auth.local]
allow_from = ["alice"]
approvers = ["alice"]
"""


def plain_config(data_dir: Path, work_dir: Path) -> Config:
    """A config whose agent is never started (tests that make interactions in the ledger)."""
    text = f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.demo]
work_dir = {json.dumps(str(work_dir))}
agent = "codex-app-server"
argv = ["/nonexistent/codex"]

[projects.demo.auth.memory]
allow_from = ["alice", "bob"]
approvers = ["alice", "bob"]

[platforms.memory]
{CONSOLE_TABLES}
"""
    return parse_config(text, "console-test.toml")


@dataclass
class ConsoleRunning:
    gateway: Gateway
    memory: MemoryPlatform
    console: ConsolePlatform
    terminal: io.StringIO = field(default_factory=io.StringIO)


@asynccontextmanager
async def console_gateway(
    config: Config,
    launcher: AgentLauncher | None = None,
    *,
    limits: PlatformLimits | None = None,
    memory: MemoryPlatform | None = None,
) -> AsyncIterator[ConsoleRunning]:
    """The gateway with the console (its own ``limits``, if given) and the memory platform
    (``memory``, if given)."""
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None
    terminal = io.StringIO()
    memory = memory or MemoryPlatform()
    console = ConsolePlatform(
        settings, announce=terminal, limits=limits or CONSOLE_LIMITS, show_token=True
    )
    agents = launcher or ConfiguredLauncher(env_source={}, handshake_timeout=60)
    platforms = {"memory": memory, "console": console}
    # as ``agent-gateway run`` has them: the console serves around the gateway's block (503
    # before the gateway attaches; POSTs refused once it stops taking input)
    async with (
        console,
        Gateway(config, platforms=platforms, launcher=agents) as gateway,
    ):
        yield ConsoleRunning(gateway=gateway, memory=memory, console=console, terminal=terminal)


def client() -> aiohttp.ClientSession:
    # unsafe: keep cookies of an IP-address host (127.0.0.1), as a browser does
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def logged_in(http: aiohttp.ClientSession, running: ConsoleRunning) -> str:
    """Open the console with its token; return the CSRF token of the page."""
    async with http.get(running.console.login_url) as response:
        assert response.status == 200
        page = await response.text()
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def origin(running: ConsoleRunning) -> dict[str, str]:
    return {"Origin": running.console.url.rstrip("/"), "Accept": "application/json"}
