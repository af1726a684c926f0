"""What the store returns: frozen records of its rows, and the outcomes of its moves.

A session's own record, which the platforms read too, is :mod:`gateway.session_record`.
The Interaction record itself lives in :mod:`gateway.interactions.machine` with its state machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from gateway.attachments import InboundAttachment
from gateway.domain import Actor, ConversationRef, Scope, TurnStatus
from gateway.interactions.machine import Interaction, Transition
from gateway.session_record import SessionRecord
from gateway.timeline import EntryKind

__all__ = [
    "AuditEntry",
    "CardCopy",
    "CardsRead",
    "CopyState",
    "EnqueueOutcome",
    "EnqueueResult",
    "EpochRecord",
    "FilesCard",
    "FilesChoice",
    "Grant",
    "InteractionUpdate",
    "Opened",
    "PromptRecord",
    "PromptState",
    "TimelineEntry",
    "TurnRecord",
    "TurnTimeline",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class EpochRecord:
    """One runtime instance of a session: one agent process, or one external server instance.

    ``pid``, ``pgid`` and ``process_start_time`` (clock ticks after boot, field 22 of
    /proc/PID/stat, as ``adapters.process_group.read_process_start_time`` returns it)
    identify a process a crashed gateway left behind, even after its pid was reused.
    """

    session_id: str
    epoch: int
    pid: int | None
    pgid: int | None
    process_start_time: int | None
    started_at: datetime
    ended_at: datetime | None
    exit_description: str | None
    agent_version: str | None
    policy: dict[str, str] = field(default_factory=dict)  # the policy actually in force

    @property
    def is_live(self) -> bool:
        return self.ended_at is None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnRecord:
    id: int
    session_id: str
    epoch: int
    prompt_id: int | None
    native_turn_id: str | None
    status: TurnStatus | None  # None while the turn runs
    error: str | None
    started_at: datetime
    ended_at: datetime | None

    @property
    def is_running(self) -> bool:
        return self.ended_at is None


@dataclass(frozen=True, kw_only=True, slots=True)
class TimelineEntry:
    """One entry of a turn's timeline (gateway/timeline.py), its text whole."""

    seq: int  # its place in the turn: the order things happened
    kind: EntryKind
    at: datetime
    text: str  # TEXT: what the agent said; TOOL: the tool's line; INTERACTION: ''
    item_id: str | None = None
    interaction_id: str | None = None  # INTERACTION: the request the agent made then


class PromptState(StrEnum):
    QUEUED = "queued"
    IN_FLIGHT = "in_flight"
    DONE = "done"
    INTERRUPTED = "interrupted"  # its turn was cut short; never resent on its own
    DROPPED = "dropped"  # cleared from the queue by /clear


class FilesChoice(StrEnum):
    """A prompt whose files failed (issue 32): waiting for its author's choice, then what
    they chose (gateway/sessions/file_choice.py). Never a decision of any request."""

    WAITING = "waiting"
    WITHOUT = "without"  # sent as text alone, the agent told which files did not come
    AGAIN = "again"  # its files fetched again when its turn comes
    DROPPED = "dropped"


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptRecord:
    id: int
    session_id: str
    conversation: ConversationRef
    platform_message_id: str
    author: Actor
    text: str
    state: PromptState
    position: int
    created_at: datetime
    updated_at: datetime
    held: bool = False  # queued before a /stop (or a restart): waits for /resume or /clear
    mode: str | None = None  # Codex collaboration mode asked for ("plan", "default")
    # the files sent with it, in the order sent (issue 32): downloaded when its turn comes
    attachments: tuple[InboundAttachment, ...] = ()
    # its files failed: waiting for its author's choice, or what they chose (issue 32)
    files_choice: FilesChoice | None = None
    files_round: int = 0  # how many times its files failed: each offer's buttons name theirs
    files_card: FilesCard | None = None  # the card of the newest offer


@dataclass(frozen=True, kw_only=True, slots=True)
class FilesCard:
    """The card a prompt's files choice is offered on (migration 26): the reason it gives,
    whether it offers "Try again", and its message in the prompt's conversation once shown."""

    why: str
    again: bool
    message_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnTimeline:
    """A turn, the prompt it answered (if any), and its timeline in order."""

    turn: TurnRecord
    prompt: PromptRecord | None
    entries: tuple[TimelineEntry, ...]


class EnqueueOutcome(StrEnum):
    QUEUED = "queued"
    DUPLICATE = "duplicate"  # this platform message was queued before: nothing new
    FULL = "full"  # the session's queue is at its depth: tell the person, nothing queued


@dataclass(frozen=True, kw_only=True, slots=True)
class EnqueueResult:
    outcome: EnqueueOutcome
    prompt: PromptRecord | None  # the new or the earlier prompt; None when FULL
    ahead: int  # queued prompts before this one (or, when FULL, the queue's depth)
    held: int  # earlier prompts held by /stop or a restart (this one runs before them)


class CopyState(StrEnum):
    PENDING = "pending"  # recorded, not yet confirmed sent
    SENT = "sent"
    FAILED = "failed"  # the last send or edit failed; send again (no ref) or edit again
    EDITED = "edited"


@dataclass(frozen=True, kw_only=True, slots=True)
class CardCopy:
    """One copy of an interaction's card in one conversation."""

    id: int
    interaction_id: str
    conversation: ConversationRef
    message_ref: str | None  # opaque platform reference; None until sent
    state: CopyState
    rendered_version: int | None  # the interaction version the copy shows
    error: str | None
    updated_at: datetime
    again: int = 0  # 0: the conversation's copy; 1, 2...: the card drawn again there


@dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """A standing permission a person gave beyond this request ("for session", "always")."""

    id: int
    session_id: str
    interaction_id: str
    action_id: str
    scope: Scope
    description: str
    actor: Actor
    granted_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    id: int
    at: datetime
    actor: str | None
    event: str
    session_id: str | None
    interaction_id: str | None
    details: dict[str, object]


@dataclass(frozen=True, kw_only=True, slots=True)
class CardSession:
    """What a request's cards need of its session: its project (the rule that says how many
    approve) and its name (the card's title), read with the request."""

    project: str
    name: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Opened:
    """The result of recording an agent's request."""

    interaction: Interaction
    created: bool  # False: the same native request was seen before, this is the first one
    copies: tuple[CardCopy, ...] = ()  # create_with_copies: the new card copies
    # create_with_copies, when created: the session as that transaction saw it (its name
    # and project, for the cards), so that drawing them reads nothing more
    session: SessionRecord | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CardsRead:
    """A request's card copies and what its cards show of its session, read by the write
    that changed the request, in its own statement: what redrawing the cards needs (the
    card lanes read nothing more: gateway/sessions/card_lanes.py)."""

    copies: tuple[CardCopy, ...]
    session: CardSession | None


@dataclass(frozen=True, kw_only=True, slots=True)
class InteractionUpdate:
    """An interaction after an event, and what the event did (moved, or ignored and audited).
    ``cards``: its copies as the write read them, where it did (``CardsRead``)."""

    interaction: Interaction
    transition: Transition
    cards: CardsRead | None = None
