"""The interaction state machine, the Interaction record, and pure checks on decisions.

Nothing here does IO: the store applies :func:`transition` inside its transactions, the
engine calls :func:`validate_decision` and :func:`derive_run_state` on plain data.

The machine (DESIGN.md, "Interaction state machine") as a table of (state, event) -> state::

    PENDING   decide ───────────▶ DECIDED
    PENDING   withdraw ─────────▶ CANCELLED   the agent cancelled, interrupted, or resolved
                                              it elsewhere before we answered
    PENDING   supersede ────────▶ CANCELLED   replaced (how: superseded)
    PENDING   stop ─────────────▶ CANCELLED   a person stopped the turn (/stop) and the agent
                                              withdrew it (how: stopped, by that person)
    PENDING   expire ───────────▶ EXPIRED     expiry policy fired; "timed out" is written next
    PENDING   epoch_ended ──────▶ ORPHANED
    DECIDED   deliver ──────────▶ DELIVERED   the answer was written to the agent's channel
    DECIDED   delivery_failed ──▶ DECIDED     the write failed: the agent did not get it; the
                                              failure is a recorded fact and nothing resends
                                              it (rule 3): the card and /pending say so, and
                                              that /stop and a new message go on from there
    DECIDED   confirm ──────────▶ RESOLVED    our write and the agent's confirmation crossed
                                              (the confirmation was read before the write was
                                              recorded); the delivery fact follows
    DECIDED   withdraw ─────────▶ CANCELLED   before our write: the decision stays recorded,
                                              nothing is written
    DECIDED   supersede ────────▶ CANCELLED
    DECIDED   stop ─────────────▶ CANCELLED
    DECIDED   epoch_ended ──────▶ ORPHANED
    DELIVERED confirm ──────────▶ RESOLVED
    DELIVERED withdraw ─────────▶ CANCELLED   the agent closed the request without confirming
                                              our answer (Claude's control_cancel_request that
                                              crossed our response, an interrupt): the agent's
                                              word is the last fact; the delivery fact stays,
                                              so a card says "delivered, then withdrawn"
    DELIVERED supersede ────────▶ CANCELLED
    DELIVERED stop ─────────────▶ CANCELLED
    DELIVERED epoch_ended ──────▶ ORPHANED, or UNKNOWN for a runtime that outlives the gateway
                                              (it cannot say whether it received the answer)
    EXPIRED   deliver ──────────▶ EXPIRED     the "timed out" outcome was written
    EXPIRED   delivery_failed ──▶ EXPIRED
    EXPIRED   epoch_ended ──────▶ EXPIRED     the runtime ended before the write of "timed
                                              out" was recorded: its delivery is recorded as
                                              unknown (the store does that), never guessed

PENDING, DECIDED and DELIVERED are live; every other state is terminal. An event for a
terminal interaction that the table does not list is a race, not an error: it comes back as
an ignored :class:`Transition` for the caller to audit. Only a move the table does not allow
for a live interaction raises :class:`~gateway.errors.IllegalTransition`. UNKNOWN is terminal:
it is never rewritten blindly.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from gateway.domain import (
    SHORT_ID_CHARS,
    Action,
    Actor,
    Decision,
    Detail,
    Effect,
    InteractionKind,
    InteractionOrigin,
    InteractionState,
    Question,
    Resolution,
    RunState,
)
from gateway.errors import IllegalTransition, InvalidDecision

__all__ = [
    "LIVE_STATES",
    "TERMINAL_STATES",
    "DecisionFact",
    "DeliveryFact",
    "DeliveryOutcome",
    "Interaction",
    "InteractionEvent",
    "ResolutionFact",
    "Transition",
    "VoteFact",
    "derive_run_state",
    "event_for_agent_close",
    "missing_answers",
    "new_short_id",
    "run_state_words",
    "transition",
    "validate_decision",
]


class InteractionEvent(StrEnum):
    DECIDE = "decide"  # an authorized person decided (compare-and-set on version)
    DELIVER = "deliver"  # the answer was written to the agent's channel
    DELIVERY_FAILED = "delivery_failed"  # the write failed; the agent did not get it
    CONFIRM = "confirm"  # the agent closed the request as answered
    WITHDRAW = "withdraw"  # the agent cancelled/interrupted/resolved it without our answer
    SUPERSEDE = "supersede"  # replaced by a newer request or, for a gateway plan, a new prompt
    STOP = "stop"  # withdrawn because a person stopped the turn (/stop): not the agent's doing
    EXPIRE = "expire"  # the project's expiry policy fired
    EPOCH_ENDED = "epoch_ended"  # the runtime instance that asked is gone


_S = InteractionState
_E = InteractionEvent

LIVE_STATES: frozenset[InteractionState] = frozenset({_S.PENDING, _S.DECIDED, _S.DELIVERED})
TERMINAL_STATES: frozenset[InteractionState] = frozenset(set(InteractionState) - LIVE_STATES)

_TABLE: dict[tuple[InteractionState, InteractionEvent], InteractionState] = {
    (_S.PENDING, _E.DECIDE): _S.DECIDED,
    (_S.PENDING, _E.WITHDRAW): _S.CANCELLED,
    (_S.PENDING, _E.SUPERSEDE): _S.CANCELLED,
    (_S.PENDING, _E.STOP): _S.CANCELLED,
    (_S.PENDING, _E.EXPIRE): _S.EXPIRED,
    (_S.PENDING, _E.EPOCH_ENDED): _S.ORPHANED,
    (_S.DECIDED, _E.DELIVER): _S.DELIVERED,
    (_S.DECIDED, _E.DELIVERY_FAILED): _S.DECIDED,
    (_S.DECIDED, _E.CONFIRM): _S.RESOLVED,
    (_S.DECIDED, _E.WITHDRAW): _S.CANCELLED,
    (_S.DECIDED, _E.SUPERSEDE): _S.CANCELLED,
    (_S.DECIDED, _E.STOP): _S.CANCELLED,
    (_S.DECIDED, _E.EPOCH_ENDED): _S.ORPHANED,
    (_S.DELIVERED, _E.CONFIRM): _S.RESOLVED,
    (_S.DELIVERED, _E.WITHDRAW): _S.CANCELLED,
    (_S.DELIVERED, _E.SUPERSEDE): _S.CANCELLED,
    (_S.DELIVERED, _E.STOP): _S.CANCELLED,
    (_S.DELIVERED, _E.EPOCH_ENDED): _S.ORPHANED,
    (_S.EXPIRED, _E.DELIVER): _S.EXPIRED,
    (_S.EXPIRED, _E.DELIVERY_FAILED): _S.EXPIRED,
    (_S.EXPIRED, _E.EPOCH_ENDED): _S.EXPIRED,
}

# Where the runtime outlives the gateway (an external server), an answer that was written
# but never confirmed may or may not have been received.
_OUTLIVING_RUNTIME: dict[tuple[InteractionState, InteractionEvent], InteractionState] = {
    (_S.DELIVERED, _E.EPOCH_ENDED): _S.UNKNOWN,
}

_RESOLUTION_OF: dict[InteractionState, Resolution] = {
    _S.RESOLVED: Resolution.ANSWERED,
    _S.CANCELLED: Resolution.CANCELLED_BY_AGENT,
    _S.EXPIRED: Resolution.EXPIRED,
    _S.ORPHANED: Resolution.ORPHANED,
    _S.UNKNOWN: Resolution.UNKNOWN,
}

# events whose own resolution says more than the state they lead to
_RESOLUTION_BY_EVENT: dict[InteractionEvent, Resolution] = {
    _E.SUPERSEDE: Resolution.SUPERSEDED,
    _E.STOP: Resolution.STOPPED,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """The outcome of one event: a move, or an ignored race on a terminal interaction."""

    event: InteractionEvent
    before: InteractionState
    after: InteractionState
    ignored: bool = False  # already terminal and not in the table: audit it, change nothing
    resolution: Resolution | None = None  # set when this move ends the interaction

    @property
    def skips_delivery(self) -> bool:
        """True when this move ends the interaction with nothing written to the agent."""
        return (
            not self.ignored
            and self.before in (_S.PENDING, _S.DECIDED)
            and self.after in (_S.CANCELLED, _S.ORPHANED)
        )


def transition(
    state: InteractionState,
    event: InteractionEvent,
    *,
    runtime_outlives_gateway: bool = False,
) -> Transition:
    """Look ``event`` up for an interaction in ``state``; pure.

    Raises IllegalTransition for a move the table does not allow on a live interaction.
    """
    key = (state, event)
    after = _OUTLIVING_RUNTIME.get(key) if runtime_outlives_gateway else None
    if after is None:
        after = _TABLE.get(key)
    if after is None:
        if state in TERMINAL_STATES:
            return Transition(event=event, before=state, after=state, ignored=True)
        raise IllegalTransition(f"no move {event.value!r} for an interaction {state.value}")
    resolution = None
    if state in LIVE_STATES and after in TERMINAL_STATES:
        resolution = _RESOLUTION_BY_EVENT.get(event) or _RESOLUTION_OF[after]
    return Transition(event=event, before=state, after=after, resolution=resolution)


def event_for_agent_close(
    state: InteractionState, how: Resolution, *, stopped: bool = False
) -> InteractionEvent:
    """Map an adapter's ``InteractionClosed(how)`` to an event for an interaction in ``state``.

    "Answered" confirms our answer once we decided; before that the request was resolved
    elsewhere (or by the agent itself), which is a withdrawal: we never answered it. A
    withdrawal while a person's /stop is under way (``stopped``) is that person's stop.
    """
    if how is Resolution.ANSWERED:
        if state in (_S.DECIDED, _S.DELIVERED):
            return _E.CONFIRM
    elif how is Resolution.SUPERSEDED:
        return _E.SUPERSEDE
    return _E.STOP if stopped else _E.WITHDRAW


# --- the record ----------------------------------------------------------------------------


class DeliveryOutcome(StrEnum):
    OK = "ok"  # written to the agent's channel
    FAILED = "failed"  # the write failed: the agent did not get it
    SKIPPED = "skipped"  # nothing was written (withdrawn first, runtime gone)
    UNKNOWN = "unknown"  # the runtime ended before the write was recorded: it may have been


@dataclass(frozen=True, kw_only=True, slots=True)
class DecisionFact:
    """Who decided what, and when. Answers to secret questions are stored redacted."""

    actor: Actor
    decision: Decision
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class VoteFact:
    """One person's standing vote under a policy rule that asks for ``needed`` people."""

    person: str
    actor: Actor
    action_id: str
    needed: int
    surface: str  # the card copy (or command) it was cast on
    content_hash: str  # what they saw
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class DeliveryFact:
    """The latest write (or non-write) of an answer to the agent."""

    outcome: DeliveryOutcome
    at: datetime
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolutionFact:
    """How the interaction ended; ``by`` is "agent", "gateway" or an actor key. For
    STOPPED, ``by`` is the key of the person who stopped the turn, ``note`` their name."""

    how: Resolution
    at: datetime
    by: str
    note: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Interaction:
    """One blocking request of an agent, as the ledger holds it.

    ``id`` is ours (short, URL-safe, random); ``native_key`` is the adapter's opaque key
    (``None`` for a plan the gateway originated) and is never shown on a platform.
    ``version`` grows by one on every move and is what a decision compares-and-sets.
    """

    id: str
    session_id: str
    runtime_epoch: int
    turn_id: int | None
    native_key: str | None
    kind: InteractionKind
    title: str
    summary: str
    detail: Detail | None
    actions: tuple[Action, ...]
    questions: tuple[Question, ...]
    state: InteractionState
    version: int
    created_at: datetime
    updated_at: datetime
    decision: DecisionFact | None = None
    delivery: DeliveryFact | None = None
    resolution: ResolutionFact | None = None
    votes: tuple[VoteFact, ...] = ()  # standing votes, oldest first (withdrawn ones left out)
    content_hash: str = ""  # sha256 of what a person is asked to approve (content_hash.py)
    origin: InteractionOrigin = InteractionOrigin.AGENT  # who asks (issue 31)

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_STATES

    def action(self, action_id: str) -> Action | None:
        return next((a for a in self.actions if a.id == action_id), None)

    def question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)


_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # lower case, no i/l/o/u: easy to type


def new_short_id(length: int = SHORT_ID_CHARS) -> str:
    """A random URL-safe id (50 bits at the default length), easy to type in /approve ID:
    five random bits a character, from one read of the system's randomness (32 letters
    divide 256: every letter equally likely)."""
    return "".join([_ID_ALPHABET[byte & 31] for byte in secrets.token_bytes(length)])


# --- pure checks ---------------------------------------------------------------------------


_RUN_STATE_WORDS = {
    RunState.WAITING_APPROVAL: "waiting for approval",
    RunState.WAITING_PLAN_REVIEW: "waiting for its plan to be reviewed",
    RunState.WAITING_INPUT: "waiting for input",
}


def run_state_words(state: RunState) -> str:
    """A session's run state as a person reads it ("waiting for approval"), on every
    surface: /status and the console."""
    return _RUN_STATE_WORDS.get(state, state.value.replace("_", " "))


def derive_run_state(interactions: Iterable[Interaction], *, turn_running: bool) -> RunState:
    """The session's run state from its interactions: never stored by hand.

    WAITING_APPROVAL while an approval is live (pending, decided or delivered: writing the
    answer does not flip the session back, the agent's next event does), else
    WAITING_PLAN_REVIEW while a plan is, else WAITING_INPUT while a question is, else RUNNING
    or IDLE.
    """
    live_kinds = {i.kind for i in interactions if i.state in LIVE_STATES}
    if InteractionKind.APPROVAL in live_kinds:
        return RunState.WAITING_APPROVAL
    if InteractionKind.PLAN in live_kinds:
        return RunState.WAITING_PLAN_REVIEW
    if InteractionKind.QUESTION in live_kinds:
        return RunState.WAITING_INPUT
    return RunState.RUNNING if turn_running else RunState.IDLE


def validate_decision(interaction: Interaction, decision: Decision) -> None:
    """Raise InvalidDecision unless ``decision`` fits ``interaction``; pure.

    Approvals and plans need one of the offered actions and take no answers. Questions take
    answers (and optionally an action: an "allow" action still needs the answers, a deny or
    cancel takes none). A question without options is a free-text question and accepts text
    whatever ``allow_other`` says. Messages name ids, never the answers' text (which may be
    secret).
    """
    if interaction.kind is InteractionKind.AUTHENTICATION:
        raise InvalidDecision("authentication requests are not supported in chat")
    action = None
    if decision.action_id is not None:
        action = interaction.action(decision.action_id)
        if action is None:
            offered = ", ".join(a.id for a in interaction.actions) or "none"
            raise InvalidDecision(f"unknown action {decision.action_id!r} (offered: {offered})")
    if interaction.kind is not InteractionKind.QUESTION:
        if action is None:
            raise InvalidDecision(f"a {interaction.kind.value} needs one of the offered actions")
        if decision.answers:
            raise InvalidDecision(f"a {interaction.kind.value} takes no answers")
        return
    if action is not None and action.effect is not Effect.ALLOW:
        if decision.answers:
            raise InvalidDecision(f"action {action.id!r} takes no answers")
        return
    _validate_answers(interaction, decision)


def _validate_answers(interaction: Interaction, decision: Decision) -> None:
    for question_id in decision.answers:
        if interaction.question(question_id) is None:
            raise InvalidDecision(f"unknown question {question_id!r}")
    missing: list[Question] = []
    for question in interaction.questions:
        answer = decision.answers.get(question.id)
        option_ids = answer.option_ids if answer else ()
        has_text = bool(answer and answer.other and answer.other.strip())
        known = {o.id for o in question.options}
        for option_id in option_ids:
            if option_id not in known:
                raise InvalidDecision(f"unknown option {option_id!r} for question {question.id!r}")
        if len(set(option_ids)) != len(option_ids):
            raise InvalidDecision(f"an option is chosen twice for question {question.id!r}")
        if len(option_ids) > 1 and not question.multi:
            raise InvalidDecision(f"question {question.id!r} takes a single option")
        if has_text and question.options and not question.allow_other:
            raise InvalidDecision(f"question {question.id!r} takes no free text")
        if has_text and option_ids and not question.multi:
            raise InvalidDecision(f"question {question.id!r} takes an option or text, not both")
        if question.required and not option_ids and not has_text:
            missing.append(question)
    if missing:
        raise InvalidDecision(missing_answers(missing))


def missing_answers(questions: Sequence[Question]) -> str:
    """What a person is told when required answers are missing: every one of them at once,
    by the name the form shows (its header, else its text), never by its internal id."""
    names = [q.header.strip() or q.text.strip() or q.id for q in questions]
    if len(names) == 1:
        return f"{names[0]} needs an answer."
    return f"{', '.join(names[:-1])} and {names[-1]} need an answer."
