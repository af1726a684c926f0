"""Sessions a person can find, switch to and name (issue 31), through the whole gateway on
the memory platform with the scripted agent (tests/scripted_launcher.py): ``/name``,
``/sessions`` and ``/switch``, asserted on what the chat shows and on which native session
the next agent is started with."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.model import Config, ExpiryPolicy, SessionScope
from gateway.domain import Actor, ConversationRef
from tests.gateway_flows import session_of
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import scripted_config, scripted_gateway

pytestmark = pytest.mark.timeout(60)

NEVER = ExpiryPolicy()


def with_scope(config: Config, scope: SessionScope) -> Config:
    projects = {n: p.model_copy(update={"scope": scope}) for n, p in config.projects.items()}
    return config.model_copy(update={"projects": projects})


async def reply_to(
    gw: Running, text: str, conversation: ConversationRef = ROOM, *, by: Actor = ALICE
) -> str:
    """The one message the gateway answers ``text`` with."""
    before = len(gw.memory.texts(conversation))
    await gw.memory.say(conversation, by, text)
    [reply] = await gw.memory.wait_for(lambda: gw.memory.texts(conversation)[before:] or None)
    return reply


async def answered(gw: Running, text: str, conversation: ConversationRef = ROOM) -> None:
    """Say ``text`` to the agent and wait for its echo."""
    await gw.memory.say(conversation, ALICE, text)
    await gw.text_where(lambda said: said == f"echo: {text}", conversation)


# --- /name --------------------------------------------------------------------------------


async def test_name_names_the_session_and_status_shows_it(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        await answered(gw, "hello")
        assert await reply_to(gw, "/name  release notes ") == (
            "This session is now named “release notes”: /switch release notes finds it again."
        )
        session = await session_of(gw)
        assert session.name == "release notes"
        status = await reply_to(gw, "/status")
        assert status.splitlines()[0] == (
            f"Session {session.id} “release notes” · project slow · codex-app-server"
        )
        assert await reply_to(gw, "/name") == (
            "This session is named “release notes”. /name TEXT renames it."
        )


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("", "Usage: /name TEXT (a short name for this session)."),
        (
            "x" * 2000,
            "That name is 2000 characters long; a session's name is at most 80. "
            "Nothing was changed.",
        ),
        (
            "bad\x1b[31mname",
            "A session's name is one line of text, without control characters. "
            "Nothing was changed.",
        ),
        (
            "42",
            "A session's name cannot be only digits: /switch N means the Nth session listed. "
            "Nothing was changed.",
        ),
    ],
    ids=["empty", "2000 characters", "control characters", "digits"],
)
async def test_a_bad_name_is_refused_and_nothing_changes(
    tmp_path: Path, text: str, answer: str
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        await answered(gw, "hello")
        assert await reply_to(gw, f"/name {text}") == answer
        assert (await session_of(gw)).name is None
