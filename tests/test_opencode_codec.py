"""The OpenCode codec alone (sans-IO): event JSON in, gateway events and requests out.

The events are shaped as opencode-ai 1.18.33 sends them (../shared/labs/oc-acp-lab/run_*.log);
the behaviour against the real server is in tests/test_gateway_opencode.py."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.opencode import (
    ENDED_AT_REFUSAL,
    OpenCodeCodec,
    SseDecoder,
    basic_auth,
    matching_saved,
    parse_listening_line,
    remove_saved,
)
from gateway.domain import Answer, Decision, Resolution, Scope, TurnStatus
from gateway.errors import CodecUsageError
from gateway.events import (
    AgentMessage,
    Compact,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    TextDelta,
    ToolActivity,
    ToolPhase,
    TurnCompleted,
)

SID = "ses_1"
OTHER = "ses_2"


def started() -> OpenCodeCodec:
    codec = OpenCodeCodec()
    request = codec.open_session()
    assert request.method == "POST" and request.path == "/session"
    assert isinstance(request.body, dict)
    assert request.body["permission"] == [{"permission": "*", "pattern": "*", "action": "ask"}]
    codec.created({"id": SID, "version": "1.18.33"})
    return codec


def event(kind: str, **props: Any) -> dict[str, Any]:
    return {"id": "evt_x", "type": kind, "properties": {"sessionID": SID, **props}}


def role(message_id: str, who: str) -> dict[str, Any]:
    return event("message.updated", info={"id": message_id, "role": who})


PERMISSION = {
    "id": "per_1",
    "sessionID": SID,
    "permission": "bash",
    "patterns": ["echo hi > a.txt"],
    "metadata": {"command": "echo hi > a.txt"},
    "always": ["echo *"],
}


def test_text_only_from_the_assistant_and_the_prompt_not_echoed() -> None:
    codec = started()
    codec.request_for(Prompt(text="hello"))
    assert codec.feed_event(role("msg_u", "user")) == []
    user_part = {
        "id": "prt_u",
        "messageID": "msg_u",
        "type": "text",
        "text": "hello",
        "time": {"start": 1, "end": 2},
    }
    assert codec.feed_event(event("message.part.updated", part=user_part)) == []
    codec.feed_event(role("msg_a", "assistant"))
    delta = event(
        "message.part.delta", messageID="msg_a", partID="prt_a", field="text", delta="Hi "
    )
    assert codec.feed_event(delta) == [TextDelta(item_id="prt_a", text="Hi ")]
    final = {
        "id": "prt_a",
        "messageID": "msg_a",
        "type": "text",
        "text": "Hi there",
        "time": {"start": 1, "end": 2},
    }
    assert codec.feed_event(event("message.part.updated", part=final)) == [
        AgentMessage(item_id="prt_a", text="Hi there")
    ]
    other = {"type": "session.idle", "properties": {"sessionID": OTHER}}
    assert codec.feed_event(other) == []  # another session on the same server
    assert codec.feed_event(event("session.idle")) == [TurnCompleted(status=TurnStatus.COMPLETED)]


def test_permission_actions_and_replies() -> None:
    codec = started()
    codec.request_for(Prompt(text="go"))
    [opened] = codec.feed_event(event("permission.asked", **PERMISSION))
    assert isinstance(opened, InteractionOpened)
    request = opened.request
    assert [a.id for a in request.actions] == ["once", "always", "reject"]
    assert request.actions[1].scope is Scope.ALWAYS and request.actions[1].rule == "echo *"
    assert codec.feed_event(event("permission.asked", **PERMISSION)) == []  # no second card
    key = request.native_key
    deny = Respond(native_key=key, decision=Decision(action_id="reject", message="not here"))
    [reply], _ = codec.request_for(deny)
    assert reply.path == "/permission/per_1/reply"
    assert reply.body == {"reply": "reject", "message": "not here"}
    with pytest.raises(CodecUsageError):
        codec.request_for(Respond(native_key=key, decision=Decision(action_id="approve")))
    closed = codec.feed_event(event("permission.replied", requestID="per_1", reply="reject"))
    assert closed == [InteractionClosed(native_key=key, how=Resolution.ANSWERED)]


def test_question_answers_are_label_arrays_in_order_and_typed_text_a_string() -> None:
    codec = started()
    codec.request_for(Prompt(text="ask"))
    questions = [
        {
            "question": "Colour?",
            "header": "Colour",
            "multiple": False,
            "options": [{"label": "Red", "description": ""}, {"label": "Blue", "description": ""}],
        },
        {
            "question": "Checks?",
            "header": "Checks",
            "multiple": True,
            "custom": False,
            "options": [
                {"label": "Lint", "description": ""},
                {"label": "Tests", "description": ""},
            ],
        },
    ]
    [opened] = codec.feed_event(event("question.asked", id="que_1", questions=questions))
    assert isinstance(opened, InteractionOpened)
    asked = opened.request.questions
    assert [q.multi for q in asked] == [False, True]
    assert [q.allow_other for q in asked] == [True, False]
    answers = {"q0": Answer(other="Green"), "q1": Answer(option_ids=("0", "1"))}
    key = opened.request.native_key
    [reply], _ = codec.request_for(Respond(native_key=key, decision=Decision(answers=answers)))
    assert reply.path == "/question/que_1/reply"
    assert reply.body == {"answers": [["Green"], ["Lint", "Tests"]]}
    [dismiss], _ = codec.request_for(
        Respond(native_key=key, decision=Decision(action_id="dismiss"))
    )
    assert dismiss.path == "/question/que_1/reject" and dismiss.body is None


def test_abort_ends_the_turn_interrupted_and_its_permission_is_never_reopened() -> None:
    codec = started()
    codec.request_for(Prompt(text="go"))
    codec.feed_event(event("permission.asked", **PERMISSION))
    [abort], _ = codec.request_for(Interrupt())
    assert abort.path == f"/session/{SID}/abort"
    error = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
    assert codec.feed_event(event("session.error", error=error)) == []
    assert codec.feed_event(event("session.idle")) == [TurnCompleted(status=TurnStatus.INTERRUPTED)]
    # the server still lists it after the abort: a reconcile must not show it again
    assert codec.reconcile([PERMISSION], [], {}) == []
    codec.request_for(Prompt(text="again"))  # the next prompt works


def test_the_aborted_turns_late_events_do_not_end_the_next_one() -> None:
    # seen on 1.18.33 (tests/transcripts/opencode-1.18.33/abort_pending.jsonl): a prompt sent
    # right after the abort's idle is followed by the aborted tool's end and a second idle
    codec = started()
    codec.request_for(Prompt(text="go"))
    codec.feed_event(role("msg_u1", "user"))
    codec.feed_event(
        event("message.updated", info={"id": "msg_a1", "role": "assistant", "parentID": "msg_u1"})
    )
    codec.request_for(Interrupt())
    assert codec.feed_event(event("session.idle")) == [TurnCompleted(status=TurnStatus.INTERRUPTED)]
    late_tool = {
        "id": "prt_t",
        "messageID": "msg_a1",
        "type": "tool",
        "tool": "bash",
        "state": {"status": "error", "input": {"command": "x"}, "error": "aborted"},
    }
    # between the turns (the runner may be opening the next one's message as it reads this)
    assert codec.feed_event(event("message.part.updated", part=late_tool)) == []
    codec.request_for(Prompt(text="again"))
    assert codec.feed_event(event("message.part.updated", part=late_tool)) == []
    assert codec.feed_event(event("session.idle")) == []  # the turn before's
    codec.feed_event(role("msg_u1", "user"))  # an old prompt updated: still not this turn's
    assert codec.feed_event(event("session.idle")) == []
    codec.feed_event(role("msg_u2", "user"))
    codec.feed_event(
        event("message.updated", info={"id": "msg_a2", "role": "assistant", "parentID": "msg_u2"})
    )
    text = {
        "id": "prt_2",
        "messageID": "msg_a2",
        "type": "text",
        "text": "Fresh.",
        "time": {"start": 1, "end": 2},
    }
    assert codec.feed_event(event("message.part.updated", part=text)) == [
        AgentMessage(item_id="prt_2", text="Fresh.")
    ]
    assert codec.feed_event(event("session.idle")) == [TurnCompleted(status=TurnStatus.COMPLETED)]


def test_a_reattached_sessions_history_is_not_taken_for_the_next_prompt() -> None:
    # an attached server may still be ending the turn a previous gateway started: its user
    # message comes again (message.updated) after our prompt; only a new one is ours
    codec = OpenCodeCodec(resume_session_id=SID)
    codec.created({"id": SID})
    old = {"info": {"id": "msg_u1", "role": "user"}, "parts": []}
    answer = {"info": {"id": "msg_a1", "role": "assistant", "parentID": "msg_u1"}, "parts": []}
    codec.known_history([old, answer])
    codec.request_for(Prompt(text="and now?"))
    codec.feed_event(role("msg_u1", "user"))
    old_text = {
        "id": "prt_1",
        "messageID": "msg_a1",
        "type": "text",
        "text": "Done.",
        "time": {"start": 1, "end": 2},
    }
    assert codec.feed_event(event("message.part.updated", part=old_text)) == []
    assert codec.feed_event(event("session.idle")) == []  # the old turn's
    codec.feed_event(role("msg_u2", "user"))
    codec.feed_event(
        event("message.updated", info={"id": "msg_a2", "role": "assistant", "parentID": "msg_u2"})
    )
    new_text = {**old_text, "id": "prt_2", "messageID": "msg_a2", "text": "Second."}
    assert codec.feed_event(event("message.part.updated", part=new_text)) == [
        AgentMessage(item_id="prt_2", text="Second.")
    ]
    assert codec.feed_event(event("session.idle")) == [TurnCompleted(status=TurnStatus.COMPLETED)]


def test_reconcile_closes_what_was_answered_away_and_ends_an_idle_turn() -> None:
    codec = started()
    codec.request_for(Prompt(text="go"))
    [opened] = codec.feed_event(event("permission.asked", **PERMISSION))
    assert isinstance(opened, InteractionOpened)
    busy = {SID: {"type": "busy"}}
    assert codec.reconcile([PERMISSION], [], busy) == []
    messages = [
        {
            "info": {"id": "msg_u", "role": "user"},
            "parts": [{"id": "p0", "messageID": "msg_u", "type": "text", "text": "go"}],
        },
        {
            "info": {"id": "msg_a", "role": "assistant"},
            "parts": [
                {
                    "id": "p1",
                    "messageID": "msg_a",
                    "type": "text",
                    "text": "Done.",
                    "time": {"start": 1, "end": 2},
                }
            ],
        },
    ]
    events = codec.reconcile([], [], {}, messages)
    assert events == [
        AgentMessage(item_id="p1", text="Done."),
        InteractionClosed(native_key=opened.request.native_key, how=Resolution.ANSWERED),
        TurnCompleted(status=TurnStatus.COMPLETED),
    ]


def test_a_failed_turn_says_why() -> None:
    codec = started()
    codec.request_for(Prompt(text="go"))
    codec.feed_event(role("msg_u", "user"))
    error = {"name": "APIError", "data": {"message": "the model is down"}}
    codec.feed_event(event("session.error", error=error))
    assert codec.feed_event(event("session.idle")) == [
        TurnCompleted(status=TurnStatus.FAILED, error="the model is down")
    ]


def test_sse_lines_listening_line_and_auth() -> None:
    decoder = SseDecoder(max_line_bytes=100)
    assert decoder.feed(b'data: {"type": "a"}\n') == []
    assert decoder.feed(b'\ndata: {"type"') == [{"type": "a"}]
    assert decoder.feed(b': "b"}\n\n') == [{"type": "b"}]
    with pytest.raises(ValueError):
        decoder.feed(b"x" * 200)
    assert parse_listening_line("opencode server listening on http://127.0.0.1:4096\n") == (
        "http://127.0.0.1:4096"
    )
    assert parse_listening_line("Warning: something") is None
    assert basic_auth("pw") == "Basic b3BlbmNvZGU6cHc="


def test_saved_permissions_of_a_grant_are_matched_by_permission_and_pattern() -> None:
    listed = {
        "data": [
            {"id": "psv_1", "projectID": "global", "action": "bash", "resource": "echo *"},
            {"id": "psv_2", "projectID": "global", "action": "edit", "resource": "echo *"},
            {"id": "psv_3", "projectID": "global", "action": "bash", "resource": "ls *"},
            {"id": "psv_4", "projectID": "global", "action": "*", "resource": "git *"},
            {"action": "bash", "resource": "echo *"},  # no id: nothing to delete
        ]
    }
    assert matching_saved(listed, "bash", ["echo *", "git *"]) == ["psv_1", "psv_4"]
    assert matching_saved(listed, None, ["echo *"]) == ["psv_1", "psv_2"]
    assert matching_saved({"data": "nonsense"}, "bash", ["echo *"]) == []
    assert matching_saved(None, "bash", ["echo *"]) == []
    request = remove_saved("psv_1/../x")
    assert (request.method, request.path) == ("DELETE", "/api/permission/saved/psv_1%2F..%2Fx")


def _refused_turn(*, goes_on: bool) -> list[Any]:
    """A bash call asked, refused (``reply: "reject"``); the agent goes on or stops there."""
    codec = started()
    codec.request_for(Prompt(text="go"))
    codec.feed_event(role("msg_u", "user"))
    codec.feed_event(role("msg_a", "assistant"))
    asked = {**PERMISSION, "tool": {"messageID": "msg_a", "callID": "call_1"}}
    codec.feed_event(event("permission.asked", **asked))
    tool = {
        "id": "prt_t",
        "messageID": "msg_a",
        "type": "tool",
        "tool": "bash",
        "callID": "call_1",
        "state": {"status": "running", "input": {"command": "echo hi > a.txt"}},
    }
    events = codec.feed_event(event("message.part.updated", part=tool))
    events += codec.feed_event(event("permission.replied", requestID="per_1", reply="reject"))
    error = {"status": "error", "input": {"command": "echo hi > a.txt"}, "error": "The user ..."}
    events += codec.feed_event(event("message.part.updated", part={**tool, "state": error}))
    if goes_on:
        delta = event("message.part.delta", messageID="msg_a", partID="p", field="text", delta="Ok")
        events += codec.feed_event(delta)
    return events + codec.feed_event(event("session.idle"))


@pytest.mark.parametrize("goes_on", [False, True])
def test_a_refused_tool_is_denied_and_a_turn_that_stops_there_says_why(goes_on: bool) -> None:
    events = _refused_turn(goes_on=goes_on)
    [ended] = [e for e in events if isinstance(e, ToolActivity) and e.phase is ToolPhase.COMPLETED]
    assert ended.status == "denied"
    [turn] = [e for e in events if isinstance(e, TurnCompleted)]
    if goes_on:  # a refusal with a message: the model read it and answered
        assert turn == TurnCompleted(status=TurnStatus.COMPLETED)
    else:
        assert turn == TurnCompleted(status=TurnStatus.INTERRUPTED, error=ENDED_AT_REFUSAL)


# --- /compact (issue 31) ----------------------------------------------------------------


def test_compact_summarizes_with_the_session_s_model_and_ends_when_compacted() -> None:
    codec = started()
    user = {"id": "msg_u", "role": "user", "model": {"providerID": "fake", "modelID": "m1"}}
    codec.feed_event(event("message.updated", info=user))
    [request], [_] = codec.request_for(Compact())
    assert (request.path, request.body) == (
        f"/session/{SID}/summarize",
        {"providerID": "fake", "modelID": "m1"},
    )
    assert request.waits_for_work and codec.turn_running
    codec.feed_event(event("message.updated", info={"id": "msg_c", "role": "user"}))
    codec.feed_event(role("msg_s", "assistant"))
    part = {"id": "prt_s", "messageID": "msg_s", "type": "text", "text": "The summary."}
    part["time"] = {"end": 1}
    assert codec.feed_event(event("message.part.updated", part=part)) == []  # no reply
    assert codec.feed_event(event("session.compacted")) == []
    assert codec.feed_event(event("session.idle")) == [TurnCompleted(status=TurnStatus.COMPLETED)]


def test_compact_with_a_chosen_model_and_without_any_known() -> None:
    codec = started()
    [request], _ = codec.request_for(Compact(model="fake/second"))
    assert request.body == {"providerID": "fake", "modelID": "second"}
    assert codec.feed_event(event("message.updated", info={"id": "msg_c", "role": "user"})) == []
    [ended] = codec.feed_event(event("session.idle"))  # idle, but never said it compacted
    assert isinstance(ended, TurnCompleted) and ended.status is TurnStatus.FAILED
    fresh = started()
    requests, [_, failed] = fresh.request_for(Compact())
    assert requests == [] and not fresh.turn_running
    assert isinstance(failed, TurnCompleted) and failed.status is TurnStatus.FAILED
    assert "send a message first" in (failed.error or "")
