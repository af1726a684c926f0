"""Sans-IO codec for ``codex app-server`` (JSON-RPC over stdio JSONL), Codex 0.171.

Schema and recorded behaviour: ``../shared/protocols/codex-0.171/SUMMARY.md`` and ``json/``;
transcripts in ``tests/transcripts/codex-0.171/``. The codec turns lines from the server into
:mod:`gateway.events` and :mod:`gateway.events` commands into lines; the runtime
(:mod:`adapters.runtime`) moves the bytes.

Usage::

    codec = CodexAppServerCodec(cwd="/work/project")
    codec.start()                       # queues `initialize`
    write(codec.data_to_send())         # lines without terminator
    for line in agent_stdout:
        events = codec.feed(line)       # -> list[AgentEvent]
        write(codec.data_to_send())     # `initialized` + thread/start, error replies, ...
    codec.send(Prompt(text="..."))      # turn/start; Respond(...), Interrupt() likewise

Session start (state table :data:`SESSION_TRANSITIONS`, walked by
:class:`~adapters.session_state.SessionState`)::

    NEW --start()--> INITIALIZING --initialize result--> OPENING_THREAD
        (sends `initialized`, then thread/start or thread/resume with approvalsReviewer "user")
    OPENING_THREAD --thread result--> READY: emits SessionStarted(native_id=thread id,
        agent_version from userAgent, policy = the approvalPolicy / approvalsReviewer /
        sandbox the RESULT says is in force)
    any --initialize or thread/* refused or malformed--> ERROR: feed() raises RemoteError or
        MalformedMessage once, then ProtocolError for every later line (h11 style).

Commands (only in READY; :class:`gateway.errors.CodecUsageError` otherwise):

- ``Prompt`` -> ``turn/start`` with one text input; refused while a turn runs (the core
  queues prompts).
- ``Respond`` -> the JSON-RPC result for the server request named by ``native_key``
  (:mod:`adapters.codex_requests` builds it). Unknown or already answered key, an action the
  request did not offer, a missing required answer: CodecUsageError, nothing written.
- ``Interrupt`` -> ``turn/interrupt`` with the current turn id; if turn/start is still
  unanswered the interrupt is sent as soon as the turn id is known; with no turn, nothing.
- ``Steer`` -> ``turn/steer`` with the running turn's id as ``expectedTurnId`` (schema:
  TurnSteerParams); its answer is ``SteerTaken``, its refusal (the turn ended meanwhile: a
  mismatch) ``SteerRefused``. Refused at once (CodecUsageError, nothing written) while no
  turn id is known yet, while a request of the turn waits for its answer, or the turn is a
  compaction, which cannot be steered (nor can a review turn; the gateway starts none).
- ``Compact`` -> ``thread/compact/start`` (schema: ThreadCompactStartParams); Codex runs the
  compaction as a turn of its own (turn/started ... turn/completed), which ends as any turn
  does. Refused while a turn runs, like ``Prompt``.
- ``NameSession`` -> ``thread/name/set`` (ThreadSetNameParams {threadId, name}); its answer
  is ``SessionNamed`` (Codex keeps the name), a refusal a Warning.

Where the thread's ``modelProvider`` is Codex's own (``openai``), ``model/list`` is asked
once the thread is open and its answer is ``ModelsOffered``: the models ``/model`` may pick.
Under another provider Codex still lists its own presets, not the provider's models
(FACTS-session-features.md), so nothing is asked and nothing said.

Notifications -> events: see :meth:`CodexAppServerCodec._on_notification`. Methods the codec
does not map are counted in :attr:`CodexAppServerCodec.unknown_notifications`, except the
ones listed in :data:`IGNORED_NOTIFICATIONS`. Server requests the gateway does not support
are answered ``Method not found`` and reported as a Warning; never dropped, never approved.
A line that is not a valid message becomes a ``Warning(code="malformed_message")``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from adapters import codex_events
from adapters import codex_requests as requests
from adapters.codex_events import IGNORED_NOTIFICATIONS
from adapters.codex_replies import Reply
from adapters.codex_session import SANDBOX_MODES, SessionSetup, open_thread_params, read_policy
from adapters.json_fields import (
    as_object,
    get_array,
    get_object,
    get_text,
    require_object,
    require_text,
)
from adapters.jsonrpc import (
    BadMessage,
    ErrorResponse,
    InvalidParams,
    JsonObject,
    JsonRpcPeer,
    MethodNotFound,
    Notification,
    Request,
    RequestId,
    Response,
    excerpt,
    native_key_for,
)
from adapters.session_state import SessionState
from gateway.domain import Resolution, TurnStatus
from gateway.errors import (
    AlreadyAnswered,
    CodecUsageError,
    MalformedMessage,
    NativeSessionGone,
    RequestClosed,
)
from gateway.events import (
    AgentCommand,
    AgentEvent,
    Capabilities,
    Compact,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    ModelsOffered,
    NameSession,
    PolicyChanged,
    Prompt,
    Respond,
    SessionNamed,
    SessionStarted,
    Steer,
    SteerRefused,
    SteerTaken,
    ToolActivity,
    ToolKind,
    TurnCompleted,
    TurnStarted,
    Warning,
)
from gateway.interactions.plans import proposed_plan

__all__ = [
    "CODEX_CAPABILITIES",
    "IGNORED_NOTIFICATIONS",
    "SESSION_TRANSITIONS",
    "CodecState",
    "CodexAppServerCodec",
    "native_key_for",
]

CODEX_CAPABILITIES: Final = Capabilities(
    structured_events=True,
    bidirectional_control=True,
    interactive_questions=True,
    human_approval=True,
    session_resume=True,
    interrupt=True,
    sandbox=True,
    steer=True,
    compact=True,
    names_sessions=True,
    pictures=True,  # localImage input items (issue 32)
)


# the provider whose models Codex's model/list names: its own (OpenAI's) catalog
OWN_CATALOG_PROVIDER = "openai"
_MODEL_LIST_PAGES = 8  # model/list pages read at most (one in 0.171)
_USER_AGENT_VERSION = re.compile(r"^[^/\s]+/(\S+)")

_UNSUPPORTED_REQUEST_WARNING = (
    "The agent asked for {method}, which agent-gateway does not support; it was refused."
)


class CodecState(StrEnum):
    NEW = "new"
    INITIALIZING = "initializing"
    OPENING_THREAD = "opening_thread"
    READY = "ready"
    ERROR = "error"


class _SessionEvent(StrEnum):
    START = "start"
    INITIALIZED = "initialized"
    THREAD_OPENED = "thread_opened"


SESSION_TRANSITIONS: Final[Mapping[tuple[CodecState, _SessionEvent], CodecState]] = {
    (CodecState.NEW, _SessionEvent.START): CodecState.INITIALIZING,
    (CodecState.INITIALIZING, _SessionEvent.INITIALIZED): CodecState.OPENING_THREAD,
    (CodecState.OPENING_THREAD, _SessionEvent.THREAD_OPENED): CodecState.READY,
}


class CodexAppServerCodec:
    """One ``codex app-server`` connection, one thread. Not thread-safe; no IO."""

    def __init__(
        self,
        *,
        cwd: str,
        approval_policy: str = "on-request",
        sandbox: str = "workspace-write",
        model: str | None = None,
        resume_thread_id: str | None = None,
        experimental_api: bool = False,
        collaboration_mode: str | None = None,
        client_name: str = "agent-gateway",
        client_version: str = "0.1.0",
        mcp_servers: JsonObject | None = None,
    ) -> None:
        self._setup = SessionSetup(
            mcp_servers=mcp_servers,
            cwd=cwd,
            approval_policy=approval_policy,
            sandbox=sandbox,
            model=model,
            resume_thread_id=resume_thread_id,
            experimental_api=experimental_api,
            client_name=client_name,
            client_version=client_version,
        )
        self._rpc = JsonRpcPeer()
        self._session = SessionState(
            SESSION_TRANSITIONS,
            new=CodecState.NEW,
            ready=CodecState.READY,
            error=CodecState.ERROR,
            start=_SessionEvent.START,
        )
        self._default_mode = collaboration_mode
        self.agent_version: str | None = None
        self.thread_id: str | None = None
        self.model: str | None = model  # the thread's model, once thread/start says it
        self.policy: dict[str, str] = {}
        self._policy_asked: dict[str, str] = {}  # on the turn/start not answered yet
        self.unknown_notifications: Counter[str] = Counter()
        # the turn: id once known; "starting" between turn/start and its result
        self._turn_id: str | None = None
        self._turn_starting = False
        self._interrupt_pending = False
        self._compacting = False  # the running turn is a compaction: it cannot be steered
        # open server requests we turned into interactions
        self._replies: dict[str, Reply] = {}
        self._answered: set[str] = set()
        self._refused: set[RequestId] = set()  # answered with an error, no interaction
        # thread items remembered for later requests and output deltas
        self._file_changes: dict[str, requests.FileChangeSet] = {}
        self._command_titles: dict[str, str] = {}
        self._plan: str | None = None  # the running turn's proposed plan (a plan item)
        self._models_listed: list[str] = []  # model/list's pages read so far
        self._model_pages = 0

    # --- public surface -------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return CODEX_CAPABILITIES

    @property
    def state(self) -> CodecState:
        return self._session.state

    @property
    def turn_id(self) -> str | None:
        return self._turn_id

    @property
    def open_interactions(self) -> tuple[str, ...]:
        """Native keys of the server requests still open (answered or not)."""
        return tuple(self._replies)

    def start(self) -> None:
        """Queue ``initialize`` (schema: InitializeParams)."""
        self._session.move(_SessionEvent.START)
        self._rpc.send_request("initialize", self._setup.initialize_params())

    def data_to_send(self) -> list[bytes]:
        """Drain the lines to write, in order (each without a line terminator)."""
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
            case Steer():
                self._steer(command)
            case Compact():
                self._compact()
            case NameSession(name=name):
                self._rpc.send_request(
                    "thread/name/set", {"threadId": self.thread_id, "name": name}, tag=name
                )

    def feed(self, line: bytes) -> list[AgentEvent]:
        """Events for one line from the server. Raises only on a fatal protocol error."""
        self._session.check_feed()
        incoming = self._rpc.receive_line(line)
        try:
            match incoming:
                case Notification():
                    return self._on_notification(incoming)
                case Request():
                    return self._on_server_request(incoming)
                case Response():
                    return self._on_response(incoming)
                case ErrorResponse():
                    return self._on_error_response(incoming)
                case BadMessage():
                    return [self._malformed(incoming.reason, incoming.excerpt)]
        except MalformedMessage as exc:
            if self._session.failure is not None:
                raise
            return [self._malformed(exc.reason, excerpt(line))]
        raise AssertionError(f"unhandled message {incoming!r}")  # pragma: no cover

    # --- helpers --------------------------------------------------------------------------

    @staticmethod
    def _malformed(reason: str, snippet: str) -> Warning:
        return Warning(
            message=f"malformed message from codex: {reason}: {snippet}", code="malformed_message"
        )

    # --- commands -------------------------------------------------------------------------

    def _prompt(self, prompt: Prompt) -> None:
        if self._turn_starting or self._turn_id is not None:
            raise CodecUsageError("a turn is running: wait for TurnCompleted before prompting")
        # Schema: TurnStartParams, UserInput {"type": "text", text, text_elements}, and a
        # picture sent in chat {"type": "localImage", path}: Codex reads the file and sends
        # it to the model as a Responses input_image (FACTS-session-features.md)
        text_input: JsonObject = {"type": "text", "text": prompt.text, "text_elements": []}
        images: list[JsonObject] = [
            {"type": "localImage", "path": str(image.path)} for image in prompt.images
        ]
        params: JsonObject = {"threadId": self.thread_id, "input": [text_input, *images]}
        if prompt.model is not None:
            # TurnStartParams.model: "override the model for this turn and subsequent turns"
            params["model"] = prompt.model
            self.model = prompt.model
        self._policy_asked = self._ask_policy(prompt, params)
        mode = prompt.mode or self._default_mode
        if mode is not None:
            # Schema: CollaborationMode {mode: ModeKind, settings: Settings {model (required),
            # reasoning_effort, developer_instructions}}; null instructions: the mode's own.
            settings: JsonObject = {
                "model": self.model or "",
                "reasoning_effort": None,
                "developer_instructions": None,
            }
            params["collaborationMode"] = {"mode": mode, "settings": settings}
        self._rpc.send_request("turn/start", params)
        self._turn_starting = True
        self._interrupt_pending = False

    def _steer(self, steer: Steer) -> None:
        if self._turn_id is None:
            raise CodecUsageError("no running turn to steer (none, or its id not known yet)")
        if self._compacting:
            raise CodecUsageError("a compaction turn cannot be steered")
        if any(key not in self._answered for key in self._replies):
            # the core checks this too; here it is checked against the lines read so far, so
            # that a request that arrived meanwhile is never overtaken by chat text
            raise CodecUsageError("a request of the turn waits for an answer")
        # Schema: TurnSteerParams {threadId, expectedTurnId, input}: the server refuses it
        # when the turn named is no longer the active one (the text is then not taken)
        text_input: JsonObject = {"type": "text", "text": steer.text, "text_elements": []}
        params: JsonObject = {
            "threadId": self.thread_id,
            "expectedTurnId": self._turn_id,
            "input": [text_input],
        }
        self._rpc.send_request("turn/steer", params, tag=steer.key)

    def _compact(self) -> None:
        if self._turn_starting or self._turn_id is not None:
            raise CodecUsageError("a turn is running: wait for TurnCompleted before compacting")
        self._rpc.send_request("thread/compact/start", {"threadId": self.thread_id})
        self._turn_starting = True  # its turn/started names the turn
        self._compacting = True
        self._interrupt_pending = False

    def _ask_policy(self, prompt: Prompt, params: JsonObject) -> dict[str, str]:
        """The approval policy and sandbox of ``prompt`` on turn/start (TurnStartParams
        ``approvalPolicy`` and ``sandboxPolicy``: "for this turn and subsequent turns"; 0.171
        has no thread/settings/update), and those that differ from the policy in force."""
        asked: dict[str, str] = {}
        if prompt.approval_policy is not None:
            params["approvalPolicy"] = prompt.approval_policy
            asked["approval_policy"] = prompt.approval_policy
        if prompt.sandbox is not None:
            kind = next(k for k, v in SANDBOX_MODES.items() if v == prompt.sandbox)
            params["sandboxPolicy"] = {"type": kind}
            asked["sandbox"] = prompt.sandbox
        return {key: value for key, value in asked.items() if self.policy.get(key) != value}

    def _respond(self, respond: Respond) -> None:
        reply = self._replies.get(respond.native_key)
        if reply is None:
            raise RequestClosed(f"no open request {respond.native_key!r} (closed or unknown)")
        if respond.native_key in self._answered:
            raise AlreadyAnswered(f"request {respond.native_key!r} was already answered")
        result = reply.encode(respond.decision)
        self._rpc.send_result(self._request_id_of(respond.native_key), result)
        self._answered.add(respond.native_key)

    def _interrupt(self) -> None:
        if self._turn_id is not None:
            self._send_interrupt(self._turn_id)
        elif self._turn_starting:
            self._interrupt_pending = True  # sent when turn/start answers with the turn id

    def _send_interrupt(self, turn_id: str) -> None:
        # Schema: TurnInterruptParams {threadId, turnId}.
        self._rpc.send_request("turn/interrupt", {"threadId": self.thread_id, "turnId": turn_id})
        self._interrupt_pending = False

    def _turn_known(self, turn_id: str) -> None:
        self._turn_id = turn_id
        self._turn_starting = False
        if self._interrupt_pending:
            self._send_interrupt(turn_id)

    @staticmethod
    def _request_id_of(native_key: str) -> RequestId:
        rest = native_key.removeprefix("rpc:")
        return rest.removeprefix("s:") if rest.startswith("s:") else int(rest)

    # --- responses to our requests --------------------------------------------------------

    def _on_response(self, response: Response) -> list[AgentEvent]:
        match response.method:
            case "initialize":
                return self._on_initialized(response)
            case "thread/start" | "thread/resume":
                return self._on_thread_opened(response)
            case "turn/start":
                turn = get_object(as_object(response.result, where="turn/start result"), "turn")
                turn_id = get_text(turn, "id") if turn else None
                if turn_id and self._turn_starting:
                    self._turn_known(turn_id)
                return self._policy_taken()
            case "turn/steer":
                return [SteerTaken(key=response.tag or "")]
            case "thread/name/set":
                return [SessionNamed(name=response.tag or "")]
            case "model/list":
                return self._on_model_list(response)
        return []

    def _on_model_list(self, response: Response) -> list[AgentEvent]:
        # Schema: ModelListResponse {data: [Model {id, model, hidden, ...}], nextCursor}.
        # Every page is read (bounded): the models are said once, whole.
        result = as_object(response.result, where="model/list result")
        for entry in get_array(result, "data") or ():
            if isinstance(entry, dict):
                for key in ("model", "id"):
                    name = get_text(entry, key)
                    if name and name not in self._models_listed:
                        self._models_listed.append(name)
        cursor = get_text(result, "nextCursor")
        self._model_pages += 1
        if cursor and self._model_pages < _MODEL_LIST_PAGES:
            self._rpc.send_request("model/list", {"includeHidden": True, "cursor": cursor})
            return []
        return [ModelsOffered(models=tuple(self._models_listed))]

    def _policy_taken(self) -> list[AgentEvent]:
        """Codex took the turn with the policy it asked: that policy is in force now."""
        asked, self._policy_asked = self._policy_asked, {}
        if not asked:
            return []
        self.policy.update(asked)
        said = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in sorted(asked.items()))
        return [PolicyChanged(policy=dict(self.policy), message=f"⚙ Codex now runs with {said}.")]

    def _on_initialized(self, response: Response) -> list[AgentEvent]:
        # Schema: InitializeResponse {userAgent, codexHome, platformFamily, platformOs}.
        try:
            result = as_object(response.result, where="initialize result")
        except MalformedMessage as exc:
            self._session.fail(exc)
        match = _USER_AGENT_VERSION.match(get_text(result, "userAgent") or "")
        self.agent_version = match.group(1) if match else None
        self._session.move(_SessionEvent.INITIALIZED)
        self._rpc.send_notification("initialized")
        method, params = open_thread_params(self._setup)
        self._rpc.send_request(method, params)
        return []

    def _on_thread_opened(self, response: Response) -> list[AgentEvent]:
        # Schema: ThreadStartResponse / ThreadResumeResponse {thread, approvalPolicy,
        # approvalsReviewer, sandbox (SandboxPolicy), ...}.
        try:
            result = as_object(response.result, where=f"{response.method} result")
            thread = require_object(result, "thread", where=f"{response.method} result")
            thread_id = require_text(thread, "id", where="thread")
        except MalformedMessage as exc:
            self._session.fail(exc)
        self._session.move(_SessionEvent.THREAD_OPENED)
        self.thread_id = thread_id
        self.model = get_text(result, "model") or get_text(thread, "model") or self.model
        self.policy, mismatches = read_policy(self._setup, result)
        if get_text(result, "modelProvider") == OWN_CATALOG_PROVIDER:
            # model/list is Codex's own catalog: what this provider serves. Under any other
            # provider it still lists Codex's presets (FACTS-session-features.md), not what
            # the provider serves, so it is not asked: the project's models are trusted
            self._rpc.send_request("model/list", {"includeHidden": True})
        events: list[AgentEvent] = [
            SessionStarted(
                native_id=thread_id,
                agent_version=self.agent_version,
                policy=dict(self.policy),
                resumed=response.method == "thread/resume",
                native_name=get_text(thread, "name"),
            )
        ]
        events += [Warning(message=text, code="policy_mismatch") for text in mismatches]
        return events

    def _on_error_response(self, response: ErrorResponse) -> list[AgentEvent]:
        error = response.error
        if response.method == "thread/resume":
            # the thread the session names is not Codex's any more (its rollout file is gone:
            # another CODEX_HOME, a cleaned home): that session cannot be continued
            self._session.fail(NativeSessionGone(error.code, error.message, error.data))
        if response.method in ("initialize", "thread/start"):
            self._session.fail(error.as_exception())
        if response.method == "model/list":
            return []  # the models offered stay unknown: the project's are trusted
        if response.method == "turn/steer":
            return [SteerRefused(key=response.tag or "", reason=error.message)]
        if response.method == "thread/compact/start":
            self._turn_starting = self._compacting = False
            text = f"codex refused to compact: {error.message}"
            return [TurnCompleted(status=TurnStatus.FAILED, error=text)]
        if response.method == "turn/start":
            self._turn_starting = False
            self._interrupt_pending = False
            self._policy_asked = {}  # not taken: the policy in force stays
            text = f"codex refused to start the turn: {error.message}"
            return [TurnCompleted(status=TurnStatus.FAILED, error=text)]
        message = f"codex refused {response.method}: {error.message} ({error.code})"
        code = "interrupt_failed" if response.method == "turn/interrupt" else "request_failed"
        return [Warning(message=message, code=code)]

    # --- server requests ------------------------------------------------------------------

    def _on_server_request(self, request: Request) -> list[AgentEvent]:
        key = native_key_for(request.id)
        try:
            params = as_object(request.params, where=f"{request.method} params")
            match request.method:
                case "item/commandExecution/requestApproval":
                    opened = requests.open_command_approval(key, params)
                case "item/fileChange/requestApproval":
                    item_id = get_text(params, "itemId") or ""
                    changes = self._file_changes.get(item_id)
                    opened = requests.open_file_change_approval(key, params, changes)
                case "item/permissions/requestApproval":
                    opened = requests.open_permissions_approval(key, params)
                case "item/tool/requestUserInput":
                    opened = requests.open_user_input(key, params)
                case _:
                    self._refuse(
                        request.id, MethodNotFound(message=f"unsupported: {request.method}")
                    )
                    text = _UNSUPPORTED_REQUEST_WARNING.format(method=request.method)
                    return [Warning(message=text, code="unsupported_request")]
        except MalformedMessage as exc:
            self._refuse(request.id, InvalidParams(message=exc.reason))
            text = f"codex sent an unreadable {request.method}; it was refused: {exc.reason}"
            return [Warning(message=text, code="malformed_message")]
        self._replies[key] = opened.reply
        events: list[AgentEvent] = [InteractionOpened(request=opened.request)]
        events += [Warning(message=text, code="unknown_decision") for text in opened.warnings]
        return events

    def _refuse(self, request_id: RequestId, error: InvalidParams | MethodNotFound) -> None:
        self._rpc.send_error(request_id, error)
        self._refused.add(request_id)

    # --- notifications --------------------------------------------------------------------

    def _on_notification(self, note: Notification) -> list[AgentEvent]:
        params = as_object(note.params if note.params is not None else {}, where=note.method)
        stateless = codex_events.STATELESS_NOTIFICATIONS.get(note.method)
        if stateless is not None:
            return stateless(params)
        match note.method:
            case "item/started" | "item/completed":
                item = require_object(params, "item", where=note.method)
                return self._on_item(item, completed=note.method == "item/completed")
            case "item/commandExecution/outputDelta":
                title = self._command_titles.get(get_text(params, "itemId") or "", "")
                return [codex_events.output_delta(params, title)]
            case "turn/started":
                # Schema: TurnStartedNotification {turn: Turn {id, ...}}.
                turn = require_object(params, "turn", where=note.method)
                turn_id = require_text(turn, "id", where="turn")
                self._turn_known(turn_id)
                return [TurnStarted(turn_native_id=turn_id)]
            case "turn/completed":
                completed = codex_events.turn_completed(params)
                plan, self._plan = self._plan, None
                self._turn_ended()
                if plan is None or completed.status is not TurnStatus.COMPLETED:
                    return [completed]
                return [completed, InteractionOpened(request=proposed_plan(plan))]
            case "serverRequest/resolved":
                return self._on_request_resolved(params)
            case "thread/tokenUsage/updated":
                # thread/resume replays the last usage of an earlier turn before the new turn
                # starts (transcript lab-resume): only the running turn's usage is new.
                if self._turn_id is None or get_text(params, "turnId") != self._turn_id:
                    return []
                return [codex_events.usage(params)]
        if note.method not in IGNORED_NOTIFICATIONS:
            self.unknown_notifications[note.method] += 1
        return []

    def _on_item(self, item: JsonObject, *, completed: bool) -> list[AgentEvent]:
        if get_text(item, "type") == "plan":
            # Schema: PlanThreadItem {id, text}: the completed item is authoritative (the
            # deltas may not add up to it). Shown as a card when the turn ends.
            if completed:
                self._plan = require_text(item, "text", where="plan item")
            return []
        event = codex_events.item_event(item, completed=completed, cwd=self._setup.cwd)
        if not isinstance(event, ToolActivity):
            return [] if event is None else [event]
        # Remember what later messages about the item need: the changes a
        # fileChange/requestApproval shows, the command an output delta belongs to.
        if completed:
            self._file_changes.pop(event.item_id, None)
            self._command_titles.pop(event.item_id, None)
        elif event.tool is ToolKind.FILE_CHANGE:
            changes = requests.FileChangeSet(paths=event.paths, diff=event.diff or "")
            self._file_changes[event.item_id] = changes
        else:
            self._command_titles[event.item_id] = event.title
        return [event]

    def _turn_ended(self) -> None:
        self._turn_id = None
        self._turn_starting = False
        self._compacting = False
        self._interrupt_pending = False
        self._file_changes.clear()
        self._command_titles.clear()

    def _on_request_resolved(self, params: JsonObject) -> list[AgentEvent]:
        # Schema: ServerRequestResolvedNotification {threadId, requestId}. After turn/interrupt
        # the server resolves requests nobody answered (transcript interrupt_pending_approval).
        request_id = params.get("requestId")
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            raise MalformedMessage(
                "serverRequest/resolved without a request id", repr(params)[:200]
            )
        key = native_key_for(request_id)
        if self._replies.pop(key, None) is not None:
            answered = key in self._answered
            self._answered.discard(key)
            self._rpc.forget_request(request_id)
            how = Resolution.ANSWERED if answered else Resolution.CANCELLED_BY_AGENT
            return [InteractionClosed(native_key=key, how=how)]
        if request_id in self._refused:
            self._refused.discard(request_id)
            return []
        text = f"codex resolved a request this gateway never saw ({request_id!r})"
        return [Warning(message=text, code="unknown_request_resolved")]
