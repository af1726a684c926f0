"""The codex exec codec: recorded 0.171 transcripts replayed, refusals read from stderr,
malformed and out-of-order lines (a Warning, never an exception), the command line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.codex_exec import CODEX_EXEC_CAPABILITIES, CodexExecCodec, TurnState
from adapters.codex_exec_process import (
    CodexExecSettings,
    exec_argv,
    prompt_lines,
    warnings_from_stderr,
)
from adapters.stdio import ExitStatus
from gateway.config.model import FilesPolicy
from gateway.domain import TurnStatus
from gateway.errors import CodecUsageError, ConfigError
from gateway.events import (
    AgentEvent,
    AgentMessage,
    SessionStarted,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "codex-exec-0.171"
THREAD = "01a229bc-9495-76d0-ad6f-3b3bf938c744"
E = TypeVar("E")


# --- replaying a transcript ----------------------------------------------------------------


@dataclass
class RecordedProcess:
    argv: list[str]
    settings: dict[str, Any]
    lines: list[bytes]
    exit: dict[str, Any]


def load(name: str) -> list[RecordedProcess]:
    processes: list[RecordedProcess] = []
    for text in (TRANSCRIPTS / f"{name}.jsonl").read_text().splitlines():
        record = json.loads(text)
        msg = record["msg"]
        if record["dir"] == "--" and "spawn" in msg:
            spawn = msg["spawn"]
            processes.append(RecordedProcess(spawn["argv"], spawn["settings"], [], {}))
        elif record["dir"] == "<<":
            line = msg if isinstance(msg, str) else json.dumps(msg)
            processes[-1].lines.append(line.encode())
        elif record["dir"] == "--" and "exit" in msg:
            processes[-1].exit = msg["exit"]
    return processes


def settings_for(recorded: RecordedProcess) -> CodexExecSettings:
    values = dict(recorded.settings)
    values["enable"] = tuple(values.get("enable") or ())
    return CodexExecSettings(command=["codex"], cwd="$WORKSPACE", **values)


def replay(name: str, *, interrupted_by_us: bool = True) -> list[list[AgentEvent]]:
    """Each recorded process through one codec, as the session drives it: the events of each
    turn. The argv the codec builds must be the one the binary was run with."""
    processes = load(name)
    codec = CodexExecCodec(settings_for(processes[0]))
    turns = []
    for process in processes:
        assert codec.begin_turn() == process.argv
        events = [event for line in process.lines for event in codec.feed(line)]
        status = ExitStatus(
            code=process.exit["code"],
            signal=process.exit["signal"],
            stderr_tail=process.exit["stderr"],
        )
        events += codec.finish(
            exit_code=status.code,
            exit_description=status.describe(),
            stderr=status.stderr_tail,
            interrupted=process.exit["interrupted"] and interrupted_by_us,
        )
        turns.append(events)
    return turns


def of_type(events: list[AgentEvent], kind: type[E]) -> list[E]:
    return [event for event in events if isinstance(event, kind)]


def the_end(events: list[AgentEvent]) -> TurnCompleted:
    assert isinstance(events[-1], TurnCompleted), events
    assert len(of_type(events, TurnCompleted)) == 1
    return events[-1]


ALL = sorted(path.stem for path in TRANSCRIPTS.glob("*.jsonl"))


@pytest.mark.parametrize("name", ALL)
def test_every_recorded_turn_ends_with_one_turn_completed_and_no_interaction(name: str) -> None:
    for events in replay(name):
        the_end(events)
        assert not of_type(events, Warning) or all(
            w.code in {"denied_by_policy", "agent_error", "agent_warning", "question_unsupported"}
            for w in of_type(events, Warning)
        )
        assert {type(e).__name__ for e in events} <= {
            "SessionStarted",
            "TurnStarted",
            "ToolActivity",
            "AgentMessage",
            "Usage",
            "Warning",
            "TurnCompleted",
        }


def test_a_command_turn_reports_the_thread_output_exit_code_and_usage() -> None:
    (events,) = replay("command")
    started = of_type(events, SessionStarted)
    assert len(started) == 1 and started[0].native_id
    assert started[0].policy == {"approval_policy": "never", "sandbox": "workspace-write"}
    assert of_type(events, TurnStarted) == [TurnStarted()]
    first, last = of_type(events, ToolActivity)
    assert (first.phase, first.tool, first.status) == (
        ToolPhase.STARTED,
        ToolKind.COMMAND,
        "in_progress",
    )
    assert last.title == "/bin/bash -c 'echo hello from exec; exit 3'"
    assert (last.phase, last.exit_code, last.status) == (ToolPhase.COMPLETED, 3, "failed")
    assert last.output == "hello from exec\n"
    assert [m.text for m in of_type(events, AgentMessage)] == ["The command failed."]
    assert of_type(events, Usage) == [Usage(input_tokens=20, output_tokens=10)]
    assert the_end(events).status is TurnStatus.COMPLETED


def test_a_resumed_turn_keeps_the_thread_and_counts_only_its_own_tokens() -> None:
    processes = load("resume")
    assert processes[1].argv[-3:] == ["resume", THREAD, "-"]
    first, second = replay("resume")
    assert [s.native_id for s in of_type(first, SessionStarted)] == [THREAD]
    assert not of_type(second, SessionStarted)  # the same thread: nothing new to record
    assert (
        of_type(first, Usage) == of_type(second, Usage) == [Usage(input_tokens=10, output_tokens=5)]
    )
    assert "kumquat" in of_type(second, AgentMessage)[0].text


def test_a_codec_built_for_a_known_thread_resumes_it_from_the_first_turn() -> None:
    codec = CodexExecCodec(
        settings_for(load("resume")[0]),
        thread_id=THREAD,
        usage_total=Usage(input_tokens=10, output_tokens=5),
    )
    recorded = load("resume")[1]
    assert codec.begin_turn() == recorded.argv
    events = [event for line in recorded.lines for event in codec.feed(line)]
    assert not of_type(events, SessionStarted)
    assert of_type(events, Usage) == [Usage(input_tokens=10, output_tokens=5)]
    assert codec.usage_total == Usage(input_tokens=20, output_tokens=10)


def test_a_patch_is_a_file_change_with_its_paths() -> None:
    (events,) = replay("patch")
    changes = of_type(events, ToolActivity)
    assert [c.phase for c in changes] == [ToolPhase.STARTED, ToolPhase.COMPLETED]
    assert changes[-1].tool is ToolKind.FILE_CHANGE
    assert changes[-1].paths == ("$WORKSPACE/patched.txt",)
    assert changes[-1].status == "completed"


REFUSALS = {
    "refused_escalation": ("a command", "reject command"),
    "refused_execpolicy": ("a command", "policy forbids commands starting with `touch`"),
    "refused_patch_read_only": ("a file change", "blocked by read-only sandbox"),
    "refused_patch_outside": ("a file change", "writing outside of the project"),
    "refused_sandbox_write": ("sandbox stopped a command", "read only file system"),
    "network_blocked": ("sandbox stopped a command", "operation not permitted"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_refusal_by_policy_is_one_denied_warning_before_the_turn_ends(name: str) -> None:
    (events,) = replay(name)
    what, why = REFUSALS[name]
    (denied,) = [w for w in of_type(events, Warning) if w.code == "denied_by_policy"]
    assert what in denied.message and why in denied.message
    assert "app-server backend" in denied.message and "wider sandbox" in denied.message
    assert events.index(denied) == len(events) - 2  # read at the end, just before the end
    assert the_end(events).status is TurnStatus.COMPLETED


def test_a_question_exec_answered_by_itself_is_reported() -> None:
    (events,) = replay("question_in_exec")
    codes = [w.code for w in of_type(events, Warning)]
    # no "Under-development features enabled" warning: the gateway silenced it
    assert codes == ["question_unsupported"]


def test_an_error_item_is_a_warning() -> None:
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"))
    codec.begin_turn()
    line = b'{"type": "item.completed", "item": {"type": "error", "id": "i", "message": "odd"}}'
    assert codec.feed(line) == [Warning(message="odd", code="agent_warning")]


def test_a_failing_model_fails_the_turn_with_its_message() -> None:
    (events,) = replay("model_failed")
    message = "stream disconnected before completion: the model broke"
    assert [w.message for w in of_type(events, Warning)] == [message]
    end = the_end(events)
    assert (end.status, end.error) == (TurnStatus.FAILED, message)


def test_an_interrupt_ends_the_turn_interrupted() -> None:
    (events,) = replay("interrupted")
    assert of_type(events, ToolActivity)[0].title == "/bin/bash -c 'sleep 300'"
    assert the_end(events).status is TurnStatus.INTERRUPTED


def test_a_process_killed_by_someone_else_fails_the_turn_and_says_how() -> None:
    (events,) = replay("interrupted", interrupted_by_us=False)
    end = the_end(events)
    assert end.status is TurnStatus.FAILED
    assert end.error == "codex exec ended before the turn ended: killed by SIGTERM"


def test_a_process_that_never_started_a_turn_fails_it_with_its_stderr() -> None:
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"))
    codec.begin_turn()
    stderr = "No prompt provided via stdin.\n"
    status = ExitStatus(code=1, signal=None, stderr_tail=stderr)
    events = codec.finish(exit_code=1, exit_description=status.describe(), stderr=stderr)
    end = the_end(events)
    assert end.status is TurnStatus.FAILED
    assert end.error is not None and "before the turn started" in end.error
    assert "No prompt provided via stdin." in end.error
    assert codec.state is TurnState.IDLE


# --- bad input: a Warning, never an exception ----------------------------------------------

MALFORMED = [
    b"not json",
    b"\xff\xfe{",
    b"[" * 100_000,
    b"[1, 2]",
    b'{"no": "type"}',
    b'{"type": 5}',
    b'{"type": "thread.started"}',
    b'{"type": "thread.started", "thread_id": 7}',
    b'{"type": "item.completed"}',
    b'{"type": "item.completed", "item": "text"}',
    b'{"type": "item.completed", "item": {"type": "agent_message", "id": "i"}}',
    b'{"type": "item.started", "item": {"type": "command_execution", "id": "i"}}',
    b'{"type": "item.updated", "item": {"id": 1, "type": "command_execution"}}',
    b'{"type": "item.completed", "item": {"type": "error", "id": "i"}}',
]


@pytest.mark.parametrize("line", MALFORMED, ids=lambda line: repr(line[:40]))
def test_a_malformed_line_is_a_warning_and_the_turn_goes_on(line: bytes) -> None:
    recorded = load("command")[0]
    codec = CodexExecCodec(settings_for(recorded))
    codec.begin_turn()
    (warning,) = codec.feed(line)
    assert isinstance(warning, Warning) and warning.code == "malformed_message"
    assert len(warning.message) < 400  # an excerpt, not the whole line
    events = [event for raw in recorded.lines for event in codec.feed(raw)]
    events += codec.finish(exit_code=0, exit_description="exited with code 0")
    assert the_end(events).status is TurnStatus.COMPLETED


def test_unknown_events_and_items_are_counted_not_shown() -> None:
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"))
    codec.begin_turn()
    lines = [
        b'{"type": "thread.rewound"}',
        b'{"type": "item.plan.delta", "item_id": "i", "delta": "x"}',
        b'{"type": "item.completed", "item": {"id": "a", "type": "hologram"}}',
        b'{"type": "item.completed", "item": {"id": "b", "type": "reasoning", "text": "hm"}}',
    ]
    assert [event for line in lines for event in codec.feed(line)] == []
    assert codec.unknown_events == {"thread.rewound": 1}
    assert codec.unknown_items == {"hologram": 1}


def test_events_out_of_order_are_warnings_and_change_nothing() -> None:
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"))
    codec.begin_turn()
    (early,) = codec.feed(b'{"type": "turn.completed", "usage": {"input_tokens": 1}}')
    assert isinstance(early, Warning) and early.code == "unexpected_event"
    assert codec.state is TurnState.LAUNCHED
    codec.feed(b'{"type": "thread.started", "thread_id": "t1"}')
    (again,) = codec.feed(b'{"type": "thread.started", "thread_id": "t2"}')
    assert isinstance(again, Warning) and again.code == "unexpected_event"
    assert codec.thread_id == "t1"


def test_a_resume_that_lands_in_another_thread_says_so() -> None:
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"), thread_id="t1")
    codec.begin_turn()
    warning, started = codec.feed(b'{"type": "thread.started", "thread_id": "t2"}')
    assert isinstance(warning, Warning) and warning.code == "thread_changed"
    assert isinstance(started, SessionStarted) and started.native_id == "t2"
    assert codec.thread_id == "t2"


def test_a_declined_command_status_is_a_denied_warning() -> None:
    # exec_events.rs has CommandExecutionStatus::Declined; no 0.171 transcript shows one.
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"))
    codec.begin_turn()
    item = {"id": "i", "type": "command_execution", "command": "rm -rf x", "status": "declined"}
    activity, denied = codec.feed(json.dumps({"type": "item.completed", "item": item}).encode())
    assert isinstance(activity, ToolActivity) and activity.status == "declined"
    assert isinstance(denied, Warning) and denied.code == "denied_by_policy"
    assert "`rm -rf x`" in denied.message


def test_a_token_total_below_the_known_one_is_counted_whole() -> None:
    codec = CodexExecCodec(
        CodexExecSettings(command=["codex"], cwd="/w"),
        thread_id="t",
        usage_total=Usage(input_tokens=500, output_tokens=50),
    )
    codec.begin_turn()
    codec.feed(b'{"type": "thread.started", "thread_id": "t"}')
    codec.feed(b'{"type": "turn.started"}')
    usage = b'{"type": "turn.completed", "usage": {"input_tokens": 30, "output_tokens": 3}}'
    assert codec.feed(usage) == [Usage(input_tokens=30, output_tokens=3)]


def test_misuse_of_the_codec_raises() -> None:
    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/w"))
    with pytest.raises(CodecUsageError):
        codec.feed(b'{"type": "turn.started"}')
    with pytest.raises(CodecUsageError):
        codec.finish(exit_code=0, exit_description="exited with code 0")
    codec.begin_turn()
    with pytest.raises(CodecUsageError):
        codec.begin_turn()


# --- stderr --------------------------------------------------------------------------------


def test_router_errors_that_are_not_refusals_are_not_reported() -> None:
    stderr = (
        "2026-11-29T23:49:47Z ERROR codex_core::tools::router: error=failed to parse function "
        "arguments: missing field `cmd`\n"
        "2026-11-29T23:49:48Z ERROR codex_core::tools::router: error=unsupported call: nope\n"
        "2026-11-29T23:49:49Z  WARN codex_core::tasks: failed to flush rollout\n"
        "touch: cannot touch 'x': Permission denied (rejected)\n"
    )
    assert warnings_from_stderr(stderr) == []


def test_repeated_refusals_are_one_warning_with_a_count_and_colours_are_ignored() -> None:
    line = (
        "\x1b[2m2026-11-29T23:48:39Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2mcodex_core::tools::router"
        "\x1b[0m: error=patch rejected: writing outside of the project; rejected by user "
        "approval settings\n"
    )
    (warning,) = warnings_from_stderr(line * 3)
    assert warning.code == "denied_by_policy"
    assert warning.message.startswith("Denied by policy (3 times): codex refused a file change")


# --- the command line and stdin ------------------------------------------------------------


def test_the_argv_puts_every_option_before_resume_and_reads_the_prompt_from_stdin() -> None:
    settings = CodexExecSettings(
        command=["npx", "codex"],
        cwd="/work/-project",
        sandbox="read-only",
        model="gpt-5.5",
        enable=("web_search",),
        config={"model_reasoning_effort": "low"},
    )
    assert exec_argv(settings, resume_thread_id="t-1") == [
        "npx",
        "codex",
        "exec",
        "--json",
        "--color=never",
        "--cd=/work/-project",
        "--sandbox=read-only",
        "--model=gpt-5.5",
        "--enable=web_search",
        "-c",
        'model_reasoning_effort="low"',
        "-c",
        "suppress_unstable_features_warning=true",
        "resume",
        "t-1",
        "-",
    ]


@pytest.mark.parametrize("thread_id", ["--last", "", "a b", "../x"])
def test_a_thread_id_that_is_not_one_is_refused(thread_id: str) -> None:
    with pytest.raises(CodecUsageError):
        exec_argv(CodexExecSettings(command=["codex"], cwd="/w"), resume_thread_id=thread_id)


@pytest.mark.parametrize(
    "bad", [{"command": "codex"}, {"enable": ("Bad Name",)}, {"config": {"a b": 1}}]
)
def test_settings_that_cannot_make_a_command_line_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        CodexExecSettings(**{"command": ["codex"], "cwd": "/w", **bad})


@pytest.mark.parametrize(
    ("text", "stdin"),
    [
        ("hello", b"hello\n"),
        ("two\nlines\n", b"two\nlines\n"),
        ("  spaced  \n\n", b"  spaced  \n\n"),
        ("", b""),
    ],
)
def test_the_prompt_reaches_stdin_whole(text: str, stdin: bytes) -> None:
    assert b"".join(line + b"\n" for line in prompt_lines(text)) == stdin


def test_capabilities_say_there_is_no_approval_and_no_question_channel() -> None:
    caps = CODEX_EXEC_CAPABILITIES
    assert not caps.human_approval and not caps.interactive_questions
    assert not caps.bidirectional_control
    assert caps.interrupt and caps.session_resume and caps.structured_events


def test_pictures_go_by_image_arguments_unless_a_comma_would_split_their_path() -> None:
    """``--image`` splits its value at commas (seen on 0.171): a work dir with one gets its
    pictures named in the prompt instead (the runner reads the capabilities), and the inbox
    may not be named with one."""
    plain = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/srv/app"))
    assert plain.capabilities.pictures
    argv = plain.begin_turn(["/srv/app/.agent-gateway/inbox/a b.png"])
    assert argv[-2:] == ["--image=/srv/app/.agent-gateway/inbox/a b.png", "-"]
    comma = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/srv/app, v2"))
    assert not comma.capabilities.pictures
    with pytest.raises(ValueError, match="without a comma"):
        FilesPolicy(inbox=Path("in,box"))
