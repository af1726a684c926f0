"""An interaction drawn as a platform-neutral card (the model is :mod:`gateway.cards`).

`render_interaction` is pure: an :class:`~gateway.interactions.machine.Interaction` record
and the platform's text limit in, a :class:`Card` out. Each platform turns a card into its
own blocks, keyboards or components.

What a person approves is shown whole (DESIGN.md, Platforms): a command, diff or plan too
long for the message goes as an :class:`Attachment`, the card says so, and every button
says "(see attached diff)". A card offers exactly the actions the agent offered, one button
each, labelled with what it does and how far it reaches, no two alike (where there is a form, an
action that gives the answers is the form's submit, not a button of its own). What a label
cannot say whole (it was shortened, it grants beyond this once, it adds a rule) every
platform says in the card's text (``CardAction.explain_on_card``), the rule whole. Once the
interaction is no longer pending the buttons are gone and the status line tells who decided
what, whether it was delivered, and how it ended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gateway.cards import (
    FIELD_MAX_CHARS,
    LABEL_MAX_CHARS,
    LABEL_SHORT_CHARS,
    TITLE_MAX_CHARS,
    Attachment,
    Block,
    ButtonStyle,
    Card,
    CardAction,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    FormQuestion,
    QuestionForm,
    TextBlock,
    block_text_length,
    card_text_length,
)
from gateway.domain import (
    Action,
    Command,
    Detail,
    Effect,
    FileChange,
    InteractionKind,
    InteractionState,
    Network,
    OutgoingFile,
    Permissions,
    Plan,
    Scope,
    Text,
)
from gateway.interactions.machine import Interaction
from gateway.render.card_status import action_label, status_parts
from gateway.render.tally_line import card_status, hash_detail
from gateway.wording import attached_notice, file_size

__all__ = ["render_interaction", "secret_elsewhere"]


# --- the pieces ----------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _fields(*pairs: tuple[str, str | None]) -> tuple[FieldsBlock, ...]:
    kept = tuple((key, _clip(value, FIELD_MAX_CHARS)) for key, value in pairs if value)
    return (FieldsBlock(fields=kept),) if kept else ()


def _detail_blocks(detail: Detail | None, summary: str) -> tuple[Block, ...]:
    """The blocks of what is asked. A field that says what the summary already says (the
    agent's reason, often its summary too) is left out: each fact is shown once."""

    def fields(*pairs: tuple[str, str | None]) -> tuple[FieldsBlock, ...]:
        return _fields(*((key, value) for key, value in pairs if not _said(value, summary)))

    match detail:
        case None:
            return ()
        case Command():
            label = "Input for the running process" if detail.stdin_for_running_process else ""
            return (
                CodeBlock(code=detail.command, language="sh"),
                *fields(("Note", label), ("Directory", detail.cwd), ("Reason", detail.reason)),
            )
        case Network():
            port = None if detail.port is None else str(detail.port)
            return fields(
                ("Host", detail.host),
                ("Protocol", detail.protocol),
                ("Port", port),
                ("Reason", detail.reason),
            )
        case FileChange():
            # the diff's headers name each file: a list of them would say it again
            files = None if detail.diff else ", ".join(detail.paths)
            return (
                *fields(
                    ("Files", files),
                    ("Reason", detail.reason),
                    ("Write access to", detail.grant_root),
                ),
                *((DiffBlock(diff=detail.diff, paths=detail.paths),) if detail.diff else ()),
            )
        case Permissions():
            return (
                TextBlock(text=detail.description),
                *fields(
                    ("For", _SCOPE_PHRASE[detail.scope]),
                    ("Requested", ", ".join(detail.requested)),
                    ("Reason", detail.reason),
                ),
            )
        case Plan():
            return (TextBlock(text=detail.markdown, markdown=True),)
        case Text():
            return (TextBlock(text=detail.text),)
        case OutgoingFile():
            return (
                *fields(
                    ("File", detail.path),
                    ("Size", file_size(detail.size)),
                    ("Type", detail.media_type),
                    ("Caption", detail.caption),
                    ("Why you are asked", detail.reason),
                ),
                *((CodeBlock(code=detail.preview, language=""),) if detail.preview else ()),
            )


def _said(value: str | None, summary: str) -> bool:
    return bool(value) and value is not None and value.strip() in summary


_SCOPE_PHRASE = {
    Scope.ONCE: "this time only",
    Scope.TURN: "this turn",
    Scope.SESSION: "this session",
    Scope.ALWAYS: "always",
}
# What a button does, where the agent gave no description of its own.
_EFFECT_PHRASE = {
    Effect.ALLOW: "Allows it",
    Effect.DENY: "Refuses it; the agent carries on",
    Effect.CANCEL: "Refuses it and stops the agent's turn",
}
_GRANT_PHRASE = {
    Scope.ONCE: "this time only",
    Scope.TURN: "for the rest of this turn",
    Scope.SESSION: "for the rest of this session",
    Scope.ALWAYS: "always, as a lasting rule",
}
# The short words a label too long for a button gives way to.
_SHORT_LABEL = {
    (Effect.ALLOW, Scope.ONCE): "Allow once",
    (Effect.ALLOW, Scope.TURN): "Allow for this turn",
    (Effect.ALLOW, Scope.SESSION): "Allow for this session",
    (Effect.ALLOW, Scope.ALWAYS): "Always allow",
    (Effect.DENY, Scope.ALWAYS): "Always block",
}


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
    around = card_text_length(base)  # base has no blocks: the length is additive over them
    while around + sum(map(block_text_length, blocks_list)) > text_max_chars:
        candidates = [
            (len(found[2]), index, found)
            for index, block in enumerate(blocks_list)
            if (found := _attachable(block, kind)) is not None
        ]
        if not candidates:
            break
        _, index, (what, name, content) = max(candidates)
        blocks_list[index] = TextBlock(text=attached_notice(what, name, content))
        attachments.append(Attachment(name=name, content=content))
        attached.append(what)
    return tuple(blocks_list), tuple(attachments), tuple(attached)


def _explanation(action: Action) -> str:
    """What the button does, said once: the agent's description, else the effect and reach."""
    if action.description:
        return action.description
    if action.effect is Effect.ALLOW:
        return f"{_EFFECT_PHRASE[action.effect]}, {_GRANT_PHRASE[action.scope]}."
    return f"{_EFFECT_PHRASE[action.effect]}."


def _short(action: Action) -> tuple[str, str, bool]:
    """(label, explanation, shortened): the label as it is where it is short, else the
    action's short words, the whole label then leading its explanation."""
    label = action_label(action.label, action.scope)
    explanation = _explanation(action)
    if len(label) <= LABEL_SHORT_CHARS:
        return label, explanation, False
    short = _SHORT_LABEL.get((action.effect, action.scope))
    if short is None:
        short = "Deny and stop the turn" if action.effect is Effect.CANCEL else "Deny"
    return short, f"{action.label.replace('`', '')}: {explanation}", True


def _distinct(labels: list[str], wholes: list[str]) -> list[str]:
    """Labels no two alike: a short label another button also took gives way to the start of
    its own whole label; where those are alike too, the short words are numbered (the whole
    label leads each one's explanation, said beside the button)."""
    out = [
        _clip(whole, LABEL_SHORT_CHARS) if labels.count(label) > 1 else label
        for label, whole in zip(labels, wholes, strict=True)
    ]
    alike = [out.count(label) > 1 for label in out]
    seen: dict[str, int] = {}
    for index, label in enumerate(list(out)):
        if alike[index]:
            seen[label] = seen.get(label, 0) + 1
            out[index] = f"{labels[index]} ({seen[label]})"
    return out


def _buttons(
    actions: tuple[Action, ...],
    tokens: tuple[str, ...],
    attachments: tuple[Attachment, ...],
    attached: tuple[str, ...],
    kind: InteractionKind,
) -> tuple[CardAction, ...]:
    shorts = [_short(action) for action in actions]
    wholes = [action_label(action.label, action.scope) for action in actions]
    labels = _distinct([label for label, _, _ in shorts], wholes)
    buttons = [
        _button(action, token, label, explanation, shortened or label != short, attached, kind)
        for action, token, label, (short, explanation, shortened) in zip(
            actions, tokens, labels, shorts, strict=True
        )
    ]
    return tuple(_rule_in_file(button, attachments) for button in buttons)


def _rule_in_file(button: CardAction, attachments: tuple[Attachment, ...]) -> CardAction:
    """A rule that is the whole command (Codex's "Always allow this command"), where the
    command went to a file, is that file: said so, not drawn again beside the button."""
    same = next((a for a in attachments if button.rule and a.content == button.rule), None)
    if same is None:
        return button
    said = button.explanation.rstrip(" :.")
    note = f"The rule is the whole command, attached as {same.name}."
    return replace(button, rule="", explanation=f"{said}. {note}" if said else note)


def _button(
    action: Action,
    token: str,
    label: str,
    explanation: str,
    shortened: bool,
    attached: tuple[str, ...],
    kind: InteractionKind,
) -> CardAction:
    suffix = "".join(f" (see attached {what})" for what in attached)
    label = _clip(label, LABEL_MAX_CHARS - len(suffix)) + suffix
    # sending a plan back refuses nothing for good: the agent plans again
    sends_back = kind is InteractionKind.PLAN and action.effect is Effect.DENY
    if action.effect is Effect.ALLOW:
        style = ButtonStyle.PRIMARY if action.scope is Scope.ONCE else ButtonStyle.DEFAULT
    elif sends_back:
        style = ButtonStyle.DEFAULT
    else:
        style = ButtonStyle.DANGER
    # what a label cannot say whole is said in the card's text, on every platform: a label
    # that gave way, a grant beyond this once, a rule
    lasting = action.scope is not Scope.ONCE or bool(action.rule)
    return CardAction(
        label=label,
        token=token,
        style=style,
        effect=action.effect,
        scope=action.scope,
        explanation=explanation,
        rule=action.rule,
        explain_on_card=bool(explanation) and (shortened or lasting),
        takes_message=sends_back,
    )


def _answered_by_form(action: Action, form: QuestionForm | None) -> bool:
    """An action that gives the agent the answers (Claude's "Answer") is the form's own
    submit where there is a form: as a button of its own it carries no answers and could only
    be refused, beside the form's "Answer…". Refusing and stopping stay buttons."""
    return form is not None and action.effect is Effect.ALLOW


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
    approvals: int = 1,
    session_name: str | None = None,
) -> Card:
    """The card for ``interaction`` as it stands now; pure.

    ``token_for(choice)`` makes the signed token for a button (see ``gateway.action_tokens``
    ``token_factory``): ``"0"``.. for actions, ``"q<i>.<j>"`` for options, ``"s"`` for submit.
    ``text_max_chars`` is the platform's card body limit. Where the platform has no
    ``private_surface``, a request with a secret question gets no form at all (its answers
    are one decision, taken where the secret can be): the card names ``private_places``.
    ``approvals`` is how many people the request's rule asks to approve it: past one, the
    content hash is on the card's face (gateway/render/tally_line.py). ``session_name``:
    the session's ``/name``, the card's first fact ("Session: birds"), said once, so a card
    says which session asks wherever it is shown (a channel a request escalated to, the
    conversation of a session switched away from).
    """
    title = _clip(interaction.title, TITLE_MAX_CHARS)
    status = card_status(interaction, status_parts(interaction), approvals=approvals)
    hashed = hash_detail(interaction, approvals=approvals)
    if interaction.kind is InteractionKind.AUTHENTICATION:
        return Card(title=title, summary=interaction.summary, status=status, content_hash=hashed)
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
    blocks = (
        *_fields(("Session", session_name)),
        *_detail_blocks(interaction.detail, interaction.summary),
        *_answer_fields(interaction),
    )
    if pending and secret_here:  # the questions, read-only, and where to answer them
        asked = _fields(*((q.header or "Question", q.text) for q in interaction.questions))
        blocks = (*blocks, *asked, TextBlock(text=secret_elsewhere(private_places)))
    base = Card(
        title=title,
        summary=interaction.summary,
        status=status,
        form=form,
        session=session_name or "",
    )
    blocks, attachments, attached = _fit(blocks, base, interaction.kind, text_max_chars)
    length = card_text_length(base) + sum(map(block_text_length, blocks))
    budget = text_max_chars - length + len(base.summary)
    summary = _clip(interaction.summary, max(0, budget))
    actions: tuple[CardAction, ...] = ()
    if pending:
        shown = tuple(
            (action, token_for(str(index)))
            for index, action in enumerate(interaction.actions)
            if not _answered_by_form(action, form)
        )
        actions = _buttons(
            tuple(action for action, _ in shown),
            tuple(token for _, token in shown),
            attachments,
            attached,
            interaction.kind,
        )
    return Card(
        title=title,
        summary=summary,
        blocks=blocks,
        actions=actions,
        form=form,
        status=status,
        attachments=attachments,
        content_hash=hashed,
        session=session_name or "",
    )
