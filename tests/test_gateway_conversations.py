"""Conversations around a waiting request, through the whole gateway and the real codex.

Chat text typed while an approval waits is a prompt, never a decision; one session shown in
two threads keeps both copies of its card in step; a message the platform delivers twice is
one prompt and one turn; /status and /pending tell what waits and whether anyone can see it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.config.model import SessionScope
from gateway.domain import Actor, ConversationRef, InteractionState
from gateway.platform import Ack
from tests.codex_env import CodexHome
from tests.gateway_flows import (
    DONE,
    ROOM_T2,
    WHEN,
    Asked,
    ask,
    interaction,
    session_of,
    settles,
    with_scope,
)
from tests.gateway_harness import ALICE, BOB, ROOM, Running, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]

ALLOWED = rf'Approved \("Allow once"\) by Alice at {WHEN} · sent to the agent · done'


async def ask_to_touch(
    gw: Running, fake: FakeResponses, conversation: ConversationRef = ROOM
) -> Asked:
    steps = [shell("touch hello.txt", escalated=True), DONE]
    return await ask(gw, fake, steps, "please create hello.txt", conversation=conversation)


async def reply_to(
    gw: Running, text: str, conversation: ConversationRef = ROOM, *, by: Actor = ALICE
) -> str:
    """The one message the gateway answers ``text`` with."""
    before = len(gw.memory.texts(conversation))
    await gw.memory.say(conversation, by, text)
    [reply] = await gw.memory.wait_for(lambda: gw.memory.texts(conversation)[before:] or None)
    return reply


# --- chat text is never a decision ----------------------------------------------------------


async def test_ok_yes_approve_typed_while_an_approval_waits_are_prompts_not_decisions(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        iid = asked.interaction.id
        session = await session_of(gw)
        fake_model.enqueue(*([message(f"Noted: {w}")] for w in ("ok", "yes", "approve")))
        assert await reply_to(gw, "ok", by=ALICE) == (
            "Queued as a message for the agent, not as a decision. Still waiting for a "
            f"decision on: Run a command ({iid}). Use the card's buttons, or /approve {iid}, "
            f"/deny {iid}."
        )
        told = len(gw.memory.texts(ROOM))
        for by, word in [(BOB, "yes"), (ALICE, "approve")]:  # said once: then a mark
            said = await gw.memory.say(ROOM, by, word)
            await gw.memory.wait_for(lambda said=said: (ROOM, said) in gw.memory.marks)
        assert len(gw.memory.texts(ROOM)) == told
        queued = await gw.gateway.store.prompts.list_queued(session.id)
        assert [(p.author, p.text) for p in queued] == [
            (ALICE, "ok"),
            (BOB, "yes"),
            (ALICE, "approve"),
        ]
        record = await interaction(gw, iid)
        assert (record.state, record.decision, record.delivery) == (
            InteractionState.PENDING,
            None,
            None,
        )
        assert asked.shown.edits == 0 and len(asked.now.actions) == 4  # the card still waits
        assert len(fake_model.model_requests()) == 1  # nothing went to the agent
        assert not (codex_home.workspace / "hello.txt").exists()

        ack = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert ack.accepted
        await settles(gw, asked, ALLOWED)
        await gw.text_where(lambda text: text == "Noted: approve")
        assert await gw.gateway.store.prompts.list_queued(session.id) == []
    assert (codex_home.workspace / "hello.txt").exists()
    # after the approved turn, each queued text was the prompt of the next turn, in order
    prompts = [r.user_texts()[-1] for r in fake_model.model_requests() if r.step == 0]
    assert prompts == ["please create hello.txt", "ok", "yes", "approve"]


# --- one session, two conversations ---------------------------------------------------------


async def test_a_decision_in_one_thread_updates_the_card_in_the_other(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_scope(
        gateway_config(codex_bin, codex_home, tmp_path / "data"), SessionScope.CHANNEL
    )
    async with running_gateway(config) as gw:
        fake_model.enqueue([message("Hello from the agent")])
        await gw.memory.say(ROOM_T2, BOB, "hello")
        await gw.text_where(lambda text: text == "Hello from the agent", ROOM_T2)
        asked = await ask_to_touch(gw, fake_model, ROOM)
        assert (await session_of(gw, ROOM)).id == (await session_of(gw, ROOM_T2)).id
        there = Asked(
            shown=await gw.card_where(lambda card: bool(card.actions), ROOM_T2),
            interaction=asked.interaction,
        )
        assert there.labels == asked.labels

        ack = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert ack == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
        final = ALLOWED
        await settles(gw, asked, final)
        await settles(gw, there, final)
        late = await gw.memory.click(ROOM_T2, BOB, there.token("Deny"))
        assert not late.accepted
        assert late.text.startswith("Already decided by Alice: ")
        await gw.text_where(lambda text: "Done." in text, ROOM_T2)
    assert (codex_home.workspace / "hello.txt").exists()


async def test_a_thread_that_joins_while_a_card_waits_is_shown_the_card(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_scope(
        gateway_config(codex_bin, codex_home, tmp_path / "data"), SessionScope.CHANNEL
    )
    async with running_gateway(config) as gw:
        asked = await ask_to_touch(gw, fake_model, ROOM)
        iid = asked.interaction.id
        # Bob opens another thread of the channel: the same session, and its waiting card
        pending = await reply_to(gw, "/pending", ROOM_T2, by=BOB)
        assert pending == f"Open requests:\n  · {iid}: Run a command [pending, shown]"
        there = Asked(
            shown=await gw.card_where(lambda card: bool(card.actions), ROOM_T2),
            interaction=asked.interaction,
        )
        ack = await gw.memory.click(ROOM_T2, BOB, there.token("Allow once"))
        assert ack == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
        final = rf'Approved \("Allow once"\) by Bob at {WHEN} · sent to the agent · done'
        await settles(gw, there, final)
        await settles(gw, asked, final)
        await gw.text_where(lambda text: "Done." in text)
    assert (codex_home.workspace / "hello.txt").exists()


# --- a message delivered twice --------------------------------------------------------------


async def test_a_message_delivered_twice_is_one_prompt_and_one_turn(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        fake_model.enqueue(
            [message("first reply")], [message("second reply")], [message("third reply")]
        )
        # the platform delivers the conversation's first message twice at once...
        await asyncio.gather(
            gw.memory.say(ROOM, ALICE, "hello", message_id="m-1"),
            gw.memory.say(ROOM, ALICE, "hello", message_id="m-1"),
        )
        await gw.text_where(lambda text: text == "first reply")
        # ...and again once it was answered; then two new messages, one with the same text
        await gw.memory.say(ROOM, ALICE, "hello", message_id="m-1")
        await gw.memory.say(ROOM, ALICE, "and then", message_id="m-2")
        await gw.memory.say(ROOM, ALICE, "hello", message_id="m-3")
        await gw.text_where(lambda text: text == "third reply")
        shown = gw.memory.texts(ROOM)
        sessions = await gw.gateway.store.sessions.list_sessions()
    assert shown == ["first reply", "second reply", "third reply"]
    assert [r.user_texts()[-1] for r in fake_model.model_requests()] == [
        "hello",
        "and then",
        "hello",
    ]
    assert len(sessions) == 1


# --- /status and /pending -------------------------------------------------------------------


async def test_status_and_pending_show_what_waits_and_that_it_was_shown(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        iid = asked.interaction.id
        waiting = f"Open requests:\n  · {iid}: Run a command [pending, shown]"
        assert await reply_to(gw, "/pending") == waiting
        status = (await reply_to(gw, "/status")).splitlines()
        session = await session_of(gw)
        assert status == [
            f"Session {session.id} · project demo · codex-app-server",
            "State: waiting for approval",
            "Agent: 0.171.0, running",
            "Policy in force: approval_policy = on-request, approvals_reviewer = user,"
            " network_access = false, sandbox = workspace-write",
            "Queue: 0 waiting",
            "Grants: none",
            *waiting.splitlines(),
        ]
        await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        await settles(gw, asked, ALLOWED)
        assert await reply_to(gw, "/pending") == "Open requests: none"


async def test_pending_flags_a_request_no_one_could_see_and_approve_by_id_still_works(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        gw.memory.down = True  # an outage while the agent asks: its card cannot be sent
        fake_model.enqueue([shell("touch hello.txt", escalated=True), DONE])
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        await gw.memory.wait_for(lambda: "send_card" in gw.memory.refused)
        gw.memory.down = False
        # the turn's text is sent again on its own; the card is not (nothing changed it)
        await gw.text_where(lambda text: "touch hello.txt" in text)
        [waiting] = await gw.gateway.store.interactions.list_open()
        assert gw.cards() == []
        pending = await reply_to(gw, "/pending")
        assert (
            pending
            == f"Open requests:\n  · {waiting.id}: Run a command [pending, NOT SEEN by anyone yet]"
        )
        status = await reply_to(gw, "/status")
        assert "State: waiting for approval" in status
        assert pending in status

        reply = await reply_to(gw, f"/approve {waiting.id}")
        assert reply == "Approved: Allow once. Sent to the agent."
        # the copy that failed is sent again, showing how it ended
        [shown] = await gw.memory.wait_for(lambda: gw.cards() or None)
        await settles(
            gw,
            Asked(shown=shown, interaction=waiting),
            ALLOWED,
        )
        await gw.text_where(lambda text: "Done." in text)
    assert (codex_home.workspace / "hello.txt").exists()
