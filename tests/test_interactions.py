"""The interaction state machine, run-state derivation and decision checks (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from itertools import product

import pytest

from gateway.domain import (
    Action,
    Answer,
    Decision,
    Effect,
    InteractionKind,
    InteractionState,
    Option,
    Question,
    Resolution,
    RunState,
    Scope,
)
from gateway.errors import IllegalTransition, InvalidDecision
from gateway.interactions.machine import (
    LIVE_STATES,
    TERMINAL_STATES,
    Interaction,
    InteractionEvent,
    derive_run_state,
    event_for_agent_close,
    missing_answers,
    new_short_id,
    transition,
    validate_decision,
)

S = InteractionState
E = InteractionEvent

# DESIGN.md's machine, written out again by hand so that a drift of the table fails here.
LEGAL: dict[
    tuple[InteractionState, InteractionEvent], tuple[InteractionState, Resolution | None]
] = {
    (S.PENDING, E.DECIDE): (S.DECIDED, None),
    (S.PENDING, E.WITHDRAW): (S.CANCELLED, Resolution.CANCELLED_BY_AGENT),
    (S.PENDING, E.SUPERSEDE): (S.CANCELLED, Resolution.SUPERSEDED),
    (S.PENDING, E.STOP): (S.CANCELLED, Resolution.STOPPED),
    (S.PENDING, E.EXPIRE): (S.EXPIRED, Resolution.EXPIRED),
    (S.PENDING, E.EPOCH_ENDED): (S.ORPHANED, Resolution.ORPHANED),
    (S.DECIDED, E.DELIVER): (S.DELIVERED, None),
    (S.DECIDED, E.DELIVERY_FAILED): (S.DECIDED, None),
    (S.DECIDED, E.CONFIRM): (S.RESOLVED, Resolution.ANSWERED),
    (S.DECIDED, E.WITHDRAW): (S.CANCELLED, Resolution.CANCELLED_BY_AGENT),
    (S.DECIDED, E.SUPERSEDE): (S.CANCELLED, Resolution.SUPERSEDED),
    (S.DECIDED, E.STOP): (S.CANCELLED, Resolution.STOPPED),
    (S.DECIDED, E.EPOCH_ENDED): (S.ORPHANED, Resolution.ORPHANED),
    (S.DELIVERED, E.CONFIRM): (S.RESOLVED, Resolution.ANSWERED),
    (S.DELIVERED, E.WITHDRAW): (S.CANCELLED, Resolution.CANCELLED_BY_AGENT),
    (S.DELIVERED, E.SUPERSEDE): (S.CANCELLED, Resolution.SUPERSEDED),
    (S.DELIVERED, E.STOP): (S.CANCELLED, Resolution.STOPPED),
    (S.DELIVERED, E.EPOCH_ENDED): (S.ORPHANED, Resolution.ORPHANED),
    (S.EXPIRED, E.DELIVER): (S.EXPIRED, None),
    (S.EXPIRED, E.DELIVERY_FAILED): (S.EXPIRED, None),
    (S.EXPIRED, E.EPOCH_ENDED): (S.EXPIRED, None),
}


def test_live_and_terminal_states_partition_the_states() -> None:
    assert {S.PENDING, S.DECIDED, S.DELIVERED} == LIVE_STATES
    assert LIVE_STATES | TERMINAL_STATES == set(InteractionState)
    assert not LIVE_STATES & TERMINAL_STATES


@pytest.mark.parametrize(("state", "event"), sorted(LEGAL))
def test_every_legal_move(state: InteractionState, event: InteractionEvent) -> None:
    after, resolution = LEGAL[(state, event)]
    moved = transition(state, event)
    assert (moved.before, moved.event, moved.after) == (state, event, after)
    assert not moved.ignored
    assert moved.resolution == resolution


ILLEGAL = [
    (state, event)
    for state, event in product(sorted(LIVE_STATES), InteractionEvent)
    if (state, event) not in LEGAL
]


@pytest.mark.parametrize(("state", "event"), ILLEGAL)
def test_moves_the_table_lacks_raise_for_a_live_interaction(
    state: InteractionState, event: InteractionEvent
) -> None:
    with pytest.raises(IllegalTransition, match=event.value):
        transition(state, event)


def test_the_illegal_moves_include_the_ones_that_matter() -> None:
    # Delivering what nobody decided, confirming what we never answered, deciding twice.
    assert (S.PENDING, E.DELIVER) in ILLEGAL
    assert (S.PENDING, E.CONFIRM) in ILLEGAL
    assert (S.DECIDED, E.DECIDE) in ILLEGAL
    assert (S.DELIVERED, E.DELIVER) in ILLEGAL
    assert (S.DECIDED, E.EXPIRE) in ILLEGAL


TERMINAL_RACES = [
    (state, event)
    for state, event in product(sorted(TERMINAL_STATES), InteractionEvent)
    if (state, event) not in LEGAL
]


@pytest.mark.parametrize(("state", "event"), TERMINAL_RACES)
def test_events_for_an_ended_interaction_are_ignored(
    state: InteractionState, event: InteractionEvent
) -> None:
    outcome = transition(state, event)
    assert outcome.ignored
    assert outcome.after is state
    assert outcome.resolution is None
    assert not outcome.skips_delivery


def test_delivered_then_epoch_ended_is_unknown_for_a_runtime_that_outlives_the_gateway() -> None:
    assert transition(S.DELIVERED, E.EPOCH_ENDED, runtime_outlives_gateway=True).after is S.UNKNOWN
    assert (
        transition(S.DELIVERED, E.EPOCH_ENDED, runtime_outlives_gateway=True).resolution
        is Resolution.UNKNOWN
    )
    # Nothing was written yet: those are orphaned whatever the runtime.
    for state in (S.PENDING, S.DECIDED):
        assert transition(state, E.EPOCH_ENDED, runtime_outlives_gateway=True).after is S.ORPHANED


def test_unknown_is_never_rewritten() -> None:
    for event in InteractionEvent:
        assert transition(S.UNKNOWN, event).ignored


@pytest.mark.parametrize(
    ("state", "event", "skips"),
    [
        (S.PENDING, E.WITHDRAW, True),
        (S.DECIDED, E.WITHDRAW, True),  # the decision stays, nothing is written
        (S.DECIDED, E.EPOCH_ENDED, True),
        (S.PENDING, E.SUPERSEDE, True),
        (S.DELIVERED, E.WITHDRAW, False),  # it was written
        (S.DELIVERED, E.EPOCH_ENDED, False),
        (S.PENDING, E.EXPIRE, False),  # "timed out" is written next
        (S.DECIDED, E.CONFIRM, False),  # our write crossed the confirmation
        (S.PENDING, E.DECIDE, False),
    ],
)
def test_moves_that_end_without_a_write(
    state: InteractionState, event: InteractionEvent, skips: bool
) -> None:
    assert transition(state, event).skips_delivery is skips


@pytest.mark.parametrize(
    ("state", "how", "event"),
    [
        (S.PENDING, Resolution.ANSWERED, E.WITHDRAW),  # resolved elsewhere before we answered
        (S.DECIDED, Resolution.ANSWERED, E.CONFIRM),
        (S.DELIVERED, Resolution.ANSWERED, E.CONFIRM),
        (S.DELIVERED, Resolution.CANCELLED_BY_AGENT, E.WITHDRAW),
        (S.PENDING, Resolution.SUPERSEDED, E.SUPERSEDE),
        (S.DECIDED, Resolution.EXPIRED, E.WITHDRAW),
    ],
)
def test_an_agent_close_maps_to_an_event(
    state: InteractionState, how: Resolution, event: InteractionEvent
) -> None:
    assert event_for_agent_close(state, how) is event


@pytest.mark.parametrize(
    ("state", "how", "event"),
    [
        (S.PENDING, Resolution.CANCELLED_BY_AGENT, E.STOP),  # a person's /stop is why
        (S.DELIVERED, Resolution.CANCELLED_BY_AGENT, E.STOP),
        (S.PENDING, Resolution.ANSWERED, E.STOP),
        (S.DELIVERED, Resolution.ANSWERED, E.CONFIRM),  # answered is answered
        (S.PENDING, Resolution.SUPERSEDED, E.SUPERSEDE),
    ],
)
def test_an_agent_close_while_a_person_stops_the_turn_is_their_stop(
    state: InteractionState, how: Resolution, event: InteractionEvent
) -> None:
    assert event_for_agent_close(state, how, stopped=True) is event


def test_short_ids_are_url_safe_and_random() -> None:
    ids = {new_short_id() for _ in range(1000)}
    assert len(ids) == 1000
    for short_id in ids:
        assert len(short_id) == 10
        assert short_id.isalnum() and short_id == short_id.lower()


# --- run state -------------------------------------------------------------------------

NOW = datetime(2025, 1, 1, tzinfo=UTC)

APPROVE = Action(id="accept", label="Approve", effect=Effect.ALLOW)
APPROVE_SESSION = Action(
    id="acceptForSession", label="Always", effect=Effect.ALLOW, scope=Scope.SESSION
)
DENY = Action(id="decline", label="Deny", effect=Effect.DENY)


def make(
    kind: InteractionKind, state: InteractionState = S.PENDING, **fields: object
) -> Interaction:
    base = Interaction(
        id=new_short_id(),
        session_id="s1",
        runtime_epoch=1,
        turn_id=None,
        native_key="k",
        kind=kind,
        title="t",
        summary="",
        detail=None,
        actions=(APPROVE, APPROVE_SESSION, DENY) if kind is not InteractionKind.QUESTION else (),
        questions=(),
        state=state,
        version=1,
        created_at=NOW,
        updated_at=NOW,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("interactions", "running", "expected"),
    [
        ([], False, RunState.IDLE),
        ([], True, RunState.RUNNING),
        ([make(InteractionKind.APPROVAL)], True, RunState.WAITING_APPROVAL),
        ([make(InteractionKind.PLAN, S.DECIDED)], True, RunState.WAITING_PLAN_REVIEW),
        # written but not yet confirmed: still waiting, the agent's next event flips it
        ([make(InteractionKind.APPROVAL, S.DELIVERED)], True, RunState.WAITING_APPROVAL),
        ([make(InteractionKind.QUESTION)], True, RunState.WAITING_INPUT),
        (
            [make(InteractionKind.QUESTION), make(InteractionKind.APPROVAL, S.DECIDED)],
            True,
            RunState.WAITING_APPROVAL,
        ),
        ([make(InteractionKind.APPROVAL, S.RESOLVED)], True, RunState.RUNNING),
        ([make(InteractionKind.QUESTION, S.ORPHANED)], False, RunState.IDLE),
        ([make(InteractionKind.APPROVAL, S.UNKNOWN)], False, RunState.IDLE),
    ],
)
def test_run_state_is_derived_from_live_interactions(
    interactions: list[Interaction], running: bool, expected: RunState
) -> None:
    assert derive_run_state(interactions, turn_running=running) is expected


# --- decisions -------------------------------------------------------------------------

COLOR = Question(
    id="color",
    header="Color",
    text="Which color?",
    options=(Option(id="red", label="Red"), Option(id="blue", label="Blue")),
)
TOPPINGS = Question(
    id="toppings",
    header="Toppings",
    text="Which toppings?",
    options=(Option(id="cheese", label="Cheese"), Option(id="ham", label="Ham")),
    multi=True,
    allow_other=True,
    required=False,
)
NAME = Question(id="name", header="Name", text="Your name?")  # free text: no options
TOKEN = Question(id="token", header="Token", text="API token?", secret=True)


def form(*questions: Question, actions: tuple[Action, ...] = ()) -> Interaction:
    return make(InteractionKind.QUESTION, questions=questions, actions=actions)


def test_an_offered_action_decides_an_approval() -> None:
    validate_decision(make(InteractionKind.APPROVAL), Decision(action_id="accept"))
    validate_decision(make(InteractionKind.PLAN), Decision(action_id="decline", message="no"))


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (Decision(action_id="rm-rf"), "unknown action 'rm-rf'"),
        (Decision(), "needs one of the offered actions"),
        (
            Decision(action_id="accept", answers={"x": Answer(other="y")}),
            "takes no answers",
        ),
    ],
)
def test_an_approval_refuses_what_was_not_offered(decision: Decision, message: str) -> None:
    with pytest.raises(InvalidDecision, match=message):
        validate_decision(make(InteractionKind.APPROVAL), decision)


def test_authentication_is_never_decided_in_chat() -> None:
    with pytest.raises(InvalidDecision, match="not supported"):
        validate_decision(make(InteractionKind.AUTHENTICATION), Decision(action_id="accept"))


def test_complete_answers_are_valid() -> None:
    interaction = form(COLOR, TOPPINGS, NAME)
    validate_decision(
        interaction,
        Decision(
            answers={
                "color": Answer(option_ids=("red",)),
                "toppings": Answer(option_ids=("cheese", "ham"), other="olives"),
                "name": Answer(other="Ada"),
            }
        ),
    )
    # an optional question may stay unanswered
    validate_decision(
        interaction,
        Decision(answers={"color": Answer(option_ids=("blue",)), "name": Answer(other="Ada")}),
    )


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"colour": Answer(option_ids=("red",))}, "unknown question 'colour'"),
        ({"color": Answer(option_ids=("green",))}, "unknown option 'green'"),
        ({"color": Answer(option_ids=("red", "blue"))}, "takes a single option"),
        ({"color": Answer(option_ids=("red", "red"))}, "chosen twice"),
        ({"color": Answer(other="green")}, "takes no free text"),
        ({"name": Answer(other="Ada")}, "^Color needs an answer"),
        ({"color": Answer(option_ids=("red",)), "name": Answer(other="   ")}, "^Name needs"),
        ({}, "^Color and Name need an answer"),
    ],
)
def test_answers_that_do_not_fit_are_refused(answers: dict[str, Answer], message: str) -> None:
    with pytest.raises(InvalidDecision, match=message):
        validate_decision(form(COLOR, NAME), Decision(answers=answers))


def test_single_select_with_other_takes_an_option_or_text_not_both() -> None:
    pick = replace(COLOR, allow_other=True)
    validate_decision(form(pick), Decision(answers={"color": Answer(other="green")}))
    with pytest.raises(InvalidDecision, match="not both"):
        validate_decision(
            form(pick), Decision(answers={"color": Answer(option_ids=("red",), other="green")})
        )


def test_a_question_form_can_be_declined_without_answers() -> None:
    decline = Action(id="decline", label="Decline", effect=Effect.DENY)
    accept = Action(id="accept", label="Submit", effect=Effect.ALLOW)
    interaction = form(COLOR, actions=(accept, decline))
    validate_decision(interaction, Decision(action_id="decline"))
    with pytest.raises(InvalidDecision, match=r"^Color needs an answer"):
        validate_decision(interaction, Decision(action_id="accept"))
    with pytest.raises(InvalidDecision, match="takes no answers"):
        validate_decision(
            interaction,
            Decision(action_id="decline", answers={"color": Answer(option_ids=("red",))}),
        )


def test_refusals_never_echo_a_secret_answer() -> None:
    secret = "sk-this-must-not-leak"
    with pytest.raises(InvalidDecision) as caught:
        validate_decision(
            form(COLOR, TOKEN),
            Decision(answers={"token": Answer(other=secret), "color": Answer(other=secret)}),
        )
    assert secret not in str(caught.value)


def test_missing_answers_are_named_as_the_form_shows_them_all_at_once() -> None:
    unnamed = Question(id="q7", header="", text="Which branch?")
    assert missing_answers([COLOR]) == "Color needs an answer."
    assert missing_answers([COLOR, NAME, unnamed]) == (
        "Color, Name and Which branch? need an answer."
    )
