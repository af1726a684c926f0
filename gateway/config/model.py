"""The TOML configuration, validated by pydantic (DESIGN.md, Configuration).

``config.example.toml`` documents every key. Loading is three passes over plain data:

1. ``tomllib`` parses the text; ``${ENV_VAR}`` references are replaced from the environment
   and ``<secret>_file`` keys are replaced by the content of the file they name.
2. pydantic validates the shape (unknown keys are errors). Each ``[platforms.<name>]`` table
   is validated by its own platform's model, which the core gets from the
   :class:`~gateway.config.platform_tables.PlatformRegistry` it is handed (``platforms=``): the core
   names no platform. A name the registry does not know is an error that lists the known
   ones, and a table with a key missing or unknown is followed by its help in the error.
3. Rules that span keys are checked: dangerous agent modes need ``allow_dangerous = true``,
   every enabled platform needs an ``allow_from`` for every project (fail closed), options
   for another agent are refused, the data dir must not lie inside a work dir, and each
   platform's own rules (``PlatformConfig.problems``).

Every problem names the dotted key and the line of the file it was found on; secrets never
appear in a message or a repr (``SecretStr``). Checks that look at the machine (the work dir
exists, the agent binary is on PATH) are a separate step: :func:`check_config`.

Callers pass the registry; ``platforms.registry`` has :func:`parse_config` and
:func:`load_config` with the gateway's own registry bound.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gateway.config.hmac_key import read_hmac_key
from gateway.config.ledger_url import PgPool, PgTarget, PgTimeouts, check_url
from gateway.config.platform_tables import (
    AUTH_TABLES,
    NonEmpty,
    PlatformConfig,
    PlatformRegistry,
    PlatformsSection,
    known_auth_tables,
)
from gateway.config.policy_rules import PolicyRule, policy_problems
from gateway.config.sources import KeyLocator, Loc, resolve_references
from gateway.domain import AgentKind
from gateway.errors import ConfigError, StoreError
from gateway.schedule_times import ScheduleTimeError, cron_of, zone_of

__all__ = [
    "DANGEROUS",
    "DEFAULT_ARGV",
    "DEFAULT_DATA_DIR",
    "HOST_PATTERN",
    "AgentOptions",
    "ApprovalPolicy",
    "BusyInput",
    "CollaborationMode",
    "Config",
    "ConfigProblem",
    "ExpiryOutcome",
    "ExpiryPolicy",
    "FilesPolicy",
    "GatewaySection",
    "HostName",
    "LogLevel",
    "PermissionMode",
    "PlatformAuth",
    "PlatformsSection",
    "ProjectConfig",
    "RetentionSection",
    "SandboxMode",
    "ScheduleEntry",
    "SendFilePolicy",
    "SessionScope",
    "check_config",
    "load_config",
    "parse_config",
    "read_password",
]

DEFAULT_DATA_DIR = Path("~/.local/share/agent-gateway")


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class SessionScope(StrEnum):
    """How a conversation maps to an agent session."""

    THREAD = "thread"  # one session per thread (or per chat/channel where there are none)
    CHANNEL = "channel"  # one session per channel, shared by its threads
    USER = "user"  # one session per person, wherever they write


class BusyInput(StrEnum):
    """What a message typed while the agent works does (issue 31, Steering)."""

    QUEUE = "queue"  # it waits for the turn's end and runs as a turn of its own
    STEER = "steer"  # it goes into the running turn, where the agent takes it (Codex)


class ApprovalPolicy(StrEnum):
    """Codex ``AskForApproval`` (app-server schema 0.171)."""

    UNTRUSTED = "untrusted"
    ON_REQUEST = "on-request"
    NEVER = "never"


class SandboxMode(StrEnum):
    """Codex ``SandboxMode`` (app-server schema 0.171)."""

    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


class PermissionMode(StrEnum):
    """Claude Code ``--permission-mode`` choices (claude 2.1.197 --help)."""

    DEFAULT = "default"
    ACCEPT_EDITS = "acceptEdits"
    PLAN = "plan"
    DONT_ASK = "dontAsk"  # refuses whatever is not pre-allowed: nobody is asked, nothing runs
    AUTO = "auto"  # a classifier decides instead of a person: the agent approves itself
    BYPASS_PERMISSIONS = "bypassPermissions"


class CollaborationMode(StrEnum):
    """Codex ``ModeKind`` (app-server schema 0.171): the mode a project's turns run in."""

    DEFAULT = "default"
    PLAN = "plan"  # the agent proposes a plan, shown as a card, and changes nothing


class ExpiryOutcome(StrEnum):
    """What the agent is told when a pending interaction expires ("timed out")."""

    DENY = "deny"
    CANCEL = "cancel"  # deny and stop the turn


# Modes in which nobody is asked: refused unless the project says allow_dangerous = true.
DANGEROUS: Mapping[str, frozenset[str]] = {
    "approval_policy": frozenset({ApprovalPolicy.NEVER}),
    "sandbox": frozenset({SandboxMode.DANGER_FULL_ACCESS}),
    "permission_mode": frozenset({PermissionMode.BYPASS_PERMISSIONS, PermissionMode.AUTO}),
}

DEFAULT_ARGV: Mapping[AgentKind, tuple[str, ...]] = {
    AgentKind.CODEX_APP_SERVER: ("codex",),
    AgentKind.CODEX_EXEC: ("codex",),
    AgentKind.CLAUDE_CODE: ("claude",),
    AgentKind.OPENCODE: ("opencode",),
    # AgentKind.ACP: none; an ACP agent is named by its argv (_agent_problems)
}

_CODEX_ONLY = frozenset({"approval_policy", "sandbox", "features", "collaboration_mode"})
_APP_SERVER_ONLY = frozenset({"collaboration_mode"})
_CLAUDE_ONLY = frozenset({"permission_mode", "allowed_tools", "disallowed_tools", "extra_args"})
_OPENCODE_ONLY = frozenset({"url", "password_file"})  # an OpenCode server the gateway attaches to
# issue 31: the models /model offers; only where the gateway can set a turn's model (Codex
# app-server's turn/start, Claude Code's set_model, OpenCode's prompt, an ACP agent's model
# config option), see docs/decisions.md
_NO_MODEL_CHOICE = frozenset({"models"})
# issue 31: the permission modes /mode may set: Codex app-server (turn/start), Claude Code
# (set_permission_mode), an ACP agent's session modes (session/set_mode) and OpenCode's
# agents (the prompt's agent)
_NO_MODE_CHOICE = frozenset({"allowed_modes"})
# the agent options each kind does not take (ACP's session/new has no policy or model)
_NOT_FOR: Mapping[AgentKind, frozenset[str]] = {
    AgentKind.CODEX_APP_SERVER: _CLAUDE_ONLY | _OPENCODE_ONLY,
    AgentKind.CODEX_EXEC: _CLAUDE_ONLY
    | _APP_SERVER_ONLY
    | _OPENCODE_ONLY
    | _NO_MODEL_CHOICE
    | _NO_MODE_CHOICE,
    AgentKind.CLAUDE_CODE: _CODEX_ONLY | _OPENCODE_ONLY,
    AgentKind.ACP: _CODEX_ONLY | _CLAUDE_ONLY | _OPENCODE_ONLY | {"model"},
    # OpenCode: its model and provider are its own config; the session's rules ask for every
    # tool, so no Codex or Claude option means anything to it
    AgentKind.OPENCODE: _CODEX_ONLY | _CLAUDE_ONLY | {"model"},
}
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
EnvName = Annotated[str, StringConstraints(pattern=_ENV_NAME)]
# a host as ``run --host`` names it (default: the machine's hostname)
# (up to 58 characters: "host_<name>" is its NOTIFY channel, an identifier of 63 bytes at most)
HOST_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,57}$"
HostName = Annotated[str, StringConstraints(pattern=HOST_PATTERN)]


def _auth_table(name: str, info: ValidationInfo) -> str:
    """Whose user ids an ``auth`` table lists: a name the platform registry gives."""
    known = known_auth_tables(info)
    if name not in known:
        raise ValueError(f"unknown platform; one of {', '.join(sorted(known))}")
    return name


AuthTableName = Annotated[str, AfterValidator(_auth_table)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _expand_path(value: Path, info: ValidationInfo) -> Path:
    """``~`` is expanded; a relative path is relative to the config file's directory."""
    path = value.expanduser()
    base = info.context.get("base_dir") if isinstance(info.context, dict) else None
    if not path.is_absolute() and isinstance(base, Path):
        path = base / path
    return path


def _optional_path(value: Path | None, info: ValidationInfo) -> Path | None:
    return None if value is None else _expand_path(value, info)


def _known_zone(value: str | None) -> str | None:
    """A time zone key (``time_zone``), refused with the schedule's own words when unknown."""
    if value is not None:
        try:
            zone_of(value)
        except ScheduleTimeError as exc:
            raise ValueError(str(exc)) from None
    return value


# --- sections ------------------------------------------------------------------------------


class RetentionSection(_Model):
    """``[gateway.retention]`` (issue 36; gateway/store/retention.py): how long the ledger
    keeps texts, and how long the rows the audit export is built from."""

    # prune in the background (each host; one at a time on PostgreSQL); false: only
    # "agent-gateway prune" prunes
    enabled: bool = True
    # prompt texts, turn timeline text, a closed request's details (and, with files into the
    # agent, their inbox files)
    text_days: float = Field(default=30.0, gt=0, le=36_500)
    # interactions, decisions, votes, cards and audit entries: the audit export's rows
    audit_days: float = Field(default=365.0, gt=0, le=36_500)
    every_minutes: float = Field(default=60.0, gt=0, le=10_080)
    batch_rows: int = Field(default=100, ge=1, le=100_000)

    @model_validator(mode="after")
    def _texts_go_first(self) -> RetentionSection:
        if self.text_days > self.audit_days:
            raise ValueError("text_days is at most audit_days (texts go first, the audit last)")
        return self


class GatewaySection(_Model):
    data_dir: Path = Field(default=DEFAULT_DATA_DIR, validate_default=True)
    log_level: LogLevel = LogLevel.INFO
    queue_depth: int = Field(default=20, ge=1, le=10_000)
    stop_grace_seconds: float = Field(default=5.0, gt=0, le=600)
    # The ledger: None, SQLite in data_dir; "postgresql://user@host:port/db?sslmode=..." a
    # PostgreSQL database (issue 18). Its password never in the URL: store_password
    # ("${ENV}") or store_password_file.
    store: NonEmpty | None = None
    store_password: SecretStr | None = None
    # Several hosts on one PostgreSQL ledger (issue 19): the key that signs the buttons, the
    # same file on every host so that a card minted on one is valid on another. Read, never
    # created (gateway.config.hmac_key.read_hmac_key). None: <data_dir>/hmac.key, made on first
    # start.
    hmac_key_file: Path | None = None
    # Several hosts: each holds the lease host:<name> while it runs, renewed every third of
    # this; a host whose lease lapses for longer is reaped by another (its live requests
    # orphaned, "host X stopped"). Unused with SQLite.
    host_lease_seconds: float = Field(default=15.0, ge=0.3, le=600)
    # PostgreSQL: how long the ledger may take (gateway.config.ledger_url.PgTimeouts): a
    # statement, a wait for a lock, a peer's session left inside a transaction, a connection.
    # A store call that gets no answer a little past the statement's time is given up and its
    # connection replaced. Unused with SQLite.
    store_statement_seconds: float = Field(default=10.0, ge=0.1, le=3600)
    store_lock_seconds: float = Field(default=5.0, ge=0.1, le=3600)
    store_idle_in_transaction_seconds: float = Field(default=10.0, ge=0.1, le=3600)
    store_connect_seconds: float = Field(default=5.0, ge=1, le=600)
    # PostgreSQL (issue 36): the connections a host's store holds, writers (its store calls
    # run side by side on them) and read-only ones (the console, /pending, the audit export),
    # beside a few fixed ones (gateway/store/budget.py); every host's sum stays under the
    # server's max_connections (docs/deploy.md). Unused with SQLite (one writer).
    store_pool_size: int = Field(default=6, ge=1, le=100)
    store_read_pool_size: int = Field(default=3, ge=1, le=100)
    retention: RetentionSection = Field(default_factory=RetentionSection)
    # Scheduled work (issue 35, /every and /at): the shortest time between two runs of one
    # schedule, the most schedules a project may have, how late a run missed while every host
    # was down may still run once (else it is recorded as skipped), the longest prompt text,
    # and how often the scheduler looks again when nothing tells it
    schedule_min_interval_minutes: float = Field(default=5.0, ge=1, le=10_080)
    schedule_max_per_project: int = Field(default=20, ge=1, le=1000)
    schedule_grace_minutes: float = Field(default=60.0, ge=0, le=10_080)
    schedule_text_max_chars: int = Field(default=4000, ge=1, le=100_000)
    schedule_poll_seconds: float = Field(default=30.0, gt=0, le=3600)

    _paths = field_validator("data_dir", mode="after")(_expand_path)
    _key_path = field_validator("hmac_key_file", mode="after")(_optional_path)

    @field_validator("store", mode="after")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("store is a postgresql:// URL (leave it out for SQLite in data_dir)")
        try:
            check_url(value)
        except StoreError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _password_needs_a_store(self) -> GatewaySection:
        if self.store_password is not None and self.store is None:
            raise ValueError("store_password is for a PostgreSQL store: set store too")
        return self

    def ledger_target(self) -> PgTarget | None:
        """Where the ledger lives: None for SQLite in data_dir."""
        if self.store is None:
            return None
        password = self.store_password
        return PgTarget(
            url=self.store,
            password=None if password is None else password.get_secret_value(),
            timeouts=PgTimeouts(
                statement=self.store_statement_seconds,
                lock=self.store_lock_seconds,
                idle_in_transaction=self.store_idle_in_transaction_seconds,
                connect=self.store_connect_seconds,
            ),
            pool=PgPool(writers=self.store_pool_size, readers=self.store_read_pool_size),
        )


class AgentOptions(_Model):
    argv: tuple[NonEmpty, ...] | None = Field(default=None, min_length=1)
    env: dict[EnvName, SecretStr] = Field(default_factory=dict)
    env_allowlist: tuple[EnvName, ...] = ()
    model: NonEmpty | None = None
    # issue 31: the models a person may pick with /model (empty: /model changes nothing)
    models: tuple[NonEmpty, ...] = ()
    # issue 31: the approval policies and sandboxes (Codex app-server), the permission modes
    # (Claude Code), or the agent's own mode ids (ACP session modes, OpenCode agents; written
    # tightest first) a person may set with /mode; a looser one waits for an approver
    allowed_modes: tuple[
        Annotated[
            ApprovalPolicy | SandboxMode | PermissionMode | NonEmpty,
            Field(union_mode="left_to_right"),
        ],
        ...,
    ] = ()
    approval_policy: ApprovalPolicy = ApprovalPolicy.ON_REQUEST
    sandbox: SandboxMode = SandboxMode.WORKSPACE_WRITE
    permission_mode: PermissionMode = PermissionMode.DEFAULT
    allowed_tools: tuple[NonEmpty, ...] = ()  # Claude --allowedTools
    disallowed_tools: tuple[NonEmpty, ...] = ()  # Claude --disallowedTools
    extra_args: tuple[NonEmpty, ...] = ()  # Claude: more arguments for its command line
    features: tuple[NonEmpty, ...] = ()
    # Codex: the mode of a turn that asks for none ("plan": every request is planned first).
    # None: the thread's own (default, or the last mode a turn asked for)
    collaboration_mode: CollaborationMode | None = None
    allow_dangerous: bool = False
    # OpenCode attached mode: a server someone else runs (it outlives the gateway, which never
    # starts or ends it), reached at ``url`` with the OPENCODE_SERVER_PASSWORD in
    # ``password_file`` (its first line). Both or neither.
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s/]+(/[^\s]*)?$")] | None = None
    password_file: Path | None = None

    _paths = field_validator("password_file", mode="after")(_optional_path)

    def agent_env(self) -> dict[str, str]:
        """The project's ``env`` table in clear, for the agent's environment only."""
        return {name: value.get_secret_value() for name, value in self.env.items()}


class ExpiryPolicy(_Model):
    after_seconds: float | None = Field(default=None, gt=0)  # None: never expires
    outcome: ExpiryOutcome = ExpiryOutcome.DENY


class FilesPolicy(_Model):
    """[projects.<name>.files]: files a person sends with a message (issue 32). The defaults
    are under every platform's own: a Telegram bot downloads 20 MB from the cloud Bot API
    (a self-hosted Bot API server allows more, so the limit is read from here)."""

    # where they are saved, relative to work_dir and inside it; reached without following
    # links (gateway/sessions/upload_inbox.py), with a .gitignore of "*" so never committed
    inbox: Path = Path(".agent-gateway/inbox")
    max_file_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    max_prompt_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    # media types refused (as sniffed from the bytes: "application/x-msdownload", "image/*")
    refuse_types: tuple[NonEmpty, ...] = ()

    @field_validator("inbox", mode="after")
    @classmethod
    def _inside_work_dir(cls, value: Path) -> Path:
        if value.is_absolute() or not value.parts or ".." in value.parts:
            raise ValueError("inbox is a folder inside work_dir, written relative to it")
        if "," in str(value):  # codex exec --image splits a picture's path at commas
            raise ValueError("inbox: a folder name without a comma")
        return value

    @model_validator(mode="after")
    def _file_under_prompt(self) -> FilesPolicy:
        if self.max_file_bytes > self.max_prompt_bytes:
            raise ValueError("max_file_bytes is larger than max_prompt_bytes")
        return self

    def refuses(self, media_type: str) -> bool:
        """Whether ``media_type`` (sniffed) is one of ``refuse_types`` ("image/*" too)."""
        major = media_type.split("/", 1)[0]
        return any(t in (media_type, f"{major}/*") for t in self.refuse_types)


class SendFilePolicy(_Model):
    """``[projects.X.send_file]``: files the agent sends to the chat (issue 33)."""

    enabled: bool = True  # false: the agents of this project are not given send_file
    max_mb: float = Field(default=50.0, gt=0, le=2000)  # larger: refused, the agent is told
    # larger than this: a person is asked first even where no rule says so
    ask_above_mb: float = Field(default=10.0, gt=0)

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1024 * 1024)

    @property
    def ask_above_bytes(self) -> int:
        return int(self.ask_above_mb * 1024 * 1024)


class PlatformAuth(_Model):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    allow_from: tuple[NonEmpty, ...] = ()  # user ids on that platform, or "*" for anyone
    approvers: tuple[NonEmpty, ...] | None = None  # None: the session's own initiator
    # which conversations of that platform go to this project: chat/channel ids, or "*";
    # the first project (in file order) that matches takes the conversation
    channels: tuple[NonEmpty, ...] = ("*",)


class ScheduleEntry(_Model):
    """``[[projects.X.schedule]]`` (issue 35): a schedule of the config file, read-only from
    the chat. ``name`` is its id across hosts and restarts; ``channel`` where its runs are
    said and shown, written as a policy rule's ``escalate_to`` writes one
    (``"slack:#T1/C0DEV"``, ``"telegram:#-1001"``); ``creator`` the account it runs as
    (``"slack:U123"``): it must be allowed to talk to the project at every run, and decides
    the runs' requests where the project names no approvers."""

    name: Name
    cron: NonEmpty
    text: NonEmpty
    channel: NonEmpty
    creator: NonEmpty
    time_zone: NonEmpty | None = None  # None: the project's
    # run in the project's open session of this name (/name), not a fresh one; only while it
    # holds no session grant and no mode a person chose, else the run is skipped and said
    session: NonEmpty | None = None

    @field_validator("cron", mode="after")
    @classmethod
    def _cron(cls, value: str) -> str:
        try:
            return cron_of(value)
        except ScheduleTimeError as exc:
            raise ValueError(str(exc)) from None

    _zone = field_validator("time_zone", mode="after")(_known_zone)

    @field_validator("channel", mode="after")
    @classmethod
    def _channel(cls, value: str) -> str:
        platform, colon, rest = value.partition(":")
        if not colon or not platform or not rest.startswith("#") or not rest[1:].rpartition("/")[2]:
            raise ValueError(
                'a channel is written "platform:#channel" or "platform:#space/channel"'
            )
        return value

    @field_validator("creator", mode="after")
    @classmethod
    def _creator(cls, value: str) -> str:
        platform, colon, user = value.partition(":")
        if not colon or not platform or not user:
            raise ValueError('the creator is an account, written "platform:user id"')
        return value


class ProjectConfig(_Model):
    work_dir: Path
    agent: AgentKind
    # the host its agents run on and its work_dir lives on (``run --host NAME``); required
    # with a PostgreSQL store, refused without one (_host_problems)
    host: HostName | None = None
    scope: SessionScope = SessionScope.THREAD
    # "steer": a message typed during a turn goes into it where the agent takes it, except
    # while a request of the turn waits for a decision (gateway/sessions/steering.py)
    busy_input: BusyInput = BusyInput.QUEUE
    # minutes with no turn running, nothing queued and no request open after which the
    # agent's process is ended (gateway/sessions/idle.py); the next message resumes its
    # session natively. None: never. Not for an attached OpenCode server, never ended
    idle_minutes: float | None = Field(default=None, gt=0)
    agent_options: AgentOptions = Field(default_factory=AgentOptions)
    expiry: ExpiryPolicy = Field(default_factory=ExpiryPolicy)
    files: FilesPolicy = Field(default_factory=FilesPolicy)
    send_file: SendFilePolicy = Field(default_factory=SendFilePolicy)
    auth: dict[AuthTableName, PlatformAuth] = Field(default_factory=dict)
    policy: tuple[PolicyRule, ...] = ()  # [[projects.X.policy]]: first match wins
    # the IANA zone its schedules' times are read in (issue 35), unless a person's own; None: UTC
    time_zone: NonEmpty | None = None
    schedule: tuple[ScheduleEntry, ...] = ()  # [[projects.X.schedule]]: names unique
    # who may make, change and delete the project's schedules besides its approvers:
    # accounts ("slack:U1"), people or groups, as a policy rule's approvers are written
    schedulers: tuple[NonEmpty, ...] = ()
    # tables whose keys may be written in this one (the "did you mean" of an unknown key)
    FLAT_TABLES: ClassVar[tuple[str, ...]] = ("agent_options",)

    _paths = field_validator("work_dir", mode="after")(_expand_path)

    _zone = field_validator("time_zone", mode="after")(_known_zone)

    @field_validator("schedule", mode="after")
    @classmethod
    def _unique_names(cls, value: tuple[ScheduleEntry, ...]) -> tuple[ScheduleEntry, ...]:
        names = [entry.name for entry in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"schedule names must be unique in a project: {', '.join(twice)}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _gather_flat_options(cls, data: Any) -> Any:
        """Agent options may be written flat in the project table or in ``agent_options``."""
        if not isinstance(data, dict):
            return data
        flat = {key: data[key] for key in AgentOptions.model_fields if key in data}
        if not flat:
            return data
        nested = data.get("agent_options", {})
        if not isinstance(nested, dict):
            return data
        twice = sorted(set(flat) & set(nested))
        if twice:
            raise ValueError(f"{', '.join(twice)} set both here and in agent_options")
        rest = {key: value for key, value in data.items() if key not in flat}
        return {**rest, "agent_options": {**nested, **flat}}

    def argv(self) -> tuple[str, ...]:
        """The agent's argv prefix: the configured one, or the agent's usual binary name."""
        return self.agent_options.argv or DEFAULT_ARGV.get(self.agent, ())

    @property
    def attached(self) -> bool:
        """An agent server the gateway attaches to (OpenCode ``url``) rather than starts."""
        return self.agent_options.url is not None


class TranscriptionConfig(_Model):
    """[transcription]: voice notes turned into text (issue 34), by an OpenAI-compatible
    ``POST {url}/audio/transcriptions`` (``url``, ``model``, ``api_key``) or by a local
    ``command`` that reads the audio file named as its last argument and prints the text."""

    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s/]+(/\S*)?$")] | None = None
    model: NonEmpty = "whisper-1"
    api_key: SecretStr | None = None  # "${OPENAI_API_KEY}", or api_key_file
    command: tuple[NonEmpty, ...] = ()
    max_seconds: float = Field(default=300.0, gt=0)  # where the platform says the length
    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _one_way(self) -> TranscriptionConfig:
        if (self.url is None) == (not self.command):
            raise ValueError("give url (an OpenAI-compatible endpoint) or command, not both")
        return self


class PersonEntry(_Model):
    """``[people.NAME]`` written as a table: the person's ``accounts`` (as the array form
    lists them) and their ``time_zone`` (an IANA name), which the schedules they make read
    their times in where their platform does not say one (issue 35)."""

    accounts: tuple[NonEmpty, ...]
    time_zone: NonEmpty | None = None

    @model_validator(mode="before")
    @classmethod
    def _array_form(cls, value: Any) -> Any:
        """``alice = ["slack:U1"]``: the accounts alone."""
        return value if isinstance(value, dict) else {"accounts": value}

    _zone = field_validator("time_zone", mode="after")(_known_zone)


class Config(_Model):
    # platforms: validated apart, each table by its platform's own model (parse_config)
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    gateway: GatewaySection = Field(default_factory=GatewaySection)
    projects: dict[Name, ProjectConfig] = Field(min_length=1)
    platforms: PlatformsSection = Field(default_factory=PlatformsSection)
    groups: dict[Name, tuple[NonEmpty, ...]] = Field(default_factory=dict)  # policy approvers
    # [people]: the accounts of one person, as an array or as a table with its time zone
    people_entries: dict[Name, PersonEntry] = Field(default_factory=dict, alias="people")
    transcription: TranscriptionConfig | None = None  # voice notes (issue 34); None: off

    _source: str = PrivateAttr(default="<config>")
    _locator: KeyLocator | None = PrivateAttr(default=None)

    @property
    def people(self) -> dict[str, tuple[str, ...]]:
        """``[people]``: each person's accounts, whichever way the entry is written."""
        return {name: entry.accounts for name, entry in self.people_entries.items()}

    def time_zone_of(self, account: str) -> str | None:
        """The ``time_zone`` of the ``[people]`` entry that lists ``account``
        (``"telegram:42"``), or None."""
        for entry in self.people_entries.values():
            if account in entry.accounts:
                return entry.time_zone
        return None

    def projects_on(self, host: str | None) -> dict[str, ProjectConfig]:
        """The projects whose agents run on ``host``: those naming it, and every project of
        a single-host config (no ``host`` keys, which only a PostgreSQL store allows)."""
        return {
            name: project
            for name, project in self.projects.items()
            if project.host is None or project.host == host
        }

    def problem(self, loc: Loc, message: str) -> ConfigProblem:
        """A problem about one key of this config, located in its source file."""
        line = self._locator.line_of(loc) if self._locator is not None else None
        return ConfigProblem(source=self._source, loc=loc, line=line, message=message)


# --- problems ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigProblem:
    source: str
    loc: Loc
    line: int | None
    message: str

    @property
    def key(self) -> str:
        return ".".join(str(part) for part in self.loc) or "(top level)"

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.key}: {self.message}"


def _raise(problems: list[ConfigProblem], helps: Mapping[str, str] | None = None) -> None:
    """Raise one ConfigError naming every problem, then the help of the tables in ``helps``
    (dotted table name → its help)."""
    if problems:
        in_file_order = sorted(problems, key=lambda problem: problem.line or 0)
        lines = "\n".join(f"  {problem}" for problem in in_file_order)
        shown = "".join(
            f"\n\n{table}: its keys, as config.example.toml documents them:\n"
            + "\n".join(f"    {line}" if line else "" for line in text.strip().splitlines())
            for table, text in (helps or {}).items()
        )
        raise ConfigError(f"invalid configuration:\n{lines}{shown}")


# --- pass 2: pydantic errors --------------------------------------------------------------


_TOML_WORDS = (
    ("Input should be", "should be"),
    ("a valid tuple", "an array"),
    ("a valid list", "an array"),
    ("a valid dictionary", "a table"),
)


def _pydantic_message(error: Mapping[str, Any], model: type[BaseModel] | None = None) -> str:
    """The error in the words of a TOML file; an unknown key of ``model``'s tree with the
    known key it most resembles ("did you mean")."""
    kind = error.get("type")
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        loc = _pydantic_loc(error)
        known = _keys_at(model, loc[:-1]) if model is not None and loc else ()
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) if loc else []
        return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    message = re.sub(r"a valid dictionary or instance of \w+", "a table", message)
    for python, toml in _TOML_WORDS:
        message = message.replace(python, toml)
    return message


def _keys_at(model: type[BaseModel], path: Loc) -> tuple[str, ...]:
    """The keys of the table at ``path`` below ``model`` (tables of a name: one part for the
    name), or () where the path leaves the models."""
    current: Any = model
    named = False  # the part is the name of a table in a table of named tables
    for part in path:
        if named:
            named = False
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return ()
        field = next(
            (f for n, f in current.model_fields.items() if str(part) in (n, f.alias)), None
        )
        if field is None:
            return ()
        current = _model_in(field.annotation)
        if current is None:
            return ()
        if isinstance(current, tuple):  # a table of named tables: the next part is a name
            current, named = current[0], True
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return ()
    keys = [field.alias or name for name, field in current.model_fields.items()]
    for table in getattr(current, "FLAT_TABLES", ()):
        keys += _keys_at(current, (table,))
    return tuple(keys)


def _model_in(annotation: Any) -> Any:
    """The model an annotation holds: itself, or ``(model,)`` for a mapping of models."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    args = [a for a in get_args(annotation) if a is not type(None)]
    if origin is not None and args and isinstance(args[-1], type):
        if issubclass(args[-1], BaseModel) and origin in (dict, Mapping):
            return (args[-1],)
    for arg in args:  # Optional[Model], Annotated[Model, ...]
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _pydantic_loc(error: Mapping[str, Any]) -> Loc:
    return tuple(part for part in error.get("loc", ()) if part != "[key]")


# --- pass 3: rules across keys ------------------------------------------------------------


def _cross_key_problems(config: Config) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    data_dir = config.gateway.data_dir.resolve()
    holding: list[str] = []  # the projects whose work dir holds the data dir
    for name, project in config.projects.items():
        found += _agent_problems(("projects", name, "agent_options"), project)
        found += _auth_problems(("projects", name, "auth"), project, config.platforms)
        for entry in project.schedulers:
            if ":" not in entry and entry not in config.groups and entry not in config.people:
                found.append(
                    (
                        ("projects", name, "schedulers"),
                        f'unknown group or person "{entry}" (an account is "platform:id")',
                    )
                )
        if data_dir.is_relative_to(project.work_dir.resolve()):
            holding.append(name)
    if holding:  # one problem, with its fix: the agent may write anywhere in its work dir
        which = ", ".join(holding)
        found.append(
            (
                ("gateway", "data_dir"),
                f"{data_dir} lies inside the work dir of project {which}, where the agent may "
                "write: give each project a folder of its own (work_dir, relative to this "
                "file), or put data_dir elsewhere",
            )
        )
    found += policy_problems(
        {name: project.policy for name, project in config.projects.items()},
        config.groups,
        config.people,
    )
    for name, project in config.projects.items():
        found += _unreachable_approvals(("projects", name, "policy"), project, config.people)
    for name, settings in config.platforms.items():
        found += [(("platforms", name, *loc), message) for loc, message in settings.problems()]
    found += _host_problems(config)
    return found


def _host_problems(config: Config) -> list[tuple[Loc, str]]:
    """Hosts meet only in a shared ledger: ``host`` needs a PostgreSQL store, and with one
    every project names its host (its native sessions are files on one machine) and the
    buttons' key is one file that every host reads."""
    found: list[tuple[Loc, str]] = []
    if config.gateway.store is None:
        for name, project in config.projects.items():
            if project.host is not None:
                found.append(
                    (
                        ("projects", name, "host"),
                        'host needs a shared store: set [gateway] store = "postgresql://…"',
                    )
                )
        return found
    for name, project in config.projects.items():
        if project.host is None:
            found.append(
                (
                    ("projects", name, "host"),
                    "required with a PostgreSQL store: every project names its host "
                    '(host = "NAME": where its agents run and its work_dir is)',
                )
            )
    if config.gateway.hmac_key_file is None:
        found.append(
            (
                ("gateway", "hmac_key_file"),
                "required with a PostgreSQL store: the buttons' key, the same 32-byte file "
                "(mode 600) on every host",
            )
        )
    return found


def _agent_problems(where: Loc, project: ProjectConfig) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    options = project.agent_options
    for key, dangerous in DANGEROUS.items():
        value = getattr(options, key)
        if value in dangerous and not options.allow_dangerous:
            found.append(
                (
                    (*where, key),
                    f'"{value}" lets the agent act without asking anyone; refused unless '
                    "the project sets allow_dangerous = true",
                )
            )
    # an ACP agent's or OpenCode's modes are its own ids: checked against what the agent
    # offers when /mode is given, ordered as the project writes them
    own_modes = project.agent in (AgentKind.ACP, AgentKind.OPENCODE)
    for value in () if own_modes else options.allowed_modes:
        known = (
            isinstance(value, ApprovalPolicy | SandboxMode)
            if project.agent is AgentKind.CODEX_APP_SERVER
            else isinstance(value, PermissionMode)
        )
        if not known:
            found.append(((*where, "allowed_modes"), f'"{value}" is no mode of {project.agent}'))
        elif value is PermissionMode.DONT_ASK:
            found.append(
                (
                    (*where, "allowed_modes"),
                    '"dontAsk" is neither tighter nor looser than the others (it asks nobody '
                    "and refuses what is not allowed already): set it as permission_mode",
                )
            )
        if any(value in dangerous for dangerous in DANGEROUS.values()):
            if not options.allow_dangerous:
                found.append(
                    (
                        (*where, "allowed_modes"),
                        f'"{value}" lets the agent act without asking anyone; refused unless '
                        "the project sets allow_dangerous = true",
                    )
                )
    if project.agent is AgentKind.OPENCODE:
        found += [
            ((*where, "models"), f'"{name}": OpenCode names a model "provider/model"')
            for name in options.models
            if not all(name.partition("/")[::2])
        ]
    wrong = _NOT_FOR[project.agent] & options.model_fields_set
    if project.agent not in DEFAULT_ARGV and options.argv is None:
        found.append(((*where, "argv"), f"agent {project.agent} needs an argv: the command to run"))
    found += [((*where, key), f"does not apply to agent {project.agent}") for key in sorted(wrong)]
    if project.agent is AgentKind.OPENCODE:
        found += _attached_problems(where, options)
    if project.attached and project.idle_minutes is not None:
        found.append(
            (
                (*where[:-1], "idle_minutes"),  # a key of the project, not of its options
                "does not apply to an attached OpenCode server (url): the gateway never ends it",
            )
        )
    return found


def _attached_problems(where: Loc, options: AgentOptions) -> list[tuple[Loc, str]]:
    """An attached OpenCode server needs its url and its password file together; it is not
    started, so an argv would never be run."""
    if options.url is None and options.password_file is None:
        return []
    if options.url is None:
        return [((*where, "password_file"), "needs url: the OpenCode server to attach to")]
    if options.password_file is None:
        return [((*where, "url"), "needs password_file: the server's OPENCODE_SERVER_PASSWORD")]
    if options.argv is not None:
        return [((*where, "argv"), "does not apply to an attached OpenCode server (url)")]
    return []


def _unreachable_approvals(
    where: Loc, project: ProjectConfig, people: Mapping[str, tuple[str, ...]]
) -> list[tuple[Loc, str]]:
    """A rule asking N people with no approvers of its own takes the project's: refused
    where they are fewer than N (by default only the session's initiator decides)."""
    found: list[tuple[Loc, str]] = []
    owners = {account: person for person, accounts in people.items() for account in accounts}
    deciders: set[str] = set()
    for auth_name, rules in project.auth.items():
        if rules.approvers is None:
            deciders.add("the session's initiator")
        elif "*" in rules.approvers:
            return found  # anyone who may talk: no count to check
        else:
            deciders |= {
                owners.get(f"{auth_name}:{user}", f"{auth_name}:{user}") for user in rules.approvers
            }
    for index, rule in enumerate(project.policy):
        if rule.approvers or rule.approvals <= max(len(deciders), 1):
            continue
        found.append(
            (
                (*where, index, "approvals"),
                f"{rule.approvals} approvals asked of the project's approvers, who are "
                f"{len(deciders) or 1}: list approvers in the rule",
            )
        )
    return found


def _auth_problems(
    where: Loc, project: ProjectConfig, platforms: PlatformsSection
) -> list[tuple[Loc, str]]:
    """Fail closed: every enabled platform names who may talk; approvers are among them."""
    found: list[tuple[Loc, str]] = []
    for platform, auth_name in platforms.auth_platforms().items():
        rules = project.auth.get(auth_name)
        via = f" (it acts as a {auth_name} user)" if auth_name != platform else ""
        if rules is None or not rules.allow_from:
            found.append(
                (
                    (*where, auth_name, "allow_from"),
                    f"platform {platform} is enabled{via} but nobody may talk to this "
                    'project from it: list user ids in allow_from, or "*" for anyone',
                )
            )
    for auth_name, rules in project.auth.items():
        if "*" in rules.allow_from:
            continue
        strangers = [
            user for user in rules.approvers or () if user != "*" and user not in rules.allow_from
        ]
        if strangers:
            found.append(
                (
                    (*where, auth_name, "approvers"),
                    f"approvers not in allow_from: {', '.join(strangers)}",
                )
            )
    return found


# --- entry points --------------------------------------------------------------------------


def _platform_settings(
    raw: Any, registry: PlatformRegistry, context: Mapping[str, Any]
) -> tuple[PlatformsSection, list[tuple[Loc, str]], dict[str, str]]:
    """The ``[platforms]`` tables, each validated by its platform's model: the settings, the
    problems found, and the help of each table with a key missing or unknown."""
    if not isinstance(raw, dict):
        return PlatformsSection(), [(("platforms",), "should be a table")], {}
    known = registry.names()
    settings: dict[str, PlatformConfig] = {}
    found: list[tuple[Loc, str]] = []
    helps: dict[str, str] = {}
    for name, table in raw.items():
        where: Loc = ("platforms", name)
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            found.append((where, f"unknown platform; {hint}one of {', '.join(sorted(known))}"))
            continue
        schema = registry.table(name)
        try:
            settings[name] = schema.model.model_validate(table, context=dict(context))
        except ValidationError as exc:
            # not chained: pydantic's own message quotes the input values, secrets included
            errors = exc.errors(include_input=False, include_url=False)
            found += [
                ((*where, *_pydantic_loc(e)), _pydantic_message(e, schema.model)) for e in errors
            ]
            if any(e.get("type") in ("missing", "extra_forbidden") for e in errors):
                helps[f"platforms.{name}"] = schema.help  # which keys there are
    in_order = {name: settings[name] for name in known if name in settings}
    return PlatformsSection(in_order), found, helps


def parse_config(
    text: str,
    source_name: str = "<config>",
    *,
    platforms: PlatformRegistry,
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> Config:
    """Parse and validate a config; raise :class:`ConfigError` naming every problem.

    ``platforms`` is the registry the ``[platforms.<name>]`` and ``auth`` tables are checked
    against; ``env`` defaults to ``os.environ``; ``base_dir`` is where relative paths start.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source_name}: not valid TOML: {exc}") from exc
    locator = KeyLocator(text)

    def located(loc: Loc, message: str) -> ConfigProblem:
        return ConfigProblem(
            source=source_name, loc=loc, line=locator.line_of(loc), message=message
        )

    data, found = resolve_references(raw, os.environ if env is None else env, base_dir)
    _raise([located(loc, message) for loc, message in found])
    context = {"base_dir": base_dir, AUTH_TABLES: platforms.auth_tables()}
    section, in_tables, helps = _platform_settings(data.pop("platforms", {}), platforms, context)
    try:
        config = Config.model_validate({**data, "platforms": section}, context=context)
    except ValidationError as exc:
        # not chained: pydantic's own message quotes the input values, secrets included
        errors = exc.errors(include_input=False, include_url=False)
    else:
        errors = []
    problems = [located(_pydantic_loc(e), _pydantic_message(e, Config)) for e in errors]
    _raise(problems + [located(loc, message) for loc, message in in_tables], helps)
    config._source = source_name
    config._locator = locator
    _raise([config.problem(loc, message) for loc, message in _cross_key_problems(config)])
    return config


def load_config(
    path: Path | str, *, platforms: PlatformRegistry, env: Mapping[str, str] | None = None
) -> Config:
    """Read and validate the config file at ``path`` (relative paths start at its folder)."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {file}: {exc}") from exc
    return parse_config(
        text, str(file), platforms=platforms, env=env, base_dir=file.resolve().parent
    )


def check_config(config: Config, host: str | None = None) -> tuple[ConfigProblem, ...]:
    """What only the machine can tell: the shared HMAC key file can be used, and the work
    dirs exist and agent binaries can be found for the projects that run on ``host`` (the
    others' are on their own machines; None: a single-host config's, every project)."""
    problems: list[ConfigProblem] = []
    key_file = config.gateway.hmac_key_file
    if key_file is not None:
        try:
            read_hmac_key(key_file)
        except ConfigError as exc:
            problems.append(config.problem(("gateway", "hmac_key_file"), str(exc)))
    for name, project in config.projects_on(host).items():
        if not project.work_dir.is_dir():
            problems.append(
                config.problem(
                    ("projects", name, "work_dir"), f"{project.work_dir} is not a directory"
                )
            )
        if project.attached:
            problems += _password_file_problems(config, name, project)
            continue  # not started by the gateway: `check` probes its url
        if not project.argv():
            continue  # an ACP project without argv: refused by _agent_problems already
        program = project.argv()[0]
        if shutil.which(program) is None:
            configured = project.agent_options.argv is not None
            loc: Loc = (
                ("projects", name, "agent_options", "argv")
                if configured
                else ("projects", name, "agent")
            )
            message = f"agent program {program!r} not found (set argv to its path)"
            problems.append(config.problem(loc, message))
    return tuple(problems)


def _password_file_problems(
    config: Config, name: str, project: ProjectConfig
) -> list[ConfigProblem]:
    path = project.agent_options.password_file
    assert path is not None  # _attached_problems: url and password_file come together
    try:
        read_password(path)
    except ConfigError as exc:
        return [config.problem(("projects", name, "agent_options", "password_file"), str(exc))]
    return []


def read_password(path: Path) -> str:
    """The first line of an attached server's password file (never logged)."""
    try:
        first = path.read_text(encoding="utf-8").splitlines()[:1]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read password file {path}: {exc}") from exc
    if not first or not first[0].strip():
        raise ConfigError(f"password file {path} is empty")
    return first[0].strip()
