"""Live text on every host's console (issue 36): a turn host a runs streams on host b's web
console too. The owner saves the turn's timeline about once a second and the ledger NOTIFYs
every host with the session's id (never the text); b's console tells its live pages (its
server-sent events), and the page reads the text from the ledger. Two hosts on the real
PostgreSQL cluster (tests/pg_cluster.py), each with the memory platform and a console, the
scripted agent streaming its answer in parts as the test lets it (tests/scripted_launcher.py).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.model import Config
from gateway.sessions.engine import Gateway
from platforms.console.config import ConsoleConfig
from platforms.console.platform import CONSOLE_LIMITS, ConsolePlatform
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.console_harness import ConsoleRunning, client, logged_in, origin
from tests.gateway_flows import session_of
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(90)

STORY = ("Once upon", " a time there was", " a gateway.")
TYPED = "Tell me more please"
DEADLINE = 30.0


def hosts_with_consoles(tmp_path: Path, dsn: str) -> Config:
    """tests/hosts_harness.py's two hosts ("pa" on a, "pb" on b), each host with a console."""
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

[projects.{name}.auth.local]
allow_from = ["alice"]
approvers = ["alice"]
"""
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
store = {json.dumps(dsn)}
hmac_key_file = {json.dumps(str(key))}
stop_grace_seconds = 5
{projects}
[platforms.memory]

[platforms.console]
identity = "local:alice"
"""
    return parse_config(text, "hosts-console.toml")


@asynccontextmanager
async def host_with_console(
    config: Config, tmp_path: Path, name: str, launcher: ScriptedLauncher
) -> AsyncIterator[ConsoleRunning]:
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None
    memory = MemoryPlatform(adopt_unknown=True, id_prefix=f"{name}-")
    console = ConsolePlatform(settings, limits=CONSOLE_LIMITS, show_token=True)
    async with (
        console,
        Gateway(
            config,
            platforms={"memory": memory, "console": console},
            launcher=launcher,
            data_dir=tmp_path / f"data-{name}",
            host=name,
        ) as gateway,
    ):
        yield ConsoleRunning(gateway=gateway, memory=memory, console=console)


async def changed_events(response: aiohttp.ClientResponse, seen: asyncio.Queue[None]) -> None:
    """Each ``event: changed`` of a console's server-sent events, put in ``seen``."""
    async for line in response.content:
        if line.strip() == b"event: changed":
            seen.put_nowait(None)


async def page_when(
    http: aiohttp.ClientSession, url: str, seen: asyncio.Queue[None], text: str
) -> str:
    """The page at ``url`` once it shows ``text``: read again after each change event."""
    async with asyncio.timeout(DEADLINE):
        while True:
            async with http.get(url) as response:
                assert response.status == 200
                page = await response.text()
            if text in page:
                return page
            await seen.get()


async def test_a_turn_on_host_a_streams_on_host_b_s_console_before_it_ends(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = hosts_with_consoles(tmp_path, pg_database.dsn)
    on_a = ScriptedLauncher(REQUESTS, streams={"tell a story": STORY})
    on_a.may_end.clear()  # the turn goes on after its last part until the test lets it end
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(host_with_console(config, tmp_path, "a", on_a))
        b = await stack.enter_async_context(
            host_with_console(config, tmp_path, "b", ScriptedLauncher(REQUESTS))
        )
        http = await stack.enter_async_context(client())
        csrf = await logged_in(http, b)  # b's console, as a person opens it
        events = await stack.enter_async_context(http.get(b.console.url + "events"))
        assert events.status == 200
        seen: asyncio.Queue[None] = asyncio.Queue()
        reader = asyncio.create_task(changed_events(events, seen))
        try:
            await a.memory.say(ON_A, ALICE, "tell a story")
            on_a_running = Running(gateway=a.gateway, memory=a.memory)
            session = await session_of(on_a_running, ON_A)
            assert session.host == "a"
            assert b.gateway.existing_runner(session.id) is None  # b runs nothing of it
            page_url = b.console.url + f"s/{session.id}"
            # the first part, shown on b while a's agent waits to go on
            first = await page_when(http, page_url, seen, "Once upon")
            assert "a gateway." not in first
            on_a.go_on.set()
            # the whole text, shown on b while the turn still runs on a
            whole = await page_when(http, page_url, seen, "Once upon a time there was a gateway.")
            assert "Once upon a time there was a gateway." in whole
            latest = await b.gateway.store.turns.latest(session.id)
            assert latest is not None and latest.ended_at is None  # it has not ended
            on_a.may_end.set()
            await on_a.turn_over.wait()
            # a conversation started on b's console for a's project: run by a, its answer
            # shown on b from the ledger, what was typed shown once (b's memory has it)
            started = {"csrf": csrf, "project": "pa", "text": TYPED}
            async with http.post(b.console.url + "new", data=started, headers=origin(b)) as r:
                reply = await r.json()
            assert reply["accepted"], reply
            new_page = b.console.url + reply["location"].lstrip("/")
            started_session = await b.gateway.store.sessions.get(new_page.rsplit("/", 1)[1])
            assert started_session is not None and started_session.host == "a"
            page = await page_when(http, new_page, seen, f"echo: {TYPED}")
            # once from b's memory, not again from the ledger's copy of the prompt
            assert page.count(f'<span class="who">You</span>{TYPED}<') == 1
        finally:
            reader.cancel()
            on_a.go_on.set()  # a failed wait leaves no turn holding the hosts' stop
            on_a.may_end.set()
