"""Codex app-server notifications as agent events: the pure part of the mapping.

:mod:`adapters.codex_app_server` keeps the state (current turn, remembered items, open
requests) and calls these for what each notification says on its own. Schema:
``codex-0.171`` ServerNotification types, named at each function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from adapters.codex_requests import file_changes_from_item
from adapters.json_fields import (
    get_bool,
    get_int,
    get_object,
    get_text,
    require_object,
    require_text,
)
from adapters.jsonrpc import JsonObject
from gateway.domain import TurnStatus
from gateway.events import (
    AgentEvent,
    AgentMessage,
    TextDelta,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    Usage,
    Warning,
)

__all__ = [
    "IGNORED_NOTIFICATIONS",
    "STATELESS_NOTIFICATIONS",
    "item_event",
    "output_delta",
    "turn_completed",
    "usage",
]

# Known ServerNotification methods (SUMMARY.md) that carry nothing a person acts on.
IGNORED_NOTIFICATIONS: Final = frozenset(
    {
        "thread/started",  # the thread/start result already said it
        "thread/status/changed",  # run state is derived from turns and interactions
        "thread/settings/updated",
        "thread/readState/changed",
        "thread/goal/cleared",
        "account/rateLimits/updated",
        "remoteControl/status/changed",
        "deprecationNotice",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/summaryPartAdded",
        "item/reasoning/textDelta",
        "turn/diff/updated",
        "turn/plan/updated",
        "mcpServer/startupStatus/updated",
    }
)


_TURN_STATUS: Final = {
    "completed": TurnStatus.COMPLETED,
    "interrupted": TurnStatus.INTERRUPTED,
    "failed": TurnStatus.FAILED,
}


def item_event(item: JsonObject, *, completed: bool, cwd: str | None = None) -> AgentEvent | None:
    """Schema: ThreadItem. agentMessage (on completion), commandExecution and fileChange
    (started and completed); None for the other item types."""
    item_type = get_text(item, "type")
    item_id = require_text(item, "id", where="item")
    phase = ToolPhase.COMPLETED if completed else ToolPhase.STARTED
    status = get_text(item, "status")
    if item_type == "agentMessage":
        text = require_text(item, "text", where="agentMessage")
        return AgentMessage(item_id=item_id, text=text) if completed else None
    if item_type == "commandExecution":
        # CommandExecutionThreadItem {command, cwd, status, exitCode, aggregatedOutput}.
        return ToolActivity(
            item_id=item_id,
            tool=ToolKind.COMMAND,
            phase=phase,
            title=require_text(item, "command", where="commandExecution"),
            status=status,
            exit_code=get_int(item, "exitCode"),
            output=get_text(item, "aggregatedOutput"),
        )
    if item_type == "fileChange":
        # FileChangeThreadItem {changes: [FileUpdateChange {path, kind, diff}], status}.
        changes = file_changes_from_item(item, cwd)
        return ToolActivity(
            item_id=item_id,
            tool=ToolKind.FILE_CHANGE,
            phase=phase,
            title=", ".join(changes.paths) or "file changes",
            status=status,
            paths=changes.paths,
            diff=changes.diff,
        )
    return None


def output_delta(params: JsonObject, title: str) -> ToolActivity:
    """Schema: CommandExecutionOutputDeltaNotification {itemId, delta}."""
    return ToolActivity(
        item_id=require_text(params, "itemId", where="outputDelta"),
        tool=ToolKind.COMMAND,
        phase=ToolPhase.OUTPUT,
        title=title,
        output=require_text(params, "delta", where="outputDelta"),
    )


def turn_completed(params: JsonObject) -> TurnCompleted:
    """Schema: TurnCompletedNotification {turn: Turn {id, status, error: TurnError | null}}."""
    turn = require_object(params, "turn", where="turn/completed")
    native_status = get_text(turn, "status") or "unknown"
    error = get_object(turn, "error")
    message = get_text(error, "message") if error else None
    status = _TURN_STATUS.get(native_status)
    if status is None:  # "inProgress" or a status this schema does not know
        status = TurnStatus.FAILED
        message = message or f"the turn ended with status {native_status!r}"
    return TurnCompleted(status=status, error=message, turn_native_id=get_text(turn, "id"))


def _text_delta(params: JsonObject) -> list[AgentEvent]:
    # Schema: AgentMessageDeltaNotification {itemId, delta}.
    item_id = require_text(params, "itemId", where="agentMessage/delta")
    return [TextDelta(item_id=item_id, text=require_text(params, "delta", where="delta"))]


def _agent_error(params: JsonObject) -> list[AgentEvent]:
    # Schema: ErrorNotification {error: TurnError, willRetry}. The turn's failure itself is
    # reported by turn/completed (transcript model_failed); this is what the person sees now.
    message = get_text(get_object(params, "error") or {}, "message") or "unknown error"
    if get_bool(params, "willRetry"):
        return [Warning(message=f"{message} (retrying)", code="agent_error_retrying")]
    return [Warning(message=message, code="agent_error")]


def usage(params: JsonObject) -> Usage:
    """Schema: ThreadTokenUsageUpdatedNotification {turnId, tokenUsage: {total, last}}. A Usage
    event is an increment: ``last`` is the model call just finished, ``total`` the thread's."""
    token_usage = require_object(params, "tokenUsage", where="thread/tokenUsage/updated")
    last = get_object(token_usage, "last") or {}
    return Usage(
        input_tokens=get_int(last, "inputTokens") or 0,
        output_tokens=get_int(last, "outputTokens") or 0,
        # the last model call's tokens are what its context held
        context_tokens=get_int(last, "totalTokens"),
        context_window=get_int(token_usage, "modelContextWindow"),
    )


def _warning(params: JsonObject) -> list[AgentEvent]:
    # Schema: WarningNotification {message, threadId?}.
    return [Warning(message=require_text(params, "message", where="warning"), code="agent_warning")]


def _config_warning(params: JsonObject) -> list[AgentEvent]:
    # Schema: ConfigWarningNotification {summary, details?}.
    summary = require_text(params, "summary", where="configWarning")
    details = get_text(params, "details")
    return [
        Warning(message=f"{summary} ({details})" if details else summary, code="config_warning")
    ]


STATELESS_NOTIFICATIONS: Final[Mapping[str, Callable[[JsonObject], list[AgentEvent]]]] = {
    "item/agentMessage/delta": _text_delta,
    "error": _agent_error,
    "warning": _warning,
    "configWarning": _config_warning,
}
