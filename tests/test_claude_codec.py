"""The Claude Code codec: recorded transcripts replayed; session start, turns, interrupts,
unsupported and malformed input (what each can_use_tool becomes: test_claude_requests.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.claude_code import ClaudeCodeCodec, CodecState
from adapters.claude_launch import ClaudeLaunch
from gateway.domain import Decision, Resolution, TurnStatus
from gateway.errors import (
    AlreadyAnswered,
    CodecUsageError,
    ProtocolError,
    RemoteError,
    RequestClosed,
)
from gateway.events import (
    AgentEvent,
    AgentMessage,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    ModelsOffered,
    PolicyChanged,
    Prompt,
    Respond,
    SessionStarted,
    TextDelta,
    ToolActivity,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)
from tests.claude_replay import TRANSCRIPTS, load_transcript, replay

SESSION = "5f2c7d9e-0a1b-4c3d-8e9f-112233445566"
Msg = dict[str, Any]

# --- transcripts ---------------------------------------------------------------------------


def milestones(events: list[AgentEvent]) -> list[tuple[Any, ...]]:
    """What a person following the session would notice, in order."""
    seen: list[tuple[Any, ...]] = []
    for event in events:
        match event:
            case SessionStarted():
                seen.append(("session", event.policy["permission_mode"], event.resumed))
            case InteractionOpened(request=request):
                ids = tuple(a.id for a in request.actions)
                seen.append(("ask", request.kind.value, ids))
            case InteractionClosed():
                seen.append(("closed", event.how.value))
            case ToolActivity():
                seen.append(("tool", event.tool.value, event.phase.value, event.status))
            case Warning():
                seen.append(("warning", event.code))
            case PolicyChanged():
                seen.append(("policy", event.policy["permission_mode"]))
            case TurnCompleted():
                seen.append(("done", event.status.value, event.error))
    return seen


START = [("session", "default", False)]
BASH = ("tool", "command", "started", None)
BASH_OK = ("tool", "command", "completed", "completed")
BASH_REFUSED = ("tool", "command", "completed", "failed")
BASH_ASK = ("ask", "approval", ("allow", "grant-1", "grant-2", "grant-3", "deny", "stop"))
READ = [("tool", "tool_call", "started", None), ("tool", "tool_call", "completed", "completed")]
EDIT = ("tool", "file_change", "started", None)
EDIT_ASK = ("ask", "approval", ("allow", "grant-1", "deny", "stop"))
QUESTION = [("ask", "question", ("answer", "decline", "stop"))]  # the card: no activity line
PLAN_ASK = ("ask", "plan", ("approve", "keep-planning"))
ANSWERED = ("closed", "answered")
DONE = ("done", "completed", None)

TRANSCRIPT_MILESTONES: dict[str, list[tuple[Any, ...]]] = {
    "bash_allow": [*START, BASH, BASH_ASK, ANSWERED, BASH_OK, DONE],
    "bash_deny": [*START, BASH, BASH_ASK, ANSWERED, BASH_REFUSED, DONE],
    "bash_deny_stop": [
        *START, BASH, BASH_ASK, ANSWERED, BASH_REFUSED, ("done", "interrupted", None), DONE,
    ],
    # the second identical command is not asked: the session rule allowed it
    "bash_allow_rule": [*START, BASH, BASH_ASK, ANSWERED, BASH_OK, DONE, BASH, BASH_OK, DONE],
    "interrupt_pending": [
        *START, BASH, BASH_ASK, ("closed", "cancelled_by_agent"), BASH_REFUSED,
        ("done", "interrupted", None),
    ],
    "edit_allow": [
        *START, *READ, EDIT, EDIT_ASK, ANSWERED, ("tool", "file_change", "completed", "completed"),
        DONE,
    ],
    "edit_deny": [
        *START, *READ, EDIT, EDIT_ASK, ANSWERED, ("tool", "file_change", "completed", "failed"),
        DONE,
    ],
    "write_allow": [
        *START, EDIT, EDIT_ASK, ANSWERED, ("tool", "file_change", "completed", "completed"), DONE,
    ],
    "ask_answers": [*START, *QUESTION, ANSWERED, DONE],
    "ask_other": [*START, *QUESTION, ANSWERED, DONE],
    "plan_approve": [
        ("session", "plan", False), PLAN_ASK, ("policy", "default"), ANSWERED,
        BASH, BASH_ASK, ANSWERED, BASH_OK, DONE,
    ],
    "plan_keep_planning": [
        ("session", "plan", False), PLAN_ASK, ANSWERED, DONE,
    ],
    "api_retry": [*START, ("warning", "api_retry"), DONE],
    "api_error": [*START, ("done", "failed", "API Error: 400 Bad fake request")],
    "resume": [*START, DONE, ("session", "default", True), DONE],
}  # fmt: skip


def test_every_recorded_transcript_has_expectations() -> None:
    assert {path.stem for path in TRANSCRIPTS.glob("*.jsonl")} == set(TRANSCRIPT_MILESTONES)


@pytest.mark.parametrize("name", sorted(TRANSCRIPT_MILESTONES))
def test_recorded_transcript_replays_exactly(name: str) -> None:
    events: list[AgentEvent] = []
    for segment in load_transcript(TRANSCRIPTS / f"{name}.jsonl"):
        run = replay(segment)  # every line the codec writes equals the recorded one
        events += run.events
    assert milestones(events) == TRANSCRIPT_MILESTONES[name]


def test_streamed_text_and_the_finished_message_share_an_item_id() -> None:
    [segment] = load_transcript(TRANSCRIPTS / "bash_allow.jsonl")
    events = replay(segment).events
    deltas = [e for e in events if isinstance(e, TextDelta)]
    messages = [e for e in events if isinstance(e, AgentMessage)]
    assert [m.text for m in messages] == [
        "On it.",
        "Done. The tool said: ('(Bash completed with no output)', False)",
    ]
    for message in messages:
        assembled = "".join(d.text for d in deltas if d.item_id == message.item_id)
        assert assembled == message.text


def test_a_turn_reports_cost_and_tokens_before_it_completes() -> None:
    [segment] = load_transcript(TRANSCRIPTS / "bash_allow.jsonl")
    events = replay(segment).events
    usage = next(e for e in events if isinstance(e, Usage))
    assert events.index(usage) == len(events) - 2
    assert usage.input_tokens == 200 and usage.output_tokens == 50
    assert usage.cost_usd == pytest.approx(0.00225)


def test_the_api_error_text_is_reported_once_as_the_turn_error() -> None:
    [segment] = load_transcript(TRANSCRIPTS / "api_error.jsonl")
    events = replay(segment).events
    assert not [e for e in events if isinstance(e, AgentMessage)]  # the CLI's synthetic echo


def test_the_model_and_version_come_with_the_first_turn() -> None:
    [segment] = load_transcript(TRANSCRIPTS / "bash_allow.jsonl")
    codec = replay(segment).codec
    assert codec.agent_version == "2.1.197"
    assert codec.policy == {"permission_mode": "default"} and codec.model


# --- a codec driven by hand ------------------------------------------------------------------


def line(msg: Msg) -> bytes:
    return json.dumps(msg).encode()


def sent(codec: ClaudeCodeCodec) -> list[Msg]:
    return [json.loads(data) for data in codec.data_to_send()]


def answer(request_id: str, response: Msg | None = None, *, error: str | None = None) -> bytes:
    body: Msg = {"subtype": "error", "request_id": request_id, "error": error}
    if error is None:
        body = {"subtype": "success", "request_id": request_id, "response": response or {}}
    return line({"type": "control_response", "response": body})


def ready(mode: str = "default", **options: Any) -> tuple[ClaudeCodeCodec, list[AgentEvent]]:
    launch = ClaudeLaunch(session_id=SESSION, permission_mode=mode, **options)
    codec = ClaudeCodeCodec(launch, cwd="/work")
    codec.start()
    events = codec.feed(answer("gw-1", {"commands": [], "pid": 42}))
    events += codec.feed(answer("gw-2", {"mode": mode}))
    codec.data_to_send()
    return codec, events


def running(**options: Any) -> ClaudeCodeCodec:
    """A ready codec with a turn started (its user message already taken)."""
    codec, _ = ready(**options)
    codec.send(Prompt(text="go"))
    codec.data_to_send()
    return codec


def can_use_tool(
    request_id: str = "r1", tool_use_id: str | None = "toolu_1", **extra: Any
) -> bytes:
    request: Msg = {
        "subtype": "can_use_tool",
        "tool_name": "Bash",
        "input": {"command": "ls", "description": "List"},
        **extra,
    }
    if tool_use_id is not None:
        request["tool_use_id"] = tool_use_id
    return line({"type": "control_request", "request_id": request_id, "request": request})


def tool_result(tool_use_id: str = "toolu_1", *, is_error: bool = False) -> bytes:
    block = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": "x",
        "is_error": is_error,
    }
    return line({"type": "user", "message": {"role": "user", "content": [block]}})


def result(*, is_error: bool = False, **extra: Any) -> bytes:
    return line({"type": "result", "subtype": "success", "is_error": is_error, **extra})


def test_start_initializes_then_confirms_the_mode_before_the_session_starts() -> None:
    codec = ClaudeCodeCodec(ClaudeLaunch(session_id=SESSION, permission_mode="plan"))
    assert codec.start() == []
    assert sent(codec) == [
        {
            "type": "control_request",
            "request_id": "gw-1",
            "request": {"subtype": "initialize", "hooks": None},
        }
    ]
    assert codec.feed(answer("gw-1", {"pid": 7})) == []
    assert [m["request"] for m in sent(codec)] == [
        {"subtype": "set_permission_mode", "mode": "plan"}
    ]
    with pytest.raises(CodecUsageError):
        codec.send(Prompt(text="too early"))
    [started] = codec.feed(answer("gw-2", {"mode": "plan"}))
    assert started == SessionStarted(native_id=SESSION, policy={"permission_mode": "plan"})
    assert codec.state is CodecState.READY


def test_a_mode_the_cli_did_not_take_is_reported() -> None:
    codec = ClaudeCodeCodec(ClaudeLaunch(session_id=SESSION, permission_mode="acceptEdits"))
    codec.start()
    codec.feed(answer("gw-1"))
    started, warning = codec.feed(answer("gw-2", {"mode": "default"}))
    assert isinstance(started, SessionStarted) and started.policy == {"permission_mode": "default"}
    assert isinstance(warning, Warning) and warning.code == "policy_mismatch"


@pytest.mark.parametrize("refused", ["gw-1", "gw-2"])
def test_a_refused_start_ends_the_session(refused: str) -> None:
    codec = ClaudeCodeCodec(ClaudeLaunch(session_id=SESSION))
    codec.start()
    if refused == "gw-2":
        codec.feed(answer("gw-1"))
    with pytest.raises(RemoteError, match="no bypass here"):
        codec.feed(answer(refused, error="no bypass here"))
    assert codec.state is CodecState.ERROR
    with pytest.raises(ProtocolError):
        codec.feed(result())


def test_a_prompt_is_a_user_message_and_one_turn_at_a_time() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="hello\nworld"))
    [user] = sent(codec)
    assert user == {
        "type": "user",
        "message": {"role": "user", "content": "hello\nworld"},
        "parent_tool_use_id": None,
        "session_id": SESSION,
    }
    with pytest.raises(CodecUsageError, match="turn is running"):
        codec.send(Prompt(text="again"))
    assert codec.feed(line({"type": "system", "subtype": "init", "session_id": SESSION})) == [
        TurnStarted()
    ]
    *_, done = codec.feed(result(total_cost_usd=0.5, usage={"input_tokens": 3}))
    assert done == TurnCompleted(status=TurnStatus.COMPLETED)
    codec.send(Prompt(text="next"))  # the turn is over: a new one may start


def test_an_error_result_fails_the_turn_with_the_cli_s_text() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    *_, done = codec.feed(result(is_error=True, subtype="error_max_turns", errors=["max turns"]))
    assert done == TurnCompleted(status=TurnStatus.FAILED, error="max turns")


def test_interrupt_sends_one_request_and_the_error_result_is_an_interruption() -> None:
    codec, _ = ready()
    codec.send(Interrupt())
    assert sent(codec) == []  # no turn: nothing to interrupt
    codec.send(Prompt(text="go"))
    codec.feed(can_use_tool())
    codec.data_to_send()
    codec.send(Interrupt())
    codec.send(Interrupt())
    assert [m["request"] for m in sent(codec)] == [{"subtype": "interrupt"}]
    closed = codec.feed(line({"type": "control_cancel_request", "request_id": "r1"}))
    assert closed == [InteractionClosed(native_key="cc:r1", how=Resolution.CANCELLED_BY_AGENT)]
    assert codec.feed(answer("gw-3")) == []
    assert codec.feed(tool_result(is_error=True)) == []  # not an answer, not a second close
    with pytest.raises(RequestClosed, match="closed or unknown"):
        codec.send(Respond(native_key="cc:r1", decision=Decision(action_id="allow")))
    *_, done = codec.feed(result(is_error=True, subtype="error_during_execution"))
    assert done == TurnCompleted(status=TurnStatus.INTERRUPTED)


def test_a_refused_interrupt_is_reported() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    codec.send(Interrupt())
    codec.data_to_send()
    [warning] = codec.feed(answer("gw-3", error="nothing to interrupt"))
    assert isinstance(warning, Warning) and warning.code == "interrupt_failed"


def test_an_answer_is_written_once_and_resolved_by_its_tool_result() -> None:
    codec = running()
    [started, opened] = codec.feed(can_use_tool())
    assert isinstance(started, TurnStarted) and isinstance(opened, InteractionOpened)
    assert codec.feed(can_use_tool()) == []  # the same request again: no second interaction
    respond = Respond(native_key="cc:r1", decision=Decision(action_id="allow"))
    codec.send(respond)
    [written] = sent(codec)
    assert written["response"] == {
        "subtype": "success",
        "request_id": "r1",
        "response": {"behavior": "allow", "updatedInput": {"command": "ls", "description": "List"}},
    }
    with pytest.raises(AlreadyAnswered, match="already answered"):
        codec.send(respond)
    assert sent(codec) == []
    assert codec.open_interactions == ("cc:r1",)
    closed = codec.feed(tool_result())
    assert closed == [InteractionClosed(native_key="cc:r1", how=Resolution.ANSWERED)]
    assert not codec.open_interactions


def test_a_decision_the_request_cannot_take_writes_nothing() -> None:
    codec = running()
    codec.feed(can_use_tool())
    for decision in (Decision(action_id="always"), Decision(action_id=None)):
        with pytest.raises(CodecUsageError, match="not offered"):
            codec.send(Respond(native_key="cc:r1", decision=decision))
    with pytest.raises(RequestClosed, match="closed or unknown"):
        codec.send(Respond(native_key="cc:nope", decision=Decision(action_id="allow")))
    assert sent(codec) == []


def test_a_tool_result_before_any_answer_means_the_agent_withdrew_the_request() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    codec.feed(can_use_tool())
    closed = codec.feed(tool_result(is_error=True))
    assert closed == [InteractionClosed(native_key="cc:r1", how=Resolution.CANCELLED_BY_AGENT)]


def test_a_request_without_tool_use_id_is_resolved_by_the_next_message() -> None:
    codec = running()
    codec.feed(can_use_tool(tool_use_id=None))
    codec.send(Respond(native_key="cc:r1", decision=Decision(action_id="deny", message="no")))
    assert sent(codec)[0]["response"]["response"] == {"behavior": "deny", "message": "no"}
    [closed, *_] = codec.feed(line({"type": "system", "subtype": "status", "status": None}))
    assert closed == InteractionClosed(native_key="cc:r1", how=Resolution.ANSWERED)


def test_requests_still_open_when_the_turn_ends_are_closed() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    codec.feed(can_use_tool("r1", "t1"))
    codec.feed(can_use_tool("r2", "t2"))
    codec.send(Respond(native_key="cc:r1", decision=Decision(action_id="allow")))
    closed = [e for e in codec.feed(result()) if isinstance(e, InteractionClosed)]
    assert [c.how for c in closed] == [Resolution.ANSWERED, Resolution.CANCELLED_BY_AGENT]


@pytest.mark.parametrize("subtype", ["hook_callback", "mcp_message", "something_new"])
def test_other_control_requests_are_refused_and_reported(subtype: str) -> None:
    codec, _ = ready()
    msg = {"type": "control_request", "request_id": "h1", "request": {"subtype": subtype}}
    [warning] = codec.feed(line(msg))
    assert isinstance(warning, Warning) and warning.code == "unsupported_request"
    assert subtype in warning.message
    [refusal] = sent(codec)
    assert refusal["response"]["subtype"] == "error" and refusal["response"]["request_id"] == "h1"


def test_an_unreadable_permission_request_is_refused_not_approved() -> None:
    codec, _ = ready()
    msg = {"type": "control_request", "request_id": "r9", "request": {"subtype": "can_use_tool"}}
    [warning] = codec.feed(line(msg))
    assert isinstance(warning, Warning) and warning.code == "malformed_message"
    assert sent(codec)[0]["response"] == {
        "subtype": "error",
        "request_id": "r9",
        "error": "unreadable permission request: "
        "can_use_tool: 'tool_name' is missing or not a string",
    }


@pytest.mark.parametrize(
    "raw", [b"not json", b"[1, 2]", b'{"no": "type"}', b'{"type": "control_request"}']
)
def test_malformed_lines_are_warnings_and_the_session_goes_on(raw: bytes) -> None:
    codec, _ = ready()
    [warning] = codec.feed(raw)
    assert isinstance(warning, Warning) and warning.code == "malformed_message"
    codec.send(Prompt(text="still fine"))


def test_mode_changes_and_a_foreign_session_are_reported() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="go"))
    events = codec.feed(
        line(
            {
                "type": "system",
                "subtype": "init",
                "session_id": "other",
                "permissionMode": "acceptEdits",
            }
        )
    )
    mismatch, changed = [e for e in events if isinstance(e, Warning | PolicyChanged)]
    assert isinstance(mismatch, Warning) and mismatch.code == "session_mismatch"
    assert isinstance(changed, PolicyChanged) and changed.policy["permission_mode"] == "acceptEdits"
    assert changed.message == "Claude now runs in permission mode acceptEdits (was default)."
    assert codec.policy["permission_mode"] == "acceptEdits"
    assert (
        codec.feed(line({"type": "system", "subtype": "status", "permissionMode": "acceptEdits"}))
        == []
    )


def test_unknown_messages_are_counted_not_shown() -> None:
    codec, _ = ready()
    assert codec.feed(line({"type": "brand_new", "x": 1})) == []
    assert codec.feed(line({"type": "system", "subtype": "brand_new"})) == []
    assert codec.feed(line({"type": "keep_alive"})) == []
    assert codec.unknown_messages == {"brand_new": 1, "system/brand_new": 1}
    [warning] = codec.feed(answer("gw-99"))
    assert isinstance(warning, Warning) and warning.code == "unknown_response"


def test_lines_written_never_contain_a_newline() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="a\nb\r\nc\u2028d"))
    [data] = codec.data_to_send()
    assert b"\n" not in data and b"\r" not in data


def test_a_chosen_model_is_set_before_the_message_once_and_a_refusal_is_said() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="one", model="claude-haiku"))
    set_model, user = sent(codec)
    assert set_model["request"] == {"subtype": "set_model", "model": "claude-haiku"}
    assert user["message"]["content"] == "one"
    codec.feed(result())
    codec.send(Prompt(text="two", model="claude-haiku"))  # already set: only the message
    assert [m["type"] for m in sent(codec)] == ["user"]
    codec.feed(result())
    codec.send(Prompt(text="three", model="claude-opus"))
    set_model, _ = sent(codec)
    [warning] = codec.feed(answer(set_model["request_id"], error="no such model"))
    assert isinstance(warning, Warning) and warning.code == "model_refused"
    assert "no such model" in warning.message


def test_a_chosen_permission_mode_is_set_before_the_message_and_its_answer_is_in_force() -> None:
    codec, _ = ready()
    codec.send(Prompt(text="one", permission_mode="plan"))
    change, user = sent(codec)
    assert change["request"] == {"subtype": "set_permission_mode", "mode": "plan"}
    assert user["type"] == "user"
    [changed] = codec.feed(answer(change["request_id"], {"mode": "plan"}))
    assert changed == PolicyChanged(
        policy={"permission_mode": "plan"},
        message="Claude now runs in permission mode plan (was default).",
    )
    assert codec.state is CodecState.READY  # a change is not the start's confirmation
    codec.feed(result())
    codec.send(Prompt(text="two", permission_mode="plan"))  # in force: only the message
    assert [m["type"] for m in sent(codec)] == ["user"]
    codec.feed(result())
    codec.send(Prompt(text="three", permission_mode="default"))
    change, _ = sent(codec)
    [warning] = codec.feed(answer(change["request_id"], error="not now"))
    assert isinstance(warning, Warning) and "not now" in warning.message
    assert codec.state is CodecState.READY and codec.policy == {"permission_mode": "plan"}


def test_the_models_of_the_initialize_answer_are_offered_by_every_name_set_model_takes() -> None:
    codec = ClaudeCodeCodec(ClaudeLaunch(session_id=SESSION))
    codec.start()
    models = [
        {"value": "default", "resolvedModel": "claude-opus-4-8[1m]"},
        {"value": "haiku", "resolvedModel": "claude-haiku-4-5-20251001"},
        "not a model",
    ]
    codec.feed(answer("gw-1", {"models": models}))
    started, offered = codec.feed(answer("gw-2", {"mode": "default"}))
    assert isinstance(started, SessionStarted)
    assert offered == ModelsOffered(
        models=(
            "default",
            "claude-opus-4-8[1m]",
            "claude-opus-4-8",
            "haiku",
            "claude-haiku-4-5-20251001",
            "claude-haiku-4-5",
        )
    )
