"""OpenCode's server API (opencode-ai 1.18.33) as a sans-IO codec.

The protocol is HTTP plus one Server-Sent-Events stream (``GET /event``); the schema is
``GET /doc`` of the server (kept in ../shared/protocols/opencode-1.18.33-openapi.json). This
module does no IO: event JSON objects go in (:meth:`OpenCodeCodec.feed_event`), the answers
to our own requests go in (:meth:`OpenCodeCodec.created`, :meth:`OpenCodeCodec.reconcile`),
and :class:`HttpRequest` descriptions come out (:meth:`OpenCodeCodec.request_for`), which
``adapters/opencode_runtime.py`` performs with aiohttp.

What 1.18.33 was seen to do (tests/test_gateway_opencode.py, the lab's run_*.log):

- ``POST /session`` with ``permission`` rules makes those rules win over ``opencode.json``
  (a project that allows ``bash`` is still asked): every permission is set to ``ask``.
- ``prompt_async`` answers 204; ``session.idle`` ends the turn; ``session.error`` comes
  before it when the turn failed (``MessageAbortedError`` after our ``abort``).
- The prompt comes back as a ``text`` part of a ``user`` message: text is taken only from
  parts of messages that ``message.updated`` said are the assistant's.
- ``permission.asked {id, permission, patterns, metadata, always}``; ``permission.replied``
  closes it. "always" adds ``always`` (e.g. ``echo *``) to the server's memory for the
  project: later sessions of the same process are not asked, a new process asks again, and
  ``GET /api/permission/saved`` lists nothing. The action says so. Where a server did save
  one (``{id: "psv_…", projectID, action, resource}``, kept in its database), revoking the
  grant deletes it (``DELETE /api/permission/saved/{id}``, 204): :func:`saved_permissions`,
  :func:`matching_saved`, :func:`remove_saved`.
- ``question.asked {id, questions[{question, header, options[{label, description}],
  multiple, custom}]}``; the answer is one label array per question, in order;
  ``/question/{id}/reject`` dismisses it (the model reads "The user dismissed this
  question"). ``custom`` (typing one's own answer) is on unless the question says false.
- A permission refused without a message (``reply: "reject"``) fails its tool with "The user
  rejected permission to use this specific tool call" and ends the agent's loop: the turn
  goes idle with no more model requests (seen on the binary). With a message the model
  reads it and goes on. So the tool is reported ``denied`` (its permission's
  ``tool.callID``), and a turn whose last act was a refusal ends ``INTERRUPTED`` with
  :data:`ENDED_AT_REFUSAL`, not as a completed turn ("✓ Done.").
- After ``abort`` a pending permission is still listed by ``GET /permission`` and no event
  announces its end: the codec forgets it at the turn's end (the core withdraws it then) and
  never reopens it on a reconcile.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

from gateway.domain import (
    Action,
    Command,
    Decision,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Option,
    Question,
    Resolution,
    Scope,
    Text,
    TurnStatus,
)
from gateway.errors import CodecUsageError
from gateway.events import (
    AgentCommand,
    AgentEvent,
    AgentMessage,
    Capabilities,
    Compact,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    ModesOffered,
    Prompt,
    Respond,
    SessionStarted,
    TextDelta,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)

__all__ = [
    "ASK_EVERYTHING",
    "ENDED_AT_REFUSAL",
    "SERVER_USER",
    "HttpRequest",
    "OpenCodeCodec",
    "SseDecoder",
    "basic_auth",
    "listed_keys",
    "matching_saved",
    "models_offered",
    "parse_listening_line",
    "remove_saved",
    "saved_permissions",
]

# The user name of OPENCODE_SERVER_PASSWORD's basic auth (seen: any other name gets 401).
SERVER_USER = "opencode"
# Session rules: every tool asks, whatever opencode.json says (rules are permission+pattern).
ASK_EVERYTHING: tuple[Mapping[str, str], ...] = (
    {"permission": "*", "pattern": "*", "action": "ask"},
)
_LISTENING = "opencode server listening on "
_PERMISSION = "permission:"
# why a turn ended at a refusal (the core says "The turn ended: ..."): 1.18.33 stops its loop
ENDED_AT_REFUSAL = (
    "the request was refused, and OpenCode stops at a refusal that gives it no message"
)
_QUESTION = "question:"
_FILE_TOOLS = frozenset({"edit", "write", "patch", "multiedit"})
_HIDDEN_TOOLS = frozenset({"question"})  # its card says it; a tool line would say it twice

JsonObject = dict[str, Any]


def basic_auth(password: str) -> str:
    """The ``Authorization`` header value for the server's password."""
    token = base64.b64encode(f"{SERVER_USER}:{password}".encode()).decode()
    return f"Basic {token}"


def parse_listening_line(line: str) -> str | None:
    """The base URL from ``opencode serve``'s "opencode server listening on URL" line."""
    text = line.strip()
    if not text.startswith(_LISTENING):
        return None
    url = text[len(_LISTENING) :].strip().rstrip("/")
    return url if url.startswith("http://") else None


class SseDecoder:
    """Server-Sent Events bytes in, the JSON objects of their ``data`` out (sans-IO).

    OpenCode sends one ``data:`` line per event; multi-line data is joined as the SSE
    specification says. A line past ``max_line_bytes`` raises ValueError (the stream cannot
    be trusted any more: the runtime reconnects)."""

    def __init__(self, *, max_line_bytes: int = 8 * 1024 * 1024) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._max = max_line_bytes

    def feed(self, chunk: bytes) -> list[object]:
        self._buffer += chunk
        found: list[object] = []
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end]).rstrip(b"\r").decode("utf-8", "replace")
            del self._buffer[: end + 1]
            if not line:
                if self._data:
                    found.append(_json_or_text("\n".join(self._data)))
                    self._data = []
            elif line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))
        if len(self._buffer) > self._max:
            raise ValueError(f"an event line is longer than {self._max} bytes")
        return found


def _json_or_text(data: str) -> object:
    try:
        return json.loads(data)
    except ValueError:
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpRequest:
    """One request for the runtime to make: ``path`` is relative to the server's URL."""

    method: str
    path: str
    body: JsonObject | list[Any] | None = None
    purpose: str = ""  # what it is for, said in an error
    # answered only once its work is done (a summary), however long: no 30 s bound; the
    # turn's own events and /stop bound it
    waits_for_work: bool = False


@dataclass(kw_only=True)
class _Asked:
    kind: str  # "permission" or "question"
    native_id: str
    labels: tuple[tuple[str, ...], ...] = ()  # a question's option labels, per question
    turn: int = 0
    call_id: str | None = None  # a permission's tool call (``tool.callID``)


@dataclass(kw_only=True)
class _State:
    session_id: str | None = None
    turn: int = 0  # counts prompts; 0 until the first
    running: bool = False
    aborting: bool = False
    error: str | None = None
    aborted: bool = False
    roles: dict[str, str] = field(default_factory=dict)  # message id -> role
    parents: dict[str, str] = field(default_factory=dict)  # assistant message -> its prompt's
    users: set[str] = field(default_factory=set)  # user messages seen (the prompts)
    prompt_message: str | None = None  # the running turn's user message, once seen
    compacting: bool = False  # the running turn is a /compact (summarize)
    compacted: bool = False  # ... and the server said session.compacted
    model: str | None = None  # "provider/model" of the session's last message seen
    agent: str | None = None  # the OpenCode agent of the session's last prompt (its mode)
    said_agent: bool = True  # ModesOffered said that agent
    tools_started: set[str] = field(default_factory=set)
    tools_done: set[str] = field(default_factory=set)
    said: set[str] = field(default_factory=set)  # text parts whose final text was emitted
    asked: dict[str, _Asked] = field(default_factory=dict)  # native key -> request
    forgotten: set[str] = field(default_factory=set)  # ended with their turn: never reopened
    refused_calls: set[str] = field(default_factory=set)  # tool calls whose permission was refused
    refused_last: bool = False  # the running turn's last act was a refusal: OpenCode stops there


class OpenCodeCodec:
    """The gateway's side of one OpenCode session on one server."""

    _CAPABILITIES = Capabilities(
        structured_events=True,
        bidirectional_control=True,
        interactive_questions=True,
        human_approval=True,
        session_resume=True,
        interrupt=True,
        sandbox=False,
        compact=True,
    )

    def __init__(
        self,
        *,
        resume_session_id: str | None = None,
        version: str | None = None,
        allowed_tools: tuple[str, ...] = (),
        denied_tools: tuple[str, ...] = (),
    ):
        self._resume = resume_session_id
        self._version = version
        # after "everything asks": the tools of the gateway's other sessions denied (on an
        # attached server, where each session has its own send_file: another's would send
        # into that session's chat), then the gateway's own tools (this session's send_file),
        # which its policy decides, so that a person never gets OpenCode's card and then the
        # gateway's (OpenCode: the last matching rule wins; a tool denied outright is not
        # offered to the model)
        self._rules: tuple[Mapping[str, str], ...] = (
            *ASK_EVERYTHING,
            *({"permission": tool, "pattern": "*", "action": "deny"} for tool in denied_tools),
            *({"permission": tool, "pattern": "*", "action": "allow"} for tool in allowed_tools),
        )
        self._s = _State()
        # issue 32: the models ("provider/model") whose capabilities take image input, and
        # the one in use (the config's, then a prompt's own): OpenCode drops or replaces a
        # picture for a model that does not declare it, so only those are given pictures
        self._image_models: frozenset[str] = frozenset()
        self._model: str | None = None

    @property
    def capabilities(self) -> Capabilities:
        takes = self._model is not None and self._model in self._image_models
        return replace(self._CAPABILITIES, pictures=takes)

    def models_requests(self) -> tuple[HttpRequest, HttpRequest]:
        """What tells which model is in use and which take pictures: ``GET /config`` (its
        ``model``) and ``GET /config/providers`` (each model's ``capabilities.input.image``)."""
        return (
            HttpRequest(method="GET", path="/config", purpose="read the model in use"),
            HttpRequest(method="GET", path="/config/providers", purpose="read the models"),
        )

    def learn_models(self, config: object, providers: object) -> None:
        """The answers to :meth:`models_requests` (anything unreadable: no pictures)."""
        model = config.get("model") if isinstance(config, dict) else None
        self._model = model if isinstance(model, str) else None
        found: set[str] = set()
        listed = providers.get("providers") if isinstance(providers, dict) else None
        for provider in listed if isinstance(listed, list) else []:
            if not isinstance(provider, dict) or not isinstance(provider.get("id"), str):
                continue
            models = provider.get("models")
            for model_id, info in (models if isinstance(models, dict) else {}).items():
                caps = info.get("capabilities") if isinstance(info, dict) else None
                given = caps.get("input") if isinstance(caps, dict) else None
                if isinstance(given, dict) and given.get("image") is True:
                    found.add(f"{provider['id']}/{model_id}")
        self._image_models = frozenset(found)

    # --- the session -----------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._s.session_id

    @property
    def turn_running(self) -> bool:
        return self._s.running

    @property
    def policy(self) -> dict[str, str]:
        """The rules in force, for /status."""
        rules = ", ".join(f"{r['permission']} {r['pattern']} → {r['action']}" for r in self._rules)
        return {"permission": rules}

    def open_session(self) -> HttpRequest:
        """Resume the known session (its info), or create one whose rules ask for everything."""
        if self._resume is not None:
            return HttpRequest(
                method="GET", path=f"/session/{self._resume}", purpose="resume the session"
            )
        body: JsonObject = {"title": "agent-gateway", "permission": list(map(dict, self._rules))}
        return HttpRequest(method="POST", path="/session", body=body, purpose="create a session")

    def created(self, info: object) -> SessionStarted:
        """The session's info, as ``POST /session`` (or ``GET /session/{id}``) returned it."""
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            raise CodecUsageError(f"opencode returned no session id: {str(info)[:200]}")
        self._s.session_id = info["id"]
        version = info.get("version") if isinstance(info.get("version"), str) else self._version
        return SessionStarted(
            native_id=info["id"],
            agent_version=version,
            policy=self.policy,
            resumed=self._resume is not None,
        )

    # --- commands --------------------------------------------------------------------------

    def request_for(self, command: AgentCommand) -> tuple[list[HttpRequest], list[AgentEvent]]:
        """The requests a command of the core stands for, and the events it implies."""
        sid = self._require_session()
        match command:
            case Prompt(text=text, model=model, permission_mode=agent, images=images):
                if self._s.running:
                    raise CodecUsageError("a turn is running: wait for its end before prompting")
                self._s.turn += 1
                self._s.running, self._s.aborting, self._s.aborted = True, False, False
                self._s.error = None
                self._s.refused_last = False
                self._s.prompt_message = None
                parts: list[Any] = [{"type": "text", "text": text}]
                # a picture sent in chat, for a model that takes images: a file part that
                # OpenCode reads from its path (FilePartInput: type, mime, url, filename)
                parts += [
                    {
                        "type": "file",
                        "mime": image.media_type,
                        "url": image.path.as_uri(),
                        "filename": image.name,
                    }
                    for image in images
                ]
                body: JsonObject = {"parts": parts}
                if model is not None:
                    self._model = model
                    # the prompt's own model (issue 31's /model): {providerID, modelID}, the
                    # config's "provider/model" split at its first slash
                    provider, _, model_id = model.partition("/")
                    body["model"] = {"providerID": provider, "modelID": model_id}
                if agent is not None:
                    # issue 31's /mode: the OpenCode agent the prompt runs with (plan, build)
                    body["agent"] = agent
                request = HttpRequest(
                    method="POST",
                    path=f"/session/{sid}/prompt_async",
                    body=body,
                    purpose="send the prompt",
                )
                return [request], [TurnStarted(turn_native_id=f"{sid}#{self._s.turn}")]
            case Compact(model=model):
                return self._summarize(sid, model or self._s.model)
            case Interrupt():
                if not self._s.running:
                    return [], []
                self._s.aborting = True
                abort = HttpRequest(
                    method="POST", path=f"/session/{sid}/abort", purpose="abort the turn"
                )
                return [abort], []
            case Respond(native_key=key, decision=decision):
                return [self._reply(key, decision)], []
        raise CodecUsageError(f"unknown command {command!r}")

    def _summarize(self, sid: str, model: str | None) -> tuple[list[HttpRequest], list[AgentEvent]]:
        """``/compact``: OpenCode's summary of the session (``POST /session/{id}/summarize``,
        which needs the model to summarize with: the one chosen with /model, else the
        session's last message's), a turn of its own that ends on ``session.compacted``."""
        if self._s.running:
            raise CodecUsageError("a turn is running: wait for its end before compacting")
        self._s.turn += 1
        started = TurnStarted(turn_native_id=f"{sid}#{self._s.turn}")
        if model is None:
            why = "OpenCode has not said which model this session uses yet: send a message first"
            return [], [started, TurnCompleted(status=TurnStatus.FAILED, error=why)]
        self._s.running, self._s.aborting, self._s.aborted = True, False, False
        self._s.error = None
        self._s.refused_last = False
        self._s.prompt_message = None
        self._s.compacting, self._s.compacted = True, False
        provider, _, model_id = model.partition("/")
        request = HttpRequest(
            method="POST",
            path=f"/session/{sid}/summarize",
            body={"providerID": provider, "modelID": model_id},
            purpose="compact the session",
            waits_for_work=True,
        )
        return [request], [started]

    def prompt_refused(self, reason: str) -> list[AgentEvent]:
        """``prompt_async`` (or ``summarize``) was not accepted: the turn that was about to
        start failed."""
        if not self._s.running:
            return []
        self._s.running = False
        self._s.compacting = self._s.compacted = False
        return [TurnCompleted(status=TurnStatus.FAILED, error=reason)]

    def _reply(self, key: str, decision: Decision) -> HttpRequest:
        asked = self._s.asked.get(key)
        if asked is None:
            raise CodecUsageError(f"no open OpenCode request {key!r}")
        if asked.kind == "permission":
            action = decision.action_id
            if action not in ("once", "always", "reject"):
                raise CodecUsageError(f"OpenCode permissions take once, always or reject: {action}")
            body: JsonObject = {"reply": action}
            if action == "reject" and decision.message:
                body["message"] = decision.message
            return HttpRequest(
                method="POST",
                path=f"/permission/{asked.native_id}/reply",
                body=body,
                purpose="answer the permission",
            )
        if decision.action_id == "dismiss":
            return HttpRequest(
                method="POST",
                path=f"/question/{asked.native_id}/reject",
                purpose="dismiss the question",
            )
        answers: list[list[str]] = []
        for index, labels in enumerate(asked.labels):
            answer = decision.answers.get(f"q{index}")
            chosen: list[str] = []
            if answer is not None:
                for option_id in answer.option_ids:
                    if not option_id.isdigit() or int(option_id) >= len(labels):
                        raise CodecUsageError(f"question {index}: no option {option_id!r}")
                    chosen.append(labels[int(option_id)])
                if answer.other:
                    chosen.append(answer.other)
            answers.append(chosen)
        return HttpRequest(
            method="POST",
            path=f"/question/{asked.native_id}/reply",
            body={"answers": answers},
            purpose="answer the question",
        )

    def _require_session(self) -> str:
        if self._s.session_id is None:
            raise CodecUsageError("the OpenCode session has not been opened")
        return self._s.session_id

    # --- events ----------------------------------------------------------------------------

    def feed_event(self, event: object) -> list[AgentEvent]:
        """The gateway events one SSE ``data`` object stands for (others' sessions: none)."""
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return [Warning(message=f"unreadable OpenCode event: {str(event)[:200]}")]
        kind: str = event["type"]
        props = event.get("properties")
        if not isinstance(props, dict):
            return []
        sid = props.get("sessionID")
        if sid is not None and sid != self._s.session_id:
            return []  # another session on the same server
        match kind:
            case "message.updated":
                self._note_message(_obj(props.get("info")))
                if self._s.said_agent:
                    return []
                self._s.said_agent = True
                return [ModesOffered(modes=None, current=self._s.agent)]
            case "message.part.delta":
                return self._on_delta(props)
            case "message.part.updated":
                part = props.get("part")
                return self._on_part(part) if isinstance(part, dict) else []
            case "permission.asked":
                return self._on_permission(props)
            case "question.asked":
                return self._on_question(props)
            case "permission.replied":
                self._note_refusal(props)
                return self._closed("permission", props.get("requestID"))
            case "question.replied" | "question.rejected":
                return self._closed(kind.split(".")[0], props.get("requestID"))
            case "session.compacted" if self._s.compacting:
                self._s.compacted = True
                return []
            case "session.error" if self._current():
                return self._on_error(props.get("error"))
            case "session.idle" if self._current():
                return self._turn_over()
        return []

    def _note_refusal(self, props: JsonObject) -> None:
        """A refused permission: its tool is shown denied, and unless the agent goes on (a
        refusal with a message), the turn ended there."""
        asked = self._s.asked.get(_PERMISSION + str(props.get("requestID")))
        if props.get("reply") != "reject" or asked is None:
            return
        if asked.call_id is not None:
            self._s.refused_calls.add(asked.call_id)
        if asked.turn == self._s.turn:
            self._s.refused_last = True

    def _note_message(self, info: JsonObject) -> None:
        message_id = info.get("id")
        if not isinstance(message_id, str):
            return
        role = str(info.get("role"))
        self._s.roles[message_id] = role
        self._s.model = _model_of(info) or self._s.model
        agent = info.get("agent")
        if role == "user" and isinstance(agent, str) and agent and agent != self._s.agent:
            self._s.agent = agent  # said as the session's mode (issue 31's /mode)
            self._s.said_agent = False
        if role == "assistant" and isinstance(info.get("parentID"), str):
            self._s.parents[message_id] = info["parentID"]
        elif role == "user" and message_id not in self._s.users:
            self._s.users.add(message_id)
            if self._s.running and self._s.prompt_message is None:
                self._s.prompt_message = message_id

    def _current(self) -> bool:
        """Whether what the server says now is about the running turn. After an abort,
        1.18.33 may still send the aborted turn's last events (a second ``session.idle``,
        its tool's end) after the next prompt was sent: until the server has shown that
        prompt's user message, they belong to the turn before. A compaction's end is
        current once the server said it compacted."""
        return self._s.prompt_message is not None or self._s.aborting or self._s.compacted

    def _ours_now(self, message_id: object) -> bool:
        """An assistant message of the running turn (the prompt itself is a user message).
        Between turns nothing is: an aborted turn's tool end that comes after its
        ``session.idle`` would otherwise be queued, and shown in the next turn's message if
        the runner has opened it by the time it reads the queue."""
        if not self._s.running:
            return False
        key = str(message_id)
        if self._s.roles.get(key) != "assistant":
            return False
        parent = self._s.parents.get(key)
        return parent is None or parent == self._s.prompt_message

    def _on_delta(self, props: JsonObject) -> list[AgentEvent]:
        if props.get("field") != "text" or not self._ours_now(props.get("messageID")):
            return []
        if self._s.compacting:
            return []  # the summary is the agent's own context, not a reply
        delta = props.get("delta")
        if not delta:
            return []
        self._s.refused_last = False  # the agent went on after a refusal
        return [TextDelta(item_id=str(props.get("partID")), text=delta)]

    def _on_part(self, part: JsonObject) -> list[AgentEvent]:
        part_type = part.get("type")
        if not self._ours_now(part.get("messageID")):
            return []  # the prompt, echoed as a user message's part, or the turn before
        if part_type == "text":
            if self._s.compacting:
                return []  # the summary is the agent's own context, not a reply
            text = part.get("text")
            ended = isinstance(part.get("time"), dict) and "end" in part["time"]
            part_id = str(part.get("id"))
            if ended and isinstance(text, str) and text and part_id not in self._s.said:
                self._s.said.add(part_id)
                self._s.refused_last = False
                return [AgentMessage(item_id=part_id, text=text)]
            return []
        if part_type == "tool":
            return self._on_tool(part)
        step_id = str(part.get("id"))
        if (
            part_type == "step-finish"
            and isinstance(part.get("tokens"), dict)
            and step_id not in self._s.said
        ):
            self._s.said.add(step_id)
            tokens = part["tokens"]
            cost = part.get("cost")
            return [
                Usage(
                    input_tokens=int(tokens.get("input") or 0),
                    output_tokens=int(tokens.get("output") or 0),
                    cost_usd=float(cost) if isinstance(cost, int | float) else None,
                )
            ]
        return []

    def _on_tool(self, part: JsonObject) -> list[AgentEvent]:
        tool = str(part.get("tool"))
        state = _obj(part.get("state"))
        status = state.get("status")
        item_id = str(part.get("id"))
        if tool in _HIDDEN_TOOLS or status == "pending":
            return []
        tool_input = _obj(state.get("input"))
        if tool == "bash":
            kind, title = ToolKind.COMMAND, str(tool_input.get("command") or "a command")
            paths: tuple[str, ...] = ()
        elif tool in _FILE_TOOLS:
            path = tool_input.get("filePath") or tool_input.get("path") or ""
            kind, title, paths = ToolKind.FILE_CHANGE, f"{tool} {path}", (str(path),)
        else:
            kind, title, paths = ToolKind.TOOL_CALL, str(state.get("title") or tool), ()
        events: list[AgentEvent] = []
        if item_id not in self._s.tools_started:
            self._s.tools_started.add(item_id)
            self._s.refused_last = False
            events.append(
                ToolActivity(
                    item_id=item_id, tool=kind, phase=ToolPhase.STARTED, title=title, paths=paths
                )
            )
        if status in ("completed", "error") and item_id not in self._s.tools_done:
            self._s.tools_done.add(item_id)
            meta = _obj(state.get("metadata"))
            exit_code = meta.get("exit")
            output = state.get("output") if status == "completed" else state.get("error")
            ended = "completed" if status == "completed" else "failed"
            if status == "error" and part.get("callID") in self._s.refused_calls:
                ended = "denied"
            events.append(
                ToolActivity(
                    item_id=item_id,
                    tool=kind,
                    phase=ToolPhase.COMPLETED,
                    title=title,
                    status=ended,
                    exit_code=exit_code if isinstance(exit_code, int) else None,
                    output=str(output) if output is not None else None,
                    paths=paths,
                )
            )
        return events

    def _on_permission(self, props: JsonObject) -> list[AgentEvent]:
        native_id = props.get("id")
        if not isinstance(native_id, str):
            return [Warning(message="an OpenCode permission without an id was ignored")]
        key = _PERMISSION + native_id
        if key in self._s.asked or key in self._s.forgotten:
            return []
        call_id = _obj(props.get("tool")).get("callID")
        self._s.asked[key] = _Asked(
            kind="permission",
            native_id=native_id,
            turn=self._s.turn,
            call_id=call_id if isinstance(call_id, str) else None,
        )
        return [InteractionOpened(request=permission_request(key, props))]

    def _on_question(self, props: JsonObject) -> list[AgentEvent]:
        native_id = props.get("id")
        questions = props.get("questions")
        if not isinstance(native_id, str) or not isinstance(questions, list):
            return [Warning(message="an OpenCode question without an id was ignored")]
        key = _QUESTION + native_id
        if key in self._s.asked or key in self._s.forgotten:
            return []
        request = question_request(key, questions)
        labels = tuple(tuple(o.label for o in q.options) for q in request.questions)
        self._s.asked[key] = _Asked(
            kind="question", native_id=native_id, labels=labels, turn=self._s.turn
        )
        return [InteractionOpened(request=request)]

    def _closed(self, kind: str, request_id: object) -> list[AgentEvent]:
        key = f"{kind}:{request_id}"
        if self._s.asked.pop(key, None) is None:
            return []
        return [InteractionClosed(native_key=key, how=Resolution.ANSWERED)]

    def _catch_up(self, messages: list[Any]) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        users: list[str] = []
        for message in messages:
            info = _obj(message.get("info")) if isinstance(message, dict) else {}
            self._note_message(info)
            if info.get("role") == "user" and isinstance(info.get("id"), str):
                users.append(info["id"])
        if users:  # the running turn's prompt is the last user message
            self._s.prompt_message = users[-1]
        for message in _turn_messages(messages):
            info = _obj(message.get("info"))
            for part in message.get("parts") or []:
                if isinstance(part, dict):
                    events += self._on_part(part)
            if isinstance(info.get("error"), dict):
                events += self._on_error(info["error"])
        return events

    def _on_error(self, error: object) -> list[AgentEvent]:
        name = error.get("name") if isinstance(error, dict) else None
        if name == "MessageAbortedError":
            self._s.aborted = True
            return []
        data = error.get("data") if isinstance(error, dict) else None
        message = data.get("message") if isinstance(data, dict) else None
        self._s.error = str(message or name or "the agent reported an error")
        return []

    def _turn_over(self) -> list[AgentEvent]:
        if not self._s.running:
            return []
        self._s.running = False
        # Requests of the turn still open (after an abort the server lists them but never
        # says they ended) are the core's to withdraw; we must not reopen them later.
        for key, asked in list(self._s.asked.items()):
            if asked.turn == self._s.turn:
                del self._s.asked[key]
                self._s.forgotten.add(key)
        refused, self._s.refused_last = self._s.refused_last, False
        compacting, compacted = self._s.compacting, self._s.compacted
        self._s.compacting = self._s.compacted = False
        if self._s.aborted or self._s.aborting:
            return [TurnCompleted(status=TurnStatus.INTERRUPTED)]
        if compacting and not compacted and self._s.error is None:
            why = "OpenCode went idle without saying it compacted the session"
            return [TurnCompleted(status=TurnStatus.FAILED, error=why)]
        if self._s.error is not None:
            return [TurnCompleted(status=TurnStatus.FAILED, error=self._s.error)]
        if refused:
            return [TurnCompleted(status=TurnStatus.INTERRUPTED, error=ENDED_AT_REFUSAL)]
        return [TurnCompleted(status=TurnStatus.COMPLETED)]

    def known_history(self, messages: object) -> None:
        """The resumed session's messages (``GET /session/{id}/message``) before anything is
        sent: a server that outlived the gateway may still be finishing a turn the previous
        gateway started, and its messages (the server sends ``message.updated`` for them
        again) must not be taken for the next prompt's."""
        for message in messages if isinstance(messages, list) else []:
            if isinstance(message, dict):
                self._note_message(_obj(message.get("info")))

    # --- after the event stream was lost ---------------------------------------------------

    def reconcile(
        self,
        permissions: object,
        questions: object,
        statuses: object,
        messages: object = None,
    ) -> list[AgentEvent]:
        """What happened while no events came: ``GET /permission``, ``GET /question``,
        ``GET /session/status`` and, while a turn runs, ``GET /session/{id}/message`` as the
        server answers them now. The turn's messages (those after the last user message)
        bring the text and tool ends that were missed; what was already said is not again."""
        events: list[AgentEvent] = []
        if self._s.running and isinstance(messages, list):
            events += self._catch_up(messages)
        listed: set[str] = set()
        for item in _ours(permissions, self._s.session_id):
            listed.add(_PERMISSION + str(item.get("id")))
            events += self._on_permission(item)
        for item in _ours(questions, self._s.session_id):
            listed.add(_QUESTION + str(item.get("id")))
            events += self._on_question(item)
        for key in [k for k in self._s.asked if k not in listed]:
            # answered (or dismissed) while we were away: its reply event was missed
            del self._s.asked[key]
            events.append(InteractionClosed(native_key=key, how=Resolution.ANSWERED))
        status = statuses.get(self._s.session_id) if isinstance(statuses, dict) else None
        busy = isinstance(status, dict) and status.get("type") in ("busy", "retry")
        if self._s.running and not busy:
            events += self._turn_over()
        return events


def listed_keys(permissions: object, questions: object, session_id: str) -> frozenset[str]:
    """The native keys of the session's requests that ``GET /permission`` and
    ``GET /question`` still list: what a restarted gateway may still answer."""
    return frozenset(
        [_PERMISSION + str(item.get("id")) for item in _ours(permissions, session_id)]
        + [_QUESTION + str(item.get("id")) for item in _ours(questions, session_id)]
    )


def _turn_messages(messages: list[Any]) -> list[JsonObject]:
    """The messages after the last user message: the running turn's."""
    items = [m for m in messages if isinstance(m, dict)]
    users = [i for i, m in enumerate(items) if _obj(m.get("info")).get("role") == "user"]
    return items[users[-1] + 1 :] if users else items


def _model_of(info: JsonObject) -> str | None:
    """A message's model as ``"provider/model"``: a user message's ``model {providerID,
    modelID}``, an assistant message's ``providerID`` and ``modelID``."""
    given = info.get("model")
    named: JsonObject = given if isinstance(given, dict) else info
    provider, model = named.get("providerID"), named.get("modelID")
    if isinstance(provider, str) and isinstance(model, str) and provider and model:
        return f"{provider}/{model}"
    return None


def _obj(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _ours(listed: object, session_id: str | None) -> Iterable[JsonObject]:
    if not isinstance(listed, list):
        return ()
    return [i for i in listed if isinstance(i, dict) and i.get("sessionID") == session_id]


# --- saved permissions ("always" kept by the server) ----------------------------------------


def models_offered(answer: object) -> tuple[str, ...]:
    """The models ``/config/providers`` lists, named as the prompt's model is written
    (``"provider/model"``): ``{providers: [{id, models: {id: {...}}}], default}``."""
    providers = answer.get("providers") if isinstance(answer, dict) else None
    names: list[str] = []
    for provider in providers if isinstance(providers, list) else []:
        if not isinstance(provider, dict) or not isinstance(provider.get("id"), str):
            continue
        models = provider.get("models")
        for model in models if isinstance(models, dict) else {}:
            names.append(f"{provider['id']}/{model}")
    return tuple(names)


def saved_permissions() -> HttpRequest:
    """The server's saved permissions for its project: ``{data: [{id, projectID, action,
    resource}]}``."""
    return HttpRequest(
        method="GET", path="/api/permission/saved", purpose="list its saved permissions"
    )


def matching_saved(listed: Any, permission: str | None, resources: Iterable[str]) -> list[str]:
    """The ids of the saved permissions of ``listed`` (the answer of
    :func:`saved_permissions`) allowing ``permission`` (any, where None) on one of
    ``resources`` (the patterns "always" was given for)."""
    wanted = set(resources)
    data = listed.get("data") if isinstance(listed, dict) else None
    found = []
    for item in data if isinstance(data, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        if item.get("resource") not in wanted:
            continue
        if permission is not None and item.get("action") not in (permission, "*"):
            continue
        found.append(item["id"])
    return found


def remove_saved(saved_id: str) -> HttpRequest:
    return HttpRequest(
        method="DELETE",
        path=f"/api/permission/saved/{quote(saved_id, safe='')}",
        purpose=f"delete the saved permission {saved_id}",
    )


# --- requests as the core shows them ---------------------------------------------------------


def permission_request(key: str, props: Mapping[str, Any]) -> InteractionRequest:
    """``permission.asked`` as an approval: once, always (its patterns), reject."""
    permission = str(props.get("permission") or "tool")
    patterns = [str(p) for p in props.get("patterns") or []]
    always = [str(p) for p in props.get("always") or []]
    meta = _obj(props.get("metadata"))
    detail: Command | FileChange | Text
    if permission == "bash":
        detail = Command(command=str(meta.get("command") or " ".join(patterns)))
        title = "Run a command?"
    elif permission == "edit":
        path = str(meta.get("filepath") or meta.get("filePath") or ", ".join(patterns))
        detail = FileChange(paths=(path,), diff=str(meta.get("diff") or ""))
        title = "Change a file?"
    else:
        detail = Text(text=f"{permission}: {', '.join(patterns)}" if patterns else permission)
        title = f"Allow {permission}?"
    rule = ", ".join(always)
    actions = (
        Action(id="once", label="Allow once", effect=Effect.ALLOW, scope=Scope.ONCE),
        Action(
            id="always",
            label="Always allow",
            effect=Effect.ALLOW,
            scope=Scope.ALWAYS,
            description=(
                f"Allow {permission} matching these patterns without asking again, in every "
                "session of this OpenCode server until it stops"
            ),
            rule=rule,
        ),
        Action(
            id="reject",
            label="Deny",
            effect=Effect.DENY,
            scope=Scope.ONCE,
            # not the gateway's usual "the agent carries on": OpenCode does only with a message
            description=(
                "Refuses it, and OpenCode ends its turn; a refusal with a message lets it go "
                "on with your words."
            ),
        ),
    )
    return InteractionRequest(
        native_key=key,
        kind=InteractionKind.APPROVAL,
        title=title,
        detail=detail,
        actions=actions if always else (actions[0], actions[2]),
    )


def question_request(key: str, questions: list[Any]) -> InteractionRequest:
    """``question.asked`` as a form: ids ``q0``, ``q1``…; option ids their index."""
    asked: list[Question] = []
    for index, item in enumerate(q for q in questions if isinstance(q, dict)):
        options = tuple(
            Option(
                id=str(n), label=str(o.get("label")), description=str(o.get("description") or "")
            )
            for n, o in enumerate(item.get("options") or [])
            if isinstance(o, dict)
        )
        asked.append(
            Question(
                id=f"q{index}",
                header=str(item.get("header") or ""),
                text=str(item.get("question") or ""),
                options=options,
                multi=bool(item.get("multiple")),
                allow_other=item.get("custom") is not False,
            )
        )
    # 1.18.33 ends the turn after a dismissal: the model is not called again until the next
    # prompt, which carries "The user dismissed this question" (lab run_question_reject.log)
    dismiss = Action(
        id="dismiss",
        label="Dismiss",
        effect=Effect.CANCEL,
        description="The agent is told you dismissed it, and its turn ends.",
    )
    first = asked[0] if asked else None
    single = first is not None and len(asked) == 1
    return InteractionRequest(
        native_key=key,
        kind=InteractionKind.QUESTION,
        title=(first.header or first.text) if single and first else "The agent has questions",
        summary=first.text if single and first else f"{len(asked)} questions",
        questions=tuple(asked),
        actions=(dismiss,),
    )
