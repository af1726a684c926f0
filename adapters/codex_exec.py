"""Sans-IO codec for ``codex exec --json`` (JSONL on stdout, one process per turn), Codex 0.171.

Wire format: the exec ``ThreadEvent`` stream (codex-rs ``exec/src/exec_events.rs``), recorded
from the pinned binary in ``tests/transcripts/codex-exec-0.171/``. Each turn is one process::

    codec = CodexExecCodec(CodexExecSettings(command=["codex"], cwd="/work/project"))
    argv = codec.begin_turn()          # `codex exec --json ... -` (then `... resume <id> -`)
    write(prompt_lines(text)); close stdin  # the prompt goes to stdin, never into argv
    for line in stdout:
        events = codec.feed(line)      # never raises for a bad line: Warning(malformed_message)
    events = codec.finish(exit_code=..., exit_description=..., stderr=..., interrupted=...)

Turn states (table :data:`TURN_TRANSITIONS`)::

    IDLE --begin_turn()--> LAUNCHED --thread.started--> THREAD_OPEN --turn.started--> RUNNING
    RUNNING --turn.completed--> COMPLETED      RUNNING or THREAD_OPEN --turn.failed--> FAILED
    any but IDLE --finish()--> IDLE: emits the policy refusals read from stderr, then the one
        TurnCompleted (completed / failed / interrupted; failed when the process ended first)

A wire event the state does not allow is a Warning(unexpected_event), never a state change.

``codex exec`` forces ``approval_policy = never`` (0.171 ``exec/src/lib.rs``: "Default to never
ask for approvals in headless mode") and has no channel for an answer, so nothing is ever an
interaction here. What its policy refused does not appear on stdout at all in 0.171: no item,
no status, no error event (transcripts ``refused_*``). The only record is on stderr, in the
tracing log: ``ERROR codex_core::tools::router: error=<why>`` when a tool call was refused
before it ran, and ``WARN codex_sandboxing::violation: recorded sandbox violation:
resource=... reason=...`` when the sandbox stopped a command.
:func:`adapters.codex_exec_process.warnings_from_stderr` reads those records (level, target
and fields; among router errors, the ones whose reason says it was rejected) and each becomes
``Warning(code="denied_by_policy")`` with what was refused and how to allow it. The schema's
``declined`` command status is read the same way should a command item ever carry it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Final

from adapters.codex_exec_process import (
    DENIED_BY_POLICY,
    NO_QUESTIONS,
    OFFER_WIDER_PERMISSIONS,
    CodexExecSettings,
    exec_argv,
    warnings_from_stderr,
)
from adapters.json_fields import get_array, get_int, get_object, get_text, require_text
from adapters.jsonrpc import JsonObject, excerpt
from gateway.domain import TurnStatus
from gateway.errors import CodecUsageError, MalformedMessage
from gateway.events import (
    AgentEvent,
    AgentMessage,
    Capabilities,
    SessionStarted,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)

__all__ = [
    "CODEX_EXEC_CAPABILITIES",
    "IGNORED_EVENTS",
    "IGNORED_ITEMS",
    "TURN_TRANSITIONS",
    "CodexExecCodec",
    "TurnState",
]

CODEX_EXEC_CAPABILITIES: Final = Capabilities(
    structured_events=True,
    bidirectional_control=False,  # nothing can be sent once the prompt is written
    interactive_questions=False,  # "request_user_input is not supported in exec mode"
    human_approval=False,  # approval policy is forced to never
    session_resume=True,  # `codex exec resume <thread id>`
    interrupt=True,  # only by ending the turn's process group
    sandbox=True,
    pictures=True,  # --image on the turn's argv (issue 32)
)

# --- the codec ---------------------------------------------------------------------------


class TurnState(StrEnum):
    IDLE = "idle"
    LAUNCHED = "launched"
    THREAD_OPEN = "thread_open"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class _Move(StrEnum):
    BEGIN = "begin"
    THREAD_STARTED = "thread.started"
    TURN_STARTED = "turn.started"
    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    FINISH = "finish"


_LIVE: Final = (
    TurnState.LAUNCHED,
    TurnState.THREAD_OPEN,
    TurnState.RUNNING,
    TurnState.COMPLETED,
    TurnState.FAILED,
)

TURN_TRANSITIONS: Final[Mapping[tuple[TurnState, _Move], TurnState]] = {
    (TurnState.IDLE, _Move.BEGIN): TurnState.LAUNCHED,
    (TurnState.LAUNCHED, _Move.THREAD_STARTED): TurnState.THREAD_OPEN,
    (TurnState.THREAD_OPEN, _Move.TURN_STARTED): TurnState.RUNNING,
    (TurnState.THREAD_OPEN, _Move.TURN_FAILED): TurnState.FAILED,
    (TurnState.RUNNING, _Move.TURN_COMPLETED): TurnState.COMPLETED,
    (TurnState.RUNNING, _Move.TURN_FAILED): TurnState.FAILED,
    **{(state, _Move.FINISH): TurnState.IDLE for state in _LIVE},
}

# Event and item types of the schema that carry nothing a person acts on here.
IGNORED_EVENTS: Final = frozenset({"item.plan.delta"})
IGNORED_ITEMS: Final = frozenset({"reasoning", "todo_list", "plan", "collab_tool_call"})

_PHASES: Final = {
    "item.started": ToolPhase.STARTED,
    "item.updated": ToolPhase.OUTPUT,
    "item.completed": ToolPhase.COMPLETED,
}


class CodexExecCodec:
    """The turns of one Codex thread driven through ``codex exec``. Not thread-safe; no IO."""

    def __init__(
        self,
        settings: CodexExecSettings,
        *,
        thread_id: str | None = None,
        usage_total: Usage | None = None,
    ) -> None:
        self.settings = settings
        self._thread_id = thread_id
        # exec reports the thread's running total at turn.completed, resumed turns included
        self.usage_total = usage_total or Usage()
        self._state = TurnState.IDLE
        self._failure: str | None = None
        self.unknown_events: Counter[str] = Counter()
        self.unknown_items: Counter[str] = Counter()
        self._handlers: Mapping[str, Callable[[JsonObject], list[AgentEvent]]] = {
            "thread.started": self._on_thread_started,
            "turn.started": self._on_turn_started,
            "turn.completed": self._on_turn_completed,
            "turn.failed": self._on_turn_failed,
            "item.started": self._on_item,
            "item.updated": self._on_item,
            "item.completed": self._on_item,
            "error": self._on_error,
            "request_user_input": self._on_question,
        }

    @property
    def capabilities(self) -> Capabilities:
        if "," in self.settings.cwd:  # --image splits its value at commas: named instead
            return replace(CODEX_EXEC_CAPABILITIES, pictures=False)
        return CODEX_EXEC_CAPABILITIES

    @property
    def state(self) -> TurnState:
        return self._state

    @property
    def thread_id(self) -> str | None:
        """The Codex thread: None until the first turn's ``thread.started``."""
        return self._thread_id

    @property
    def policy(self) -> dict[str, str]:
        # exec prints no policy; approvals are forced to never, the sandbox is what -s says
        return {"approval_policy": "never", "sandbox": self.settings.sandbox}

    # --- a turn ---------------------------------------------------------------------------

    def begin_turn(self, images: Sequence[str] = ()) -> list[str]:
        """Start a turn: the argv of its process (a resume once the thread id is known),
        with the paths of the pictures sent with its prompt."""
        self._move(_Move.BEGIN)
        self._failure = None
        return exec_argv(self.settings, resume_thread_id=self._thread_id, images=images)

    def feed(self, line: bytes) -> list[AgentEvent]:
        """Events for one stdout line. A bad line is a Warning, never an exception."""
        if self._state is TurnState.IDLE:
            raise CodecUsageError("feed() outside a turn: call begin_turn() first")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            return [_malformed(f"not JSON ({exc})", line)]
        if not isinstance(message, dict):
            return [_malformed("not a JSON object", line)]
        kind = message.get("type")
        if not isinstance(kind, str):
            return [_malformed("no event type", line)]
        handler = self._handlers.get(kind)
        if handler is None:
            if kind not in IGNORED_EVENTS:
                self.unknown_events[kind] += 1
            return []
        try:
            return handler(message)
        except MalformedMessage as exc:
            return [_malformed(exc.reason, line)]

    def finish(
        self,
        *,
        exit_code: int | None,
        exit_description: str,
        stderr: str = "",
        interrupted: bool = False,
    ) -> list[AgentEvent]:
        """The turn's process has ended: its refusals, then its one TurnCompleted."""
        state = self._state
        self._move(_Move.FINISH)
        events: list[AgentEvent] = list(warnings_from_stderr(stderr))
        if state is TurnState.COMPLETED:
            events.append(TurnCompleted(status=TurnStatus.COMPLETED))
        elif state is TurnState.FAILED:
            events.append(TurnCompleted(status=TurnStatus.FAILED, error=self._failure))
        elif interrupted:
            events.append(TurnCompleted(status=TurnStatus.INTERRUPTED))
        else:
            when = "started" if state in (TurnState.LAUNCHED, TurnState.THREAD_OPEN) else "ended"
            error = f"codex exec ended before the turn {when}: {exit_description}"
            events.append(TurnCompleted(status=TurnStatus.FAILED, error=error))
        return events

    def _move(self, move: _Move) -> bool:
        target = TURN_TRANSITIONS.get((self._state, move))
        if target is None:
            if move in (_Move.BEGIN, _Move.FINISH):
                raise CodecUsageError(f"{move} in state {self._state}")
            return False
        self._state = target
        return True

    def _unexpected(self, move: _Move) -> list[AgentEvent]:
        text = f"codex exec sent {move} while the turn was {self._state}; ignored"
        return [Warning(message=text, code="unexpected_event")]

    # --- events (schema: exec_events.rs ThreadEvent) ---------------------------------------

    def _on_thread_started(self, message: JsonObject) -> list[AgentEvent]:
        # ThreadStartedEvent {thread_id}; printed again, same id, by `exec resume`.
        thread_id = require_text(message, "thread_id", where="thread.started")
        if not self._move(_Move.THREAD_STARTED):
            return self._unexpected(_Move.THREAD_STARTED)
        known, self._thread_id = self._thread_id, thread_id
        if known == thread_id:
            return []
        started = SessionStarted(native_id=thread_id, policy=self.policy)
        if known is None:
            return [started]
        text = f"codex exec resumed thread {known} as a new thread {thread_id}"
        return [Warning(message=text, code="thread_changed"), started]

    def _on_turn_started(self, message: JsonObject) -> list[AgentEvent]:
        # TurnStartedEvent {}: exec has no turn id.
        if not self._move(_Move.TURN_STARTED):
            return self._unexpected(_Move.TURN_STARTED)
        return [TurnStarted()]

    def _on_turn_completed(self, message: JsonObject) -> list[AgentEvent]:
        # TurnCompletedEvent {usage: {input_tokens, cached_input_tokens, output_tokens, ...}}:
        # the thread's total so far (a resumed turn counts the earlier ones too).
        if not self._move(_Move.TURN_COMPLETED):
            return self._unexpected(_Move.TURN_COMPLETED)
        usage = get_object(message, "usage")
        if usage is None:
            return []
        total = Usage(
            input_tokens=get_int(usage, "input_tokens") or 0,
            output_tokens=get_int(usage, "output_tokens") or 0,
        )
        before, self.usage_total = self.usage_total, total
        if total.input_tokens < before.input_tokens or total.output_tokens < before.output_tokens:
            before = Usage()  # not the total we knew (another history): count it all
        return [
            Usage(
                input_tokens=total.input_tokens - before.input_tokens,
                output_tokens=total.output_tokens - before.output_tokens,
            )
        ]

    def _on_turn_failed(self, message: JsonObject) -> list[AgentEvent]:
        # TurnFailedEvent {error: ThreadErrorEvent {message}}.
        error = get_object(message, "error") or {}
        if not self._move(_Move.TURN_FAILED):
            return self._unexpected(_Move.TURN_FAILED)
        self._failure = get_text(error, "message") or "the turn failed"
        return []

    def _on_error(self, message: JsonObject) -> list[AgentEvent]:
        # ThreadErrorEvent {message}: the app-server's error notification (a failing model
        # call; turn.failed follows with the same message when it ends the turn).
        text = get_text(message, "message") or "unknown error"
        return [Warning(message=text, code="agent_error")]

    def _on_question(self, message: JsonObject) -> list[AgentEvent]:
        # RequestUserInputEvent {id, call_id, questions}: exec answers it empty by itself.
        text = f"The agent asked you a question, {NO_QUESTIONS}"
        return [Warning(message=text, code="question_unsupported")]

    def _on_item(self, message: JsonObject) -> list[AgentEvent]:
        # ItemStartedEvent / ItemUpdatedEvent / ItemCompletedEvent {item: ThreadItem}.
        phase = _PHASES[str(message["type"])]
        item = get_object(message, "item")
        if item is None:
            raise MalformedMessage(f"{message['type']} without an item", "")
        item_type = require_text(item, "type", where="item")
        item_id = require_text(item, "id", where="item")
        build = _ITEMS.get(item_type)
        if build is None:
            if item_type not in IGNORED_ITEMS:
                self.unknown_items[item_type] += 1
            return []
        return build(item, item_id, phase)


def _malformed(reason: str, line: bytes) -> Warning:
    text = f"malformed line from codex exec: {reason}: {excerpt(line)}"
    return Warning(message=text, code="malformed_message")


# --- items (schema: exec_events.rs ThreadItemDetails, snake_case) -------------------------


def _agent_message(item: JsonObject, item_id: str, phase: ToolPhase) -> list[AgentEvent]:
    # AgentMessageItem {text}: only ever completed.
    if phase is not ToolPhase.COMPLETED:
        return []
    return [AgentMessage(item_id=item_id, text=require_text(item, "text", where="agent_message"))]


def _command(item: JsonObject, item_id: str, phase: ToolPhase) -> list[AgentEvent]:
    # CommandExecutionItem {command, aggregated_output, exit_code, status: in_progress |
    # completed | failed | declined}.
    command = require_text(item, "command", where="command_execution")
    status = get_text(item, "status")
    events: list[AgentEvent] = [
        ToolActivity(
            item_id=item_id,
            tool=ToolKind.COMMAND,
            phase=phase,
            title=command,
            status=status,
            exit_code=get_int(item, "exit_code"),
            output=get_text(item, "aggregated_output") if phase is not ToolPhase.STARTED else None,
        )
    ]
    if status == "declined" and phase is ToolPhase.COMPLETED:
        text = f"Denied by policy: codex declined the command `{command}`; it was not run."
        text += f" {OFFER_WIDER_PERMISSIONS}"
        events.append(Warning(message=text, code=DENIED_BY_POLICY))
    return events


def _file_change(item: JsonObject, item_id: str, phase: ToolPhase) -> list[AgentEvent]:
    # FileChangeItem {changes: [FileUpdateChange {path, kind, diff?}], status}; exec maps a
    # declined patch to "failed".
    changes = [change for change in get_array(item, "changes") or () if isinstance(change, dict)]
    paths = tuple(path for change in changes if (path := get_text(change, "path")))
    diffs = [diff for change in changes if (diff := get_text(change, "diff"))]
    return [
        ToolActivity(
            item_id=item_id,
            tool=ToolKind.FILE_CHANGE,
            phase=phase,
            title=", ".join(paths) or "file changes",
            status=get_text(item, "status"),
            paths=paths,
            diff="\n".join(diffs) or None,
        )
    ]


def _tool_call(item: JsonObject, item_id: str, phase: ToolPhase) -> list[AgentEvent]:
    # McpToolCallItem {server, tool, status, error?} and WebSearchItem {query}.
    if get_text(item, "type") == "web_search":
        title = f"web search: {get_text(item, 'query') or ''}".rstrip(": ")
    else:
        title = f"{get_text(item, 'server') or '?'}/{get_text(item, 'tool') or '?'}"
    error = get_object(item, "error")
    return [
        ToolActivity(
            item_id=item_id,
            tool=ToolKind.TOOL_CALL,
            phase=phase,
            title=title,
            status=get_text(item, "status"),
            output=get_text(error, "message") if error else None,
        )
    ]


def _error_item(item: JsonObject, item_id: str, phase: ToolPhase) -> list[AgentEvent]:
    # ErrorItem {message}: a non-fatal warning (config warnings, unstable features, ...).
    message = require_text(item, "message", where="error item")
    return [Warning(message=message, code="agent_warning")]


_ITEMS: Final[Mapping[str, Callable[[JsonObject, str, ToolPhase], list[AgentEvent]]]] = {
    "agent_message": _agent_message,
    "command_execution": _command,
    "file_change": _file_change,
    "mcp_tool_call": _tool_call,
    "web_search": _tool_call,
    "error": _error_item,
}
