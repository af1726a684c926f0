"""Sessions a person can find, switch to and name (issue 31), through the whole gateway on
the memory platform with the scripted agent (tests/scripted_launcher.py): ``/name``,
``/sessions`` and ``/switch``, asserted on what the chat shows and on which native session
the next agent is started with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.cards import FieldsBlock
from gateway.config.model import Config, ExpiryPolicy, SessionScope
from gateway.domain import Actor, AgentKind, ConversationRef
from tests.gateway_flows import session_of
from tests.gateway_harness import ALICE, BOB, ROOM, Running
from tests.scripted_gateway import open_card, scripted_config, scripted_gateway

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
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        await answered(gw, "hello")
        assert await reply_to(gw, "/name  release notes ") == (
            "This session is now named “release notes”: /switch release notes finds it again."
        )
        session = await session_of(gw)
        assert session.name == "release notes"
        assert launcher.named == ["release notes"]  # the running agent is told too
        status = await reply_to(gw, "/status")
        assert status.splitlines()[0] == (
            f"Session {session.id} “release notes” · project slow · codex-app-server"
        )
        assert await reply_to(gw, "/name") == (
            "This session is named “release notes”. /name TEXT renames it."
        )


async def test_a_named_sessions_cards_say_its_name(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        await answered(gw, "hello")
        await reply_to(gw, "/name birds")
        await gw.memory.say(ROOM, ALICE, "approve")
        shown = await gw.card_where(lambda card: card.title == "Run ls?")
        assert shown.card is not None
        assert str(shown.card.blocks).count("birds") == 1
        first = shown.card.blocks[0]
        assert isinstance(first, FieldsBlock) and first.fields == (("Session", "birds"),)


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


async def test_new_with_a_name_starts_a_named_session_that_the_next_message_runs_in(
    tmp_path: Path,
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        await answered(gw, "hello")
        old = await session_of(gw)
        assert await reply_to(gw, "/new 12345") == (
            "A session's name cannot be only digits: /switch N means the Nth session listed. "
            "Nothing was changed."
        )
        assert (await session_of(gw)).id == old.id  # a name refused closes nothing
        assert await reply_to(gw, "/new  fix the login ") == (
            "A new session “fix the login” starts with your next message."
        )
        named = await session_of(gw)
        assert named.id != old.id and named.name == "fix the login"
        assert len(launcher.resumed) == 1  # no agent until a message asks for one
        listed = (await reply_to(gw, "/sessions")).splitlines()
        assert listed[1].startswith(f"1. “fix the login” ({named.id}) · ")
        await answered(gw, "the first message")
        assert (await session_of(gw)).id == named.id
        assert len(launcher.resumed) == 2
        assert launcher.named[-1:] == ["fix the login"]  # the agent's own session named too


async def test_new_with_a_name_where_no_session_is_yet_makes_one(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        assert await reply_to(gw, "/new") == "No session here yet: send a message to start one."
        assert await reply_to(gw, "/new release") == (
            "A new session “release” starts with your next message."
        )
        await answered(gw, "go")
        assert (await session_of(gw)).name == "release"


# --- /sessions ------------------------------------------------------------------------------

STAMP = r"last active \d{4}-\d\d-\d\d \d\d:\d\d UTC"


async def fresh_session(gw: Running, text: str, conversation: ConversationRef = ROOM) -> str:
    """/new, then ``text``: the id of the session it started."""
    assert (
        await reply_to(gw, "/new", conversation) == "A new session starts with your next message."
    )
    await answered(gw, text, conversation)
    return (await session_of(gw, conversation)).id


async def test_sessions_lists_newest_first_with_state_and_pages_past_ten(tmp_path: Path) -> None:
    config = with_scope(scripted_config(tmp_path, fast=NEVER), SessionScope.CHANNEL)
    async with scripted_gateway(config) as (gw, _):
        await answered(gw, "message 1")
        ids = [(await session_of(gw)).id]
        for n in range(2, 13):
            ids.append(await fresh_session(gw, f"message {n}"))
        await reply_to(gw, "/name latest")
        first = (await reply_to(gw, "/sessions")).splitlines()
        assert first[0] == "Sessions 1 to 10 of 12, newest first:"
        assert re.fullmatch(
            rf"1\. “latest” \({ids[11]}\) · slow · codex-app-server · idle · {STAMP}"
            " · current here",
            first[1],
        )
        assert [line.split(" · ")[0] for line in first[2:11]] == [
            f"{n}. {ids[12 - n]}" for n in range(2, 11)
        ]
        assert all(" · ended · " in line for line in first[2:11])
        assert first[11:] == ["More: /sessions 2.", "Continue one here: /switch NAME or /switch N."]
        second = (await reply_to(gw, "/sessions 2")).splitlines()
        assert second[0] == "Sessions 11 to 12 of 12, newest first:"
        assert [line.split(" · ")[0] for line in second[1:3]] == [f"11. {ids[1]}", f"12. {ids[0]}"]
        assert second[3:] == ["Continue one here: /switch NAME or /switch N."]
        assert await reply_to(gw, "/sessions 3") == "No page 3: /sessions 1 to /sessions 2."


async def test_sessions_says_waiting_for_you_while_a_card_waits(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, _):
        await open_card(gw, ROOM, "approve")
        session = await session_of(gw)
        [line] = (await reply_to(gw, "/sessions")).splitlines()[1:2]
        assert re.fullmatch(
            rf"1\. {session.id} · slow · codex-app-server · waiting for you · {STAMP}"
            " · 1 waiting · current here",
            line,
        )


def approvers_only(config: Config, *people: str) -> Config:
    """The project "slow" with ``people`` as its only approvers (alice and bob still talk)."""
    slow = config.projects["slow"]
    auth = {"memory": slow.auth["memory"].model_copy(update={"approvers": people})}
    projects = {**config.projects, "slow": slow.model_copy(update={"auth": auth})}
    return config.model_copy(update={"projects": projects})


BOBS_DM = ConversationRef(platform="memory", space=None, channel="dm-bob")
ROOM_T2 = ConversationRef(platform="memory", space="team", channel="room", thread="t2")


async def test_an_approver_lists_but_cannot_open_a_session_of_another_conversation(
    tmp_path: Path,
) -> None:
    config = approvers_only(scripted_config(tmp_path, fast=NEVER), "alice")
    async with scripted_gateway(config) as (gw, launcher):
        await answered(gw, "bob's secret plan", BOBS_DM)
        bobs = await session_of(gw, BOBS_DM)
        await answered(gw, "hello")
        alices = await session_of(gw)
        listing = (await reply_to(gw, "/sessions")).splitlines()
        assert [line.split(" · ")[0] for line in listing[1:3]] == [
            f"1. {alices.id}",
            f"2. {bobs.id}",
        ]
        assert listing[2].endswith(" · listed only: held in another conversation")
        assert await reply_to(gw, "/switch 2") == (
            f"Session {bobs.id} was held in another conversation: it is listed to you, not "
            "opened here. Nothing was changed."
        )
        assert (await session_of(gw)).id == alices.id
        assert not any("secret" in text for text in gw.memory.texts(ROOM))
        # bob is no approver: from his own DM he sees his session only
        bobs_list = (await reply_to(gw, "/sessions", BOBS_DM, by=BOB)).splitlines()
        assert [line.split(" · ")[0] for line in bobs_list[1:]][:-1] == [f"1. {bobs.id}"]
        assert await reply_to(gw, f"/switch {alices.id}", BOBS_DM, by=BOB) == (
            f"No session named “{alices.id}” that you can see here: /sessions lists them."
            " Nothing was changed."
        )
        assert launcher.resumed == [None, None]  # nothing was started again


# --- /switch --------------------------------------------------------------------------------


async def test_switch_takes_up_an_earlier_session_natively_with_its_last_exchange(
    tmp_path: Path,
) -> None:
    config = with_scope(scripted_config(tmp_path, fast=NEVER), SessionScope.CHANNEL)
    async with scripted_gateway(config) as (gw, launcher):
        await answered(gw, "plan the release")
        assert (await reply_to(gw, "/name release")).startswith("This session is now named")
        release = await session_of(gw)
        later = await fresh_session(gw, "something else")
        reply = await reply_to(gw, "/switch release")
        assert reply.splitlines() == [
            "↪ Switched to session release (project slow, codex-app-server): your next message"
            " continues it.",
            "Last exchange:",
            "Alice: plan the release",
            "Agent: echo: plan the release",
        ]
        assert launcher.resumed == [None, None]
        await answered(gw, "where were we?")
        assert launcher.resumed == [None, None, release.native_session_id]
        now = await session_of(gw)
        assert now.id == release.id and not now.is_closed
        left = await gw.gateway.store.sessions.get(later)
        assert left is not None and left.close_reason == f"/switch by memory:alice to {release.id}"
        # and back, by its number: the session just left is the second listed
        assert (await reply_to(gw, "/switch 2")).startswith(f"↪ Switched to session {later} ")
        assert (await session_of(gw)).id == later
        await answered(gw, "and on with this one")  # its agent, just ended, starts again
        assert launcher.resumed[-1] == "scripted-thread-2"
        assert await reply_to(gw, f"/switch {later}") == (
            f"This conversation is already on session {later}."
        )


@pytest.mark.parametrize(
    ("spec", "answer"),
    [
        ("7", "No session 7: /sessions lists sessions 1 to 2. Nothing was changed."),
        (
            "nonesuch",
            "No session named “nonesuch” that you can see here: /sessions lists them."
            " Nothing was changed.",
        ),
        ("", "Usage: /switch NAME or /switch N (the number /sessions shows). Nothing was changed."),
    ],
    ids=["number", "name", "nothing"],
)
async def test_switch_to_an_unknown_session_changes_nothing(
    tmp_path: Path, spec: str, answer: str
) -> None:
    config = with_scope(scripted_config(tmp_path, fast=NEVER), SessionScope.CHANNEL)
    async with scripted_gateway(config) as (gw, _):
        await answered(gw, "one")
        current = await fresh_session(gw, "two")
        assert await reply_to(gw, f"/switch {spec}") == answer
        assert (await session_of(gw)).id == current


async def test_a_session_whose_host_is_gone_is_said_gone_and_nothing_changes(
    tmp_path: Path,
) -> None:
    config = with_scope(scripted_config(tmp_path, fast=NEVER), SessionScope.CHANNEL)
    async with scripted_gateway(config) as (gw, _):
        store = gw.gateway.store
        old = await store.sessions.create(
            project="slow", agent_kind=AgentKind.CODEX_APP_SERVER, host="old-box"
        )
        await store.prompts.enqueue(  # talked to here, on a host since retired
            old.id,
            conversation=ROOM,
            platform_message_id="long-ago",
            author=ALICE,
            text="long ago",
            max_depth=10,
        )
        await store.prompts.clear(old.id)
        await store.sessions.close(old.id, reason="its host was retired")
        await answered(gw, "today")
        current = await session_of(gw)
        assert await reply_to(gw, f"/switch {old.id}") == (
            f"Session {old.id} is gone: its agent's session was kept on host old-box, which no"
            " longer runs project slow. Nothing was changed; your next message here starts a"
            " new session."
        )
        assert (await session_of(gw)).id == current.id


async def test_in_thread_scope_switch_points_to_the_other_thread(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        await answered(gw, "in thread two", ROOM_T2)
        other = await session_of(gw, ROOM_T2)
        await answered(gw, "in thread one")
        here = await session_of(gw)
        assert await reply_to(gw, f"/switch {other.id}") == (
            f"Session {other.id} follows thread t2 of this channel — continue it there."
            " Nothing was changed here."
        )
        assert (await session_of(gw)).id == here.id
        # a session this thread had before /new is this thread's: taken up here
        later = await fresh_session(gw, "a fresh start")
        assert (await reply_to(gw, f"/switch {here.id}")).startswith(
            f"↪ Switched to session {here.id} "
        )
        await answered(gw, "back again")
        assert launcher.resumed[-1] == here.native_session_id
        assert (await gw.gateway.store.sessions.get(later)) is not None
