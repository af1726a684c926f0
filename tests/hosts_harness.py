"""Two gateway hosts on one PostgreSQL ledger, in one test process (issue 19): project "pa"
on host "a" (channel "a"), "pb" on host "b" (channel "b"), each host its own data dir and
memory platform, around the scripted agent (tests/scripted_launcher.py)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.model import Config
from gateway.domain import ConversationRef
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.gateway_harness import Running
from tests.scripted_launcher import ScriptedLauncher

__all__ = ["ON_A", "ON_B", "both_running", "host_gateway", "memory_of", "two_hosts"]

ON_A = ConversationRef(platform="memory", space="team", channel="a", thread="t1")
ON_B = ConversationRef(platform="memory", space="team", channel="b", thread="t1")


def two_hosts(tmp_path: Path, dsn: str, *, lease_seconds: float | None = None) -> Config:
    """Project "pa" on host "a" (channel "a"), "pb" on host "b" (channel "b");
    ``lease_seconds``: the hosts' lease (``host_lease_seconds``), else the default."""
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    projects = ""
    for name, host in (("pa", "a"), ("pb", "b")):
        work = tmp_path / f"work-{host}"
        work.mkdir()
        projects += f"""
[projects.{name}]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
host = "{host}"

[projects.{name}.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]
channels = ["{host}"]
"""
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
store = {json.dumps(dsn)}
hmac_key_file = {json.dumps(str(key))}
stop_grace_seconds = 5
{f"host_lease_seconds = {lease_seconds}" if lease_seconds is not None else ""}
{projects}
[platforms.memory]
"""
    return parse_config(text, "hosts.toml")


def host_gateway(config: Config, tmp_path: Path, name: str, launcher: ScriptedLauncher) -> Gateway:
    memory = MemoryPlatform(adopt_unknown=True, id_prefix=f"{name}-")
    return Gateway(
        config,
        platforms={"memory": memory},
        launcher=launcher,
        data_dir=tmp_path / f"data-{name}",  # each machine has its own
        host=name,
    )


def memory_of(gateway: Gateway) -> MemoryPlatform:
    memory = gateway.platforms["memory"]
    assert isinstance(memory, MemoryPlatform)
    return memory


@asynccontextmanager
async def both_running(
    config: Config, tmp_path: Path, on_a: ScriptedLauncher, on_b: ScriptedLauncher
) -> AsyncIterator[tuple[Running, Running]]:
    """Hosts "a" and "b" of ``config`` running side by side, each with its launcher."""
    async with (
        host_gateway(config, tmp_path, "a", on_a) as gateway_a,
        host_gateway(config, tmp_path, "b", on_b) as gateway_b,
    ):
        yield (
            Running(gateway=gateway_a, memory=memory_of(gateway_a)),
            Running(gateway=gateway_b, memory=memory_of(gateway_b)),
        )
