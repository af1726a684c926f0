"""Three real ``agent-gateway run --host NAME`` processes on one Slack app (the fake Slack,
Socket Mode: each host a connection of its own) and one PostgreSQL ledger (issue 19):
project "pa" on host a (channel #general), "pb" on host b (channel #bee), host c runs no
project. The agent is the scripted Codex (tests/agents/codex_scripted.py); the processes are
tests/harness/run_hosts.py's (each host its own config file, the same but for its data dir).

    async with slack_hosts(tmp_path, fake, dsn) as hosts:
        said = await fake.say(ALICE, GENERAL, "<@U0BOT> approve", to=hosts["a"].connection)
        ...
        hosts["c"].run.kill()

Which process holds which Socket Mode connection, and which made a Web API call, the fake
Slack asks :meth:`Hosts.of_peer` (the client's port, found in ``/proc``: tests/harness/peers.py)
while the socket is open.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from adapters.process_group import end_leftover_process_group
from gateway.config.ledger_url import PgTarget
from gateway.store.store import Store
from tests.harness.peers import pid_of_port
from tests.harness.run_hosts import RunHost, hosts_gateway_text, run_host, scripted_project_text
from tests.servers.fake_slack import ALICE, APP_TOKEN, BOB, BOT_TOKEN, TEAM_ID, FakeSlack, Posted
from tests.slack_harness import GENERAL, read

__all__ = ["BEE", "HOSTS", "Hosts", "SlackHost", "replies_saying", "slack_hosts"]

HOSTS = ("a", "b", "c")
BEE = "C0BEE"  # the channel of project pb (host b); #general is pa's (host a)
DEADLINE = 60.0
LEASE_SECONDS = 15.0  # the default: no host lapses during a test


def _config_text(tmp_path: Path, fake: FakeSlack, dsn: str) -> str:
    people = json.dumps([ALICE.id, BOB.id])
    projects = ""
    for project, host, channel in (("pa", "a", "C0GENERAL"), ("pb", "b", BEE)):
        auth = (
            "[projects.{name}.auth.slack]\n"
            f"allow_from = {people}\napprovers = {people}\nchannels = [{json.dumps(channel)}]\n"
        )
        work, log = tmp_path / f"work-{project}", tmp_path / f"prompts-{project}.jsonl"
        projects += scripted_project_text(project, host, work, log, auth)
    return (
        "[gateway]\n"
        + hosts_gateway_text(tmp_path, dsn, lease_seconds=LEASE_SECONDS)
        + "\n"
        + projects
        + "[platforms.slack]\n"
        f'bot_token = "{BOT_TOKEN}"\napp_token = "{APP_TOKEN}"\n'
        f'base_url = "{fake.base_url}"\nteam_id = "{TEAM_ID}"\n'
    )


@dataclass
class SlackHost:
    name: str
    run: RunHost
    connection: int = 0  # its Socket Mode connection's number at the fake Slack

    @property
    def pid(self) -> int:
        return self.run.process.pid


class Hosts(dict[str, SlackHost]):
    """The hosts by name; which of them holds a client socket (the fake's ``identify``)."""

    def of_peer(self, peer: tuple[str, int]) -> str | None:
        live = [h.pid for h in self.values() if h.run.process.returncode is None]
        pid = pid_of_port(peer[1], live)
        return next((h.name for h in self.values() if h.pid == pid), None)


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
async def slack_hosts(
    tmp_path: Path, fake: FakeSlack, dsn: str, *, stores: Mapping[str, str] | None = None
) -> AsyncIterator[Hosts]:
    """Hosts a, b and c running, each with its Socket Mode connection; stopped at the end
    (SIGINT), and any agent a killed host left ended. ``stores``: the ledger's URL for some
    hosts, if not ``dsn`` (the same database as another role, to cut one host off)."""
    if BEE not in fake.channels:
        fake.add_channel(BEE, "bee", members={ALICE.id, BOB.id})
    shared = _config_text(tmp_path, fake, dsn)
    hosts = Hosts()
    fake.identify = hosts.of_peer
    try:
        async with AsyncExitStack() as stack:
            for name in HOSTS:
                store = (stores or {}).get(name)
                text = shared.replace(json.dumps(dsn), json.dumps(store)) if store else shared
                hosts[name] = SlackHost(
                    name, await stack.enter_async_context(run_host(tmp_path, name, text))
                )

            def mapped() -> bool:
                if fake.connected != len(HOSTS):
                    return False
                # found now (a connection made before its host was listed was not named)
                owners = {c.n: hosts.of_peer(c.peer) for c in fake.connections}
                if sorted(str(o) for o in owners.values()) != sorted(HOSTS):
                    return False
                for n, owner in owners.items():
                    hosts[str(owner)].connection = n
                return True

            await fake.wait_for(mapped, DEADLINE)
            yield hosts
    finally:
        await _end_agents(tmp_path, dsn)


def replies_saying(fake: FakeSlack, thread: str, pattern: str) -> list[Posted]:
    """The app's replies in ``thread`` of the general channel whose text matches
    ``pattern`` (cards left out)."""
    return [
        m
        for m in fake.replies(GENERAL, thread)
        if m.from_bot and not m.labels and re.search(pattern, read(m.seen))
    ]
