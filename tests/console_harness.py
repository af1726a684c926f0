"""A whole gateway with the web console beside the memory platform, for the console tests.

The console acts as ``local:alice`` (``[platforms.console] identity``), an approver of the
project; the memory platform's people are those of tests/gateway_harness.py.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from adapters.launch import ConfiguredLauncher
from gateway.config import Config, parse_config
from gateway.engine import Gateway
from platforms.console import ConsolePlatform
from platforms.memory import MemoryPlatform

__all__ = ["CONSOLE_TABLES", "ConsoleRunning", "console_gateway", "plain_config"]

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
async def console_gateway(config: Config) -> AsyncIterator[ConsoleRunning]:
    assert config.platforms.console is not None
    terminal = io.StringIO()
    memory = MemoryPlatform()
    console = ConsolePlatform(config.platforms.console, announce=terminal)
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    platforms = {"memory": memory, "console": console}
    # the console serves inside the gateway's block: no page reads a ledger already closed
    async with (
        Gateway(config, platforms=platforms, launcher=launcher) as gateway,
        console,
    ):
        yield ConsoleRunning(gateway=gateway, memory=memory, console=console, terminal=terminal)
