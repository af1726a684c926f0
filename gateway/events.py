"""What adapters emit (AgentEvent) and what the core asks of them (AgentCommand)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gateway.attachments import SavedFile
from gateway.domain import Decision, InteractionRequest, Resolution, TurnStatus

__all__ = [
    "DETACHED",
    "AgentCommand",
    "AgentEvent",
    "AgentExited",
    "AgentMessage",
    "Capabilities",
    "Compact",
    "InteractionClosed",
    "InteractionOpened",
    "Interrupt",
    "ModelsOffered",
    "ModesOffered",
    "NameSession",
    "PolicyChanged",
    "Prompt",
    "Respond",
    "SessionNamed",
    "SessionStarted",
    "Steer",
    "SteerRefused",
    "SteerTaken",
    "TextDelta",
    "ToolActivity",
    "ToolKind",
    "ToolPhase",
    "TurnCompleted",
    "TurnStarted",
    "Usage",
    "Warning",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What an adapter can do, declared before it starts; the core degrades honestly."""

    structured_events: bool = True
    bidirectional_control: bool = False
    interactive_questions: bool = False
    human_approval: bool = False
    session_resume: bool = False
    interrupt: bool = False
    sandbox: bool = False
    # text given to a running turn enters it (Codex turn/steer); without it, text waits for
    # the turn's end (gateway/sessions/steering.py)
    steer: bool = False
    # the agent compacts its own context on request (Codex thread/compact/start)
    compact: bool = False
    # the agent keeps a name for its session (Codex thread/name/set): NameSession is sent to
    # it, and SessionStarted.native_name says the name it has
    names_sessions: bool = False
    # pictures sent in chat go to it as images (Prompt.images: Codex localImage, Claude image
    # blocks); without it they are saved and named in the prompt's text like any file
    pictures: bool = False
    # the largest picture it takes as one (Claude: the Messages API's 5 MB, base64 in one
    # line); a larger one is named like any file. None: no limit of its own
    picture_max_bytes: int | None = None
    # other files sent in chat go to it as links it reads (ACP resource_link: Prompt.files);
    # without it they are named in the prompt's text with their saved path
    file_links: bool = False


# --- events --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionStarted:
    native_id: str
    agent_version: str | None = None
    policy: dict[str, str] = field(default_factory=dict)  # the policy actually in force
    resumed: bool = False
    # the name the agent keeps for the session (where Capabilities.names_sessions): a
    # session named while the agent did not take it is named again at its start
    native_name: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStarted:
    turn_native_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    item_id: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentMessage:
    item_id: str
    text: str


class ToolKind(StrEnum):
    COMMAND = "command"
    FILE_CHANGE = "file_change"
    TOOL_CALL = "tool_call"


class ToolPhase(StrEnum):
    STARTED = "started"
    OUTPUT = "output"
    COMPLETED = "completed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolActivity:
    item_id: str
    tool: ToolKind
    phase: ToolPhase
    title: str
    status: str | None = None  # native status: completed, failed, declined, ...
    exit_code: int | None = None
    output: str | None = None
    paths: tuple[str, ...] = ()
    diff: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class InteractionOpened:
    request: InteractionRequest


@dataclass(frozen=True, kw_only=True, slots=True)
class InteractionClosed:
    native_key: str
    how: Resolution


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCompleted:
    status: TurnStatus
    error: str | None = None
    turn_native_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens used since the last Usage event (an increment), and how full the model's
    context is now: ``context_tokens`` of ``context_window`` (None where not reported)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    context_tokens: int | None = None
    context_window: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyChanged:
    """The agent now runs under another policy (a plan approved, a mode granted): the whole
    policy in force, as ``SessionStarted.policy``, and what a person is told."""

    policy: dict[str, str]
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Warning:
    message: str
    code: str = "warning"


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentExited:
    code: int | None
    stderr_tail: str = ""
    # "exited", "killed", "line_too_long", "protocol_error", "stopped", or DETACHED
    reason: str = ""


# AgentExited.reason of a runtime the gateway let go of without ending it (an attached
# OpenCode server): it may live on, and its requests with it
DETACHED = "detached"


@dataclass(frozen=True, kw_only=True, slots=True)
class SteerTaken:
    """The agent took the text of :class:`Steer` ``key`` into its running turn."""

    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SteerRefused:
    """The agent refused the text of :class:`Steer` ``key`` (the turn it named had ended,
    or is one that cannot be steered): the text was not taken, it waits for its own turn."""

    key: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelsOffered:
    """The models the agent says it offers this session (issue 31's ``/model`` is checked
    against them): Claude Code's ``initialize`` answer, an ACP session's config option of
    the model category, Codex's ``model/list`` where its catalog is the provider's. Each
    name as ``/model`` may be given it (a Claude alias and the model it resolves to are
    both named). An agent that does not say (or cannot tell) emits none."""

    models: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class ModesOffered:
    """The modes the agent offers this session and the one it runs in (issue 31's
    ``/mode`` for an agent whose modes are its own ids): an ACP agent's session modes
    (``session/new``'s ``modes``, a ``current_mode_update``), OpenCode's agent of the
    session's last message. ``modes`` None: the agent does not list them."""

    modes: tuple[str, ...] | None
    current: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionNamed:
    """The agent acknowledged :class:`NameSession` ``name`` (Codex answered
    ``thread/name/set``): it keeps the name, which need not be given again."""

    name: str


AgentEvent = (
    SessionStarted
    | TurnStarted
    | TextDelta
    | AgentMessage
    | ToolActivity
    | InteractionOpened
    | InteractionClosed
    | TurnCompleted
    | Usage
    | PolicyChanged
    | Warning
    | AgentExited
    | SteerTaken
    | SteerRefused
    | ModelsOffered
    | ModesOffered
    | SessionNamed
)


# --- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Prompt:
    text: str
    # Codex's collaboration mode for this turn: "plan" or "default"; None: the agent's own
    # (the project's setting). Only Codex app-server has modes: the gateway asks a mode of
    # no other agent (/plan is refused there), and their codecs ignore it.
    mode: str | None = None
    # issue 31: the model a person chose with /model, for this turn and the next (Codex's
    # turn/start ``model``, Claude Code's ``set_model``); None: the agent's own. Only agents
    # whose project may list ``models`` are asked one; the others' codecs ignore it.
    model: str | None = None
    # issue 31: the permission mode a person chose with /mode (Codex's approval policy and
    # sandbox, on turn/start for this turn and the next); None: the project's, as started
    approval_policy: str | None = None
    sandbox: str | None = None
    # Claude Code's (set_permission_mode), an ACP agent's session mode (session/set_mode),
    # OpenCode's agent (the prompt's agent)
    permission_mode: str | None = None
    # issue 32: pictures sent with the prompt, saved in the session's inbox, for an agent
    # whose capabilities say ``pictures`` (the only ones given any); every other file sent
    # is named in ``text`` (gateway.attachments.files_in_prompt)
    images: tuple[SavedFile, ...] = ()
    # ... and the other files, for an agent whose capabilities say ``file_links`` (for any
    # other agent they are named in ``text``)
    files: tuple[SavedFile, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Respond:
    native_key: str
    decision: Decision


@dataclass(frozen=True, kw_only=True, slots=True)
class Interrupt:
    pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Steer:
    """Text for the running turn (only to an agent whose capabilities say ``steer``): the
    agent answers with :class:`SteerTaken` or :class:`SteerRefused` of the same ``key``, or
    the codec refuses it at once (CodecUsageError) when no turn it could steer runs."""

    key: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Compact:
    """The agent's own compaction of its context, run as a turn of its own (only to an agent
    whose capabilities say ``compact``); it ends with TurnCompleted like any turn. ``model``:
    the one chosen with /model, for an agent that summarizes with a model named per call
    (OpenCode); None: the agent's own."""

    model: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class NameSession:
    """Name the agent's own session, where the agent keeps names (Codex ``thread/name/set``;
    issue 31's ``/name``); an agent without names ignores it."""

    name: str


AgentCommand = Prompt | Respond | Interrupt | Steer | Compact | NameSession
