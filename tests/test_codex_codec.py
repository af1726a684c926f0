"""The Codex app-server codec: recorded transcripts replayed, then each request type and
each way the server or the caller can get things wrong."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.codex_app_server import CodecState, CodexAppServerCodec
from gateway.domain import (
    Answer,
    Command,
    Decision,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Network,
    Permissions,
    Resolution,
    Scope,
    TurnStatus,
)
from gateway.errors import CodecUsageError, ProtocolError, RemoteError
from gateway.events import (
    AgentEvent,
    AgentMessage,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
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
from tests.transcript_replay import TRANSCRIPTS, load_transcript, replay

THREAD = "thr-1"
TURN = "turn-1"
USER_AGENT = "agent-gateway/0.171.0 (Debian 12.0.0; x86_64) unknown (agent-gateway; 0.1.0)"


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
    assert opened == closed
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
        diff="*** Add File: $WORKSPACE/patched.txt\npatched by fake model\n",
    )


def test_replay_of_a_resume_sends_thread_resume_with_the_thread_id() -> None:
    first, second = load_transcript(TRANSCRIPTS / "lab-resume.jsonl")
    thread_id = replay(first).codec.thread_id
    run = replay(second)
    resume = next(m for m in run.sent if m.get("method") == "thread/resume")
    assert resume["params"]["threadId"] == thread_id == run.codec.thread_id
    assert resume["params"]["approvalsReviewer"] == "user"


# --- a codec driven by hand ----------------------------------------------------------------


class Session:
    """A codec and the lines it wrote, fed messages as dicts."""

    def __init__(self, **options: Any) -> None:
        self.codec = CodexAppServerCodec(cwd="/work/project", **options)
        self.codec.start()

    def feed(self, message: dict[str, Any] | bytes) -> list[AgentEvent]:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        return self.codec.feed(raw)

    def sent(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.codec.data_to_send()]

    def send(self, command: Prompt | Respond | Interrupt) -> list[dict[str, Any]]:
        self.codec.send(command)
        return self.sent()

    def ask(self, method: str, params: dict[str, Any], request_id: int = 0) -> list[AgentEvent]:
        return self.feed({"id": request_id, "method": method, "params": params})

    def asked(self, method: str, params: dict[str, Any], request_id: int = 0) -> InteractionRequest:
        [opened] = [
            e for e in self.ask(method, params, request_id) if isinstance(e, InteractionOpened)
        ]
        return opened.request


def thread_result(request_id: int = 2, **overrides: Any) -> dict[str, Any]:
    result = {
        "thread": {"id": THREAD},
        "approvalPolicy": "on-request",
        "approvalsReviewer": "user",
        "sandbox": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False},
        **overrides,
    }
    return {"id": request_id, "result": result}


def ready(**options: Any) -> Session:
    session = Session(**options)
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.feed(thread_result())
    session.sent()
    return session


def running() -> Session:
    session = ready()
    session.send(Prompt(text="go"))
    session.feed({"id": 3, "result": {"turn": {"id": TURN, "status": "inProgress"}}})
    session.feed({"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": TURN}}})
    return session


COMMAND_PARAMS: dict[str, Any] = {
    "kind": "command",
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_1",
    "command": "/bin/bash -c 'touch hello.txt'",
    "cwd": "/work/project",
    "reason": "Need to create hello.txt outside the sandbox",
    "proposedExecpolicyAmendment": ["touch", "hello.txt"],
    "availableDecisions": [
        "accept",
        {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "hello.txt"]}},
        "cancel",
    ],
}
COMMAND = "item/commandExecution/requestApproval"


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


# --- command approvals ---------------------------------------------------------------------


def test_command_approval_offers_exactly_the_available_decisions_plus_decline() -> None:
    request = running().asked(COMMAND, COMMAND_PARAMS)
    assert request.kind is InteractionKind.APPROVAL
    assert request.turn_native_id == TURN
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("accept", Effect.ALLOW, Scope.ONCE),
        ("rule", Effect.ALLOW, Scope.ALWAYS),
        ("decline", Effect.DENY, Scope.ONCE),
        ("cancel", Effect.CANCEL, Scope.ONCE),
    ]
    rule = request.actions[1]
    assert "touch hello.txt" in rule.label and "touch hello.txt" in rule.description
    shown = dataclasses.replace(request, native_key="")
    assert "rpc:0" not in repr(shown) and "'id': 0" not in repr(shown)


@pytest.mark.parametrize(
    ("action_id", "wire"),
    [
        ("accept", "accept"),
        ("decline", "decline"),
        ("cancel", "cancel"),
        (
            "rule",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "hello.txt"]}},
        ),
    ],
)
def test_the_reply_echoes_the_exact_decision_offered(action_id: str, wire: object) -> None:
    session = running()
    request = session.asked(COMMAND, COMMAND_PARAMS)
    [reply] = session.send(
        Respond(native_key=request.native_key, decision=Decision(action_id=action_id))
    )
    assert reply == {"jsonrpc": "2.0", "id": 0, "result": {"decision": wire}}


def test_every_command_decision_variant_of_the_schema_becomes_an_action() -> None:
    session = running()
    params = {
        **COMMAND_PARAMS,
        "availableDecisions": [
            "accept",
            "acceptForSession",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["git", "status"]}},
            {
                "applyNetworkPolicyAmendment": {
                    "network_policy_amendment": {"host": "pypi.org", "action": "allow"}
                }
            },
            {
                "applyNetworkPolicyAmendment": {
                    "network_policy_amendment": {"host": "evil.test", "action": "deny"}
                }
            },
            "decline",
            "cancel",
        ],
    }
    request = session.asked(COMMAND, params)
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("accept", Effect.ALLOW, Scope.ONCE),
        ("session", Effect.ALLOW, Scope.SESSION),
        ("rule", Effect.ALLOW, Scope.ALWAYS),
        ("net-allow", Effect.ALLOW, Scope.ALWAYS),
        ("net-deny", Effect.DENY, Scope.ALWAYS),
        ("decline", Effect.DENY, Scope.ONCE),
        ("cancel", Effect.CANCEL, Scope.ONCE),
    ]
    assert "pypi.org" in request.actions[3].label and "evil.test" in request.actions[4].label
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(action_id="net-deny")))
    assert reply["result"]["decision"] == params["availableDecisions"][4]


def test_an_unknown_decision_variant_is_not_offered_and_is_reported() -> None:
    session = running()
    params = {**COMMAND_PARAMS, "availableDecisions": ["accept", "approveEverything", "cancel"]}
    events = session.ask(COMMAND, params)
    [opened] = [e for e in events if isinstance(e, InteractionOpened)]
    assert [a.id for a in opened.request.actions] == ["accept", "decline", "cancel"]
    assert any(isinstance(e, Warning) and e.code == "unknown_decision" for e in events)


@pytest.mark.parametrize(
    ("kind", "proposed", "expected"),
    [
        ("command", ["touch", "hello.txt"], ["accept", "rule", "decline", "cancel"]),
        ("command", None, ["accept", "decline", "cancel"]),
        ("humanCommand", ["touch", "hello.txt"], ["accept", "decline", "cancel"]),
    ],
)
def test_without_available_decisions_the_safe_defaults_are_offered(
    kind: str, proposed: list[str] | None, expected: list[str]
) -> None:
    params = {k: v for k, v in COMMAND_PARAMS.items() if k != "availableDecisions"}
    params.update(kind=kind, proposedExecpolicyAmendment=proposed)
    assert [a.id for a in running().asked(COMMAND, params).actions] == expected


def test_input_for_a_running_terminal_is_not_shown_as_a_new_command() -> None:
    request = running().asked(COMMAND, {**COMMAND_PARAMS, "kind": "writeStdin"})
    assert "running command" in request.title
    assert isinstance(request.detail, Command) and request.detail.stdin_for_running_process


def test_a_network_approval_shows_the_host_asked_for() -> None:
    params = {
        k: v
        for k, v in COMMAND_PARAMS.items()
        if k not in ("command", "proposedExecpolicyAmendment")
    }
    params["networkApprovalContext"] = {"host": "pypi.org", "protocol": "https"}
    params["availableDecisions"] = ["accept", "acceptForSession", "cancel"]
    request = running().asked(COMMAND, params)
    assert "pypi.org" in request.title
    assert request.detail == Network(
        host="pypi.org", protocol="https", reason=COMMAND_PARAMS["reason"]
    )


def test_additional_permissions_of_a_command_are_shown() -> None:
    extra = {"fileSystem": {"write": ["/outside"]}, "network": {"enabled": True}}
    request = running().asked(COMMAND, {**COMMAND_PARAMS, "additionalPermissions": extra})
    assert "write /outside" in request.summary and "network access" in request.summary


# --- file change approvals -----------------------------------------------------------------

PATCH = "item/fileChange/requestApproval"


def test_a_file_change_approval_shows_the_changes_of_its_item() -> None:
    session = running()
    changes = [
        {"path": "/w/new.txt", "kind": {"type": "add"}, "diff": "hello\n"},
        {
            "path": "/w/old.txt",
            "kind": {"type": "update", "move_path": "/w/moved.txt"},
            "diff": "@@ -1 +1 @@\n-a\n+b",
        },
    ]
    item = {"type": "fileChange", "id": "p1", "changes": changes, "status": "inProgress"}
    session.feed({"method": "item/started", "params": {"item": item, "turnId": TURN}})
    request = session.asked(
        PATCH, {"threadId": THREAD, "turnId": TURN, "itemId": "p1", "reason": None}
    )
    assert isinstance(request.detail, FileChange)
    assert request.detail.paths == ("/w/new.txt", "/w/old.txt", "/w/moved.txt")
    assert "*** Add File: /w/new.txt\nhello\n" in request.detail.diff
    assert "*** Move to: /w/moved.txt\n@@ -1 +1 @@\n-a\n+b\n" in request.detail.diff
    assert [(a.id, a.scope) for a in request.actions] == [
        ("accept", Scope.ONCE),
        ("session", Scope.SESSION),
        ("decline", Scope.ONCE),
        ("cancel", Scope.ONCE),
    ]
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(action_id="session")))
    assert reply["result"] == {"decision": "acceptForSession"}


def test_a_file_change_approval_without_its_item_says_the_changes_are_unknown() -> None:
    request = running().asked(PATCH, {"threadId": THREAD, "turnId": TURN, "itemId": "nope"})
    assert isinstance(request.detail, FileChange) and request.detail.paths == ()
    assert "did not announce" in request.summary


# --- permissions approvals (recorded: permissions_grant_turn, _session, permissions_deny) ----

PERMISSIONS = "item/permissions/requestApproval"
ASKED_PERMISSIONS = {
    "network": None,
    "fileSystem": {
        "read": None,
        "write": ["/outside"],
        "entries": [{"path": {"type": "path", "path": "/outside"}, "access": "write"}],
    },
}
PERMISSIONS_PARAMS = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_1",
    "cwd": "/work/project",
    "reason": "I need to write the report outside the workspace",
    "permissions": ASKED_PERMISSIONS,
}


@pytest.mark.parametrize(
    ("action_id", "result"),
    [
        ("turn", {"permissions": ASKED_PERMISSIONS, "scope": "turn"}),
        ("session", {"permissions": ASKED_PERMISSIONS, "scope": "session"}),
        ("deny", {"permissions": {}, "scope": "turn"}),
    ],
)
def test_permissions_are_granted_for_the_chosen_scope_or_not_at_all(
    action_id: str, result: dict[str, Any]
) -> None:
    session = running()
    request = session.asked(PERMISSIONS, PERMISSIONS_PARAMS)
    assert isinstance(request.detail, Permissions)
    assert request.detail.requested == ("write /outside", "write /outside")
    assert request.detail.reason == PERMISSIONS_PARAMS["reason"]
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("turn", Effect.ALLOW, Scope.TURN),
        ("session", Effect.ALLOW, Scope.SESSION),
        ("deny", Effect.DENY, Scope.ONCE),
    ]
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(action_id=action_id)))
    assert reply["result"] == result


# --- questions -----------------------------------------------------------------------------

QUESTIONS = "item/tool/requestUserInput"
QUESTION_PARAMS: dict[str, Any] = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_rui_1",
    "isBlocking": True,
    "questions": [
        {
            "id": "color",
            "header": "Color",
            "question": "Which color should I use?",
            "isOther": True,
            "isSecret": False,
            "options": [
                {"label": "Red (Recommended)", "description": "warm"},
                {"label": "Blue", "description": "cool"},
            ],
        },
        {
            "id": "token",
            "header": "Token",
            "question": "API token?",
            "isSecret": True,
            "options": None,
        },
    ],
}


def test_questions_get_stable_option_ids_and_keep_their_flags() -> None:
    request = running().asked(QUESTIONS, QUESTION_PARAMS)
    assert request.kind is InteractionKind.QUESTION
    color, token = request.questions
    assert [(o.id, o.label, o.description) for o in color.options] == [
        ("0", "Red (Recommended)", "warm"),
        ("1", "Blue", "cool"),
    ]
    assert (color.header, color.text, color.allow_other, color.secret) == (
        "Color",
        "Which color should I use?",
        True,
        False,
    )
    assert token.options == () and token.allow_other and token.secret and token.required


def test_answers_go_back_as_labels_and_free_text_by_question_id() -> None:
    session = running()
    session.asked(QUESTIONS, QUESTION_PARAMS)
    answers = {"color": Answer(option_ids=("1",)), "token": Answer(other=" s3cr3t ")}
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(answers=answers)))
    assert reply["result"] == {
        "answers": {
            "color": {"answers": ["Blue"]},
            "token": {"answers": ["user_note: s3cr3t"]},
        }
    }


@pytest.mark.parametrize(
    "answers",
    [
        {"color": Answer(option_ids=("1",))},  # the token is missing
        {"color": Answer(option_ids=("1",)), "token": Answer(other="   ")},
        {"color": Answer(option_ids=("7",)), "token": Answer(other="t")},
        {"color": Answer(option_ids=("0", "1")), "token": Answer(other="t")},
        {
            "color": Answer(option_ids=("1",)),
            "token": Answer(other="t"),
            "extra": Answer(other="x"),
        },
    ],
    ids=["missing", "blank", "unknown option", "two options", "unasked question"],
)
def test_an_incomplete_or_invalid_answer_is_refused_and_nothing_is_sent(
    answers: dict[str, Answer],
) -> None:
    session = running()
    session.asked(QUESTIONS, QUESTION_PARAMS)
    with pytest.raises(CodecUsageError):
        session.codec.send(Respond(native_key="rpc:0", decision=Decision(answers=answers)))
    assert session.sent() == []
    complete = {"color": Answer(option_ids=("0",)), "token": Answer(other="t")}
    assert session.send(Respond(native_key="rpc:0", decision=Decision(answers=complete)))


def test_free_text_is_refused_where_the_question_takes_none() -> None:
    session = running()
    params = {
        **QUESTION_PARAMS,
        "questions": [{**QUESTION_PARAMS["questions"][0], "isOther": False}],
    }
    session.asked(QUESTIONS, params)
    with pytest.raises(CodecUsageError):
        session.codec.send(
            Respond(native_key="rpc:0", decision=Decision(answers={"color": Answer(other="green")}))
        )


# --- answering, once -----------------------------------------------------------------------


def test_a_request_is_answered_once_and_closed_as_answered() -> None:
    session = running()
    session.asked(COMMAND, COMMAND_PARAMS)
    accept = Respond(native_key="rpc:0", decision=Decision(action_id="accept"))
    assert len(session.send(accept)) == 1
    with pytest.raises(CodecUsageError):
        session.codec.send(accept)
    assert session.sent() == []
    [closed] = session.feed(
        {"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 0}}
    )
    assert closed == InteractionClosed(native_key="rpc:0", how=Resolution.ANSWERED)
    with pytest.raises(CodecUsageError):
        session.codec.send(accept)


def test_a_request_withdrawn_by_the_agent_closes_as_cancelled_and_cannot_be_answered() -> None:
    session = running()
    session.asked(COMMAND, COMMAND_PARAMS)
    [closed] = session.feed(
        {"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 0}}
    )
    assert closed.how is Resolution.CANCELLED_BY_AGENT  # type: ignore[union-attr]
    with pytest.raises(CodecUsageError):
        session.codec.send(Respond(native_key="rpc:0", decision=Decision(action_id="accept")))
    assert session.sent() == []


@pytest.mark.parametrize("action_id", ["session", "allow", None])
def test_an_action_the_request_did_not_offer_is_refused(action_id: str | None) -> None:
    session = running()
    session.asked(COMMAND, COMMAND_PARAMS)  # no acceptForSession offered
    with pytest.raises(CodecUsageError):
        session.codec.send(Respond(native_key="rpc:0", decision=Decision(action_id=action_id)))
    assert session.sent() == []


def test_an_unknown_native_key_is_refused() -> None:
    with pytest.raises(CodecUsageError):
        running().codec.send(Respond(native_key="rpc:9", decision=Decision(action_id="accept")))


def test_server_request_ids_are_their_own_and_string_ids_work() -> None:
    session = running()
    request = session.asked(COMMAND, COMMAND_PARAMS, request_id=3)  # our turn/start was id 3
    assert request.native_key == "rpc:3"
    session.feed({"id": "abc", "method": QUESTIONS, "params": QUESTION_PARAMS})
    [reply] = session.send(Respond(native_key="rpc:3", decision=Decision(action_id="cancel")))
    assert reply == {"jsonrpc": "2.0", "id": 3, "result": {"decision": "cancel"}}
    answers = {"color": Answer(option_ids=("0",)), "token": Answer(other="t")}
    [reply] = session.send(Respond(native_key="rpc:s:abc", decision=Decision(answers=answers)))
    assert reply["id"] == "abc"


# --- what the gateway does not support -----------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "mcpServer/elicitation/request",
        "item/tool/call",
        "account/chatgptAuthTokens/refresh",
        "attestation/generate",
        "applyPatchApproval",
        "execCommandApproval",
        "some/futureRequest",
    ],
)
def test_an_unsupported_request_is_refused_with_method_not_found_and_reported(method: str) -> None:
    session = running()
    [warning] = session.ask(method, {"threadId": THREAD}, request_id=4)
    assert isinstance(warning, Warning) and warning.code == "unsupported_request"
    assert method in warning.message
    [reply] = session.sent()
    assert reply["id"] == 4 and reply["error"]["code"] == -32601 and "result" not in reply
    assert (
        session.feed(
            {"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 4}}
        )
        == []
    )


def test_an_unreadable_supported_request_is_refused_with_invalid_params() -> None:
    session = running()
    [warning] = session.ask(QUESTIONS, {"threadId": THREAD, "questions": []})
    assert isinstance(warning, Warning) and warning.code == "malformed_message"
    [reply] = session.sent()
    assert reply["error"]["code"] == -32602


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
