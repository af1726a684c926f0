"""Three real ``agent-gateway run --host NAME`` processes on one Slack app (the fake Slack,
Socket Mode: each host a connection of its own) and one PostgreSQL ledger (issue 19):
project "pa" on host a (channel #general), "pb" on host b (channel #bee), host c runs no
project. The agent is the scripted Codex (tests/agents/codex_scripted.py).

    async with slack_hosts(tmp_path, fake, dsn) as hosts:
        said = await fake.say(ALICE, GENERAL, "<@U0BOT> approve", to=hosts["a"].connection)
        ...
        hosts["c"].kill()

Each host has its own data dir, so its own config file, the same in all else (on one machine
the data dirs must differ: each `run` holds its data dir's lock). Which process holds which
connection, and which process made a Web API call, is read from ``/proc`` by the client's
port (tests/harness/peers.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from adapters.process_group import end_leftover_process_group
from gateway.auth import HMAC_KEY_BYTES
from gateway.store import Store
from gateway.store.postgresql import PgTarget
from tests.harness.driver import SCRIPTED_AGENT
from tests.harness.peers import pid_of_port
from tests.servers.fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_TOKEN,
    TEAM_ID,
    FakeSlack,
)

__all__ = ["BEE", "HOSTS", "Hosts", "SlackHost", "slack_hosts"]

HOSTS = ("a", "b", "c")
BEE = "C0BEE"  # the channel of project pb (host b); #general is pa's (host a)
DEADLINE = 60.0


def _config_text(tmp_path: Path, fake: FakeSlack, dsn: str, host: str) -> str:
    q = json.dumps
    key = tmp_path / "hmac.key"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    projects = ""
    for project, on, channel in (("pa", "a", "C0GENERAL"), ("pb", "b", BEE)):
        work = tmp_path / f"work-{project}"
        work.mkdir(exist_ok=True)
        argv = [sys.executable, str(SCRIPTED_AGENT), "normal"]
        projects += f"""
[projects.{project}]
work_dir = {q(str(work))}
agent = "codex-app-server"
host = "{on}"
argv = {q(argv)}
approval_policy = "on-request"
sandbox = "workspace-write"

[projects.{project}.agent_options.env]
{chr(10).join(f"{k} = {q(v)}" for k, v in env.items())}

[projects.{project}.auth.slack]
allow_from = {q([ALICE.id, BOB.id])}
approvers = {q([ALICE.id, BOB.id])}
channels = ["{channel}"]
"""
    return f"""
[gateway]
data_dir = {q(str(tmp_path / f"data-{host}"))}
store = {q(dsn)}
hmac_key_file = {q(str(key))}
stop_grace_seconds = 5
{projects}
[platforms.slack]
bot_token = "{BOT_TOKEN}"
app_token = "{APP_TOKEN}"
base_url = "{fake.base_url}"
team_id = "{TEAM_ID}"
"""


@dataclass
class SlackHost:
    name: str
    process: asyncio.subprocess.Process
    log: Path
    connection: int = 0  # its Socket Mode connection's number at the fake Slack

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: nothing is acked, closed or cleaned up."""
        self.process.send_signal(signal.SIGKILL)

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Hosts(dict[str, SlackHost]):
    """The hosts by name; which of them holds a client socket (the fake's ``identify``)."""

    def of_peer(self, peer: tuple[str, int]) -> str | None:
        live = [h.pid for h in self.values() if h.process.returncode is None]
        pid = pid_of_port(peer[1], live)
        return next((h.name for h in self.values() if h.pid == pid), None)


async def _start(tmp_path: Path, fake: FakeSlack, dsn: str, host: str) -> SlackHost:
    config = tmp_path / f"gateway-{host}.toml"
    config.write_text(_config_text(tmp_path, fake, dsn, host), encoding="utf-8")
    log = tmp_path / f"host-{host}.log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "gateway", "run", "--config", str(config), "--host", host),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return SlackHost(host, process, log)


async def _stop(host: SlackHost) -> None:
    if host.process.returncode is None:
        host.process.send_signal(signal.SIGINT)
    try:
        async with asyncio.timeout(DEADLINE):
            await host.process.wait()
    except TimeoutError:
        host.kill()
        await host.process.wait()


async def _end_agents(tmp_path: Path, dsn: str) -> None:
    """The agents a killed host left running, ended (the ledger names them)."""
    async with Store.open(tmp_path / "data-cleanup", postgresql=PgTarget(url=dsn)) as store:
        epochs = await store.sessions.live_epochs()
    for epoch in epochs:
        if epoch.pid is not None and epoch.process_start_time is not None:
            await end_leftover_process_group(
                epoch.pid, epoch.pgid or epoch.pid, int(epoch.process_start_time), 2.0
            )


@asynccontextmanager
async def slack_hosts(tmp_path: Path, fake: FakeSlack, dsn: str) -> AsyncIterator[Hosts]:
    """Hosts a, b and c running, each with its Socket Mode connection; stopped at the end
    (SIGINT), and any agent a killed host left ended."""
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    if BEE not in fake.channels:
        fake.add_channel(BEE, "bee", members={ALICE.id, BOB.id})
    hosts = Hosts()
    fake.identify = hosts.of_peer
    try:
        for name in HOSTS:
            hosts[name] = await _start(tmp_path, fake, dsn, name)

        def mapped() -> bool:
            for name in HOSTS:
                if hosts[name].process.returncode is not None:
                    raise AssertionError(f"host {name} ended:\n{hosts[name].log_tail()}")
            if fake.connected != len(HOSTS):
                return False
            owners = {c.n: c.caller for c in fake.connections}
            if sorted(str(o) for o in owners.values()) != sorted(HOSTS):
                return False
            for n, owner in owners.items():
                assert owner is not None
                hosts[owner].connection = n
            return True

        await fake.wait_for(mapped, DEADLINE)
        yield hosts
    finally:
        for host in hosts.values():
            await _stop(host)
        await _end_agents(tmp_path, dsn)
