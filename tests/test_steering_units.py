"""Steering and /compact below the gateway (issue 31): the Codex codec's ``turn/steer`` and
``thread/compact/start`` lines and answers, the pure checks of steering and of the button
"Send into this turn now", and its signed token."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.domain import (
    Actor,
    AgentKind,
    ConversationRef,
    Decision,
    InteractionKind,
    InteractionState,
    TurnStatus,
)
from gateway.errors import CodecUsageError
from gateway.events import Compact, Prompt, Respond, Steer, SteerRefused, SteerTaken, TurnCompleted
from gateway.interactions.machine import Interaction
from gateway.sessions.compaction import compaction_offered, ended_words
from gateway.sessions.steer_button import (
    NOT_VALID,
    SEND_NOW_LABEL,
    click_refusal,
    encode_steer_token,
    queued_notice,
    verify_steer_token,
)
from gateway.sessions.steering import NOT_QUEUED, steer_refusal
from gateway.store.records import PromptRecord, PromptState
from platforms.discord import render as discord_render
from platforms.slack import render as slack_render
from tests.codex_harness import COMMAND, COMMAND_PARAMS, THREAD, TURN, ready, running

# --- the Codex codec -----------------------------------------------------------------------


def test_a_steer_names_the_running_turn_and_its_answer_says_taken() -> None:
    session = running()
    [steer] = session.send(Steer(key="7", text="also mention bananas"))
    assert steer["method"] == "turn/steer"
    assert steer["params"] == {
        "threadId": THREAD,
        "expectedTurnId": TURN,
        "input": [{"type": "text", "text": "also mention bananas", "text_elements": []}],
    }
    assert session.feed({"id": steer["id"], "result": {"turnId": TURN}}) == [SteerTaken(key="7")]


def test_a_steer_the_turn_no_longer_takes_is_refused_with_the_reason() -> None:
    session = running()
    [steer] = session.send(Steer(key="7", text="late"))
    error = {"code": -32600, "message": "expected turn does not match the active turn"}
    [refused] = session.feed({"id": steer["id"], "error": error})
    assert refused == SteerRefused(key="7", reason=error["message"])


def test_no_steer_is_written_without_a_known_turn_or_into_a_compaction() -> None:
    session = ready()
    with pytest.raises(CodecUsageError):
        session.send(Steer(key="1", text="no turn"))
    session.send(Prompt(text="go"))
    with pytest.raises(CodecUsageError):  # turn/start not answered yet: no turn id
        session.send(Steer(key="1", text="too early"))
    compacting = ready()
    [compact] = compacting.send(Compact())
    assert compact["method"] == "thread/compact/start"
    assert compact["params"] == {"threadId": THREAD}
    compacting.feed(
        {"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": TURN}}}
    )
    with pytest.raises(CodecUsageError):
        compacting.send(Steer(key="2", text="into the compaction"))
    assert compacting.sent() == []


def test_a_compaction_is_a_turn_and_a_refused_one_ends_as_failed() -> None:
    session = running()
    with pytest.raises(CodecUsageError):  # never while a turn runs
        session.send(Compact())
    refused = ready()
    [compact] = refused.send(Compact())
    [done] = refused.feed({"id": compact["id"], "error": {"code": -1, "message": "no"}})
    assert isinstance(done, TurnCompleted) and done.status is TurnStatus.FAILED
    assert refused.send(Prompt(text="again"))[0]["method"] == "turn/start"


# --- the pure checks ---------------------------------------------------------------------------

ALICE = Actor(platform="memory", user_id="alice", display="Alice")
BOB = Actor(platform="memory", user_id="bob", display="Bob")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")


def _prompt(state: PromptState = PromptState.QUEUED, *, held: bool = False) -> PromptRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return PromptRecord(
        id=5,
        session_id="s1",
        conversation=ROOM,
        platform_message_id="m5",
        author=ALICE,
        text="also mention bananas",
        state=state,
        position=5,
        created_at=now,
        updated_at=now,
        held=held,
    )


def _request(state: InteractionState) -> Interaction:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Interaction(
        id="abc123",
        session_id="s1",
        runtime_epoch=1,
        turn_id=1,
        native_key="rpc:0",
        kind=InteractionKind.APPROVAL,
        title="Run ls?",
        summary="",
        detail=None,
        actions=(),
        questions=(),
        state=state,
        version=1,
        created_at=now,
        updated_at=now,
    )


def test_nothing_is_steered_while_a_request_waits_for_a_decision() -> None:
    ok = {"agent_steers": True, "turn_running": True, "ahead": 0}
    assert steer_refusal(**ok, waiting=()) is None
    waiting = _request(InteractionState.PENDING)
    why = steer_refusal(**ok, waiting=[waiting])
    assert why is not None and "waits for a decision" in why
    decided = _request(InteractionState.DELIVERED)
    assert steer_refusal(**ok, waiting=[decided]) is None
    assert steer_refusal(**{**ok, "ahead": 1}, waiting=()) is not None
    assert steer_refusal(**{**ok, "turn_running": False}, waiting=()) is not None
    assert steer_refusal(**{**ok, "agent_steers": False}, waiting=()) is not None


def test_the_button_is_its_authors_once_and_its_token_is_signed() -> None:
    key = b"k" * 32
    token = encode_steer_token(key, 5)
    assert token.startswith("s1:5:") and len(token) <= 64
    assert verify_steer_token(key, token) == 5
    assert verify_steer_token(b"x" * 32, token) is None
    assert verify_steer_token(key, "s1:6:" + token.split(":")[2]) is None
    assert verify_steer_token(key, "a1:5:0:1:AAAAAAAAAAAA") is None
    prompt = _prompt()
    assert click_refusal(prompt, clicker=ALICE, where=ROOM) is None
    assert click_refusal(prompt, clicker=BOB, where=ROOM) == (
        "Only Alice can send their message into the turn."
    )
    elsewhere = ConversationRef(platform="memory", space="team", channel="room", thread="t2")
    assert click_refusal(prompt, clicker=ALICE, where=elsewhere) == NOT_VALID
    assert click_refusal(None, clicker=ALICE, where=ROOM) == NOT_VALID
    done = _prompt(PromptState.DONE)
    assert click_refusal(done, clicker=ALICE, where=ROOM) == NOT_QUEUED
    assert click_refusal(_prompt(held=True), clicker=ALICE, where=ROOM) == NOT_QUEUED


def test_compact_is_offered_by_codex_claude_code_and_opencode_and_its_end_is_said() -> None:
    assert compaction_offered(AgentKind.CODEX_APP_SERVER) is None
    assert compaction_offered(AgentKind.CLAUDE_CODE) is None
    assert compaction_offered(AgentKind.OPENCODE) is None
    for other in (AgentKind.CODEX_EXEC, AgentKind.ACP):
        said = compaction_offered(other)
        assert said is not None and said.startswith("/compact is not offered by this agent")
    assert ended_words(TurnStatus.COMPLETED, None).startswith("🗜 Compacted")
    assert "bad" in ended_words(TurnStatus.FAILED, "bad")


def test_the_queued_notice_is_one_button_carrying_the_token_on_slack_and_discord() -> None:
    key = b"k" * 32
    card = queued_notice(key, 5)
    token = encode_steer_token(key, 5)
    slack = slack_render.render_card(card)
    buttons = [
        element
        for block in slack.blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert [(b["text"]["text"], b["value"]) for b in buttons] == [(SEND_NOW_LABEL, token)]
    assert "Queued" in slack.text
    discord = discord_render.render_card(card)
    [row] = discord.components
    [button] = row["components"]
    assert button["label"] == SEND_NOW_LABEL
    assert discord_render.token_of(button["custom_id"]) == token
    assert "Queued" in discord.embed["title"]


def test_no_steer_while_a_request_of_the_turn_waits_for_its_answer() -> None:
    session = running()
    request = session.asked(COMMAND, COMMAND_PARAMS)
    with pytest.raises(CodecUsageError):
        session.send(Steer(key="1", text="yes, approve"))
    assert session.sent() == []
    session.send(Respond(native_key=request.native_key, decision=Decision(action_id="accept")))
    [steer] = session.send(Steer(key="2", text="and then bananas"))
    assert steer["method"] == "turn/steer"
