"""An attached OpenCode server on a host that stops (issue 28): two hosts on one ledger (the
real PostgreSQL cluster), a real ``opencode serve`` 1.18.33 the test runs, project "notes"
attached to it on host a. Host a stops cleanly with a request pending; host b reaps it. The
server outlives its host: b leaves the request open (never orphaned), a click on b decides
it, and when a is back it reattaches the server and the answer reaches it, once.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import tests.servers.fake_chat_completions as fc
from adapters.launch import ConfiguredLauncher
from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.model import Config
from gateway.domain import InteractionState
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A
from tests.opencode_env import OPENCODE_WAIT, OpenCodeHome, Server, opencode_server
from tests.pg_cluster import PgCluster
from tests.servers.fake_chat_completions import DONE, FakeChatCompletions

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]

LEASE = 3.0  # seconds: b reaps a within a third of it once a let go of its lease


def two_hosts_attached(tmp_path: Path, dsn: str, server: Server, home: OpenCodeHome) -> Config:
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    password_file = home.root / "opencode-password"
    password_file.write_text(server.password + "\n")
    q = json.dumps
    return parse_config(
        f"""
[gateway]
data_dir = {q(str(tmp_path / "data"))}
store = {q(dsn)}
hmac_key_file = {q(str(key))}
stop_grace_seconds = 2
host_lease_seconds = {LEASE}

[projects.notes]
work_dir = {q(str(home.workspace))}
agent = "opencode"
url = {q(server.url)}
password_file = {q(str(password_file))}
host = "a"

[projects.notes.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]
channels = ["a"]

[platforms.memory]
""",
        "hosts.toml",
    )


@asynccontextmanager
async def on_host(config: Config, tmp_path: Path, name: str) -> AsyncIterator[Running]:
    memory = MemoryPlatform(adopt_unknown=True, id_prefix=f"{name}-{os.urandom(3).hex()}-")
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    gateway = Gateway(
        config,
        platforms={"memory": memory},
        launcher=launcher,
        data_dir=tmp_path / f"data-{name}",
        host=name,
    )
    async with gateway:
        yield Running(gateway=gateway, memory=memory, deadline=OPENCODE_WAIT)


async def test_a_clean_stop_leaves_an_attached_servers_request_answerable(
    opencode_bin: str,
    opencode_home: OpenCodeHome,
    fake_chat: FakeChatCompletions,
    tmp_path: Path,
    pg_database: PgCluster,
) -> None:
    made = opencode_home.workspace / "made.txt"
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = two_hosts_attached(tmp_path, pg_database.dsn, server, opencode_home)
        async with on_host(config, tmp_path, "b") as b:
            async with on_host(config, tmp_path, "a") as a:
                fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
                await a.memory.say(ON_A, ALICE, "please make a file")
                card = await a.card_where(lambda shown: bool(shown.actions), ON_A)
                assert card.card is not None
                allow = card.card.actions[0].token
            # a stopped cleanly, its lease let go: b reaps it, and says what stays open
            told = await b.wait_for(
                lambda: next((t for t in b.memory.texts(ON_A) if "Host a stopped" in t), None)
            )
            assert "its open requests stay open" in told
            [waiting] = await b.gateway.store.interactions.list_open()
            assert waiting.state is InteractionState.PENDING  # never orphaned
            # answered on b while a is away: decided, to reach the server once a is back
            ack = await b.memory.click(ON_A, ALICE, allow)
            assert ack.accepted, ack.text
            assert "goes to the agent only once that host answers again" in ack.text
            assert not made.exists()
        assert server.process.running  # nobody ended it
        asked = len(fake_chat.model_requests())
        async with on_host(config, tmp_path, "a") as a:  # back: reattached, the answer sent
            # the command ran: OpenCode asks the model on with its output (the turn's text
            # is not shown after the restart: no change of the chat to wait on)
            await fake_chat.wait_for_requests(asked + 1)
            assert made.exists()
            answered = await a.gateway.store.interactions.get(waiting.id)
            assert answered is not None and answered.decision is not None
            assert answered.runtime_epoch == waiting.runtime_epoch  # the same server's epoch
        assert made.read_text() == "hi\n"
        assert server.process.running
