"""OpenCode attached mode: a real ``opencode serve`` 1.18.33 that the test starts (a free port,
a password) and the gateway only reaches (``url``, ``password_file``), restarted around it.

The server outlives the gateway: a request it still lists after a restart stays pending, its
card untouched, and is answered through the next gateway; one it no longer lists is orphaned;
the server is never ended by the gateway; ``check`` asks its url, never ``opencode --version``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

import tests.servers.fake_chat_completions as fc
from adapters.launch import ConfiguredLauncher, probe_version
from adapters.opencode import basic_auth
from gateway.config.model import Config, check_config
from gateway.domain import InteractionState
from gateway.errors import AgentStartError
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform, Rendered
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, ROOM, Running
from tests.opencode_env import OPENCODE_WAIT, OpenCodeHome, Server, opencode_server
from tests.servers.fake_chat_completions import DONE, FakeChatCompletions

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]


def attached_config(server: Server, home: OpenCodeHome, data_dir: Path, password: str) -> Config:
    password_file = home.root / "opencode-password"
    password_file.write_text(password + "\n")
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 2

[projects.notes]
work_dir = {json.dumps(str(home.workspace))}
agent = "opencode"
url = {json.dumps(server.url)}
password_file = {json.dumps(str(password_file))}

[projects.notes.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
""",
        "attached.toml",
    )


@asynccontextmanager
async def gateway_on(config: Config, memory: MemoryPlatform) -> AsyncIterator[Running]:
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        yield Running(gateway=gateway, memory=memory, deadline=OPENCODE_WAIT)


async def first_card(gw: Running) -> Rendered:
    def find() -> Rendered | None:
        return next((c for c in gw.cards() if c.card is not None and c.card.actions), None)

    return await gw.wait_for(find)


async def ask_for_a_file(gw: Running, fake_chat: FakeChatCompletions) -> Rendered:
    fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
    await gw.memory.say(ROOM, ALICE, "please make a file")
    return await first_card(gw)


async def test_a_request_the_server_still_asks_survives_the_restart_and_is_answered(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    memory = MemoryPlatform()  # the same chat before and after the restart
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        async with gateway_on(config, memory) as gw:
            shown = await ask_for_a_file(gw, fake_chat)
            assert shown.card is not None
            before = (shown.card, len(shown.versions))
        assert server.process.running  # the gateway let go of it: not ended
        async with gateway_on(config, memory) as gw:
            store = gw.gateway.store
            [entry] = await store.audit.entries(event="recovery.attached_agent")
            assert entry.details["still_asked"] and entry.details["epoch"] == 1
            [waiting] = await store.interactions.list_open()
            assert waiting.state is InteractionState.PENDING
            assert (shown.card, len(shown.versions)) == before  # the card untouched
            assert await store.audit.entries(event="recovery.leftover_agent") == []
            asked = len(fake_chat.model_requests())
            ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
            assert ack.accepted, ack.text
            # the command ran: OpenCode asks the model on with its output (the turn's text
            # is not shown after the restart: no change of the chat to wait on)
            await fake_chat.wait_for_requests(asked + 1)
            assert (opencode_home.workspace / "made.txt").exists()
            await gw.wait_for(lambda: shown.card is not None and not shown.card.actions)
            answered = await store.interactions.get(waiting.id)
            assert answered is not None and answered.runtime_epoch == 1
            # the reattached epoch takes the next prompt like any (the server may still be
            # ending the turn the previous gateway started: its events are not this one's)
            fake_chat.enqueue([fc.text("Second answer.")])
            await gw.memory.say(ROOM, ALICE, "and now?")
            await gw.text_where(lambda text: "Second answer." in text)
            session = await store.sessions.lookup(ROOM)
            assert session is not None and session.current_epoch == 1
        assert (opencode_home.workspace / "made.txt").read_text() == "hi\n"
        assert server.process.running


async def test_a_request_answered_elsewhere_while_away_is_orphaned_and_the_server_lives(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    memory = MemoryPlatform()
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        async with gateway_on(config, memory) as gw:
            shown = await ask_for_a_file(gw, fake_chat)
            [asked] = await gw.gateway.store.interactions.list_open()
        assert shown.card is not None and asked.native_key is not None
        # someone at the server's own client answers it while no gateway runs
        native_id = asked.native_key.split(":", 1)[1]
        headers = {"Authorization": basic_auth(server.password)}
        async with aiohttp.ClientSession(headers=headers) as http:
            reply = {"reply": "reject", "message": "not now"}
            async with http.post(f"{server.url}/permission/{native_id}/reply", json=reply) as r:
                assert r.status < 300, await r.text()
        async with gateway_on(config, memory) as gw:
            store = gw.gateway.store
            gone = await store.interactions.get(asked.id)
            assert gone is not None and gone.state is InteractionState.ORPHANED
            await gw.wait_for(lambda: shown.card is not None and not shown.card.actions)
            late = await gw.memory.click(ROOM, ALICE, before_token(shown))
            assert not late.accepted
            epoch = await store.sessions.get_epoch(asked.session_id, 1)
            assert epoch is not None and epoch.ended_at is not None
        assert server.process.running  # end_leftover never reaches an attached server
        assert not (opencode_home.workspace / "made.txt").exists()


def before_token(shown: Rendered) -> str:
    """The first button's token as it was first drawn (the card has none now)."""
    first = shown.versions[0]
    assert not isinstance(first, str) and first.actions
    return first.actions[0].token


async def test_check_asks_the_url_and_runs_no_binary(
    opencode_bin: str, opencode_home: OpenCodeHome, tmp_path: Path
) -> None:
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        project = config.projects["notes"]
        assert check_config(config) == ()  # no "opencode" looked for on PATH
        said = await probe_version(project, deadline=30)
        assert said == "opencode 1.18.33 (attached, healthy)"
        wrong = attached_config(server, opencode_home, tmp_path / "d", "not-the-password")
        with pytest.raises(AgentStartError, match="HTTP 401"):
            await probe_version(wrong.projects["notes"], deadline=30)
        assert server.process.running


async def test_a_server_gone_while_away_orphans_its_requests(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    memory = MemoryPlatform()
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        async with gateway_on(config, memory) as gw:
            shown = await ask_for_a_file(gw, fake_chat)
            [asked] = await gw.gateway.store.interactions.list_open()
        await server.process.stop()  # its owner ended it while no gateway ran
    async with gateway_on(config, memory) as gw:
        store = gw.gateway.store
        [entry] = await store.audit.entries(event="recovery.attached_agent")
        assert entry.details["still_asked"] == []
        assert "could not be asked" in entry.details["gone"]
        gone = await store.interactions.get(asked.id)
        assert gone is not None and gone.state is InteractionState.ORPHANED
        await gw.wait_for(lambda: shown.card is not None and not shown.card.actions)
        said = await gw.text_where(lambda text: text.startswith("↻ The gateway restarted"))
        assert "was not ended" in said


async def test_new_lets_go_of_the_server_and_ends_the_epoch(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    memory = MemoryPlatform()
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        async with gateway_on(config, memory) as gw:
            shown = await ask_for_a_file(gw, fake_chat)
            [asked] = await gw.gateway.store.interactions.list_open()
            await gw.memory.say(ROOM, ALICE, "/new")
            await gw.text_where(lambda text: text.startswith("A new session starts"))
            await gw.wait_for(lambda: shown.card is not None and not shown.card.actions)
            store = gw.gateway.store
            ended = await store.sessions.get_epoch(asked.session_id, 1)
            assert ended is not None and ended.ended_at is not None
            gone = await store.interactions.get(asked.id)
            assert gone is not None and gone.state is InteractionState.ORPHANED
        assert server.process.running


async def test_revoking_an_always_of_an_attached_server_says_the_server_keeps_it(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    # The server is not the gateway's to end: the revoke must not claim it was.
    memory = MemoryPlatform()
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        async with gateway_on(config, memory) as gw:
            shown = await ask_for_a_file(gw, fake_chat)
            assert shown.card is not None
            always = next(a for a in shown.card.actions if a.label.startswith("Always"))
            ack = await gw.memory.click(ROOM, ALICE, always.token)
            assert ack.accepted, ack.text
            await gw.wait_for(lambda: (opencode_home.workspace / "made.txt").exists() or None)

            async def said(text: str, starts: str) -> str:
                before = len(memory.texts(ROOM))
                await memory.say(ROOM, ALICE, text)
                return await gw.wait_for(
                    lambda: next(
                        (t for t in memory.texts(ROOM)[before:] if t.startswith(starts)), None
                    )
                )

            asked = await said("/revoke 1", "Revoking")
            assert f"the OpenCode server at {server.url} is not the gateway's to end" in asked
            assert asked.endswith("To go on: /revoke 1 confirm"), asked
            done = await said("/revoke 1 confirm", "Grant 1 revoked")
            assert "revoked in the ledger" in done and "until it is restarted" in done, done
            assert "is ended" not in done
            assert await said("/grants", "Grants in force") == "Grants in force: none."
            [entry] = await gw.gateway.store.audit.entries(event="grant.revoked")
        assert entry.details["how"].endswith("attached server not ended")
        assert server.process.running
