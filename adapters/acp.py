"""Sans-IO codec for an Agent Client Protocol (ACP v1) agent over stdio JSON-RPC.

Evidence: ``../shared/labs/oc-acp-lab/codex-acp-run.log`` (codex-acp 0.16.0). The runtime
(:mod:`adapters.runtime`) moves the bytes; this codec does no IO.

Session start::

    NEW --start()--> INITIALIZING: `initialize {protocolVersion: 1}`, fs and terminal off
    INITIALIZING --result--> OPENING: `session/load {sessionId, cwd, mcpServers: []}` when a
        session is resumed and the agent says `loadSession`, else `session/new {cwd, ...}`
    OPENING --result--> READY: SessionStarted(native_id=sessionId); the history session/load
        replays before its result is not shown again

Commands (READY only): ``Prompt`` -> ``session/prompt``, whose ``stopReason`` ends the turn;
``Respond`` -> ``{outcome: {outcome: "selected", optionId}}`` with the option the person
chose (its id exactly as the agent sent it); ``Interrupt`` -> ``session/cancel`` and every
open permission answered ``{outcome: "cancelled"}``, as the protocol requires, then closed
as withdrawn. ACP has no "request resolved" message: an answered permission is closed with
the next line from the agent.

``session/request_permission`` -> an approval whose actions are the agent's ``options`` in
order (effect from ``allow_*`` / ``reject_*``, scope from ``*_once`` / ``*_always``), each
labelled with the name the agent gave it; the card's summary is the agent's own words (the
tool's title where the card does not show it already, ``rawInput.reason``, the text content
without the sections codex-acp adds to restate the options and the rule). Every
other agent request (``fs/*``, ``terminal/*``, ``elicitation/create``, unknown) is answered
-32601 and reported as a Warning: never approved.
"""

from __future__ import annotations

import base64
import shlex
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Final

from adapters.json_fields import (
    as_object,
    get_array,
    get_bool,
    get_int,
    get_object,
    get_text,
    require_text,
)
from adapters.jsonrpc import (
    BadMessage,
    ErrorResponse,
    InvalidParams,
    JsonObject,
    JsonRpcPeer,
    JsonValue,
    MethodNotFound,
    Notification,
    Request,
    RequestId,
    Response,
    excerpt,
    native_key_for,
)
from adapters.session_state import SessionState
from gateway.domain import (
    Action,
    Command,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Resolution,
    Scope,
    Text,
    TurnStatus,
)
from gateway.errors import AlreadyAnswered, CodecUsageError, MalformedMessage, RequestClosed
from gateway.events import (
    AgentCommand,
    AgentEvent,
    Capabilities,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    ModelsOffered,
    ModesOffered,
    PolicyChanged,
    Prompt,
    Respond,
    SessionStarted,
    TextDelta,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    Usage,
    Warning,
)

__all__ = [
    "ACP_CAPABILITIES",
    "ENDED_AT_REFUSAL",
    "PROTOCOL_VERSION",
    "AcpCodec",
    "AcpState",
    "native_key_for",
    "option_action",
    "stop_reason_outcome",
]

PROTOCOL_VERSION: Final = 1

ACP_CAPABILITIES: Final = Capabilities(
    structured_events=True,
    bidirectional_control=True,
    interactive_questions=False,
    human_approval=True,
    session_resume=True,
    interrupt=True,
    sandbox=False,
)

_UNSUPPORTED_REQUEST_WARNING = (
    "The agent asked for {method}, which agent-gateway does not support; it was refused."
)

# ACP ToolKind -> what the gateway shows
_TOOL_KINDS: Final[Mapping[str, ToolKind]] = {
    "execute": ToolKind.COMMAND,
    "edit": ToolKind.FILE_CHANGE,
    "delete": ToolKind.FILE_CHANGE,
    "move": ToolKind.FILE_CHANGE,
}

# stopReason -> (status, what the person reads); "end_turn" is the plain end
_STOP_REASONS: Final[Mapping[str, tuple[TurnStatus, str | None]]] = {
    "end_turn": (TurnStatus.COMPLETED, None),
    "cancelled": (TurnStatus.INTERRUPTED, None),
    "max_tokens": (TurnStatus.FAILED, "the agent reached its token limit"),
    "max_turn_requests": (TurnStatus.FAILED, "the agent reached its limit of model requests"),
    "refusal": (TurnStatus.FAILED, "the agent refused to go on"),
}

# session/update kinds the codec knows and does not show
_QUIET_UPDATES: Final = frozenset(
    {"agent_thought_chunk", "user_message_chunk", "available_commands_update"}
)


class AcpState(StrEnum):
    NEW = "new"
    INITIALIZING = "initializing"
    OPENING = "opening"
    READY = "ready"
    ERROR = "error"


class _Move(StrEnum):
    START = "start"
    INITIALIZED = "initialized"
    OPENED = "opened"


_TRANSITIONS: Final[Mapping[tuple[AcpState, _Move], AcpState]] = {
    (AcpState.NEW, _Move.START): AcpState.INITIALIZING,
    (AcpState.INITIALIZING, _Move.INITIALIZED): AcpState.OPENING,
    (AcpState.OPENING, _Move.OPENED): AcpState.READY,
}


# What a refusal does is the agent's to say (codex-acp's "abort" ends the turn, another
# agent's reject goes on): the gateway's own words never guess.
_REJECT_WORDS: Final[Mapping[str, str]] = {
    "reject_once": "Refuses it; what the agent does next is its own choice.",
    "reject_always": "Refuses it, and the agent refuses calls like it from now on.",
}


def option_action(option: JsonObject) -> Action:
    """One ``PermissionOption {optionId, name, kind}`` as a button: its own id and label,
    effect and scope from its kind."""
    option_id = require_text(option, "optionId", where="permission option")
    kind = get_text(option, "kind") or ""
    effect_word, _, scope_word = kind.partition("_")
    effects = {"allow": Effect.ALLOW, "reject": Effect.DENY}
    scopes = {"once": Scope.ONCE, "always": Scope.ALWAYS}
    if effect_word not in effects or scope_word not in scopes:
        raise MalformedMessage(f"permission option of unknown kind {kind!r}", repr(option)[:200])
    return Action(
        id=option_id,
        label=get_text(option, "name") or option_id,
        effect=effects[effect_word],
        scope=scopes[scope_word],
        description=_REJECT_WORDS.get(kind, ""),
    )


def stop_reason_outcome(stop_reason: str) -> TurnCompleted:
    status, text = _STOP_REASONS.get(
        stop_reason, (TurnStatus.FAILED, f"the agent stopped ({stop_reason})")
    )
    return TurnCompleted(status=status, error=text)


@dataclass(slots=True)
class _Permission:
    request_id: RequestId
    option_ids: tuple[str, ...]
    refusals: frozenset[str] = frozenset()  # the options that refuse (reject_*)
    call_id: str | None = None  # the tool call it asks about
    answered: bool = False


# why a turn ended, where the agent ended it ("cancelled") right after a person's refusal,
# with no /stop: codex-acp's "abort" does (seen on 0.16.0: no tool update, then the prompt's
# result ``{stopReason: "cancelled"}``); the core says "The turn ended: ..."
ENDED_AT_REFUSAL: Final = "the request was refused, and the agent ended its turn there"


class AcpCodec:
    """One ACP agent connection, one session. Not thread-safe; no IO."""

    def __init__(
        self,
        *,
        cwd: str,
        resume_session_id: str | None = None,
        client_name: str = "agent-gateway",
        client_version: str = "0.1.0",
        read_file: Callable[[Path], bytes] = Path.read_bytes,
        mcp_servers: list[JsonValue] | None = None,
    ) -> None:
        self._cwd = cwd
        # a picture's bytes, for an image block (the codec's one read, injected)
        self._read_file = read_file
        self._takes_images = False  # the agent's promptCapabilities.image (initialize)
        # the gateway's MCP server (send_file), on session/new and session/load alike
        self._mcp_servers: list[JsonValue] = list(mcp_servers or [])
        self._resume = resume_session_id
        self._client = {"name": client_name, "version": client_version}
        self._rpc = JsonRpcPeer()
        self._session = SessionState(
            _TRANSITIONS,
            new=AcpState.NEW,
            ready=AcpState.READY,
            error=AcpState.ERROR,
            start=_Move.START,
        )
        self.session_id: str | None = None
        self.agent_version: str | None = None
        self.load_session = False
        self.unknown_updates: Counter[str] = Counter()
        self._turn_running = False
        self._turn_count = 0
        self._refused = False  # the running turn's last answer refused, and no /stop since
        self._permissions: dict[str, _Permission] = {}
        self._closing: list[AgentEvent] = []  # answered permissions, closed on the next line
        # tool_call_update repeats only what changed: the title and kind of each call so far
        self._tools: dict[str, tuple[str, ToolKind]] = {}
        # tool calls a person refused: their "failed" end is shown as denied
        self._refused_calls: set[str] = set()
        # issue 31's /model: the session config option of the model category (its id, the
        # values it offers, the one in force), from session/new or session/load, and a
        # prompt held until the agent answered session/set_config_option
        self._model_option: str | None = None
        self._models_offered: tuple[str, ...] = ()
        self._model_in_force: str | None = None
        # and its /mode: the session's modes (session/new's modes, or a config option of the
        # mode category), set by session/set_mode (or that option) before the prompt
        self._mode_option: str | None = None
        self._modes_offered: tuple[str, ...] = ()
        self._mode_in_force: str | None = None
        self._held_prompt: JsonObject | None = None
        # the settings still to make before the held prompt: (method, params, what, value)
        self._before_prompt: list[tuple[str, JsonObject, str, str]] = []
        self._held_stopped = False  # /stop came while the prompt was held

    # --- public surface -------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        # every ACP agent takes a resource_link; an image only where its initialize answer
        # says promptCapabilities.image (ACP: ContentBlock, "Prompt capabilities")
        return replace(ACP_CAPABILITIES, pictures=self._takes_images, file_links=True)

    @property
    def state(self) -> AcpState:
        return self._session.state

    @property
    def open_interactions(self) -> tuple[str, ...]:
        return tuple(self._permissions)

    @staticmethod
    def initialize_params(
        client_name: str = "agent-gateway", client_version: str = "0.1.0"
    ) -> JsonObject:
        """``initialize``: protocol 1, no fs, no terminal, no elicitation."""
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
            },
            "clientInfo": {"name": client_name, "version": client_version},
        }

    def start(self) -> None:
        self._session.move(_Move.START)
        params = self.initialize_params(self._client["name"], self._client["version"])
        self._rpc.send_request("initialize", params)

    def data_to_send(self) -> list[bytes]:
        return self._rpc.data_to_send()

    def send(self, command: AgentCommand) -> None:
        self._session.check_send(command)
        match command:
            case Prompt():
                self._prompt(command)
            case Respond():
                self._respond(command)
            case Interrupt():
                self._interrupt()

    def feed(self, line: bytes) -> list[AgentEvent]:
        self._session.check_feed()
        incoming = self._rpc.receive_line(line)
        events, self._closing = self._closing, []
        try:
            match incoming:
                case Notification():
                    events += self._on_notification(incoming)
                case Request():
                    events += self._on_request(incoming)
                case Response():
                    events += self._on_response(incoming)
                case ErrorResponse():
                    events += self._on_error(incoming)
                case BadMessage():
                    events.append(self._malformed(incoming.reason, incoming.excerpt))
        except MalformedMessage as exc:
            if self._session.failure is not None:
                raise
            events.append(self._malformed(exc.reason, excerpt(line)))
        return events

    @staticmethod
    def _malformed(reason: str, snippet: str) -> Warning:
        return Warning(
            message=f"malformed message from the ACP agent: {reason}: {snippet}",
            code="malformed_message",
        )

    # --- commands -------------------------------------------------------------------------

    def _blocks(self, prompt: Prompt) -> list[JsonValue]:
        """The prompt's content blocks (ACP ContentBlock): the text, each picture as an
        ``image`` (base64; only to an agent that takes images: the runner's choice by
        :attr:`capabilities`), each other file as a ``resource_link`` to its saved path."""
        blocks: list[JsonValue] = [{"type": "text", "text": prompt.text}]
        for image in prompt.images:
            try:
                data = self._read_file(image.path)
            except OSError as exc:  # gone since it was saved: said to the agent, not raised
                blocks.append({"type": "text", "text": f"(picture {image.name!r}: {exc})"})
                continue
            blocks.append(
                {
                    "type": "image",
                    "mimeType": image.media_type,
                    "data": base64.b64encode(data).decode("ascii"),
                    "uri": image.path.as_uri(),
                }
            )
        for file in prompt.files:
            blocks.append(
                {
                    "type": "resource_link",
                    "uri": file.path.as_uri(),
                    "name": file.name,
                    "mimeType": file.media_type,
                    "size": file.size,
                }
            )
        return blocks

    def _prompt(self, prompt: Prompt) -> None:
        if self._turn_running:
            raise CodecUsageError("a turn is running: wait for TurnCompleted before prompting")
        params: JsonObject = {
            "sessionId": self.session_id,
            "prompt": self._blocks(prompt),
        }
        # set first, prompt once the agent answered: a prompt sent alongside could start
        # under the old model or mode (ACP: session/set_config_option {sessionId, configId,
        # value}; session/set_mode {sessionId, modeId})
        steps: list[tuple[str, JsonObject, str, str]] = []
        model = prompt.model
        if model is not None and model != self._model_in_force and self._model_option:
            change: JsonObject = {
                "sessionId": self.session_id,
                "configId": self._model_option,
                "value": model,
            }
            steps.append(("session/set_config_option", change, "model", model))
        mode = prompt.permission_mode
        if mode is not None and mode != self._mode_in_force and self._modes_offered:
            if self._mode_option:
                change = {"sessionId": self.session_id, "configId": self._mode_option}
                steps.append(("session/set_config_option", {**change, "value": mode}, "mode", mode))
            else:
                change = {"sessionId": self.session_id, "modeId": mode}
                steps.append(("session/set_mode", change, "mode", mode))
        if steps:
            self._held_prompt, self._before_prompt = params, steps
            self._next_setting()
        else:
            self._rpc.send_request("session/prompt", params)
        self._turn_running = True
        self._refused = False
        self._turn_count += 1

    def _respond(self, respond: Respond) -> None:
        permission = self._permissions.get(respond.native_key)
        if permission is None:
            raise RequestClosed(f"no open request {respond.native_key!r} (closed or unknown)")
        if permission.answered:
            raise AlreadyAnswered(f"request {respond.native_key!r} was already answered")
        chosen = respond.decision.action_id
        if chosen not in permission.option_ids:
            offered = ", ".join(permission.option_ids)
            raise CodecUsageError(f"action {chosen!r} was not offered (offered: {offered})")
        outcome: JsonObject = {"outcome": "selected", "optionId": chosen}
        self._rpc.send_result(permission.request_id, {"outcome": outcome})
        permission.answered = True
        self._refused = chosen in permission.refusals
        if self._refused and permission.call_id is not None:
            self._refused_calls.add(permission.call_id)
        del self._permissions[respond.native_key]
        self._closing.append(
            InteractionClosed(native_key=respond.native_key, how=Resolution.ANSWERED)
        )

    def _interrupt(self) -> None:
        if not self._turn_running:
            return
        self._refused = False  # the person stopped it: not the agent's own end
        if self._held_prompt is not None:
            # stopped before its prompt was sent: it is never sent, and the turn ends when
            # the model's answer comes (_send_held_prompt)
            self._held_stopped = True
            return
        self._rpc.send_notification("session/cancel", {"sessionId": self.session_id})
        self._cancel_open_permissions()

    def _cancel_open_permissions(self) -> None:
        for key, permission in list(self._permissions.items()):
            if not permission.answered:
                self._rpc.send_result(permission.request_id, {"outcome": {"outcome": "cancelled"}})
            self._closing.append(
                InteractionClosed(native_key=key, how=Resolution.CANCELLED_BY_AGENT)
            )
        self._permissions.clear()

    # --- responses ------------------------------------------------------------------------

    def _on_response(self, response: Response) -> list[AgentEvent]:
        match response.method:
            case "initialize":
                return self._on_initialized(response)
            case "session/new" | "session/load":
                return self._on_opened(response)
            case "session/set_config_option" | "session/set_mode":
                return self._setting_taken(response.tag or "")
            case "session/prompt":
                result = as_object(response.result, where="session/prompt result")
                stop_reason = get_text(result, "stopReason") or "end_turn"
                outcome = stop_reason_outcome(stop_reason)
                if stop_reason == "cancelled" and self._refused:
                    outcome = TurnCompleted(status=outcome.status, error=ENDED_AT_REFUSAL)
                return self._turn_ended(outcome)
        return []

    def _on_initialized(self, response: Response) -> list[AgentEvent]:
        try:
            result = as_object(response.result, where="initialize result")
        except MalformedMessage as exc:
            self._session.fail(exc)
        capabilities = get_object(result, "agentCapabilities") or {}
        self.load_session = get_bool(capabilities, "loadSession")
        self._takes_images = get_bool(get_object(capabilities, "promptCapabilities") or {}, "image")
        info = get_object(result, "agentInfo") or {}
        label = " ".join(filter(None, (get_text(info, "name"), get_text(info, "version"))))
        self.agent_version = label or None
        self._session.move(_Move.INITIALIZED)
        events: list[AgentEvent] = []
        if self._resume is not None and self.load_session:
            params: JsonObject = {
                "sessionId": self._resume,
                "cwd": self._cwd,
                "mcpServers": list(self._mcp_servers),
            }
            self._rpc.send_request("session/load", params)
        else:
            if self._resume is not None:
                text = "The agent cannot load an earlier session; a new session was started."
                events.append(Warning(message=text, code="resume_unsupported"))
            self._rpc.send_request(
                "session/new", {"cwd": self._cwd, "mcpServers": list(self._mcp_servers)}
            )
        return events

    def _on_opened(self, response: Response) -> list[AgentEvent]:
        loaded = response.method == "session/load"
        try:
            if loaded:
                assert self._resume is not None
                session_id = self._resume
            else:
                result = as_object(response.result, where="session/new result")
                session_id = require_text(result, "sessionId", where="session/new result")
        except MalformedMessage as exc:
            self._session.fail(exc)
        self._session.move(_Move.OPENED)
        self.session_id = session_id
        self._read_model_option(response.result)
        self._read_modes(response.result)
        policy = {"mode": self._mode_in_force} if self._mode_in_force else {}
        events: list[AgentEvent] = [
            SessionStarted(
                native_id=session_id,
                agent_version=self.agent_version,
                resumed=loaded,
                policy=policy,
            )
        ]
        if self._model_option:
            events.append(ModelsOffered(models=self._models_offered))
        if self._modes_offered:
            events.append(ModesOffered(modes=self._modes_offered, current=self._mode_in_force))
        return events

    def _read_modes(self, result: object) -> None:
        """The session's modes: a config option of the ``mode`` category (then set through
        it), else ``modes {currentModeId, availableModes[{id}]}`` (session/set_mode)."""
        if not isinstance(result, dict):
            return
        for option in get_array(result, "configOptions") or ():
            if isinstance(option, dict) and get_text(option, "category") == "mode":
                self._mode_option = get_text(option, "id")
                self._mode_in_force = get_text(option, "currentValue")
                values = get_array(option, "options") or ()
                self._modes_offered = tuple(
                    str(v.get("value")) for v in values if isinstance(v, dict)
                )
                return
        modes = get_object(result, "modes") or {}
        self._mode_in_force = get_text(modes, "currentModeId")
        available = get_array(modes, "availableModes") or ()
        self._modes_offered = tuple(
            str(m.get("id")) for m in available if isinstance(m, dict) and m.get("id")
        )

    def _read_model_option(self, result: object) -> None:
        """The session's config option of the ``model`` category, if it offers one
        (SessionConfigOption {id, category, type: select, currentValue, options[{value}]})."""
        options = get_array(result, "configOptions") if isinstance(result, dict) else None
        for option in options or ():
            if isinstance(option, dict) and get_text(option, "category") == "model":
                self._model_option = get_text(option, "id")
                self._model_in_force = get_text(option, "currentValue")
                values = get_array(option, "options") or ()
                self._models_offered = tuple(
                    str(v.get("value")) for v in values if isinstance(v, dict)
                )
                return

    def _next_setting(self) -> list[AgentEvent]:
        """The next setting to make before the held prompt, or the prompt once none is."""
        if not self._before_prompt or self._held_stopped:
            self._before_prompt = []
            return self._send_held_prompt()
        method, params, what, value = self._before_prompt.pop(0)
        self._rpc.send_request(method, params, tag=f"{what}:{value}")
        return []

    def _setting_taken(self, tag: str) -> list[AgentEvent]:
        what, _, value = tag.partition(":")
        events: list[AgentEvent] = []
        if what == "model":
            self._model_in_force = value
        elif what == "mode":
            events += self._mode_now(value, said=True)
        return [*events, *self._next_setting()]

    def _mode_now(self, mode: str, *, said: bool) -> list[AgentEvent]:
        """The agent runs in ``mode`` now (it took session/set_mode, or said so)."""
        changed = mode != self._mode_in_force
        self._mode_in_force = mode
        events: list[AgentEvent] = [ModesOffered(modes=self._modes_offered, current=mode)]
        if changed or said:
            events.append(
                PolicyChanged(
                    policy={"mode": mode}, message=f"⚙ The agent now runs in mode {mode}."
                )
            )
        return events

    def _send_held_prompt(self) -> list[AgentEvent]:
        held, self._held_prompt = self._held_prompt, None
        if self._held_stopped:  # stopped meanwhile: never sent, the turn ends here
            self._held_stopped = False
            return self._turn_ended(TurnCompleted(status=TurnStatus.INTERRUPTED))
        if held is not None:
            self._rpc.send_request("session/prompt", held)
        return []

    def _on_error(self, response: ErrorResponse) -> list[AgentEvent]:
        error = response.error
        if response.method in ("initialize", "session/new", "session/load"):
            self._session.fail(error.as_exception())
        if response.method == "session/prompt":
            text = f"the agent refused the prompt: {error.message}"
            return self._turn_ended(TurnCompleted(status=TurnStatus.FAILED, error=text))
        if response.method in ("session/set_config_option", "session/set_mode"):
            what = (response.tag or "model:").partition(":")[0]
            text = f"the agent refused the {what}: {error.message}; the turn runs with the last"
            # the message still goes, under the model and mode in force
            return [Warning(message=text, code=f"{what}_refused"), *self._next_setting()]
        message = f"the agent refused {response.method}: {error.message} ({error.code})"
        return [Warning(message=message, code="request_failed")]

    def _turn_ended(self, completed: TurnCompleted) -> list[AgentEvent]:
        self._turn_running = False
        # a permission cannot outlive its turn: one still open is withdrawn
        self._cancel_open_permissions()
        closing, self._closing = self._closing, []
        return [*closing, completed]

    # --- agent requests -------------------------------------------------------------------

    def _on_request(self, request: Request) -> list[AgentEvent]:
        if request.method != "session/request_permission":
            self._rpc.send_error(
                request.id, MethodNotFound(message=f"unsupported: {request.method}")
            )
            text = _UNSUPPORTED_REQUEST_WARNING.format(method=request.method)
            return [Warning(message=text, code="unsupported_request")]
        key = native_key_for(request.id)
        try:
            params = as_object(request.params, where="session/request_permission params")
            opened = _permission_request(key, params)
        except MalformedMessage as exc:
            self._rpc.send_error(request.id, InvalidParams(message=exc.reason))
            text = f"the agent sent an unreadable permission request; it was refused: {exc.reason}"
            return [Warning(message=text, code="malformed_message")]
        tool_call = get_object(params, "toolCall") or {}
        call_id = get_text(tool_call, "toolCallId")
        if call_id is not None:
            wire_kind = get_text(tool_call, "kind") or ""
            tool_title = get_text(tool_call, "title") or _command_text(tool_call) or ""
            self._tools[call_id] = (tool_title, _TOOL_KINDS.get(wire_kind, ToolKind.TOOL_CALL))
        self._permissions[key] = _Permission(
            request_id=request.id,
            option_ids=tuple(action.id for action in opened.actions),
            refusals=frozenset(a.id for a in opened.actions if a.effect is Effect.DENY),
            call_id=call_id,
        )
        return [InteractionOpened(request=opened)]

    # --- notifications --------------------------------------------------------------------

    def _on_notification(self, note: Notification) -> list[AgentEvent]:
        if note.method != "session/update":
            self.unknown_updates[note.method] += 1
            return []
        if self._session.state is not AcpState.READY:
            return []  # session/load replays the history before its result: shown already
        params = as_object(note.params if note.params is not None else {}, where=note.method)
        update = get_object(params, "update") or {}
        kind = get_text(update, "sessionUpdate") or ""
        match kind:
            case "agent_message_chunk":
                content = get_object(update, "content") or {}
                text = get_text(content, "text")
                if get_text(content, "type") != "text" or not text:
                    return []
                item_id = get_text(update, "messageId") or f"message-{self._turn_count}"
                return [TextDelta(item_id=item_id, text=text)]
            case "tool_call" | "tool_call_update":
                return [self._tool_activity(update, started=kind == "tool_call")]
            case "usage_update":
                return [_usage(update)]
            case "current_mode_update":
                mode = get_text(update, "currentModeId")
                return self._mode_now(mode, said=False) if mode else []
        if kind not in _QUIET_UPDATES:
            self.unknown_updates[kind] += 1
        return []

    def _tool_activity(self, update: JsonObject, *, started: bool) -> ToolActivity:
        call_id = get_text(update, "toolCallId") or ""
        known_title, known_kind = self._tools.get(call_id, ("", ToolKind.TOOL_CALL))
        wire_kind = get_text(update, "kind")
        kind = _TOOL_KINDS.get(wire_kind, ToolKind.TOOL_CALL) if wire_kind else known_kind
        title = get_text(update, "title") or _command_text(update) or known_title
        status = get_text(update, "status")
        if status in ("completed", "failed"):
            phase = ToolPhase.COMPLETED
            self._tools.pop(call_id, None)
            if status == "failed" and call_id in self._refused_calls:
                status = "denied"
            self._refused_calls.discard(call_id)
        else:
            phase = ToolPhase.STARTED if started else ToolPhase.OUTPUT
            self._tools[call_id] = (title, kind)
        return ToolActivity(
            item_id=call_id,
            tool=kind,
            phase=phase,
            title=title,
            status=status,
            paths=_paths(update),
        )


# --- mapping helpers -------------------------------------------------------------------------


def _permission_request(key: str, params: JsonObject) -> InteractionRequest:
    options = get_array(params, "options") or []
    actions = tuple(option_action(as_object(option, where="option")) for option in options)
    if not actions:
        raise MalformedMessage("a permission request without options", repr(params)[:200])
    ids = [action.id for action in actions]
    if len(set(ids)) != len(ids):
        raise MalformedMessage("permission options with the same id", repr(ids)[:200])
    tool_call = get_object(params, "toolCall") or {}
    actions = _with_rule(actions, tool_call)
    tool_title = get_text(tool_call, "title") or ""
    kind = _TOOL_KINDS.get(get_text(tool_call, "kind") or "", ToolKind.TOOL_CALL)
    reason = get_text(get_object(tool_call, "rawInput") or {}, "reason")
    detail: Command | FileChange | Text | None
    if kind is ToolKind.COMMAND:
        title = "Run a command"
        command = _command_text(tool_call) or tool_title
        detail = Command(command=command, cwd=_raw_cwd(tool_call), reason=reason)
        shown = [command]
    elif kind is ToolKind.FILE_CHANGE:
        title = "Apply file changes"
        detail = FileChange(paths=_paths(tool_call), diff=_diff(tool_call), reason=reason)
        shown = [*detail.paths]
    else:
        title = tool_title or "Use a tool"
        detail = None if tool_title else Text(text="The agent asks to use a tool.")
        shown = [title]
    return InteractionRequest(
        native_key=key,
        kind=InteractionKind.APPROVAL,
        title=title,
        summary=_agent_words(tool_title, reason, _content_text(tool_call), shown),
        detail=detail,
        actions=actions,
    )


# codex-acp restates what the request already carries in labelled sections of its text:
# the options (the buttons), the amendment (the "always" option's rule). Seen on codex-acp
# 0.16.0 ("Proposed Amendment: /bin/bash\n-c\n...\nAvailable Decisions: Approved\n..."); the
# labels are the binary's own strings.
_RESTATED_SECTIONS: Final = (
    "Proposed Amendment:",
    "Proposed Network Policy Amendments:",
    "Available Decisions:",
)
# its other labelled sections, which say something the card does not: kept
_OTHER_SECTIONS: Final = (
    "Additional Permissions:",
    "Network Approval Context:",
    "Network Access:",
)


def _content_text(tool_call: JsonObject) -> str:
    """The tool call's text content, without the sections that restate the request."""
    texts = []
    for content in get_array(tool_call, "content") or []:
        inner = content.get("content") if isinstance(content, dict) else None
        if isinstance(inner, dict) and inner.get("type") == "text":
            text = inner.get("text")
            if isinstance(text, str):
                texts.append(text)
    kept: list[str] = []
    restated = False
    for line in "\n".join(texts).splitlines():
        if line.startswith(_RESTATED_SECTIONS):
            restated = True
        elif line.startswith(_OTHER_SECTIONS):
            restated = False
        if not restated:
            kept.append(line)
    return "\n".join(kept).strip()


def _agent_words(title: str, reason: str | None, text: str, shown: list[str]) -> str:
    """What the agent says about the request, each thing once: the tool's title where it
    names nothing the card shows already (a command's title is the command, a file edit's
    "Edit /path" names the diff's file), its reason, and the rest of its text."""
    said: list[str] = []
    if any(thing and thing in title for thing in shown):
        title = ""
    for part in (title, reason or "", *text.splitlines()):
        part = part.strip()
        if part and part not in said and part not in shown:
            said.append(part)
    return "\n".join(said)


def _with_rule(actions: tuple[Action, ...], tool_call: JsonObject) -> tuple[Action, ...]:
    """The lasting rule an "always" option adds, where the agent says which: codex-acp puts
    the exec-policy amendment it proposes in ``rawInput.proposed_execpolicy_amendment`` (the
    words it writes to ``$CODEX_HOME/rules/default.rules`` when that option is chosen). ACP
    itself names no rule; an agent that gives none gets none."""
    raw = get_object(tool_call, "rawInput") or {}
    words = raw.get("proposed_execpolicy_amendment")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
        return actions
    rule = shlex.join(str(word) for word in words)
    return tuple(
        replace(action, rule=rule)
        if action.effect is Effect.ALLOW and action.scope is Scope.ALWAYS
        else action
        for action in actions
    )


def _command_text(tool_call: JsonObject) -> str | None:
    raw = get_object(tool_call, "rawInput") or {}
    command = raw.get("command")
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        parts = [part for part in command if isinstance(part, str)]
        # codex-acp: ["/bin/bash", "-lc", "<script>"]: the script is what the person reads
        if len(parts) == 3 and parts[1] in ("-c", "-lc"):
            return parts[2]
        return " ".join(parts)
    return command if isinstance(command, str) else None


def _raw_cwd(tool_call: JsonObject) -> str | None:
    return get_text(get_object(tool_call, "rawInput") or {}, "cwd")


def _paths(tool_call: JsonObject) -> tuple[str, ...]:
    paths: list[str] = []
    for location in get_array(tool_call, "locations") or []:
        if isinstance(location, dict) and isinstance(location.get("path"), str):
            paths.append(str(location["path"]))
    for content in get_array(tool_call, "content") or []:
        if isinstance(content, dict) and content.get("type") == "diff":
            path = content.get("path")
            if isinstance(path, str) and path not in paths:
                paths.append(path)
    return tuple(paths)


def _diff(tool_call: JsonObject) -> str:
    parts: list[str] = []
    for content in get_array(tool_call, "content") or []:
        if isinstance(content, dict) and content.get("type") == "diff":
            path = str(content.get("path") or "")
            old = content.get("oldText")
            new = content.get("newText")
            old_lines = old.splitlines() if isinstance(old, str) else []
            new_lines = new.splitlines() if isinstance(new, str) else []
            parts.append(f"--- {path}\n+++ {path}")
            parts += [f"-{line}" for line in old_lines] + [f"+{line}" for line in new_lines]
    return "\n".join(parts)


def _usage(update: JsonObject) -> Usage:
    cost = get_object(update, "cost") or {}
    amount = cost.get("amount")
    usd = (
        float(amount)
        if get_text(cost, "currency") == "USD" and isinstance(amount, int | float)
        else None
    )
    return Usage(input_tokens=get_int(update, "used") or 0, cost_usd=usd)
