"""Who may decide, and with which button: every refusal through the whole gateway.

The agent is the real codex app-server asking to run a command. Forged, malformed, replayed,
stale and foreign tokens, a person who may talk but not decide, a stranger, and the /approve
and /deny fallback are each answered with what happened, audited, and write nothing to the
agent: the request stays pending (its card unchanged, the model not called again) and the
person who may decide still can, exactly once. Two approvers clicking at once get one
decision between them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.domain import Actor, ConversationRef, InteractionState
from gateway.platform import Ack
from gateway.store.records import AuditEntry
from tests.codex_env import CodexHome
from tests.forgery import tampered
from tests.gateway_flows import (
    CAROL,
    DONE,
    ORPHANED,
    ROOM_T2,
    WHEN,
    Asked,
    ask,
    count_rows,
    interaction,
    session_of,
    settles,
    told,
)
from tests.gateway_harness import (
    ALICE,
    BOB,
    MALLORY,
    ROOM,
    Running,
    gateway_config,
    running_gateway,
)
from tests.servers.fake_responses import FakeResponses, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]

ALLOWED = rf'Approved \("Allow once"\) by Alice at {WHEN} · sent to the agent · done'
NOT_VALID = "This button is not valid."
STALE = "This request belongs to an agent process that has ended."
NOT_ALLOWED = "You may not use this project here."


async def ask_to_touch(gw: Running, fake: FakeResponses, name: str = "hello.txt") -> Asked:
    asked = await ask(gw, fake, [shell(f"touch {name}", escalated=True), DONE], f"create {name}")
    assert asked.labels[0] == "Allow once"
    return asked


async def rejections(gw: Running, actor: Actor) -> list[str]:
    """The reasons of the refusals audited for ``actor``, oldest first."""
    entries = await gw.gateway.store.audit.entries(event="click.rejected")
    return [str(e.details["reason"]) for e in reversed(entries) if e.actor == actor.key()]


async def still_pending(gw: Running, asked: Asked, fake: FakeResponses) -> None:
    """Nothing was decided or written: the card still waits, the model was not called."""
    record = await interaction(gw, asked.interaction.id)
    assert record.state is InteractionState.PENDING
    assert (record.decision, record.delivery) == (None, None)
    assert count_rows(gw, "decisions", record.id) == 0
    assert asked.shown.edits == 0
    assert asked.now.status_line == "Waiting for a decision"
    assert len(fake.model_requests()) == 1


async def approve_at_last(gw: Running, asked: Asked, home: CodexHome) -> None:
    """The person who may decide still can, and the answer reaches the agent once."""
    ack = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
    assert ack == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
    await settles(gw, asked, ALLOWED)
    await gw.text_where(lambda text: "Done." in text)
    assert (home.workspace / "hello.txt").exists()
    assert count_rows(gw, "deliveries", asked.interaction.id) == 1


# --- tokens and people ----------------------------------------------------------------------


def other_choice(token: str) -> str:
    """A genuine tag moved onto another choice (button 1's tag on button 0's choice)."""
    version, iid, _choice, epoch, tag = token.split(":")
    return ":".join((version, iid, "1", epoch, tag))


@dataclass(frozen=True)
class Attempt:
    actor: Actor
    conversation: ConversationRef
    forge: str  # how the token is made from the "Allow once" button's
    text: str
    reason: str


ATTEMPTS = {
    "tampered-tag": Attempt(ALICE, ROOM, "tampered", NOT_VALID, "forged"),
    "tag-of-another-button": Attempt(ALICE, ROOM, "other_choice", NOT_VALID, "forged"),
    "not-a-token": Attempt(ALICE, ROOM, "garbage", NOT_VALID, "malformed"),
    "other-conversation": Attempt(
        ALICE, ROOM_T2, "genuine", "This request does not belong to this conversation.", "foreign"
    ),
    "may-talk-not-decide": Attempt(
        CAROL, ROOM, "genuine", "You may not decide this request.", "not_approver"
    ),
    "stranger": Attempt(
        MALLORY, ROOM, "genuine", "You may not use this project here.", "not_allowed"
    ),
}


@pytest.mark.parametrize("attempt", list(ATTEMPTS.values()), ids=list(ATTEMPTS))
async def test_a_refused_click_is_answered_audited_and_writes_nothing(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
    attempt: Attempt,
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        genuine = asked.token("Allow once")
        token = {
            "genuine": genuine,
            "tampered": tampered(genuine),
            "other_choice": other_choice(genuine),
            "garbage": "approve",
        }[attempt.forge]
        ack = await gw.memory.click(attempt.conversation, attempt.actor, token)
        assert ack == Ack(text=attempt.text, accepted=False)
        assert await rejections(gw, attempt.actor) == [attempt.reason]
        await still_pending(gw, asked, fake_model)
        await approve_at_last(gw, asked, codex_home)


async def test_a_card_of_another_session_is_foreign_even_where_the_clicker_has_a_session(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        here = await ask_to_touch(gw, fake_model)
        there = await ask(
            gw, fake_model, [shell("touch there.txt", escalated=True), DONE], conversation=ROOM_T2
        )
        assert (await session_of(gw, ROOM)).id != (await session_of(gw, ROOM_T2)).id
        ack = await gw.memory.click(ROOM_T2, ALICE, here.token("Allow once"))
        assert ack == Ack(text="This request does not belong to this conversation.", accepted=False)
        assert await rejections(gw, ALICE) == ["foreign"]
        for asked in (here, there):
            record = await interaction(gw, asked.interaction.id)
            assert record.state is InteractionState.PENDING
            assert asked.shown.edits == 0
        assert not (codex_home.workspace / "hello.txt").exists()


async def test_a_replayed_click_is_told_who_decided_and_nothing_is_written_again(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        first = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert first.accepted
        await settles(gw, asked, ALLOWED)
        await gw.text_where(lambda text: "Done." in text)
        again = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        other = await gw.memory.click(ROOM, BOB, asked.token("Deny"))
        record = await interaction(gw, asked.interaction.id)
        assert count_rows(gw, "decisions", record.id) == 1
        assert count_rows(gw, "deliveries", record.id) == 1
        assert await rejections(gw, ALICE) == ["not_open"]
        assert await rejections(gw, BOB) == ["not_open"]
    for ack in (again, other):
        assert not ack.accepted
        assert ack.text.startswith('Already decided by Alice: Approved ("Allow once") at')
    assert record.decision is not None and record.decision.actor == ALICE
    assert len(fake_model.model_requests()) == 2  # the command's output, reported once


async def test_a_token_of_an_ended_agent_process_is_stale_even_once_a_new_one_asks(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        old = await ask_to_touch(gw, fake_model)
        session = await session_of(gw)
        runner = gw.gateway.existing_runner(session.id)
        assert runner is not None and runner.agent is not None
        await runner.agent.stop()  # the epoch ends: its interactions are orphaned
        orphaned = await settles(gw, old, ORPHANED)
        assert orphaned.state is InteractionState.ORPHANED
        assert await gw.memory.click(ROOM, ALICE, old.token("Allow once")) == Ack(
            text=STALE, accepted=False
        )

        new = await ask_to_touch(gw, fake_model, "again.txt")  # a new process, a new epoch
        assert new.interaction.runtime_epoch == old.interaction.runtime_epoch + 1
        assert await gw.memory.click(ROOM, ALICE, old.token("Allow once")) == Ack(
            text=STALE, accepted=False
        )
        assert await rejections(gw, ALICE) == ["stale", "stale"]
        assert new.shown.edits == 0  # the new request is untouched
        ack = await gw.memory.click(ROOM, ALICE, new.token("Allow once"))
        assert ack.accepted, ack.text
        await settles(gw, new, ALLOWED)
        await gw.text_where(lambda text: "Done." in text)
    assert (codex_home.workspace / "again.txt").exists()
    assert not (codex_home.workspace / "hello.txt").exists()
    assert count_rows(gw, "decisions", old.interaction.id) == 0


# --- /approve and /deny ---------------------------------------------------------------------


async def reply_to(
    gw: Running,
    actor: Actor,
    text: str,
    conversation: ConversationRef = ROOM,
    *,
    private: bool = False,
) -> str:
    """What the gateway answers in the chat to ``text``."""
    before = len(gw.memory.texts(conversation))
    await gw.memory.say(conversation, actor, text, private=private)
    [reply] = await gw.memory.wait_for(lambda: gw.memory.texts(conversation)[before:] or None)
    return reply


async def test_approve_command_follows_the_same_rules_as_a_click(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        iid = asked.interaction.id
        assert await reply_to(gw, ALICE, "/approve nosuchid") == "No request nosuchid."
        assert await reply_to(gw, CAROL, f"/approve {iid}") == "You may not decide this request."
        # a stranger: nothing said in the shared room; in their own chat, their id
        room_before = gw.memory.texts(ROOM)
        await gw.memory.say(ROOM, MALLORY, f"/approve {iid}")  # handled when it returns
        assert gw.memory.texts(ROOM) == room_before
        own = ConversationRef(platform="memory", space=None, channel=MALLORY.user_id)
        assert await reply_to(gw, MALLORY, f"/approve {iid}", own, private=True) == (
            "You are not allowed to use this bot. Your Memory id is mallory: ask its owner to"
            ' add "mallory" to allow_from in the project\'s auth.memory settings.'
        )
        assert (
            await reply_to(gw, ALICE, f"/approve {iid}", ROOM_T2)
            == "This request does not belong to this conversation."
        )
        assert await rejections(gw, CAROL) == ["not_approver"]
        assert await rejections(gw, ALICE) == ["foreign"]
        refused = await gw.gateway.store.audit.entries(event="message.refused")
        assert [e.actor for e in refused] == [MALLORY.key()] * 2
        await still_pending(gw, asked, fake_model)

        reply = await reply_to(gw, BOB, f"/approve {iid}")
        assert reply == "Approved: Allow once. Sent to the agent."
        await settles(
            gw, asked, rf'Approved \("Allow once"\) by Bob at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)
        again = await reply_to(gw, ALICE, f"/deny {iid}")
        assert again.startswith('Already decided by Bob: Approved ("Allow once") at')
        assert count_rows(gw, "deliveries", iid) == 1
    assert (codex_home.workspace / "hello.txt").exists()


async def test_deny_command_declines_and_approve_takes_an_action_by_number(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        first = await ask_to_touch(gw, fake_model)
        reply = await reply_to(gw, ALICE, f"/deny {first.interaction.id} not now")
        assert reply == "Denied. Sent to the agent."
        await settles(
            gw, first, rf'Denied \("Deny"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)
        assert "rejected by user" in told(fake_model)

        second = await ask_to_touch(gw, fake_model, "second.txt")
        reply = await reply_to(gw, ALICE, f"/approve {second.interaction.id} 2")
        assert reply == "Approved: Always allow commands like this. Sent to the agent."
        rule = "Always allow commands like this"
        await settles(
            gw, second, rf'Approved \("{rule}"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.memory.wait_for(lambda: sum("Done." in t for t in gw.memory.texts(ROOM)) == 2)
    assert not (codex_home.workspace / "hello.txt").exists()
    assert (codex_home.workspace / "second.txt").exists()


async def test_an_approval_of_an_ended_agent_process_by_command_is_stale(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        runner = gw.gateway.existing_runner((await session_of(gw)).id)
        assert runner is not None and runner.agent is not None
        await runner.agent.stop()
        await settles(gw, asked, ORPHANED)
        assert await reply_to(gw, ALICE, f"/approve {asked.interaction.id}") == STALE
        assert await rejections(gw, ALICE) == ["stale"]
        assert count_rows(gw, "decisions", asked.interaction.id) == 0


# --- two approvers at once ------------------------------------------------------------------


@pytest.mark.parametrize("alice_first", [True, False], ids=["alice-sent-first", "bob-sent-first"])
async def test_two_approvers_clicking_at_once_make_one_decision(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
    alice_first: bool,
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        clicks = [
            gw.memory.click(ROOM, ALICE, asked.token("Allow once")),
            gw.memory.click(ROOM, BOB, asked.token("Deny")),
        ]
        alice, bob = await asyncio.gather(*(clicks if alice_first else clicks[::-1]))
        if not alice_first:
            alice, bob = bob, alice
        assert [alice.accepted, bob.accepted].count(True) == 1, (alice, bob)
        winner, loser = (ALICE, bob) if alice.accepted else (BOB, alice)
        assert loser.text.startswith(f"Already decided by {winner.display}"), loser.text
        verdict = r'Approved \("Allow once"\)' if winner == ALICE else r'Denied \("Deny"\)'
        record = await settles(
            gw, asked, rf"{verdict} by {winner.display} at {WHEN} · sent to the agent · done"
        )
        await gw.text_where(lambda text: "Done." in text)
        assert count_rows(gw, "decisions", record.id) == 1
        assert count_rows(gw, "deliveries", record.id) == 1
        audited = await gw.gateway.store.audit.entries(interaction_id=record.id)
    assert record.decision is not None and record.decision.actor == winner
    # the loser's attempt is on record, whichever check stopped it
    assert any(lost(entry, winner) for entry in audited)
    # the model heard back once, about the winner's choice
    [_, after] = fake_model.model_requests()
    assert len(after.tool_outputs()) == 1
    ran = (codex_home.workspace / "hello.txt").exists()
    assert ran is (winner == ALICE)
    assert ("rejected by user" in told(fake_model)) is (winner == BOB)


def lost(entry: AuditEntry, winner: Actor) -> bool:
    loser = BOB if winner == ALICE else ALICE
    return entry.actor == loser.key() and entry.event in {
        "click.rejected",
        "interaction.decision_rejected",
    }
