"""Sans-IO codec for Claude Code in stream-json mode with the stdio control protocol, 2.1.197.

The process is started with :meth:`adapters.claude_launch.ClaudeLaunch.argv` (``claude -p
--input-format stream-json --output-format stream-json --verbose --permission-prompt-tool
stdio --include-partial-messages ...``). Every line either way is one JSON object with a
``type``. The protocol reference is the claude-agent-sdk (``_internal/query.py``); recorded
behaviour is in ``tests/transcripts/claude-2.1.197/``. The codec follows the
:class:`adapters.codec.AgentCodec` contract::

    codec = ClaudeCodeCodec(ClaudeLaunch(permission_mode="default"), cwd="/work/project")
    codec.start()                   # queues the `initialize` control request
    events = codec.feed(line)       # -> list[AgentEvent]
    codec.send(Prompt(text="..."))  # a stream-json user message; Respond / Interrupt likewise
    lines = codec.data_to_send()

Session start (state table :data:`SESSION_TRANSITIONS`, walked by
:class:`~adapters.session_state.SessionState`)::

    NEW --start()--> INITIALIZING --initialize answered--> CONFIRMING_MODE
        (sends set_permission_mode with the mode the launch asked for)
    CONFIRMING_MODE --mode answered--> READY: SessionStarted(native_id = the --session-id or
        --resume id, policy = {"permission_mode": the mode the CLI says is in force})
    any --a start-up request refused--> ERROR: feed() raises RemoteError once, then
        ProtocolError for every later line (h11 style).

The CLI writes nothing on its own until the first user message (its ``system/init`` comes
with the first turn), so the codec asks it for something that has an answer: the
``set_permission_mode`` reply is the agent's own word on the permission mode, which is what
``/status`` shows. Each ``system/init`` and ``system/status`` that reports another mode (plan
approved, "switch to acceptEdits" granted) updates :attr:`ClaudeCodeCodec.policy` and is
reported as ``PolicyChanged`` (the whole policy then in force).

Commands (only in READY; :class:`gateway.errors.CodecUsageError` otherwise):

- ``Prompt`` -> a ``user`` message; refused while a turn runs (the core queues prompts).
- ``Respond`` -> the ``control_response`` for the ``can_use_tool`` named by ``native_key``
  (:mod:`adapters.claude_replies`). Unknown, closed or already answered key, an action not
  offered, a missing answer: CodecUsageError, nothing written.
- ``Interrupt`` -> the ``interrupt`` control request, if a turn runs. The CLI then cancels
  pending ``can_use_tool`` requests (``control_cancel_request``) and ends the turn with an
  error ``result``, reported as ``TurnCompleted(INTERRUPTED)``; so is a turn stopped by
  "deny and stop the turn" (``interrupt: true``).
- ``Compact`` -> the ``user`` message ``/compact``, Claude Code's own compaction, as a turn:
  2.1.197 answers ``system/status`` ``compacting``, then ``compact_result`` ``success`` or
  ``failed`` (with ``compact_error``, e.g. "Not enough messages to compact."), a
  ``compact_boundary``, and the turn's ``result`` (seen on the pinned binary; a failed one
  still ends in a success ``result``, so the codec reports it as FAILED with that error).

Interactions close with ``InteractionClosed``: ANSWERED when the ``tool_result`` with the
request's ``tool_use_id`` arrives after our answer; CANCELLED_BY_AGENT on
``control_cancel_request``, or when the tool result or the turn's end comes first. Control
requests other than ``can_use_tool`` get an error response and a Warning; never dropped,
never approved. ``system/api_retry`` is a Warning. A line that is not a valid message is a
``Warning(code="malformed_message")``.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Final

from adapters.claude_launch import ClaudeLaunch
from adapters.claude_messages import MessageMapper, api_retry_warning
from adapters.claude_pending import OpenRequest, OpenRequests
from adapters.claude_requests import open_can_use_tool
from adapters.json_fields import as_object, get_array, get_object, get_text, require_text
from adapters.jsonrpc import JsonObject, JsonValue, excerpt
from adapters.session_state import SessionState
from gateway.domain import Resolution, TurnStatus
from gateway.errors import (
    AlreadyAnswered,
    CodecUsageError,
    MalformedMessage,
    RemoteError,
    RequestClosed,
)
from gateway.events import (
    AgentCommand,
    AgentEvent,
    Capabilities,
    Compact,
    InteractionOpened,
    Interrupt,
    ModelsOffered,
    PolicyChanged,
    Prompt,
    Respond,
    SessionStarted,
    TurnCompleted,
    TurnStarted,
    Warning,
)

__all__ = [
    "CLAUDE_CAPABILITIES",
    "IGNORED_SYSTEM_SUBTYPES",
    "SESSION_TRANSITIONS",
    "ClaudeCodeCodec",
    "CodecState",
    "models_offered",
    "native_key_for",
]

# The Messages API refuses an image whose base64 is over 5 MB (5,242,880 characters): the
# bytes that make that many; a larger picture is saved and named like any file
PICTURE_MAX_BYTES: Final = 5 * 1024 * 1024 * 3 // 4

CLAUDE_CAPABILITIES: Final = Capabilities(
    structured_events=True,
    bidirectional_control=True,
    interactive_questions=True,
    human_approval=True,
    session_resume=True,
    interrupt=True,
    sandbox=False,
    compact=True,
    pictures=True,  # image blocks in the stream-json user message (issue 32)
    picture_max_bytes=PICTURE_MAX_BYTES,
)

# system subtypes that carry nothing a person acts on
IGNORED_SYSTEM_SUBTYPES: Final = frozenset(
    {
        "compact_boundary",
        "hook_started",
        "hook_progress",
        "hook_response",
        "task_started",
        "task_progress",
        "task_notification",
        "session_state_changed",
    }
)
# message types that carry nothing a person acts on
_IGNORED_TYPES: Final = frozenset({"keep_alive", "rate_limit_event", "prompt_suggestion"})

_UNSUPPORTED_REQUEST_WARNING = (
    "Claude asked for {subtype}, which agent-gateway does not support; it was refused."
)


class CodecState(StrEnum):
    NEW = "new"
    INITIALIZING = "initializing"
    CONFIRMING_MODE = "confirming_mode"
    READY = "ready"
    ERROR = "error"


class _SessionEvent(StrEnum):
    START = "start"
    INITIALIZED = "initialized"
    MODE_CONFIRMED = "mode_confirmed"


SESSION_TRANSITIONS: Final[Mapping[tuple[CodecState, _SessionEvent], CodecState]] = {
    (CodecState.NEW, _SessionEvent.START): CodecState.INITIALIZING,
    (CodecState.INITIALIZING, _SessionEvent.INITIALIZED): CodecState.CONFIRMING_MODE,
    (CodecState.CONFIRMING_MODE, _SessionEvent.MODE_CONFIRMED): CodecState.READY,
}


class _Turn(StrEnum):
    IDLE = "idle"
    STARTING = "starting"  # the user message is written; nothing of the turn seen yet
    RUNNING = "running"


# what a set_permission_mode of /mode is tracked as (the start's own is "set_permission_mode")
_MODE_CHANGE = "set_permission_mode:change"


def native_key_for(request_id: str) -> str:
    """The opaque key of a ``can_use_tool`` control request: ``cc:<request_id>``."""
    return f"cc:{request_id}"


class ClaudeCodeCodec:
    """One ``claude -p`` stream-json process, one session. Not thread-safe; no IO."""

    def __init__(
        self,
        launch: ClaudeLaunch,
        *,
        cwd: str | None = None,
        read_file: Callable[[Path], bytes] = Path.read_bytes,
    ) -> None:
        self.launch = launch
        # how a picture's bytes are read (Prompt.images: saved in the inbox, at most
        # PICTURE_MAX_BYTES each): the one read this codec does, injected
        self._read_file = read_file
        self.session_id = launch.session_id
        self.cwd = cwd
        self.agent_version: str | None = None
        self.model: str | None = None
        self.policy: dict[str, str] = {}
        self.unknown_messages: Counter[str] = Counter()
        self._session = SessionState(
            SESSION_TRANSITIONS,
            new=CodecState.NEW,
            ready=CodecState.READY,
            error=CodecState.ERROR,
            start=_SessionEvent.START,
        )
        self._outbox: list[bytes] = []
        self._ids = itertools.count(1)
        self._our_requests: dict[str, str] = {}  # request id -> subtype, until answered
        self._model_asked: str | None = None  # the last model set_model asked for
        self._mode_asked: str | None = None  # a mode change not answered yet
        self._models_offered: tuple[str, ...] = ()  # from the initialize answer
        self._mapper = MessageMapper(cwd=cwd)
        self._turn = _Turn.IDLE
        self._stop_asked = False  # an interrupt or a "deny and stop" was sent this turn
        self._interrupting = False  # our interrupt request is unanswered
        self._compacting = False  # the turn is a /compact
        self._compact_error: str | None = None  # what its compact_result "failed" said
        self._open = OpenRequests()  # the can_use_tool requests shown as interactions

    # --- public surface -------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return CLAUDE_CAPABILITIES

    @property
    def state(self) -> CodecState:
        return self._session.state

    @property
    def turn_running(self) -> bool:
        return self._turn is not _Turn.IDLE

    @property
    def open_interactions(self) -> tuple[str, ...]:
        """Native keys of the can_use_tool requests still open (answered or not)."""
        return self._open.keys()

    def start(self) -> list[AgentEvent]:
        """Queue ``initialize`` (no hooks: every permission goes through can_use_tool)."""
        self._session.move(_SessionEvent.START)
        self._control_request({"subtype": "initialize", "hooks": None})
        return []

    def data_to_send(self) -> list[bytes]:
        lines, self._outbox = self._outbox, []
        return lines

    def send(self, command: AgentCommand) -> None:
        self._session.check_send(command)
        match command:
            case Prompt():
                self._prompt(command)
            case Respond():
                self._respond(command)
            case Interrupt():
                self._interrupt()
            case Compact():
                self._prompt(Prompt(text="/compact"))
                self._compacting = True

    def feed(self, line: bytes) -> list[AgentEvent]:
        """Events for one line from the CLI. Raises only when the session cannot go on."""
        self._session.check_feed()
        try:
            msg = as_object(json.loads(line), where="a stream-json line")
            kind = require_text(msg, "type", where="a stream-json message")
        except (ValueError, MalformedMessage) as exc:
            reason = exc.reason if isinstance(exc, MalformedMessage) else "not JSON"
            return [self._malformed(reason, excerpt(line.decode("utf-8", "replace")))]
        events: list[AgentEvent] = [*self._open.close_answered_unlinked()]
        if self._turn is _Turn.STARTING and kind not in ("control_response", "keep_alive"):
            self._turn = _Turn.RUNNING
            events.append(TurnStarted())
        try:
            events += self._dispatch(kind, msg)
        except MalformedMessage as exc:
            if self._session.failure is not None:
                raise
            events.append(self._malformed(exc.reason, exc.excerpt))
        return events

    # --- helpers --------------------------------------------------------------------------

    @staticmethod
    def _malformed(reason: str, snippet: str) -> Warning:
        return Warning(
            message=f"malformed message from claude: {reason}: {snippet}",
            code="malformed_message",
        )

    def _write(self, msg: JsonObject) -> None:
        self._outbox.append(json.dumps(msg, ensure_ascii=False).encode())

    def _control_request(self, request: JsonObject, *, tracked: str | None = None) -> None:
        """Send one of our requests; its answer is matched by ``tracked`` (default: its
        subtype), which tells a mode change apart from the start's mode confirmation."""
        request_id = f"gw-{next(self._ids)}"
        self._our_requests[request_id] = tracked or str(request["subtype"])
        self._write({"type": "control_request", "request_id": request_id, "request": request})

    def _control_response(self, request_id: str, response: JsonObject) -> None:
        body: JsonObject = {"subtype": "success", "request_id": request_id, "response": response}
        self._write({"type": "control_response", "response": body})

    def _control_error(self, request_id: str, error: str) -> None:
        body: JsonObject = {"subtype": "error", "request_id": request_id, "error": error}
        self._write({"type": "control_response", "response": body})

    # --- commands -------------------------------------------------------------------------

    def _content(self, prompt: Prompt) -> JsonValue:
        """The user message's content: the text alone, or with pictures the Messages API's
        content blocks, the text first, then each picture as an ``image`` block, base64."""
        if not prompt.images:
            return prompt.text
        blocks: list[JsonValue] = [{"type": "text", "text": prompt.text}]
        for image in prompt.images:
            try:
                data = self._read_file(image.path)
            except OSError as exc:  # gone since it was saved: said to the agent, not raised
                blocks.append({"type": "text", "text": f"(picture {image.name!r}: {exc})"})
                continue
            source: JsonObject = {
                "type": "base64",
                "media_type": image.media_type,
                "data": base64.b64encode(data).decode("ascii"),
            }
            blocks.append({"type": "image", "source": source})
        return blocks

    def _prompt(self, prompt: Prompt) -> None:
        if self._turn is not _Turn.IDLE:
            raise CodecUsageError("a turn is running: wait for TurnCompleted before prompting")
        if prompt.model is not None and prompt.model != self._model_asked:
            # the CLI reads its stdin in order: the model is set before the message is read
            # (set_model changes the model of the next request, FACTS-session-features.md)
            self._control_request({"subtype": "set_model", "model": prompt.model})
            self._model_asked = prompt.model
        mode = prompt.permission_mode
        if (
            mode is not None
            and mode != self.policy.get("permission_mode")
            and (mode != self._mode_asked)
        ):
            # issue 31's /mode: asked before the message is read; the answer (and the next
            # system/init) is the mode in force
            self._control_request(
                {"subtype": "set_permission_mode", "mode": mode}, tracked=_MODE_CHANGE
            )
            self._mode_asked = mode
        self._write(
            {
                "type": "user",
                "message": {"role": "user", "content": self._content(prompt)},
                "parent_tool_use_id": None,
                "session_id": self.session_id,
            }
        )
        self._turn = _Turn.STARTING
        self._stop_asked = False

    def _respond(self, respond: Respond) -> None:
        opened = self._open.get(respond.native_key)
        if opened is None:
            raise RequestClosed(f"no open request {respond.native_key!r} (closed or unknown)")
        if opened.answered:
            raise AlreadyAnswered(f"request {respond.native_key!r} was already answered")
        encoded = opened.reply.encode(respond.decision)
        self._control_response(opened.request_id, encoded.response)
        self._open.answered(respond.native_key)
        self._stop_asked = self._stop_asked or encoded.stops_turn

    def _interrupt(self) -> None:
        if self._turn is _Turn.IDLE or self._interrupting:
            return
        self._control_request({"subtype": "interrupt"})
        self._interrupting = self._stop_asked = True

    # --- dispatch -------------------------------------------------------------------------

    def _dispatch(self, kind: str, msg: JsonObject) -> list[AgentEvent]:
        match kind:
            case "control_response":
                return self._on_control_response(msg)
            case "control_request":
                return self._on_control_request(msg)
            case "control_cancel_request":
                return self._on_cancel(msg)
            case "system":
                return self._on_system(msg)
            case "stream_event":
                return self._mapper.on_stream_event(msg)
            case "assistant":
                return self._mapper.on_assistant(msg)
            case "user":
                return self._on_user(msg)
            case "result":
                return self._on_result(msg)
        if kind not in _IGNORED_TYPES:
            self.unknown_messages[kind] += 1
        return []

    # --- answers to our control requests --------------------------------------------------

    def _on_control_response(self, msg: JsonObject) -> list[AgentEvent]:
        # SDKControlResponse: {"response": {"subtype": "success"|"error", "request_id",
        # "response"?: {...}, "error"?: str}}
        body = get_object(msg, "response") or {}
        request_id = get_text(body, "request_id") or ""
        subtype = self._our_requests.pop(request_id, None)
        refused = get_text(body, "subtype") == "error"
        error = get_text(body, "error") or "refused"
        if subtype in ("initialize", "set_permission_mode") and refused:
            self._session.fail(RemoteError(0, f"claude refused {subtype}: {error}"))
        match subtype:
            case "initialize":
                self._models_offered = models_offered(get_object(body, "response") or {})
                self._session.move(_SessionEvent.INITIALIZED)
                self._control_request(
                    {"subtype": "set_permission_mode", "mode": self.launch.permission_mode}
                )
            case "set_permission_mode":
                return self._on_mode_confirmed(get_object(body, "response") or {})
            case "set_permission_mode:change":  # _MODE_CHANGE
                self._mode_asked = None
                if refused:
                    text = f"claude refused the permission mode: {error}"
                    return [Warning(message=text, code="policy_mismatch")]
                mode = get_text(get_object(body, "response") or {}, "mode")
                return self._mode_reported(mode) if mode else []
            case "set_model" if refused:
                self._model_asked = None  # asked again with the next prompt
                text = f"claude refused the model: {error}"
                return [Warning(message=text, code="model_refused")]
            case "interrupt":
                self._interrupting = False
                if refused:
                    text = f"claude refused to interrupt: {error}"
                    return [Warning(message=text, code="interrupt_failed")]
            case None:
                text = f"claude answered a request this gateway never sent ({request_id!r})"
                return [Warning(message=text, code="unknown_response")]
        return []

    def _on_mode_confirmed(self, response: JsonObject) -> list[AgentEvent]:
        self._session.move(_SessionEvent.MODE_CONFIRMED)
        asked = self.launch.permission_mode
        mode = get_text(response, "mode")
        events: list[AgentEvent] = []
        if mode is None:
            text = "claude did not confirm its permission mode"
            events.append(Warning(message=text, code="policy_mismatch"))
        elif mode != asked:
            text = f"claude runs with permission mode {mode!r}, not {asked!r}"
            events.append(Warning(message=text, code="policy_mismatch"))
        self.policy = {"permission_mode": mode or asked}
        started = SessionStarted(
            native_id=self.session_id, policy=dict(self.policy), resumed=self.launch.resume
        )
        offered = [ModelsOffered(models=self._models_offered)] if self._models_offered else []
        return [started, *offered, *events]

    # --- requests of the CLI --------------------------------------------------------------

    def _on_control_request(self, msg: JsonObject) -> list[AgentEvent]:
        request_id = require_text(msg, "request_id", where="control_request")
        request = get_object(msg, "request") or {}
        subtype = get_text(request, "subtype") or "?"
        key = native_key_for(request_id)
        if subtype != "can_use_tool":
            self._control_error(request_id, f"agent-gateway does not support {subtype}")
            text = _UNSUPPORTED_REQUEST_WARNING.format(subtype=subtype)
            return [Warning(message=text, code="unsupported_request")]
        if self._open.get(key) is not None:
            return []  # the same request again: never a second interaction
        try:
            opened = open_can_use_tool(
                key, request, cwd=self.cwd, allow_dangerous=self.launch.allow_dangerous
            )
        except MalformedMessage as exc:
            self._control_error(request_id, f"unreadable permission request: {exc.reason}")
            text = f"claude sent an unreadable can_use_tool; it was refused: {exc.reason}"
            return [Warning(message=text, code="malformed_message")]
        tool_use_id = get_text(request, "tool_use_id")
        self._open.add(
            key, OpenRequest(request_id=request_id, reply=opened.reply, tool_use_id=tool_use_id)
        )
        events: list[AgentEvent] = [InteractionOpened(request=opened.request)]
        events += [Warning(message=text, code="unknown_suggestion") for text in opened.warnings]
        return events

    def _on_cancel(self, msg: JsonObject) -> list[AgentEvent]:
        # {"type": "control_cancel_request", "request_id"}: the CLI gave up on the request
        # (interrupt_pending.jsonl); the tool result that follows is not an answer.
        request_id = require_text(msg, "request_id", where="control_cancel_request")
        closed = self._open.close(native_key_for(request_id), Resolution.CANCELLED_BY_AGENT)
        return [closed] if closed else []

    # --- the message stream -----------------------------------------------------------------

    def _on_system(self, msg: JsonObject) -> list[AgentEvent]:
        subtype = get_text(msg, "subtype") or "?"
        match subtype:
            case "init":
                return self._on_init(msg)
            case "status":
                if self._compacting and get_text(msg, "compact_result") == "failed":
                    error = get_text(msg, "compact_error") or "the compaction failed"
                    self._compact_error = error
                mode = get_text(msg, "permissionMode")
                return self._mode_reported(mode) if mode else []
            case "api_retry":
                return [api_retry_warning(msg)]
        if subtype not in IGNORED_SYSTEM_SUBTYPES:
            self.unknown_messages[f"system/{subtype}"] += 1
        return []

    def _on_init(self, msg: JsonObject) -> list[AgentEvent]:
        # system/init, sent at the start of every turn: {session_id, cwd, model,
        # permissionMode, claude_code_version, tools, ...}
        self.agent_version = get_text(msg, "claude_code_version") or self.agent_version
        self.model = get_text(msg, "model") or self.model
        events: list[AgentEvent] = []
        session_id = get_text(msg, "session_id")
        if session_id and session_id != self.session_id:
            text = f"claude runs session {session_id}, not {self.session_id}"
            events.append(Warning(message=text, code="session_mismatch"))
        mode = get_text(msg, "permissionMode")
        return events + (self._mode_reported(mode) if mode else [])

    def _mode_reported(self, mode: str) -> list[AgentEvent]:
        before = self.policy.get("permission_mode")
        self.policy["permission_mode"] = mode
        if before is None or before == mode:
            return []
        text = f"Claude now runs in permission mode {mode} (was {before})."
        return [PolicyChanged(policy=dict(self.policy), message=text)]

    def _on_user(self, msg: JsonObject) -> list[AgentEvent]:
        events, results = self._mapper.on_user(msg)
        closed = [self._open.close_tool_use(result.tool_use_id) for result in results]
        return [*(c for c in closed if c is not None), *events]

    def _on_result(self, msg: JsonObject) -> list[AgentEvent]:
        result = self._mapper.on_result(msg)
        events: list[AgentEvent] = [*self._open.close_all()]
        if not result.is_error:
            status, error = TurnStatus.COMPLETED, None
        elif self._stop_asked:
            status, error = TurnStatus.INTERRUPTED, None
        else:
            status, error = TurnStatus.FAILED, result.error
        if self._compact_error is not None and status is TurnStatus.COMPLETED:
            status, error = TurnStatus.FAILED, self._compact_error
        self._compacting, self._compact_error = False, None
        self._turn = _Turn.IDLE
        self._stop_asked = self._interrupting = False
        self._mapper.reset_turn()
        return [*events, result.usage, TurnCompleted(status=status, error=error)]


# a model's dated snapshot ("claude-haiku-4-5-20251001") and its context tag ("[1m]")
_SNAPSHOT_DATE = re.compile(r"-[0-9]{8}$")
_CONTEXT_TAG = re.compile(r"\[[^\]]*\]$")


def models_offered(answer: JsonObject) -> tuple[str, ...]:
    """The models Claude Code's ``initialize`` answer lists (``models: [{value,
    resolvedModel, ...}]``, seen on 2.1.197), each by every name ``set_model`` takes: its
    alias (``haiku``), the model it resolves to (``claude-haiku-4-5-20251001``) and that
    model without its snapshot date or context tag (``claude-haiku-4-5``)."""
    names: list[str] = []
    for entry in get_array(answer, "models") or ():
        if not isinstance(entry, dict):
            continue
        for key in ("value", "resolvedModel"):
            name = get_text(entry, key)
            if not name:
                continue
            bare = _CONTEXT_TAG.sub("", name)
            for each in (name, bare, _SNAPSHOT_DATE.sub("", bare)):
                if each not in names:
                    names.append(each)
    return tuple(names)
