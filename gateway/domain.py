"""The domain vocabulary shared by adapters, the core and platforms (DESIGN.md).

Plain frozen keyword-only dataclasses. Nothing here knows a platform SDK or an agent's wire
names: adapters translate native messages into these, platforms render them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "SHORT_ID_CHARS",
    "Action",
    "Actor",
    "AgentKind",
    "Answer",
    "Command",
    "ConversationRef",
    "Decision",
    "Detail",
    "Effect",
    "FileChange",
    "InteractionKind",
    "InteractionOrigin",
    "InteractionRequest",
    "InteractionState",
    "Network",
    "Option",
    "OutgoingFile",
    "Permissions",
    "Plan",
    "Question",
    "Resolution",
    "RunState",
    "Scope",
    "Text",
    "TurnStatus",
]


SHORT_ID_CHARS = 10  # interaction and session ids: what an action token must hold


class AgentKind(StrEnum):
    CODEX_APP_SERVER = "codex-app-server"
    CODEX_EXEC = "codex-exec"
    CLAUDE_CODE = "claude-code"
    ACP = "acp"
    OPENCODE = "opencode"


class InteractionKind(StrEnum):
    APPROVAL = "approval"
    QUESTION = "question"
    PLAN = "plan"
    AUTHENTICATION = "authentication"  # reserved: reported as unsupported, never rendered


class InteractionOrigin(StrEnum):
    """Who asks (issue 31): what a decision's delivery is, and what ends the interaction.

    ``agent``: the agent's own request, answered through its native key, tied to the runtime
    epoch that asked. ``plan``: the gateway's plan card (gateway/interactions/plans.py): its
    decision is queued as the next turn, which resolves it, and a new turn supersedes it.
    ``setting``: a setting change a person asked for that an approver must accept (a looser
    /mode): its delivery is applying the setting, once; no turn ends it and no epoch's end
    orphans it (gateway/interactions/setting_change.py).
    """

    AGENT = "agent"
    PLAN = "plan"
    SETTING = "setting"


class InteractionState(StrEnum):
    PENDING = "pending"
    DECIDED = "decided"
    DELIVERED = "delivered"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    ORPHANED = "orphaned"
    UNKNOWN = "unknown"


class Resolution(StrEnum):
    """How an interaction ended (the third fact)."""

    ANSWERED = "answered"
    CANCELLED_BY_AGENT = "cancelled_by_agent"
    STOPPED = "stopped"  # a person stopped the turn (/stop); the agent withdrew it then
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    ORPHANED = "orphaned"
    UNKNOWN = "unknown"


class RunState(StrEnum):
    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    WAITING_PLAN_REVIEW = "waiting_plan_review"
    WAITING_INPUT = "waiting_input"
    FAILED = "failed"
    STOPPED = "stopped"


class TurnStatus(StrEnum):
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class Effect(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    CANCEL = "cancel"  # deny and stop the turn


class Scope(StrEnum):
    ONCE = "once"
    TURN = "turn"
    SESSION = "session"
    ALWAYS = "always"


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationRef:
    platform: str
    space: str | None
    channel: str
    thread: str | None = None

    def key(self) -> str:
        return "/".join((self.platform, self.space or "", self.channel, self.thread or ""))


@dataclass(frozen=True, kw_only=True, slots=True)
class Actor:
    """A person on a platform. ``roles`` are the ids of the roles they hold where the
    platform has roles (a Discord member's), as seen with the message or click that
    brought them; empty elsewhere and in direct messages. They are not part of who the
    person is (not compared, never stored): only ``role:<id>`` auth entries read them."""

    platform: str
    user_id: str
    display: str = ""
    roles: tuple[str, ...] = field(default=(), compare=False)

    def key(self) -> str:
        return f"{self.platform}:{self.user_id}"

    def __str__(self) -> str:
        return self.display or self.key()


# --- what an interaction shows -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """A command the agent wants to run (or input for a running terminal)."""

    command: str
    cwd: str | None = None
    reason: str | None = None
    stdin_for_running_process: bool = False  # Codex kind=writeStdin: not a new command


@dataclass(frozen=True, kw_only=True, slots=True)
class Network:
    """A network access the agent asks for (no command involved)."""

    host: str
    protocol: str | None = None
    port: int | None = None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FileChange:
    paths: tuple[str, ...]
    diff: str
    reason: str | None = None
    grant_root: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Permissions:
    """Extra permissions asked for: what, and for how long (turn or session)."""

    description: str
    scope: Scope
    reason: str | None = None
    requested: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    markdown: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OutgoingFile:
    """A file the agent asks to send to the chat (``send_file``, issue 33), as the gateway
    found it once opened: where it really is in the work dir, its size, its type sniffed
    from its first bytes, and for text its first lines. ``reason``: why a person is asked
    (a dotfile, under .git/, larger than the limit), empty when a rule asks."""

    path: str  # relative to the session's work dir
    size: int
    media_type: str
    preview: str | None = None
    caption: str | None = None
    reason: str | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


Detail = Command | Network | FileChange | Permissions | Plan | Text | OutgoingFile


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """One choice the agent offers; ``id`` is what a decision names.

    ``label`` is short (a button on a phone); ``description`` says what it does; ``rule`` is
    the exact lasting rule it adds where it adds one (a command prefix, a permission rule),
    shown whole beside the description, never in the label, where it would be cut."""

    id: str
    label: str
    effect: Effect
    scope: Scope = Scope.ONCE
    description: str = ""
    rule: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    id: str
    label: str
    description: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Question:
    id: str
    header: str
    text: str
    options: tuple[Option, ...] = ()
    multi: bool = False
    allow_other: bool = False
    secret: bool = False
    required: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class InteractionRequest:
    """A blocking request of the agent, as the adapter reports it.

    ``native_key`` is opaque to everything but the adapter that made it; the core gives the
    interaction its own id and never shows the native key.
    """

    native_key: str
    kind: InteractionKind
    title: str
    summary: str = ""
    detail: Detail | None = None
    actions: tuple[Action, ...] = ()
    questions: tuple[Question, ...] = ()
    turn_native_id: str | None = None
    origin: InteractionOrigin = InteractionOrigin.AGENT


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """The answer to one question: option ids, plus free text where "other" was allowed."""

    option_ids: tuple[str, ...] = ()
    other: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """What a person decided: an action (approvals, plans) or answers (questions)."""

    action_id: str | None = None
    answers: dict[str, Answer] = field(default_factory=dict)
    message: str | None = None  # feedback the agent sees (deny with a message, keep planning)
