"""Where a session is found and where it is shown are two things (gateway/sessions/routing.py).

A session of scope "channel" is found by its channel, and shown in the threads people talk
in, never at the channel's root; one of scope "user" is found by the person, and shown where
they talk and in the direct conversation their platform gives (on Slack or Discord a DM
channel's id is not the person's id). Through the whole gateway with the scripted agent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.config.model import Config, SessionScope
from gateway.domain import Actor, ConversationRef
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.gateway_flows import with_scope
from tests.gateway_harness import ALICE, BOB, Running
from tests.puppet_launcher import PuppetLauncher
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(30)

ROOT = ConversationRef(platform="memory", space="team", channel="room")
THREAD_1 = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
THREAD_2 = ConversationRef(platform="memory", space="team", channel="room", thread="t2")


class DirectMessages(MemoryPlatform):
    """A platform whose direct conversations have ids of their own, as Slack's and
    Discord's DM channels do."""

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return ConversationRef(platform=self.name, space=None, channel=f"D-{actor.user_id}")


def config(tmp_path: Path, scope: SessionScope) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice", "bob"]

[platforms.memory]
"""
    return with_scope(parse_config(text, "routing.toml"), scope)


@asynccontextmanager
async def gateway(config: Config) -> AsyncIterator[Running]:
    memory = DirectMessages()
    async with Gateway(config, platforms={"memory": memory}, launcher=ScriptedLauncher({})) as gw:
        yield Running(gateway=gw, memory=memory)


async def test_a_channel_session_is_shown_in_its_threads_never_at_the_root(
    tmp_path: Path,
) -> None:
    async with gateway(config(tmp_path, SessionScope.CHANNEL)) as gw:
        await gw.memory.say(THREAD_1, ALICE, "hello")
        await gw.text_where(lambda text: text == "echo: hello", THREAD_1)
        await gw.memory.say(THREAD_2, BOB, "and here")
        # one session for the channel: the second thread joins it and is answered there
        await gw.text_where(lambda text: text == "echo: and here", THREAD_2)
        await gw.text_where(lambda text: text == "echo: and here", THREAD_1)
        sessions = await gw.gateway.store.sessions.list_sessions()
        assert len(sessions) == 1
        bound = await gw.gateway.store.sessions.list_bindings(sessions[0].id)
        assert bound == [THREAD_1, THREAD_2]
    assert gw.memory.messages(ROOT) == []


async def test_a_persons_session_is_shown_in_the_direct_conversation_the_platform_gives(
    tmp_path: Path,
) -> None:
    direct = ConversationRef(platform="memory", space=None, channel="D-alice")
    async with gateway(config(tmp_path, SessionScope.USER)) as gw:
        await gw.memory.say(THREAD_1, ALICE, "hello")
        await gw.text_where(lambda text: text == "echo: hello", THREAD_1)
        await gw.text_where(lambda text: text == "echo: hello", direct)
        # Alice elsewhere: her session still; Bob: a session of his own
        await gw.memory.say(THREAD_2, ALICE, "again")
        await gw.text_where(lambda text: text == "echo: again", direct)
        await gw.memory.say(THREAD_2, BOB, "mine")
        await gw.text_where(lambda text: text == "echo: mine", THREAD_2)
        sessions = await gw.gateway.store.sessions.list_sessions()
        assert len(sessions) == 2
    # nothing went to a "conversation" whose id is the person's id
    assert gw.memory.messages(ConversationRef(platform="memory", space=None, channel="alice")) == []


class MentionedCommands(MemoryPlatform):
    """A platform whose threads take no slash command: "@agent stop", as a Slack thread."""

    def spell_command(self, name: str) -> str:
        return f"@agent {name}"


async def test_help_and_replies_name_commands_as_the_platform_takes_them(tmp_path: Path) -> None:
    memory = MentionedCommands()
    launcher = PuppetLauncher()
    async with Gateway(
        config(tmp_path, SessionScope.THREAD), platforms={"memory": memory}, launcher=launcher
    ) as gw:
        running = Running(gateway=gw, memory=memory)
        await memory.say(THREAD_1, ALICE, "/help")
        help_text = await running.text_where(lambda text: text.startswith("Commands:"), THREAD_1)
        await memory.say(THREAD_1, ALICE, "hello")
        agent, _ = await launcher.prompt()
        agent.start_turn()
        await memory.say(THREAD_1, ALICE, "and then")  # waits behind the turn
        await memory.say(THREAD_1, ALICE, "/stop")
        stopped = await running.text_where(lambda text: "is held" in text, THREAD_1)
    assert "@agent stop — interrupt the agent and hold what is queued" in help_text
    assert "@agent approve ID [action] — approve a request" in help_text
    assert "/stop" not in help_text and "/approve" not in help_text
    assert stopped.endswith(
        "@agent resume runs it, @agent clear drops it; a new message runs first."
    )
