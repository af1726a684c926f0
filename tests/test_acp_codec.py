"""The ACP codec without a process: what it writes for each command and what each line means."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.acp import ENDED_AT_REFUSAL, AcpCodec, AcpState
from gateway.cards import Card
from gateway.domain import Decision, Effect, Resolution, Scope, TurnStatus
from gateway.errors import CodecUsageError, RemoteError
from gateway.events import (
    AgentEvent,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    SessionStarted,
    TextDelta,
    ToolActivity,
    ToolPhase,
    TurnCompleted,
    Usage,
    Warning,
)
from gateway.render.interaction_card import render_interaction
from platforms.telegram.render import render_card
from tests.card_samples import pending
from tests.servers.telegram_wire import visible_text

SESSION = "sess-1"


def line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def sent(codec: AcpCodec) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in codec.data_to_send()]


def ready(*, resume: str | None = None, load: bool = True) -> tuple[AcpCodec, list[AgentEvent]]:
    codec = AcpCodec(cwd="/w", resume_session_id=resume)
    codec.start()
    [init] = sent(codec)
    assert init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    caps = {"loadSession": load}
    info = {"name": "fake-acp", "version": "1.2.3"}
    events = codec.feed(line({"id": 1, "result": {"agentCapabilities": caps, "agentInfo": info}}))
    [opening] = sent(codec)
    if opening["method"] == "session/load":
        assert opening["params"] == {"sessionId": resume, "cwd": "/w", "mcpServers": []}
        replay = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
        events += codec.feed(
            line({"method": "session/update", "params": {"sessionId": resume, "update": replay}})
        )
        events += codec.feed(line({"id": 2, "result": None}))
    else:
        assert opening["params"] == {"cwd": "/w", "mcpServers": []}
        events += codec.feed(line({"id": 2, "result": {"sessionId": SESSION}}))
    assert codec.state is AcpState.READY
    return codec, events


def update(body: dict[str, Any]) -> bytes:
    return line({"method": "session/update", "params": {"sessionId": SESSION, "update": body}})


def permission(request_id: Any, kinds: list[tuple[str, str]]) -> bytes:
    options = [{"optionId": oid, "name": oid.upper(), "kind": kind} for oid, kind in kinds]
    call = {"toolCallId": "c1", "kind": "execute", "title": "ls", "rawInput": {"command": "ls"}}
    params = {"sessionId": SESSION, "toolCall": call, "options": options}
    return line({"id": request_id, "method": "session/request_permission", "params": params})


def test_a_new_session_is_started() -> None:
    _, events = ready()
    assert events == [SessionStarted(native_id=SESSION, agent_version="fake-acp 1.2.3")]


def test_a_loaded_session_does_not_show_its_history_again() -> None:
    _, events = ready(resume="old-7")
    assert events == [
        SessionStarted(native_id="old-7", agent_version="fake-acp 1.2.3", resumed=True)
    ]


def test_an_agent_that_cannot_load_starts_a_new_session_and_says_so() -> None:
    _, events = ready(resume="old-7", load=False)
    assert isinstance(events[0], Warning) and events[0].code == "resume_unsupported"
    assert events[1] == SessionStarted(native_id=SESSION, agent_version="fake-acp 1.2.3")


def test_a_refused_session_new_ends_the_session() -> None:
    codec = AcpCodec(cwd="/w")
    codec.start()
    codec.feed(line({"id": 1, "result": {}}))
    codec.data_to_send()
    with pytest.raises(RemoteError):
        codec.feed(line({"id": 2, "error": {"code": -32000, "message": "auth required"}}))


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        ("end_turn", TurnStatus.COMPLETED),
        ("cancelled", TurnStatus.INTERRUPTED),
        ("max_tokens", TurnStatus.FAILED),
        ("refusal", TurnStatus.FAILED),
    ],
)
def test_the_stop_reason_ends_the_turn(reason: str, status: TurnStatus) -> None:
    codec, _ = ready()
    codec.send(Prompt(text="hi"))
    [prompt] = sent(codec)
    assert prompt["params"] == {"sessionId": SESSION, "prompt": [{"type": "text", "text": "hi"}]}
    [done] = codec.feed(line({"id": prompt["id"], "result": {"stopReason": reason}}))
    assert isinstance(done, TurnCompleted) and done.status is status
    assert (done.error is None) == (status is not TurnStatus.FAILED)


def test_updates_become_text_tools_and_usage_and_thoughts_are_hidden() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="hi"))
    codec.data_to_send()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}}
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}
    tool = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "execute"}
    done = {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}
    usage = {"sessionUpdate": "usage_update", "used": 15, "size": 1000}
    events = [e for body in (chunk, thought, tool, done, usage) for e in codec.feed(update(body))]
    assert isinstance(events[0], TextDelta) and events[0].text == "Hel"
    assert isinstance(events[1], ToolActivity) and events[1].phase is ToolPhase.STARTED
    assert isinstance(events[2], ToolActivity) and events[2].phase is ToolPhase.COMPLETED
    assert events[2].title == "ls"  # the update repeats only what changed
    assert events[3] == Usage(input_tokens=15)
    assert len(events) == 4
    codec.feed(update({"sessionUpdate": "plan", "entries": []}))
    assert codec.unknown_updates["plan"] == 1


def test_the_options_are_the_actions_in_order_and_the_chosen_id_is_replied() -> None:
    codec, _ = ready()
    kinds = [
        ("z", "reject_always"),
        ("a1", "allow_once"),
        ("9", "allow_always"),
        ("r", "reject_once"),
    ]
    [opened] = codec.feed(permission("p-1", kinds))
    assert isinstance(opened, InteractionOpened)
    request = opened.request
    assert request.native_key == "rpc:s:p-1"
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("z", Effect.DENY, Scope.ALWAYS),
        ("a1", Effect.ALLOW, Scope.ONCE),
        ("9", Effect.ALLOW, Scope.ALWAYS),
        ("r", Effect.DENY, Scope.ONCE),
    ]
    with pytest.raises(CodecUsageError):
        codec.send(Respond(native_key=request.native_key, decision=Decision(action_id="allow")))
    assert codec.data_to_send() == []
    codec.send(Respond(native_key=request.native_key, decision=Decision(action_id="9")))
    [reply] = sent(codec)
    assert reply == {
        "jsonrpc": "2.0",
        "id": "p-1",
        "result": {"outcome": {"outcome": "selected", "optionId": "9"}},
    }
    events = codec.feed(update({"sessionUpdate": "tool_call_update", "toolCallId": "c1"}))
    assert events[0] == InteractionClosed(native_key="rpc:s:p-1", how=Resolution.ANSWERED)


def test_interrupt_cancels_the_turn_and_answers_every_open_permission_cancelled() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="hi"))
    [prompt] = sent(codec)
    codec.feed(permission(41, [("ok", "allow_once"), ("no", "reject_once")]))
    codec.send(Interrupt())
    cancel, answer = sent(codec)
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": SESSION},
    }
    assert answer == {"jsonrpc": "2.0", "id": 41, "result": {"outcome": {"outcome": "cancelled"}}}
    events = codec.feed(line({"id": prompt["id"], "result": {"stopReason": "cancelled"}}))
    assert events == [
        InteractionClosed(native_key="rpc:41", how=Resolution.CANCELLED_BY_AGENT),
        TurnCompleted(status=TurnStatus.INTERRUPTED),
    ]


@pytest.mark.parametrize(
    "method", ["fs/read_text_file", "fs/write_text_file", "terminal/create", "elicitation/create"]
)
def test_other_agent_requests_are_refused_never_approved(method: str) -> None:
    codec, _ = ready()
    [warning] = codec.feed(line({"id": 5, "method": method, "params": {}}))
    assert isinstance(warning, Warning) and method in warning.message
    [error] = sent(codec)
    assert error["id"] == 5 and error["error"]["code"] == -32601


def test_a_permission_with_an_unknown_option_kind_is_refused() -> None:
    codec, _ = ready()
    [warning] = codec.feed(permission(6, [("x", "allow_sometimes")]))
    assert isinstance(warning, Warning)
    [error] = sent(codec)
    assert error["error"]["code"] == -32602


RECORDED = Path(__file__).parent / "transcripts" / "codex-acp-0.16" / "always_with_reason.jsonl"


def recorded_permission() -> dict[str, Any]:
    """codex-acp 0.16.0's own request, as recorded (a reason, its "Available Decisions")."""
    for raw in RECORDED.read_text().splitlines():
        msg = json.loads(raw)["msg"]
        if msg.get("method") == "session/request_permission":
            return dict(msg)
    raise AssertionError("no permission request recorded")


def card_for(opened: InteractionOpened) -> Card:
    request = opened.request
    item = pending(request, at=datetime(2026, 12, 5, 5, 15, tzinfo=UTC))
    return render_interaction(item, token_for=lambda choice: f"tok-{choice}")


def test_a_codex_acp_card_shows_the_agents_reason_and_options_not_its_internal_lines() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="make hello.txt"))
    sent(codec)
    [opened] = codec.feed(json.dumps(recorded_permission()).encode())
    assert isinstance(opened, InteractionOpened)
    card = card_for(opened)
    everything = repr(card)
    # the agent's reason, once; its restatement of the options and the rule, never
    assert card.summary == "Need to create hello.txt"
    assert everything.count("Need to create hello.txt") == 1
    assert "Available Decisions" not in everything and "Proposed Amendment" not in everything
    # the command once, in its block (the tool's title is the same command)
    assert "echo hi" not in card.summary
    # each option as codex-acp wrote it, on its button or in the button's explanation
    names = [
        "Yes, proceed",
        "Yes, and don't ask again for commands that start with `/bin/bash -c echo hi > hello.txt`",
        "No, and tell Codex what to do differently",
    ]
    for name, action in zip(names, card.actions, strict=True):
        assert name.replace("`", "") in f"{action.label} {action.explanation}", action
    # the "always" option adds the amendment codex-acp writes to its rules file, said whole
    assert card.actions[1].rule == "/bin/bash -c 'echo hi > hello.txt'"
    # a refusal's explanation does not guess that the agent carries on (codex-acp's ends the turn)
    assert "carries on" not in card.actions[2].explanation
    shown = visible_text(render_card(card, None, private=True, limit=4096).html)
    assert "Need to create hello.txt" in shown and "Available Decisions" not in shown


@pytest.mark.parametrize(
    ("call", "title", "summary"),
    [
        # a file edit's title names the diff's file: not said again; its reason is
        (
            {
                "kind": "edit",
                "title": "Edit /w/a.txt",
                "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "a", "newText": "b"}],
                "rawInput": {"reason": "Fix the typo"},
            },
            "Apply file changes",
            "Fix the typo",
        ),
        # another tool's title is the card's title, and its text (not the title again) the body
        (
            {
                "kind": "fetch",
                "title": "Fetch https://example.com",
                "content": [{"type": "content", "content": {"type": "text", "text": "For docs"}}],
            },
            "Fetch https://example.com",
            "For docs",
        ),
    ],
)
def test_each_thing_the_agent_says_is_on_the_card_once(
    call: dict[str, Any], title: str, summary: str
) -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    sent(codec)
    options = [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]
    params = {"sessionId": SESSION, "toolCall": {"toolCallId": "c9", **call}, "options": options}
    [opened] = codec.feed(line({"id": 5, "method": "session/request_permission", "params": params}))
    assert isinstance(opened, InteractionOpened)
    card = card_for(opened)
    assert (card.title, card.summary) == (title, summary)
    everything = repr(card)
    for said in (title, summary):
        assert everything.count(said) == 1, everything


def test_a_tool_a_person_refused_ends_denied_not_failed() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    sent(codec)
    [opened] = codec.feed(permission("p-1", [("y", "allow_once"), ("n", "reject_once")]))
    assert isinstance(opened, InteractionOpened)
    codec.send(Respond(native_key=opened.request.native_key, decision=Decision(action_id="n")))
    sent(codec)
    events = codec.feed(
        update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed"})
    )
    [tool] = [e for e in events if isinstance(e, ToolActivity)]
    assert (tool.title, tool.phase, tool.status) == ("ls", ToolPhase.COMPLETED, "denied")
    # the turn goes on (this agent carries on): it completes as the agent says
    [ended] = codec.feed(line({"id": 3, "result": {"stopReason": "end_turn"}}))
    assert ended == TurnCompleted(status=TurnStatus.COMPLETED)


@pytest.mark.parametrize("stopped", [False, True])
def test_a_turn_the_agent_cancels_after_a_refusal_says_so_and_a_stop_does_not(
    stopped: bool,
) -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    sent(codec)
    [opened] = codec.feed(permission("p-1", [("y", "allow_once"), ("abort", "reject_once")]))
    assert isinstance(opened, InteractionOpened)
    codec.send(Respond(native_key=opened.request.native_key, decision=Decision(action_id="abort")))
    if stopped:
        codec.send(Interrupt())
    sent(codec)
    events = codec.feed(line({"id": 3, "result": {"stopReason": "cancelled"}}))
    [ended] = [e for e in events if isinstance(e, TurnCompleted)]
    assert ended.status is TurnStatus.INTERRUPTED
    assert ended.error == (None if stopped else ENDED_AT_REFUSAL)


def test_a_chosen_model_is_set_as_the_model_option_before_the_prompt_is_sent() -> None:
    codec = AcpCodec(cwd="/w")
    codec.start()
    sent(codec)
    codec.feed(line({"id": 1, "result": {"agentCapabilities": {}, "agentInfo": {}}}))
    sent(codec)
    model_option = {
        "id": "model",
        "category": "model",
        "type": "select",
        "currentValue": "gpt-5.5",
        "options": [{"value": "gpt-5.5"}, {"value": "gpt-5.4-mini"}],
    }
    codec.feed(line({"id": 2, "result": {"sessionId": SESSION, "configOptions": [model_option]}}))
    codec.send(Prompt(text="hi", model="gpt-5.5"))  # in force already: straight to the prompt
    [prompt] = sent(codec)
    assert prompt["method"] == "session/prompt"
    codec.feed(line({"id": prompt["id"], "result": {"stopReason": "end_turn"}}))
    codec.send(Prompt(text="again", model="gpt-5.4-mini"))
    [change] = sent(codec)  # the prompt waits for the agent's answer
    assert change["method"] == "session/set_config_option"
    assert change["params"] == {"sessionId": SESSION, "configId": "model", "value": "gpt-5.4-mini"}
    assert codec.feed(line({"id": change["id"], "result": {"configOptions": []}})) == []
    [prompt] = sent(codec)
    assert prompt["method"] == "session/prompt"
    assert prompt["params"]["prompt"][0]["text"] == "again"
    codec.feed(line({"id": prompt["id"], "result": {"stopReason": "end_turn"}}))
    codec.send(Prompt(text="third", model="gpt-9"))
    [change] = sent(codec)
    refused = line({"id": change["id"], "error": {"code": -32602, "message": "no such model"}})
    [warning] = codec.feed(refused)
    assert isinstance(warning, Warning) and "no such model" in warning.message
    [prompt] = sent(codec)  # the message still goes, under the model in force
    assert prompt["params"]["prompt"][0]["text"] == "third"


def test_a_stop_while_the_model_is_being_set_ends_the_turn_without_sending_the_prompt() -> None:
    codec = AcpCodec(cwd="/w")
    codec.start()
    sent(codec)
    codec.feed(line({"id": 1, "result": {"agentCapabilities": {}, "agentInfo": {}}}))
    sent(codec)
    option = {"id": "model", "category": "model", "currentValue": "a", "options": []}
    codec.feed(line({"id": 2, "result": {"sessionId": SESSION, "configOptions": [option]}}))
    codec.send(Prompt(text="hi", model="b"))
    [change] = sent(codec)
    codec.send(Interrupt())
    assert sent(codec) == []
    [done] = codec.feed(line({"id": change["id"], "result": {}}))
    assert done == TurnCompleted(status=TurnStatus.INTERRUPTED)
    assert sent(codec) == []  # the prompt was never sent
    codec.send(Prompt(text="next"))  # the turn is over
