"""Cards: what a person sees for an interaction, before and after it is decided."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from gateway.action_tokens import ActionToken, token_factory, verify_token
from gateway.cards import (
    ButtonStyle,
    Card,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    TextBlock,
    card_text_length,
)
from gateway.domain import (
    Action,
    Actor,
    Answer,
    Command,
    Decision,
    Detail,
    Effect,
    FileChange,
    InteractionKind,
    InteractionState,
    Option,
    OutgoingFile,
    Plan,
    Question,
    Resolution,
    Scope,
)
from gateway.interactions.machine import (
    DecisionFact,
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    ResolutionFact,
)
from gateway.interactions.plans import proposed_plan
from gateway.render.interaction_card import render_interaction

KEY = bytes(32)
T0 = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)
T1 = datetime(2026, 11, 30, 9, 17, tzinfo=UTC)
ALICE = Actor(platform="telegram", user_id="123", display="alice")

ALLOW = Action(id="accept", label="Yes", effect=Effect.ALLOW)
ALLOW_SESSION = Action(id="acceptForSession", label="Yes", effect=Effect.ALLOW, scope=Scope.SESSION)
DENY = Action(id="decline", label="No", effect=Effect.DENY)
CANCEL = Action(id="cancel", label="No, and stop", effect=Effect.CANCEL)


def interaction(
    *,
    kind: InteractionKind = InteractionKind.APPROVAL,
    detail: Detail | None = None,
    actions: tuple[Action, ...] = (ALLOW, DENY),
    questions: tuple[Question, ...] = (),
    state: InteractionState = InteractionState.PENDING,
    title: str = "Run a command",
    summary: str = "The agent wants to run the tests.",
) -> Interaction:
    return Interaction(
        id="k3m9x2p7qa",
        session_id="s1",
        runtime_epoch=4,
        turn_id=1,
        native_key="rpc:7",
        kind=kind,
        title=title,
        summary=summary,
        detail=detail if detail is not None else Command(command="pytest -q", cwd="/srv/web"),
        actions=actions,
        questions=questions,
        state=state,
        version=1,
        created_at=T0,
        updated_at=T0,
    )


def render(item: Interaction, text_max_chars: int = 4096) -> Card:
    return render_interaction(
        item,
        token_for=token_factory(KEY, item.id, item.runtime_epoch),
        text_max_chars=text_max_chars,
    )


def decided(item: Interaction, action: Action | None, **facts: object) -> Interaction:
    decision = Decision(action_id=action.id if action else None)
    return replace(item, decision=DecisionFact(actor=ALICE, decision=decision, at=T1), **facts)  # type: ignore[arg-type]


def delivered(outcome: DeliveryOutcome = DeliveryOutcome.OK) -> DeliveryFact:
    return DeliveryFact(outcome=outcome, at=T1)


def resolved(how: Resolution) -> ResolutionFact:
    return ResolutionFact(how=how, at=T1, by="agent")


# --- what a pending card shows -------------------------------------------------------------


def test_a_command_card_shows_the_command_and_one_button_per_action() -> None:
    card = render(interaction(actions=(ALLOW, ALLOW_SESSION, DENY, CANCEL)))

    assert card.title == "Run a command"
    assert card.summary == "The agent wants to run the tests."
    assert CodeBlock(code="pytest -q", language="sh") in card.blocks
    assert FieldsBlock(fields=(("Directory", "/srv/web"),)) in card.blocks
    assert [a.label for a in card.actions] == [
        "Yes",
        "Yes (for this session)",
        "No",
        "No, and stop",
    ]
    assert [a.effect for a in card.actions] == [
        Effect.ALLOW,
        Effect.ALLOW,
        Effect.DENY,
        Effect.CANCEL,
    ]
    assert card.actions[0].style is ButtonStyle.PRIMARY
    assert (
        card.actions[1].style is ButtonStyle.DEFAULT
    )  # a wider grant is never the highlighted one
    assert card.actions[2].style is ButtonStyle.DANGER
    assert card.status_line == "Waiting for a decision"
    assert card.attachments == ()


def test_each_button_carries_a_token_for_its_own_action() -> None:
    card = render(interaction(actions=(ALLOW, ALLOW_SESSION, DENY)))
    tokens = [verify_token(KEY, a.token) for a in card.actions]
    assert tokens == [ActionToken.for_action("k3m9x2p7qa", index, 4) for index in range(3)]
    assert all(len(a.token.encode()) <= 64 for a in card.actions)


def test_a_card_offers_exactly_what_the_agent_offered() -> None:
    card = render(interaction(actions=(DENY,)))
    assert [a.label for a in card.actions] == ["No"]
    assert render(interaction(actions=())).actions == ()


def test_a_label_that_already_names_its_scope_gets_no_second_hint() -> None:
    always = Action(id="a", label="Always allow curl", effect=Effect.ALLOW, scope=Scope.ALWAYS)
    turn = Action(id="t", label="Allow", effect=Effect.ALLOW, scope=Scope.TURN)
    card = render(interaction(actions=(always, turn)))
    assert [a.label for a in card.actions] == ["Always allow curl", "Allow (for this turn)"]


def test_a_short_diff_is_shown_in_the_card() -> None:
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    card = render(interaction(detail=FileChange(paths=("app.py",), diff=diff)))
    assert DiffBlock(diff=diff, paths=("app.py",)) in card.blocks
    assert card.attachments == ()
    assert [a.label for a in card.actions] == ["Yes", "No"]


def test_a_diff_too_long_for_the_message_is_attached_and_the_buttons_say_so() -> None:
    diff = "".join(f"+line {n}\n" for n in range(2000))
    card = render(interaction(detail=FileChange(paths=("big.py",), diff=diff)), text_max_chars=4096)

    assert [(a.name, a.content) for a in card.attachments] == [("changes.diff", diff)]
    assert not any(isinstance(block, DiffBlock) for block in card.blocks)
    notices = [b.text for b in card.blocks if isinstance(b, TextBlock)]
    assert notices == [
        f"The full diff (2,000 lines, {len(diff):,} characters) is attached as changes.diff."
    ]
    assert [a.label for a in card.actions] == ["Yes (see attached diff)", "No (see attached diff)"]
    assert card_text_length(card) <= 4096


def test_a_long_command_is_attached_whole() -> None:
    command = "python - <<'EOF'\n" + "print('x')\n" * 600 + "EOF"
    card = render(interaction(detail=Command(command=command)), text_max_chars=1000)
    assert card.attachments[0].name == "command.sh"
    assert card.attachments[0].content == command
    assert card.actions[0].label == "Yes (see attached command)"
    assert card_text_length(card) <= 1000


def test_a_plan_card_shows_the_plan() -> None:
    accept = Action(id="accept", label="Start building", effect=Effect.ALLOW)
    keep = Action(id="keep", label="Keep planning", effect=Effect.DENY)
    item = interaction(
        kind=InteractionKind.PLAN, detail=Plan(markdown="1. Read\n2. Write"), actions=(accept, keep)
    )
    card = render(item)
    assert TextBlock(text="1. Read\n2. Write", markdown=True) in card.blocks
    assert [a.label for a in card.actions] == ["Start building", "Keep planning"]


def test_a_question_card_has_a_form_with_a_token_per_option() -> None:
    question = Question(
        id="q1",
        header="Database",
        text="Which database?",
        options=(Option(id="pg", label="Postgres"), Option(id="lite", label="SQLite")),
    )
    item = interaction(
        kind=InteractionKind.QUESTION, detail=None, actions=(), questions=(question,)
    )
    card = render(item)
    assert card.status_line == "Waiting for an answer"
    assert card.form is not None
    assert card.form.questions[0].question == question
    options = [verify_token(KEY, t) for t in card.form.questions[0].option_tokens]
    assert options == [ActionToken.for_option("k3m9x2p7qa", 0, j, 4) for j in range(2)]
    assert verify_token(KEY, card.form.submit_token).is_submit


# --- after the decision --------------------------------------------------------------------

WHEN = "09:17 UTC"
YES = f'Approved ("Yes") by alice at {WHEN}'
NEXT_START = "your next message starts the agent again"


def ended(how: Resolution, note: str = "", by: str = "agent", seconds: int = 120) -> ResolutionFact:
    return ResolutionFact(how=how, at=T0 + timedelta(seconds=seconds), by=by, note=note)


def expired(
    outcome: DeliveryOutcome | None, error: str | None = None, note: str = "deny"
) -> Interaction:
    delivery = None if outcome is None else DeliveryFact(outcome=outcome, at=T1, error=error)
    return replace(
        interaction(state=InteractionState.EXPIRED),
        delivery=delivery,
        resolution=ended(Resolution.EXPIRED, note=note, by="gateway", seconds=95),
    )


# Every state a card can end in, in a person's words: what happened, what the agent was told
# (or that nothing reached it), and what to do next.
STATUS_LINES = [
    (
        decided(interaction(state=InteractionState.DECIDED), ALLOW),
        f"{YES} · sending it to the agent…",
    ),
    (
        decided(
            interaction(state=InteractionState.DECIDED),
            ALLOW,
            delivery=delivered(DeliveryOutcome.FAILED),
        ),
        f"{YES} · the answer did not reach the agent (the write failed) and was not resent:"
        " /stop the turn, then send a new message",
    ),
    (
        decided(interaction(state=InteractionState.DELIVERED), DENY, delivery=delivered()),
        f'Denied ("No") by alice at {WHEN} · sent to the agent',
    ),
    (
        decided(
            interaction(state=InteractionState.RESOLVED, actions=(ALLOW_SESSION, DENY)),
            ALLOW_SESSION,
            delivery=delivered(),
            resolution=resolved(Resolution.ANSWERED),
        ),
        f'Approved ("Yes (for this session)") by alice at {WHEN} · sent to the agent · done',
    ),
    (
        decided(
            interaction(state=InteractionState.RESOLVED, actions=(ALLOW, CANCEL)),
            CANCEL,
            delivery=delivered(),
        ),
        f'Denied and stopped ("No, and stop") by alice at {WHEN} · sent to the agent · done',
    ),
    (
        replace(
            interaction(state=InteractionState.CANCELLED),
            resolution=resolved(Resolution.CANCELLED_BY_AGENT),
        ),
        "Closed before anyone answered: the agent withdrew the request · nothing was sent to"
        " the agent",
    ),
    (
        replace(
            interaction(state=InteractionState.CANCELLED),
            resolution=ended(Resolution.CANCELLED_BY_AGENT, note="the turn ended"),
        ),
        "Closed before anyone answered: the turn ended · nothing was sent to the agent",
    ),
    (
        replace(
            interaction(state=InteractionState.CANCELLED),
            resolution=resolved(Resolution.SUPERSEDED),
        ),
        "Closed before anyone answered: a newer request replaced it · nothing was sent to the"
        " agent",
    ),
    (
        decided(
            interaction(state=InteractionState.CANCELLED),
            ALLOW,
            delivery=DeliveryFact(
                outcome=DeliveryOutcome.SKIPPED,
                at=T1,
                error="not written: the agent withdrew the request first",
            ),
            resolution=resolved(Resolution.CANCELLED_BY_AGENT),
        ),
        f"{YES} · nothing reached the agent: the agent withdrew the request first",
    ),
    (
        decided(
            interaction(state=InteractionState.CANCELLED),
            ALLOW,
            delivery=delivered(),
            resolution=resolved(Resolution.CANCELLED_BY_AGENT),
        ),
        f"{YES} · sent to the agent, then the agent withdrew the request",
    ),
    (
        expired(DeliveryOutcome.OK),
        "Timed out: nobody answered within 1 min 35 s · a refusal was sent to the agent",
    ),
    (
        expired(DeliveryOutcome.OK, note="deny and stop"),
        "Timed out: nobody answered within 1 min 35 s · a refusal that stops the turn was sent"
        " to the agent",
    ),
    (
        expired(None),
        "Timed out: nobody answered within 1 min 35 s · sending a refusal to the agent…",
    ),
    (
        expired(DeliveryOutcome.FAILED, error="the agent process that asked has ended"),
        "Timed out: nobody answered within 1 min 35 s · a refusal did not reach the agent (the"
        " agent process that asked has ended) · /stop the turn, then send a new message",
    ),
    (
        # the runtime ended between the expiry's commit and the record of its write
        expired(DeliveryOutcome.UNKNOWN, error="the gateway restarted"),
        "Timed out: nobody answered within 1 min 35 s · whether a refusal reached the agent is"
        " not known: the gateway restarted and ended the agent process",
    ),
    (
        expired(
            DeliveryOutcome.SKIPPED,
            error="not written: the agent offers no way to decline this question",
            note="",
        ),
        "Timed out: nobody answered within 1 min 35 s · nothing was sent to the agent: the"
        " agent offers no way to decline this question",
    ),
    (
        replace(
            interaction(state=InteractionState.ORPHANED),
            delivery=DeliveryFact(
                outcome=DeliveryOutcome.SKIPPED, at=T1, error="not written: the runtime ended first"
            ),
            resolution=ended(Resolution.ORPHANED, note="exited with code 17", by="gateway"),
        ),
        "The agent process ended (exited with code 17) before anyone answered: no answer can"
        f" reach it now · {NEXT_START}",
    ),
    (
        replace(
            interaction(state=InteractionState.ORPHANED),
            resolution=ended(Resolution.ORPHANED, note="the gateway restarted", by="gateway"),
        ),
        "The gateway restarted and ended the agent process before anyone answered: no answer"
        f" can reach it now · {NEXT_START}",
    ),
    (
        decided(
            interaction(state=InteractionState.ORPHANED),
            ALLOW,
            delivery=delivered(DeliveryOutcome.SKIPPED),
        ),
        f"{YES} · nothing reached the agent: the agent process ended first · {NEXT_START}",
    ),
    (
        # the gateway died between committing the decision and recording its write
        decided(
            interaction(state=InteractionState.ORPHANED),
            ALLOW,
            resolution=ended(
                Resolution.ORPHANED,
                note="the gateway restarted; whether the answer was written to the agent before"
                " the gateway stopped is not known",
                by="gateway",
            ),
        ),
        f"{YES} · whether it reached the agent is not known: the gateway stopped before"
        f" recording it, and the agent process was ended · {NEXT_START}",
    ),
    (
        decided(interaction(state=InteractionState.ORPHANED), ALLOW, delivery=delivered()),
        f"{YES} · sent to the agent, then the agent process ended · {NEXT_START}",
    ),
    (
        decided(interaction(state=InteractionState.UNKNOWN), ALLOW, delivery=delivered()),
        f"{YES} · sent to the agent, but whether it got it is not known: the agent runs on"
        " its own and outlived the gateway, which cannot ask it",
    ),
]


@pytest.mark.parametrize(("item", "expected"), STATUS_LINES)
def test_the_status_line_tells_the_three_facts(item: Interaction, expected: str) -> None:
    card = render(item)
    assert card.status_line == expected
    assert card.actions == ()  # buttons are gone once it is no longer pending
    assert card.form is None


@pytest.mark.parametrize(("item", "expected"), STATUS_LINES)
def test_a_status_line_never_shows_the_ledgers_own_words(item: Interaction, expected: str) -> None:
    line = render(item).status_line.lower()
    for internal in ("not written", "orphaned", "superseded", "runtime ended", "delivering"):
        assert internal not in line
    assert "“" not in line and "”" not in line  # one style of quotes: straight


def gateway_plan(state: InteractionState) -> Interaction:
    """A Codex plan card: the gateway's own (no native key), from gateway/interactions/plans.py."""
    request = proposed_plan("1. Read\n2. Write")
    return replace(
        interaction(
            kind=request.kind,
            detail=request.detail,
            actions=request.actions,
            state=state,
            title=request.title,
            summary=request.summary,
        ),
        native_key=None,
        origin=request.origin,
    )


def test_a_decision_on_a_codex_plan_is_queued_then_sent_when_its_turn_starts() -> None:
    """The decision is the next turn: "queued" until that turn starts, never "sent" before."""
    implement, keep = gateway_plan(InteractionState.PENDING).actions
    lines = [
        render(decided(gateway_plan(InteractionState.DECIDED), implement)).status_line,
        render(
            decided(gateway_plan(InteractionState.DELIVERED), implement, delivery=delivered())
        ).status_line,
        render(
            decided(
                gateway_plan(InteractionState.RESOLVED),
                keep,
                delivery=delivered(),
                resolution=resolved(Resolution.ANSWERED),
            )
        ).status_line,
    ]
    assert lines == [
        f'Approved ("Implement") by alice at {WHEN} · queuing it as the next turn…',
        f'Approved ("Implement") by alice at {WHEN} · queued as the next turn',
        f'Sent back ("Keep planning") by alice at {WHEN} · sent to the agent as the next turn',
    ]


def test_answers_are_shown_after_the_decision_except_secret_ones() -> None:
    questions = (
        Question(
            id="db", header="Database", text="?", options=(Option(id="pg", label="Postgres"),)
        ),
        Question(id="pw", header="Password", text="?", secret=True),
    )
    answers = {"db": Answer(option_ids=("pg",)), "pw": Answer(other="hunter2")}
    item = replace(
        interaction(kind=InteractionKind.QUESTION, detail=None, actions=(), questions=questions),
        state=InteractionState.DELIVERED,
        decision=DecisionFact(actor=ALICE, decision=Decision(answers=answers), at=T1),
        delivery=delivered(),
    )
    card = render(item)
    assert card.status_line == f"Answered by alice at {WHEN} · sent to the agent"
    assert (
        FieldsBlock(fields=(("Database", "Postgres"), ("Password", "(secret, not shown)")))
        in card.blocks
    )
    assert "hunter2" not in repr(card)


def test_an_authentication_request_is_not_rendered_as_a_form() -> None:
    item = interaction(kind=InteractionKind.AUTHENTICATION, detail=None, actions=(ALLOW,))
    card = render(item)
    assert card.actions == ()
    assert card.form is None
    assert "not supported in chat" in card.status_line


def test_without_a_private_surface_a_secret_is_answered_where_it_stays_private() -> None:
    questions = (Question(id="pw", header="Password", text="The staging password?", secret=True),)
    item = interaction(kind=InteractionKind.QUESTION, detail=None, actions=(), questions=questions)
    kept = render_interaction(item, token_for=token_factory(KEY, item.id, item.runtime_epoch))
    assert kept.form is not None  # a private surface (a modal, a DM) takes it
    card = render_interaction(
        item,
        token_for=token_factory(KEY, item.id, item.runtime_epoch),
        private_surface=False,
        private_places=("console", "telegram"),
    )
    assert card.form is None
    assert card.blocks[-2:] == (
        FieldsBlock(fields=(("Password", "The staging password?"),)),
        TextBlock(
            text="🔒 This asks for a secret answer, which is never typed here: answer it where"
            " it stays private (console, telegram)."
        ),
    )
    assert card.status_line == "Waiting for an answer"


# --- a file the agent asked to send (issue 33): the card says what became of the file ---------

SEND_IT = Action(id="send", label="Send it", effect=Effect.ALLOW)
DONT_SEND = Action(id="keep", label="Don't send", effect=Effect.DENY)


def file_card(state: InteractionState) -> Interaction:
    return replace(
        interaction(
            state=state,
            detail=OutgoingFile(path="build.log", size=223, media_type="text/plain"),
            actions=(SEND_IT, DONT_SEND),
            title="Send build.log to the chat?",
            summary="The agent wants to send build.log (223 B).",
        ),
        native_key="send_file:7",
    )


def outcome(became: str) -> DeliveryFact:
    return DeliveryFact(outcome=DeliveryOutcome.OK, at=T1, error=became)


FILE_LINES = [
    (
        decided(
            file_card(InteractionState.DELIVERED),
            SEND_IT,
            delivery=outcome("sent build.log (223 B) to the chat"),
        ),
        f'Approved ("Send it") by alice at {WHEN} · sent to the chat',
    ),
    (
        decided(
            file_card(InteractionState.RESOLVED),
            SEND_IT,
            delivery=outcome("sent build.log (223 B) to the chat"),
            resolution=resolved(Resolution.ANSWERED),
        ),
        f'Approved ("Send it") by alice at {WHEN} · sent to the chat · done',
    ),
    (
        decided(
            file_card(InteractionState.RESOLVED),
            SEND_IT,
            delivery=outcome(
                "sent build.log (223 B) to the chat; not to slack: the upload failed (boom)"
            ),
            resolution=resolved(Resolution.ANSWERED),
        ),
        f'Approved ("Send it") by alice at {WHEN} · sent to the chat; not to slack: the upload'
        " failed (boom) · done",
    ),
    (
        decided(
            file_card(InteractionState.RESOLVED),
            SEND_IT,
            delivery=outcome("not sent: telegram: 60 MB is more than the 50 MB it takes"),
            resolution=resolved(Resolution.ANSWERED),
        ),
        f'Approved ("Send it") by alice at {WHEN} · not sent: telegram: 60 MB is more than the'
        " 50 MB it takes · done",
    ),
    (
        decided(
            file_card(InteractionState.RESOLVED),
            DONT_SEND,
            delivery=outcome("not sent: alice chose not to send build.log"),
            resolution=resolved(Resolution.ANSWERED),
        ),
        f'Denied ("Don\'t send") by alice at {WHEN} · not sent · done',
    ),
    (
        # decided before the outcome was kept with the delivery: no guess either way
        decided(file_card(InteractionState.DELIVERED), SEND_IT, delivery=delivered()),
        f'Approved ("Send it") by alice at {WHEN} · the agent was told',
    ),
]


@pytest.mark.parametrize(("item", "expected"), FILE_LINES)
def test_a_decided_file_card_says_what_became_of_the_file(item: Interaction, expected: str) -> None:
    card = render(item)
    assert card.status_line == expected
    assert "sent to the agent" not in card.status_line
