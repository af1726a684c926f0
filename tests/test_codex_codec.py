"""The Codex app-server codec: recorded transcripts replayed; session start, turns, and
malformed input (server requests: test_codex_requests.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.codex_app_server import CodecState
from adapters.codex_launch import codex_app_server_argv
from gateway.domain import (
    Command,
    FileChange,
    InteractionKind,
    Plan,
    TurnStatus,
)
from gateway.errors import CodecUsageError, ConfigError, ProtocolError, RemoteError
from gateway.events import (
    AgentEvent,
    AgentMessage,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    ModelsOffered,
    NameSession,
    Prompt,
    SessionNamed,
    SessionStarted,
    TextDelta,
    ToolActivity,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)
from tests.codex_harness import THREAD, TURN, USER_AGENT, Session, ready, running, thread_result
from tests.transcript_replay import TRANSCRIPTS, load_transcript, replay

# --- transcripts ---------------------------------------------------------------------------


def milestones(events: list[AgentEvent]) -> list[tuple[Any, ...]]:
    """What a person following the session would notice, in order."""
    seen: list[tuple[Any, ...]] = []
    for event in events:
        match event:
            case SessionStarted():
                seen.append(("session", event.resumed))
            case TurnStarted():
                seen.append(("turn",))
            case InteractionOpened(request=request):
                ids = tuple(a.id for a in request.actions) or tuple(q.id for q in request.questions)
                seen.append(("ask", request.kind.value, ids))
            case InteractionClosed():
                seen.append(("closed", event.how.value))
            case ToolActivity():
                seen.append(("tool", event.tool.value, event.phase.value, event.status))
            case AgentMessage():
                seen.append(("message",))
            case TurnCompleted():
                seen.append(("done", event.status.value, event.error))
    return seen


START = [("session", False), ("turn",)]
COMMAND_ASK = [
    ("tool", "command", "started", "inProgress"),
    ("ask", "approval", ("accept", "rule", "decline", "cancel")),
]
PATCH_ASK = [
    ("tool", "file_change", "started", "inProgress"),
    ("ask", "approval", ("accept", "session", "decline", "cancel")),
]
ANSWERED = [("closed", "answered")]
DONE = [("message",), ("done", "completed", None)]
QUESTION = [("ask", "question", ("color",)), *ANSWERED]

LAB_TRANSCRIPTS = {
    "lab-shell_accept": [
        *START,
        *COMMAND_ASK,
        *ANSWERED,
        ("tool", "command", "completed", "completed"),
        *DONE,
    ],
    "lab-shell_untrusted_accept": [
        *START,
        *COMMAND_ASK,
        *ANSWERED,
        ("tool", "command", "completed", "completed"),
        *DONE,
    ],
    # decline is not in availableDecisions, yet 0.171 takes it and the turn goes on
    "lab-shell_decline": [
        *START,
        *COMMAND_ASK,
        *ANSWERED,
        ("tool", "command", "completed", "declined"),
        *DONE,
    ],
    "lab-shell_cancel": [
        *START,
        *COMMAND_ASK,
        *ANSWERED,
        ("tool", "command", "completed", "declined"),
        ("done", "interrupted", None),
    ],
    "lab-patch_accept": [
        *START,
        *PATCH_ASK,
        *ANSWERED,
        ("tool", "file_change", "completed", "completed"),
        *DONE,
    ],
    "lab-patch_decline": [
        *START,
        *PATCH_ASK,
        *ANSWERED,
        ("tool", "file_change", "completed", "declined"),
        *DONE,
    ],
    "lab-user_input_feature_flag": [*START, *QUESTION, *DONE],
    "lab-user_input_plan_mode": [*START, *QUESTION, *DONE],
    # nobody answered: the interrupt ends the turn, then the server withdraws the request
    "lab-interrupt_pending_approval": [
        *START,
        *COMMAND_ASK,
        ("done", "interrupted", None),
        ("closed", "cancelled_by_agent"),
    ],
    "lab-model_failed": [
        *START,
        ("done", "failed", "stream disconnected before completion: fake model failure"),
    ],
    "lab-resume": [*START, *DONE, ("session", True), ("turn",), *DONE],
}


def replay_file(path: Path) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    for segment in load_transcript(path):
        events += replay(segment).events
    return events


@pytest.mark.parametrize("name", sorted(LAB_TRANSCRIPTS))
def test_lab_transcripts_replay_to_what_a_person_would_see(name: str) -> None:
    events = replay_file(TRANSCRIPTS / f"{name}.jsonl")
    assert milestones(events) == LAB_TRANSCRIPTS[name]


ALL_TRANSCRIPTS = sorted(path.stem for path in TRANSCRIPTS.glob("*.jsonl"))


@pytest.mark.parametrize("name", ALL_TRANSCRIPTS)
def test_every_recorded_transcript_replays_consistently(name: str) -> None:
    """Every transcript in the folder (the lab's and the project's own recordings): the codec
    writes what the recording client wrote, understands every line, and sees every request it
    opened closed again."""
    events = replay_file(TRANSCRIPTS / f"{name}.jsonl")
    codes = {event.code for event in events if isinstance(event, Warning)}
    assert not codes & {"malformed_message", "unknown_decision", "unknown_request_resolved"}
    opened = {e.request.native_key for e in events if isinstance(e, InteractionOpened)}
    closed = {e.native_key for e in events if isinstance(e, InteractionClosed)}
    assert opened - {""} == closed  # "": a proposed plan, the gateway's own (nothing waits)
    sessions = [event for event in events if isinstance(event, SessionStarted)]
    assert sessions and all(s.agent_version == "0.171.0" for s in sessions)
    assert all(s.policy["approvals_reviewer"] == "user" for s in sessions)


def test_replay_shows_the_command_and_the_exact_reply() -> None:
    [segment] = load_transcript(TRANSCRIPTS / "lab-shell_accept.jsonl")
    run = replay(segment)
    [asked] = [e.request for e in run.events if isinstance(e, InteractionOpened)]
    assert asked.native_key == "rpc:0"
    assert asked.detail == Command(
        command="/bin/bash -c 'touch hello.txt'",
        cwd="$WORKSPACE",
        reason="Need to create hello.txt outside the sandbox",
    )
    assert {"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}} in run.sent
    started = next(e for e in run.events if isinstance(e, SessionStarted))
    assert started.policy == {
        "approval_policy": "on-request",
        "approvals_reviewer": "user",
        "sandbox": "workspace-write",
        "network_access": "false",
    }
    text = "".join(e.text for e in run.events if isinstance(e, TextDelta))
    [message] = [e for e in run.events if isinstance(e, AgentMessage)]
    assert text == message.text
    assert [(u.input_tokens, u.output_tokens) for u in run.events if isinstance(u, Usage)] == [
        (10, 5),
        (10, 5),
    ]


def test_replay_of_a_patch_shows_paths_and_diff_from_the_file_change_item() -> None:
    [segment] = load_transcript(TRANSCRIPTS / "lab-patch_accept.jsonl")
    [asked] = [e.request for e in replay(segment).events if isinstance(e, InteractionOpened)]
    assert asked.detail == FileChange(
        paths=("$WORKSPACE/patched.txt",),
        diff="--- /dev/null\n+++ b/patched.txt\n@@ -0,0 +1,1 @@\n+patched by fake model\n",
    )


def test_replay_of_a_resume_sends_thread_resume_with_the_thread_id() -> None:
    first, second = load_transcript(TRANSCRIPTS / "lab-resume.jsonl")
    thread_id = replay(first).codec.thread_id
    run = replay(second)
    resume = next(m for m in run.sent if m.get("method") == "thread/resume")
    assert resume["params"]["threadId"] == thread_id == run.codec.thread_id
    assert resume["params"]["approvalsReviewer"] == "user"
    # the usage of the earlier turn that resume replays is not counted again
    assert [(u.input_tokens, u.output_tokens) for u in run.events if isinstance(u, Usage)] == [
        (10, 5)
    ]


# --- session start -------------------------------------------------------------------------


def test_start_sends_initialize_then_initialized_and_thread_start_with_user_reviewer() -> None:
    session = Session(model="gpt-5.5", experimental_api=True)
    [initialize] = session.sent()
    assert initialize["method"] == "initialize" and initialize["id"] == 1
    assert initialize["params"]["capabilities"]["experimentalApi"] is True
    assert session.feed({"id": 1, "result": {"userAgent": USER_AGENT}}) == []
    initialized, thread_start = session.sent()
    assert initialized == {"jsonrpc": "2.0", "method": "initialized"}
    assert thread_start["method"] == "thread/start"
    assert thread_start["params"] == {
        "cwd": "/work/project",
        "approvalPolicy": "on-request",
        "approvalsReviewer": "user",
        "sandbox": "workspace-write",
        "model": "gpt-5.5",
    }
    [started] = session.feed(thread_result())
    assert started == SessionStarted(
        native_id=THREAD,
        agent_version="0.171.0",
        policy={
            "approval_policy": "on-request",
            "approvals_reviewer": "user",
            "sandbox": "workspace-write",
            "network_access": "false",
        },
    )
    codec = session.codec
    assert (codec.state, codec.thread_id, codec.agent_version) == (
        CodecState.READY,
        THREAD,
        "0.171.0",
    )
    assert codec.capabilities.human_approval and codec.capabilities.interactive_questions
    assert codec.capabilities.session_resume and codec.capabilities.interrupt


def test_the_policy_in_force_is_what_the_result_says_and_a_difference_is_a_warning() -> None:
    session = Session()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    sandbox = {"type": "dangerFullAccess"}
    events = session.feed(thread_result(approvalsReviewer="auto_review", sandbox=sandbox))
    started = next(e for e in events if isinstance(e, SessionStarted))
    assert started.policy["sandbox"] == "danger-full-access"
    assert started.policy["approvals_reviewer"] == "auto_review"
    warnings = [e.message for e in events if isinstance(e, Warning) and e.code == "policy_mismatch"]
    assert any("auto_review" in w for w in warnings)
    assert any("danger-full-access" in w for w in warnings)


def test_resume_sends_thread_resume_and_reports_a_resumed_session() -> None:
    session = Session(resume_thread_id="old-thread")
    session.sent()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    _, resume = session.sent()
    assert resume["method"] == "thread/resume"
    assert resume["params"]["threadId"] == "old-thread"
    assert resume["params"]["approvalsReviewer"] == "user"
    [started, *_] = session.feed(thread_result(thread={"id": "old-thread"}))
    assert isinstance(started, SessionStarted) and started.resumed


@pytest.mark.parametrize("failing", [1, 2], ids=["initialize", "thread/start"])
def test_a_refused_handshake_is_fatal_and_the_codec_then_refuses_input(failing: int) -> None:
    session = Session()
    if failing == 2:
        session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    with pytest.raises(RemoteError) as raised:
        session.feed({"id": failing, "error": {"code": -32600, "message": "no such thread"}})
    assert raised.value.message == "no such thread"
    assert session.codec.state is CodecState.ERROR
    with pytest.raises(ProtocolError):
        session.feed({"method": "warning", "params": {"message": "x"}})
    with pytest.raises(CodecUsageError):
        session.codec.send(Prompt(text="hello"))


def test_a_thread_result_without_a_thread_id_is_fatal() -> None:
    session = Session()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    with pytest.raises(ProtocolError):
        session.feed({"id": 2, "result": {"thread": {}}})
    assert session.codec.state is CodecState.ERROR


def test_commands_before_the_session_started_and_a_second_start_are_local_misuse() -> None:
    session = Session()
    with pytest.raises(CodecUsageError):
        session.codec.send(Prompt(text="too early"))
    with pytest.raises(CodecUsageError):
        session.codec.start()


# --- turns ---------------------------------------------------------------------------------


def test_a_prompt_starts_a_turn_and_a_second_prompt_waits_for_it() -> None:
    session = ready()
    [turn_start] = session.send(Prompt(text="please create hello.txt"))
    assert turn_start["method"] == "turn/start"
    assert turn_start["params"] == {
        "threadId": THREAD,
        "input": [{"type": "text", "text": "please create hello.txt", "text_elements": []}],
    }
    with pytest.raises(CodecUsageError):
        session.codec.send(Prompt(text="another"))
    session.feed({"id": 3, "result": {"turn": {"id": TURN}}})
    [done] = session.feed(
        {"method": "turn/completed", "params": {"turn": {"id": TURN, "status": "completed"}}}
    )
    assert done == TurnCompleted(status=TurnStatus.COMPLETED, turn_native_id=TURN)
    assert session.send(Prompt(text="another"))[0]["method"] == "turn/start"


def test_interrupt_names_the_current_turn() -> None:
    session = running()
    [interrupt] = session.send(Interrupt())
    assert interrupt["method"] == "turn/interrupt"
    assert interrupt["params"] == {"threadId": THREAD, "turnId": TURN}


def test_an_interrupt_before_the_turn_id_is_known_is_sent_once_it_is() -> None:
    session = ready()
    session.send(Prompt(text="go"))
    assert session.send(Interrupt()) == []
    session.feed({"id": 3, "result": {"turn": {"id": TURN}}})
    [interrupt] = session.sent()
    assert interrupt["params"] == {"threadId": THREAD, "turnId": TURN}


def test_an_interrupt_with_no_turn_sends_nothing() -> None:
    assert ready().send(Interrupt()) == []


def test_a_refused_turn_start_ends_the_turn_as_failed() -> None:
    session = ready()
    session.send(Prompt(text="go"))
    [done] = session.feed({"id": 3, "error": {"code": -32602, "message": "bad input"}})
    assert isinstance(done, TurnCompleted) and done.status is TurnStatus.FAILED
    assert done.error is not None and "bad input" in done.error
    assert session.send(Prompt(text="again"))[0]["method"] == "turn/start"


def test_a_failed_turn_carries_the_error_text_and_the_error_notification_is_a_warning() -> None:
    session = running()
    error = {"message": "stream disconnected", "codexErrorInfo": "other"}
    [warning] = session.feed(
        {"method": "error", "params": {"error": error, "willRetry": True, "turnId": TURN}}
    )
    assert warning == Warning(message="stream disconnected (retrying)", code="agent_error_retrying")
    [done] = session.feed(
        {
            "method": "turn/completed",
            "params": {"turn": {"id": TURN, "status": "failed", "error": error}},
        }
    )
    assert done == TurnCompleted(
        status=TurnStatus.FAILED, error="stream disconnected", turn_native_id=TURN
    )


def test_command_output_deltas_name_their_command() -> None:
    session = running()
    item = {"type": "commandExecution", "id": "c1", "command": "ls", "status": "inProgress"}
    session.feed({"method": "item/started", "params": {"item": item}})
    [output] = session.feed(
        {"method": "item/commandExecution/outputDelta", "params": {"itemId": "c1", "delta": "a\n"}}
    )
    assert isinstance(output, ToolActivity)
    assert (output.title, output.output, output.phase.value) == ("ls", "a\n", "output")


# --- malformed input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"this is not json",
        b'{"id": 99, "result": {}}',  # a response to an id we never used
        b'{"method": "item/agentMessage/delta", "params": {"itemId": "m"}}',  # no delta
        b'{"method": "turn/completed", "params": {}}',
        b'{"method": "item/started", "params": {"item": "not an object"}}',
        b'{"method": "serverRequest/resolved", "params": {"requestId": null}}',
        b"[1, 2, 3]",
    ],
)
def test_malformed_lines_become_a_warning_with_an_excerpt(raw: bytes) -> None:
    session = running()
    [warning] = session.feed(raw)
    assert isinstance(warning, Warning) and warning.code == "malformed_message"
    assert raw.decode()[:20] in warning.message or "without" in warning.message
    assert session.codec.state is CodecState.READY
    assert session.send(Interrupt())[0]["method"] == "turn/interrupt"


def test_a_huge_malformed_line_gives_a_bounded_warning() -> None:
    [warning] = running().feed(b"{" + b"x" * 1_000_000)
    assert isinstance(warning, Warning) and len(warning.message) < 500


def test_unknown_notifications_are_counted_not_reported() -> None:
    session = running()
    for method in (
        "thread/someNewThing",
        "thread/someNewThing",
        "hook/started",
        "thread/status/changed",
    ):
        assert session.feed({"method": method, "params": {"threadId": THREAD}}) == []
    assert session.codec.unknown_notifications == {"thread/someNewThing": 2, "hook/started": 1}


def test_warnings_from_codex_are_passed_on() -> None:
    session = running()
    config = {"summary": "bubblewrap missing", "details": "using the bundled one"}
    assert session.feed({"method": "configWarning", "params": config}) == [
        Warning(message="bubblewrap missing (using the bundled one)", code="config_warning")
    ]
    assert session.feed({"method": "warning", "params": {"message": "unstable feature"}}) == [
        Warning(message="unstable feature", code="agent_warning")
    ]


# --- the command line ----------------------------------------------------------------------


def test_the_app_server_argv_takes_a_prefix_features_and_toml_overrides() -> None:
    argv = codex_app_server_argv(
        ["npx", "codex"],
        enable=["default_mode_request_user_input"],
        disable=["plugins"],
        config={
            "model": 'gpt-5.5 "mini"',
            "features.unbounded_connection_retries": False,
            "model_providers.mock.request_max_retries": 0,
            "sandbox_workspace_write.writable_roots": ["/a", "/b"],
        },
    )
    assert argv == [
        "npx",
        "codex",
        "app-server",
        "--enable",
        "default_mode_request_user_input",
        "--disable",
        "plugins",
        "-c",
        'model="gpt-5.5 \\"mini\\""',
        "-c",
        "features.unbounded_connection_retries=false",
        "-c",
        "model_providers.mock.request_max_retries=0",
        "-c",
        'sandbox_workspace_write.writable_roots=["/a", "/b"]',
        "-c",
        "suppress_unstable_features_warning=true",  # the gateway enabled a feature
    ]
    assert "suppress_unstable_features_warning=true" not in codex_app_server_argv(["codex"])
    quiet_off = {"suppress_unstable_features_warning": False}
    assert codex_app_server_argv(["codex"], enable=["x"], config=quiet_off)[-1].endswith("false")


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("codex", {}),
        ([], {}),
        (["codex"], {"enable": ["bad feature"]}),
        (["codex"], {"config": {"a=b": 1}}),
        (["codex"], {"config": {"": 1}}),
        (["codex"], {"config": {"x": float("inf")}}),
    ],
)
def test_a_bad_command_line_setting_is_a_config_error(command: Any, options: Any) -> None:
    with pytest.raises(ConfigError):
        codex_app_server_argv(command, **options)


# --- plans (collaboration mode) -------------------------------------------------------------


def test_a_prompt_in_plan_mode_names_the_mode_and_the_threads_model() -> None:
    session = Session()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.feed(thread_result(model="gpt-5.5"))
    session.sent()
    [turn_start] = session.send(Prompt(text="plan it", mode="plan"))
    assert turn_start["params"]["collaborationMode"] == {
        "mode": "plan",
        "settings": {"model": "gpt-5.5", "reasoning_effort": None, "developer_instructions": None},
    }


def test_a_prompt_without_a_mode_keeps_the_threads_own_unless_the_project_says_plan() -> None:
    [plain] = ready().send(Prompt(text="go"))
    assert "collaborationMode" not in plain["params"]
    [planned] = ready(collaboration_mode="plan").send(Prompt(text="go"))
    assert planned["params"]["collaborationMode"]["mode"] == "plan"
    [chosen] = ready(collaboration_mode="plan").send(Prompt(text="go", mode="default"))
    assert chosen["params"]["collaborationMode"]["mode"] == "default"


def test_a_proposed_plan_becomes_the_gateways_plan_card_after_the_turn_ends() -> None:
    session = running()
    plan_item = {"type": "plan", "id": "p1", "text": ""}
    assert session.feed({"method": "item/started", "params": {"item": plan_item}}) == []
    delta = {"itemId": "p1", "delta": "# Pl", "threadId": THREAD, "turnId": TURN}
    assert session.feed({"method": "item/plan/delta", "params": delta}) == []
    done_item = {**plan_item, "text": "# Plan\n\n1. Create hello.txt\n"}
    assert session.feed({"method": "item/completed", "params": {"item": done_item}}) == []
    turn = {"id": TURN, "status": "completed", "items": []}
    ended, opened = session.feed({"method": "turn/completed", "params": {"turn": turn}})
    assert isinstance(ended, TurnCompleted) and isinstance(opened, InteractionOpened)
    request = opened.request
    assert request.native_key == "" and request.kind is InteractionKind.PLAN
    assert request.detail == Plan(markdown="# Plan\n\n1. Create hello.txt\n")
    assert [a.id for a in request.actions] == ["implement", "keep-planning"]
    assert session.codec.open_interactions == ()  # nothing in the agent waits for it


def test_no_plan_card_for_a_turn_that_did_not_complete() -> None:
    session = running()
    item = {"type": "plan", "id": "p1", "text": "# Plan"}
    session.feed({"method": "item/completed", "params": {"item": item}})
    turn = {"id": TURN, "status": "interrupted", "items": []}
    [ended] = session.feed({"method": "turn/completed", "params": {"turn": turn}})
    assert isinstance(ended, TurnCompleted)


# --- issue 31: the models Codex offers, and the thread's name ------------------------------


def test_under_codex_s_own_provider_model_list_is_asked_and_each_page_read() -> None:
    session = Session()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.sent()
    started = session.feed(thread_result(modelProvider="openai", thread={"id": THREAD}))
    assert [type(e) for e in started] == [SessionStarted]
    [listing] = session.sent()
    assert listing["method"] == "model/list" and listing["params"] == {"includeHidden": True}
    page = {"data": [{"id": "gpt-5.5", "model": "gpt-5.5"}], "nextCursor": "2"}
    assert session.feed({"id": listing["id"], "result": page}) == []
    [second] = session.sent()
    assert second["params"] == {"includeHidden": True, "cursor": "2"}
    last = {"data": [{"id": "gpt-6-sol", "model": "gpt-6-sol", "hidden": True}]}
    assert session.feed({"id": second["id"], "result": last}) == [
        ModelsOffered(models=("gpt-5.5", "gpt-6-sol"))
    ]


def test_under_another_provider_model_list_is_not_asked() -> None:
    # FACTS-session-features.md: it would list Codex's presets, not the provider's models
    session = Session()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.sent()
    session.feed(thread_result(modelProvider="mock"))
    assert session.sent() == []


def test_a_refused_model_list_leaves_the_models_unknown_and_says_nothing() -> None:
    session = Session()
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.sent()
    session.feed(thread_result(modelProvider="openai"))
    [listing] = session.sent()
    refused = {"id": listing["id"], "error": {"code": -32601, "message": "no"}}
    assert session.feed(refused) == []


def test_the_thread_s_name_is_said_at_start_and_a_name_set_is_acknowledged() -> None:
    session = Session(resume_thread_id=THREAD)
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.sent()
    [started] = session.feed(thread_result(thread={"id": THREAD, "name": "birds"}))
    assert isinstance(started, SessionStarted) and started.native_name == "birds"
    assert session.codec.capabilities.names_sessions
    [named] = session.send(NameSession(name="herons"))
    assert named["params"] == {"threadId": THREAD, "name": "herons"}
    assert session.feed({"id": named["id"], "result": {}}) == [SessionNamed(name="herons")]
