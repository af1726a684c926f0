"""The platform-neutral card: what an interaction looks like before a platform draws it.

:func:`render_interaction` is pure: an :class:`~gateway.interactions.Interaction` record
and the platform's text limit in, a :class:`Card` out. Each platform turns a card into its
own blocks, keyboards or components.

What a person approves is shown whole (DESIGN.md, Platforms): a command, diff or plan too
long for the message goes as an :class:`Attachment`, the card says so, and every button
says "(see attached diff)". A card offers exactly the actions the agent offered, one button
each, labelled with what it does and how far it reaches; once the interaction is no longer
pending the buttons are gone and the status line tells who decided what, whether it was
delivered, and how it ended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from gateway.domain import (
    Action,
    Command,
    Detail,
    Effect,
    FileChange,
    InteractionKind,
    InteractionState,
    Network,
    Permissions,
    Plan,
    Question,
    Resolution,
    Scope,
    Text,
)
from gateway.expiry import waited
from gateway.interactions import DecisionFact, DeliveryOutcome, Interaction

__all__ = [
    "Attachment",
    "Block",
    "ButtonStyle",
    "Card",
    "CardAction",
    "CodeBlock",
    "DiffBlock",
    "FieldsBlock",
    "FormQuestion",
    "QuestionForm",
    "TextBlock",
    "card_text_length",
    "render_interaction",
    "secret_elsewhere",
    "status_line",
    "undelivered",
]

TITLE_MAX_CHARS = 200
FIELD_MAX_CHARS = 500
LABEL_MAX_CHARS = 75  # Slack's limit for button text, the strictest


class ButtonStyle(StrEnum):
    PRIMARY = "primary"
    DANGER = "danger"
    DEFAULT = "default"


@dataclass(frozen=True, kw_only=True, slots=True)
class CodeBlock:
    code: str
    language: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class DiffBlock:
    diff: str
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class TextBlock:
    text: str
    markdown: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldsBlock:
    fields: tuple[tuple[str, str], ...]


Block = CodeBlock | DiffBlock | TextBlock | FieldsBlock


@dataclass(frozen=True, kw_only=True, slots=True)
class CardAction:
    """One button: the token is the only thing the platform sends back."""

    label: str
    token: str
    style: ButtonStyle = ButtonStyle.DEFAULT
    effect: Effect | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FormQuestion:
    """A question and one token per option (buttons where the platform has no forms)."""

    question: Question
    option_tokens: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class QuestionForm:
    """The questions of an interaction; answers come back with ``submit_token``.

    A question marked ``secret`` is only ever collected on a private surface.
    """

    questions: tuple[FormQuestion, ...]
    submit_token: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Attachment:
    name: str
    content: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Card:
    title: str
    summary: str = ""
    blocks: tuple[Block, ...] = ()
    actions: tuple[CardAction, ...] = ()
    form: QuestionForm | None = None
    status_line: str = ""
    attachments: tuple[Attachment, ...] = ()


def _block_length(block: Block) -> int:
    match block:
        case CodeBlock(code=code, language=language):
            return len(code) + len(language) + 8  # fences and newlines
        case DiffBlock(diff=diff):
            return len(diff) + 12
        case TextBlock(text=text):
            return len(text) + 2
        case FieldsBlock(fields=fields):
            return sum(len(key) + len(value) + 4 for key, value in fields)


def card_text_length(card: Card) -> int:
    """An estimate of the card's message text, in characters, as a platform would draw it."""
    length = len(card.title) + len(card.summary) + len(card.status_line) + 4
    length += sum(_block_length(block) for block in card.blocks)
    if card.form is not None:
        for item in card.form.questions:
            question = item.question
            length += len(question.header) + len(question.text) + 4
            length += sum(
                len(option.label) + len(option.description) + 4 for option in question.options
            )
    return length


# --- the pieces ----------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _fields(*pairs: tuple[str, str | None]) -> tuple[FieldsBlock, ...]:
    kept = tuple((key, _clip(value, FIELD_MAX_CHARS)) for key, value in pairs if value)
    return (FieldsBlock(fields=kept),) if kept else ()


def _detail_blocks(detail: Detail | None) -> tuple[Block, ...]:
    match detail:
        case None:
            return ()
        case Command():
            label = "Input for the running process" if detail.stdin_for_running_process else ""
            return (
                CodeBlock(code=detail.command, language="sh"),
                *_fields(("Note", label), ("Directory", detail.cwd), ("Reason", detail.reason)),
            )
        case Network():
            port = None if detail.port is None else str(detail.port)
            return _fields(
                ("Host", detail.host),
                ("Protocol", detail.protocol),
                ("Port", port),
                ("Reason", detail.reason),
            )
        case FileChange():
            return (
                *_fields(
                    ("Files", ", ".join(detail.paths)),
                    ("Reason", detail.reason),
                    ("Write access to", detail.grant_root),
                ),
                DiffBlock(diff=detail.diff, paths=detail.paths),
            )
        case Permissions():
            return (
                TextBlock(text=detail.description),
                *_fields(
                    ("For", _SCOPE_PHRASE[detail.scope]),
                    ("Requested", ", ".join(detail.requested)),
                    ("Reason", detail.reason),
                ),
            )
        case Plan():
            return (TextBlock(text=detail.markdown, markdown=True),)
        case Text():
            return (TextBlock(text=detail.text),)


_SCOPE_PHRASE = {
    Scope.ONCE: "this time only",
    Scope.TURN: "this turn",
    Scope.SESSION: "this session",
    Scope.ALWAYS: "always",
}
_SCOPE_HINT = {
    Scope.TURN: "for this turn",
    Scope.SESSION: "for this session",
    Scope.ALWAYS: "always",
}
_SCOPE_WORDS = ("turn", "session", "always", "forever", "permanent")


def _attachable(block: Block, kind: InteractionKind) -> tuple[str, str, str] | None:
    """(what it is, file name, content) for a block a person approves, else None."""
    match block:
        case CodeBlock(code=code):
            return "command", "command.sh", code
        case DiffBlock(diff=diff):
            return "diff", "changes.diff", diff
        case TextBlock(text=text, markdown=True) if kind is InteractionKind.PLAN:
            return "plan", "plan.md", text
        case _:
            return None


def _fit(
    blocks: tuple[Block, ...], base: Card, kind: InteractionKind, text_max_chars: int
) -> tuple[tuple[Block, ...], tuple[Attachment, ...], tuple[str, ...]]:
    """Move the largest approvable blocks to attachments until the card fits."""
    blocks_list = list(blocks)
    attachments: list[Attachment] = []
    attached: list[str] = []
    while card_text_length(_with_blocks(base, blocks_list)) > text_max_chars:
        candidates = [
            (len(found[2]), index, found)
            for index, block in enumerate(blocks_list)
            if (found := _attachable(block, kind)) is not None
        ]
        if not candidates:
            break
        _, index, (what, name, content) = max(candidates)
        lines = content.count("\n") + (0 if content.endswith("\n") else 1)
        notice = (
            f"The full {what} ({lines} lines, {len(content):,} characters) is attached as {name}."
        )
        blocks_list[index] = TextBlock(text=notice)
        attachments.append(Attachment(name=name, content=content))
        attached.append(what)
    return tuple(blocks_list), tuple(attachments), tuple(attached)


def _with_blocks(card: Card, blocks: list[Block]) -> Card:
    return replace(card, blocks=tuple(blocks))


def _action_label(action: Action) -> str:
    """The agent's label, plus how far the grant reaches where the label does not say."""
    hint = _SCOPE_HINT.get(action.scope)
    if hint and not any(word in action.label.lower() for word in _SCOPE_WORDS):
        return f"{action.label} ({hint})"
    return action.label


def _button(action: Action, token: str, attached: tuple[str, ...]) -> CardAction:
    label = _action_label(action)
    suffix = "".join(f" (see attached {what})" for what in attached)
    label = _clip(label, LABEL_MAX_CHARS - len(suffix)) + suffix
    if action.effect is Effect.ALLOW:
        style = ButtonStyle.PRIMARY if action.scope is Scope.ONCE else ButtonStyle.DEFAULT
    else:
        style = ButtonStyle.DANGER
    return CardAction(label=label, token=token, style=style, effect=action.effect)


# --- status --------------------------------------------------------------------------------


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


_VERDICT = {Effect.ALLOW: "Approved", Effect.DENY: "Denied", Effect.CANCEL: "Denied and stopped"}


def _decided(interaction: Interaction, fact: DecisionFact) -> str:
    action = interaction.action(fact.decision.action_id) if fact.decision.action_id else None
    if interaction.kind is InteractionKind.QUESTION and (
        action is None or action.effect is Effect.ALLOW
    ):
        verdict = "Answered"
    elif action is not None:
        verdict = _VERDICT[action.effect]
    else:
        verdict = "Decided"
    choice = f' ("{_action_label(action)}")' if action is not None and verdict != "Answered" else ""
    return f"{verdict}{choice} by {fact.actor} at {_when(fact.at)}"


def _expired(interaction: Interaction) -> str:
    """Nobody decided in time: what the gateway told the agent, never "denied by" anyone."""
    head = f"Expired after {waited(interaction)}: timed out"
    sent = (interaction.resolution.note if interaction.resolution else "") or "a refusal"
    delivery = interaction.delivery
    if delivery is None:
        return f"{head}, sending {sent} to the agent…"
    match delivery.outcome:
        case DeliveryOutcome.OK:
            return f"{head}, {sent} sent to the agent"
        case DeliveryOutcome.FAILED:
            return f"{head}, {sent} not delivered: {delivery.error or 'the write failed'}"
        case DeliveryOutcome.UNKNOWN:
            why = f" ({delivery.error})" if delivery.error else ""
            return f"{head}; whether {sent} reached the agent is not known{why}"
        case DeliveryOutcome.SKIPPED:
            why = (delivery.error or "").removeprefix("not written: ")
            return f"{head}, nothing sent to the agent" + (f": {why}" if why else "")


def undelivered(interaction: Interaction) -> str | None:
    """What a person must know, and do, when a decision's write failed while the agent still
    waits (DECIDED with a failed delivery); None otherwise. The answer is never resent on its
    own (DESIGN.md rule 3): the person ends the turn and says what they want now."""
    delivery = interaction.delivery
    if (
        interaction.state is not InteractionState.DECIDED
        or delivery is None
        or delivery.outcome is not DeliveryOutcome.FAILED
    ):
        return None
    why = delivery.error or "the write failed"
    return (
        f"the answer did not reach the agent ({why}); it was not resent: "
        "/stop the turn, then send a new message"
    )


def _stopped_by(interaction: Interaction) -> str | None:
    """ "stopped by @alice at …" when a person's /stop ended it (the agent did not cancel it)."""
    resolution = interaction.resolution
    if resolution is None or resolution.how is not Resolution.STOPPED:
        return None
    return f"stopped by {resolution.note or resolution.by} at {_when(resolution.at)}"


def status_line(interaction: Interaction) -> str:
    """One line: the state and the three facts (decision, delivery, resolution)."""
    state = interaction.state
    if interaction.kind is InteractionKind.AUTHENTICATION:
        return "Sign-in requests are not supported in chat: answer it where the agent runs"
    if state is InteractionState.PENDING:
        if interaction.kind is InteractionKind.QUESTION:
            return "Waiting for an answer"
        return "Waiting for a decision"
    superseded = (
        interaction.resolution is not None and interaction.resolution.how is Resolution.SUPERSEDED
    )
    stopped = _stopped_by(interaction)
    if interaction.decision is None:
        match state:
            case InteractionState.CANCELLED if stopped is not None:
                return f"{stopped[0].upper()}{stopped[1:]}: nothing was sent to the agent"
            case InteractionState.CANCELLED:
                return "Superseded by a newer request" if superseded else "Cancelled by the agent"
            case InteractionState.EXPIRED:
                return _expired(interaction)
            case InteractionState.ORPHANED:
                return "Orphaned: the agent process ended before this was answered"
            case _:
                return f"Closed ({state.value})"
    parts = [_decided(interaction, interaction.decision)]
    delivery = interaction.delivery
    delivered = delivery is not None and delivery.outcome is DeliveryOutcome.OK
    failed = delivery is not None and delivery.outcome is DeliveryOutcome.FAILED
    if delivered:
        parts.append("delivered")
    elif failed and state is InteractionState.DECIDED:
        parts.append(undelivered(interaction) or "")
    elif failed:
        error = delivery.error if delivery is not None else None
        parts.append(f"not delivered ({error or 'the write failed'})")
    match state:
        case InteractionState.DECIDED if delivery is None:
            parts.append("delivering…")
        case InteractionState.RESOLVED:
            parts.append("done")
        case InteractionState.CANCELLED:
            why = "superseded by a newer request" if superseded else "cancelled by the agent"
            why = stopped or why
            parts.append(f"then {why}" if delivered or failed else f"not delivered: {why}")
        case InteractionState.ORPHANED if delivered:
            parts.append("orphaned: the agent process ended before confirming")
        case InteractionState.ORPHANED if failed:
            parts.append("then the agent process ended")
        case InteractionState.ORPHANED if delivery is None:
            # a gateway that died between the decision and recording its write
            parts.append("orphaned: the gateway stopped before recording whether it was delivered")
        case InteractionState.ORPHANED:
            parts.append("orphaned: the agent process ended before it was delivered")
        case InteractionState.UNKNOWN:
            parts.append("unknown whether the agent received it (its runtime outlived the gateway)")
    return " · ".join(parts)


def _answer_fields(interaction: Interaction) -> tuple[Block, ...]:
    if interaction.decision is None or not interaction.decision.decision.answers:
        return ()
    pairs: list[tuple[str, str | None]] = []
    for question in interaction.questions:
        answer = interaction.decision.decision.answers.get(question.id)
        if answer is None:
            continue
        if question.secret:
            pairs.append((question.header or question.text, "(secret, not shown)"))
            continue
        labels = [o.label for o in question.options if o.id in answer.option_ids]
        if answer.other:
            labels.append(answer.other)
        pairs.append((question.header or question.text, ", ".join(labels)))
    return _fields(*pairs)


# --- the card ------------------------------------------------------------------------------


def secret_elsewhere(private_places: tuple[str, ...]) -> str:
    """What a card says, where no answer stays private, about its secret question."""
    if not private_places:
        return (
            "🔒 This asks for a secret answer, which is never typed here, and no platform "
            "running here can take it privately."
        )
    where = ", ".join(private_places)
    return (
        "🔒 This asks for a secret answer, which is never typed here: answer it where it "
        f"stays private ({where})."
    )


def render_interaction(
    interaction: Interaction,
    *,
    token_for: Callable[[str], str],
    text_max_chars: int = 4096,
    private_surface: bool = True,
    private_places: tuple[str, ...] = (),
) -> Card:
    """The card for ``interaction`` as it stands now; pure.

    ``token_for(choice)`` makes the signed token for a button (see ``gateway.auth``
    ``token_factory``): ``"0"``.. for actions, ``"q<i>.<j>"`` for options, ``"s"`` for submit.
    ``text_max_chars`` is the platform's card body limit. Where the platform has no
    ``private_surface``, a request with a secret question gets no form at all (its answers
    are one decision, taken where the secret can be): the card names ``private_places``.
    """
    title = _clip(interaction.title, TITLE_MAX_CHARS)
    status = status_line(interaction)
    if interaction.kind is InteractionKind.AUTHENTICATION:
        return Card(title=title, summary=interaction.summary, status_line=status)
    pending = interaction.state is InteractionState.PENDING
    secret_here = not private_surface and any(q.secret for q in interaction.questions)
    form = None
    if pending and interaction.questions and not secret_here:
        form = QuestionForm(
            questions=tuple(
                FormQuestion(
                    question=question,
                    option_tokens=tuple(
                        token_for(f"q{i}.{j}") for j in range(len(question.options))
                    ),
                )
                for i, question in enumerate(interaction.questions)
            ),
            submit_token=token_for("s"),
        )
    blocks = (*_detail_blocks(interaction.detail), *_answer_fields(interaction))
    if pending and secret_here:  # the questions, read-only, and where to answer them
        asked = _fields(*((q.header or "Question", q.text) for q in interaction.questions))
        blocks = (*blocks, *asked, TextBlock(text=secret_elsewhere(private_places)))
    base = Card(title=title, summary=interaction.summary, status_line=status, form=form)
    blocks, attachments, attached = _fit(blocks, base, interaction.kind, text_max_chars)
    budget = text_max_chars - card_text_length(_with_blocks(base, list(blocks))) + len(base.summary)
    summary = _clip(interaction.summary, max(0, budget))
    actions: tuple[CardAction, ...] = ()
    if pending:
        actions = tuple(
            _button(action, token_for(str(index)), attached)
            for index, action in enumerate(interaction.actions)
        )
    return Card(
        title=title,
        summary=summary,
        blocks=blocks,
        actions=actions,
        form=form,
        status_line=status,
        attachments=attachments,
    )
