"""Claude Code's message stream (everything on stdout but the control protocol) as events.

Message types of ``claude -p --output-format stream-json --verbose
--include-partial-messages`` 2.1.197 (recorded in ``tests/transcripts/claude-2.1.197/``):

==============  =======================================================================
``stream_event``  one raw Messages API SSE event of the model call in progress:
                  ``content_block_delta`` / ``text_delta`` → :class:`TextDelta`
``assistant``     one finished content block of the model's message (the CLI sends one
                  ``assistant`` message per block, all with the same ``message.id``):
                  ``text`` → :class:`AgentMessage`, ``tool_use`` → ToolActivity STARTED.
                  ``model: "<synthetic>"`` is the CLI's own "API Error: ..." text, which the
                  ``result`` reports again: skipped.
``user``          ``tool_result`` blocks → ToolActivity COMPLETED (and the ids that close
                  interactions); the CLI's own notes ("[Request interrupted ...]", replayed
                  local command output) are skipped.
``result``        the end of a turn: ``is_error``, ``errors`` / ``result`` text, ``usage``,
                  ``total_cost_usd`` → :class:`TurnResult`
==============  =======================================================================

Messages of a subagent (``parent_tool_use_id`` set) are not shown: their permission requests
still reach the gateway as control requests. Item ids are ``<message id>/<n>``, ``n``
counting the text blocks of that message, so that a delta and the finished text share one id.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.claude_requests import CARD_TOOLS, FILE_TOOLS, file_change_diff
from adapters.json_fields import get_array, get_bool, get_int, get_object, get_text
from adapters.jsonrpc import JsonObject, JsonValue
from gateway.errors import MalformedMessage
from gateway.events import (
    AgentEvent,
    AgentMessage,
    TextDelta,
    ToolActivity,
    ToolKind,
    ToolPhase,
    Usage,
    Warning,
)

__all__ = [
    "OUTPUT_LIMIT",
    "MessageMapper",
    "ToolResult",
    "TurnResult",
    "api_retry_warning",
    "result_error_text",
]

OUTPUT_LIMIT = 64 * 1024  # characters of a tool's output carried in one event
SYNTHETIC_MODEL = "<synthetic>"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    tool_use_id: str
    is_error: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnResult:
    is_error: bool
    error: str | None
    usage: Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class _ToolUse:
    kind: ToolKind
    title: str
    paths: tuple[str, ...] = ()


def _text_of(content: JsonValue) -> str:
    """A tool_result's content: a string, or text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


def _tokens_in(usage: JsonObject) -> int:
    """Anthropic usage: the input counted three ways (fresh, written to and read from cache)."""
    return sum(
        get_int(usage, key) or 0
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _bounded(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + "\n… (output truncated)"


def result_error_text(result: JsonObject) -> str:
    """The most telling text of an error ``result`` (as the claude-agent-sdk picks it):
    ``errors[]``, else ``result``, else a non-success subtype, else the HTTP status."""
    errors = [e for e in get_array(result, "errors") or () if isinstance(e, str) and e.strip()]
    if errors:
        return "; ".join(errors)
    text = (get_text(result, "result") or "").strip()
    if text:
        return text
    subtype = get_text(result, "subtype")
    if subtype and subtype != "success":
        return subtype
    status = get_int(result, "api_error_status")
    return f"API error (HTTP {status})" if status is not None else "unknown error"


def api_retry_warning(msg: JsonObject) -> Warning:
    # {"subtype": "api_retry", "attempt", "max_retries", "retry_delay_ms", "error_status",
    # "error"} (api_retry.jsonl)
    status = get_int(msg, "error_status")
    error = get_text(msg, "error") or "error"
    attempt, most = get_int(msg, "attempt"), get_int(msg, "max_retries")
    delay = msg.get("retry_delay_ms")
    what = f"HTTP {status} {error}" if status is not None else error
    text = f"the model API failed ({what}); claude retries"
    if attempt is not None and most is not None:
        text += f" ({attempt} of {most})"
    if isinstance(delay, int | float) and not isinstance(delay, bool):
        text += f" in {delay / 1000:.1f} s"
    return Warning(message=text, code="api_retry")


class MessageMapper:
    """Stream state of one process: the message in progress, text block counts, tool uses."""

    def __init__(self, *, cwd: str | None = None) -> None:
        self.cwd = cwd
        self._streaming: str | None = None  # message id of the model call in progress
        self._stream_items: dict[int, str] = {}  # block index -> item id, for that message
        self._stream_texts: dict[str, int] = {}  # message id -> text blocks started
        self._message_texts: dict[str, int] = {}  # message id -> text blocks finished
        self._tools: dict[str, _ToolUse] = {}
        self._context: int | None = None  # tokens the last main model call's context held

    def reset_turn(self) -> None:
        self._streaming = None
        self._stream_items.clear()
        self._stream_texts.clear()
        self._message_texts.clear()
        self._tools.clear()

    # --- stream_event ----------------------------------------------------------------------

    def on_stream_event(self, msg: JsonObject) -> list[AgentEvent]:
        event = get_object(msg, "event")
        if event is None or msg.get("parent_tool_use_id"):
            return []
        match get_text(event, "type"):
            case "message_start":
                started = get_object(event, "message") or {}
                self._streaming = get_text(started, "id")
                self._stream_items.clear()
            case "content_block_start":
                block = get_object(event, "content_block") or {}
                index = get_int(event, "index")
                if self._streaming and index is not None and get_text(block, "type") == "text":
                    n = self._stream_texts.get(self._streaming, 0)
                    self._stream_texts[self._streaming] = n + 1
                    self._stream_items[index] = f"{self._streaming}/{n}"
            case "content_block_delta":
                delta = get_object(event, "delta") or {}
                item_id = self._stream_items.get(get_int(event, "index") or 0)
                text = get_text(delta, "text")
                if item_id and text and get_text(delta, "type") == "text_delta":
                    return [TextDelta(item_id=item_id, text=text)]
        return []

    # --- assistant -------------------------------------------------------------------------

    def on_assistant(self, msg: JsonObject) -> list[AgentEvent]:
        message = get_object(msg, "message")
        if message is None:
            raise MalformedMessage("assistant message without message", repr(msg)[:200])
        if msg.get("parent_tool_use_id") or get_text(message, "model") == SYNTHETIC_MODEL:
            return []
        message_id = get_text(message, "id") or get_text(msg, "uuid") or "message"
        usage = get_object(message, "usage")
        if usage is not None:  # what this model call's context held
            self._context = _tokens_in(usage) + (get_int(usage, "output_tokens") or 0)
        events: list[AgentEvent] = []
        for block in get_array(message, "content") or ():
            if not isinstance(block, dict):
                continue
            match get_text(block, "type"):
                case "text":
                    n = self._message_texts.get(message_id, 0)
                    self._message_texts[message_id] = n + 1
                    text = get_text(block, "text") or ""
                    events.append(AgentMessage(item_id=f"{message_id}/{n}", text=text))
                case "tool_use":
                    started = self._tool_started(block)
                    if started is not None:
                        events.append(started)
        return events

    def _tool_started(self, block: JsonObject) -> ToolActivity | None:
        tool_use_id = get_text(block, "id")
        name = get_text(block, "name") or "tool"
        tool_input = get_object(block, "input") or {}
        if tool_use_id is None or name in CARD_TOOLS:
            return None  # a card shows it: an activity line would say it twice
        diff = None
        if name == "Bash":
            use = _ToolUse(kind=ToolKind.COMMAND, title=get_text(tool_input, "command") or name)
        elif name in FILE_TOOLS:
            try:
                path, diff = file_change_diff(name, tool_input, self.cwd)
            except MalformedMessage:
                path = "?"
            use = _ToolUse(kind=ToolKind.FILE_CHANGE, title=f"{name} {path}", paths=(path,))
        else:
            about = get_text(tool_input, "description") or get_text(tool_input, "url")
            title = f"{name}: {about}" if about else name
            use = _ToolUse(kind=ToolKind.TOOL_CALL, title=title)
        self._tools[tool_use_id] = use
        return ToolActivity(
            item_id=tool_use_id,
            tool=use.kind,
            phase=ToolPhase.STARTED,
            title=use.title,
            paths=use.paths,
            diff=diff,
        )

    # --- user (tool results) ----------------------------------------------------------------

    def on_user(self, msg: JsonObject) -> tuple[list[AgentEvent], list[ToolResult]]:
        message = get_object(msg, "message") or {}
        events: list[AgentEvent] = []
        results: list[ToolResult] = []
        for block in get_array(message, "content") or ():
            if not isinstance(block, dict) or get_text(block, "type") != "tool_result":
                continue
            tool_use_id = get_text(block, "tool_use_id")
            if tool_use_id is None:
                continue
            is_error = get_bool(block, "is_error")
            results.append(ToolResult(tool_use_id=tool_use_id, is_error=is_error))
            use = self._tools.pop(tool_use_id, None)
            if use is None or msg.get("parent_tool_use_id"):
                continue
            events.append(
                ToolActivity(
                    item_id=tool_use_id,
                    tool=use.kind,
                    phase=ToolPhase.COMPLETED,
                    title=use.title,
                    status="failed" if is_error else "completed",
                    output=_bounded(_text_of(block.get("content"))),
                    paths=use.paths,
                )
            )
        return events, results

    # --- result ----------------------------------------------------------------------------

    def on_result(self, msg: JsonObject) -> TurnResult:
        usage = get_object(msg, "usage") or {}
        tokens_in = _tokens_in(usage)
        # modelUsage {model: {contextWindow, ...}}: the largest window of the turn's models
        windows = [
            get_int(as_model, "contextWindow") or 0
            for as_model in (get_object(msg, "modelUsage") or {}).values()
            if isinstance(as_model, dict)
        ]
        context, self._context = self._context, None
        cost = msg.get("total_cost_usd")
        is_error = get_bool(msg, "is_error")
        return TurnResult(
            is_error=is_error,
            error=result_error_text(msg) if is_error else None,
            usage=Usage(
                input_tokens=tokens_in,
                output_tokens=get_int(usage, "output_tokens") or 0,
                cost_usd=float(cost)
                if isinstance(cost, int | float) and not isinstance(cost, bool)
                else None,
                context_tokens=context,
                context_window=max(windows, default=0) or None,
            ),
        )
