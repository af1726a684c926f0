"""One interaction card as HTML: what is asked (the whole command or diff, highlighted), the
agent's exact actions with what each does, the question form, and the three facts.

Pure: a :class:`~platforms.console.views.CardView` in, escaped HTML out. The buttons and the
form post to the console with the card's own signed tokens; the console is a private surface,
so secret questions are asked here in masked inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from gateway.cards import (
    Attachment,
    Block,
    ButtonStyle,
    Card,
    CardAction,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    QuestionForm,
    StatusPart,
    TextBlock,
    status_text,
)
from gateway.domain import InteractionState, Question
from gateway.interactions.machine import Interaction
from gateway.render.card_status import action_label, delivery_words, ending
from gateway.render.markdown import console_html
from gateway.wording import clock_time, count, line_count, quoted
from platforms.console.highlight import highlight_code, highlight_diff, highlight_shell
from platforms.console.views import PLATFORM, CardView, agent_name, platform_name

__all__ = [
    "MESSAGE_MAX_CHARS",
    "PostContext",
    "card_html",
    "clock",
    "notice_html",
    "split_diff",
    "state_class",
]

MESSAGE_MAX_CHARS = 4000  # a message sent with a button (Keep planning's "what to change")


@dataclass(frozen=True, kw_only=True, slots=True)
class PostContext:
    """What every form of a page carries: the CSRF token and the page to come back to."""

    csrf: str
    back: str

    def hidden(self) -> str:
        return (
            f'<input type="hidden" name="csrf" value="{escape(self.csrf)}">'
            f'<input type="hidden" name="back" value="{escape(self.back)}">'
        )


_LIVE = {InteractionState.PENDING, InteractionState.DECIDED, InteractionState.DELIVERED}
_GOOD = {InteractionState.RESOLVED}
# the badge beside a card's title: the state in a person's words (the class keeps its name)
_BADGE = {
    InteractionState.PENDING: "waiting",
    InteractionState.DECIDED: "sending",
    InteractionState.DELIVERED: "sent",
    InteractionState.RESOLVED: "done",
    InteractionState.CANCELLED: "closed",
    InteractionState.EXPIRED: "timed out",
    InteractionState.ORPHANED: "agent ended",
    InteractionState.UNKNOWN: "not known",
}


def state_class(text: str) -> str:
    return text.replace(" ", "-").replace("_", "-")


def clock(at: datetime) -> str:
    """A clock time as every surface writes it (gateway/wording.py), machine-readable too:
    the page's script shows it in the browser's own time zone; without script, UTC."""
    utc = at.astimezone(UTC)
    return f'<time datetime="{utc.isoformat()}">{clock_time(utc)}</time>'


def _status(status: tuple[StatusPart, ...], content_hash: str) -> str:
    """The status line, its times as :func:`clock`; the content hash, where the card carries
    it as a detail, folded under "Details"."""
    line = status_text(
        tuple(escape(p) if isinstance(p, str) else p for p in status),
        at=lambda t: f" at {clock(t)}",
    )
    details = (
        f'<details class="hash"><summary>Details</summary>content hash {escape(content_hash)}'
        "</details>"
        if content_hash
        else ""
    )
    return f'<p class="status">{line}</p>{details}'


def _block(block: Block) -> str:
    match block:
        case CodeBlock(code=code, language=language):
            css = "sh" if language in ("sh", "bash", "shell") else "code"
            body = highlight_shell(code) if css == "sh" else escape(code)
            return f'<pre class="{css}">{body}</pre>'
        case DiffBlock(diff=diff):
            return "".join(_file_diff(name, part) for name, part in split_diff(diff))
        case TextBlock(text=text, markdown=True):
            return f'<div class="msg md">{console_html(text, highlight_code)}</div>'
        case TextBlock(text=text):
            return f'<div class="msg">{escape(text)}</div>'
        case FieldsBlock(fields=fields):
            rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in fields)
            return f'<dl class="fields">{rows}</dl>'


def _file_diff(name: str | None, diff: str) -> str:
    """One file's changes: its name up front, then its hunks (the ``---``/``+++`` lines
    said it in diff's own words, once the name is above them they are left out)."""
    if name is None:
        return f'<pre class="diff">{highlight_diff(diff)}</pre>'
    return (
        f'<p class="file"><code>{escape(name)}</code></p>'
        f'<pre class="diff">{highlight_diff(diff)}</pre>'
    )


def split_diff(diff: str) -> list[tuple[str | None, str]]:
    """A unified diff as (file name, its hunks), one per file; a name "(new file)" or
    "(deleted)" where one side is /dev/null. Text before the first file header, or a diff
    without headers, comes whole with no name."""
    lines = diff.splitlines(keepends=True)
    files: list[tuple[str | None, list[str]]] = [(None, [])]
    index = 0
    while index < len(lines):
        line = lines[index]
        after = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("--- ") and after.startswith("+++ "):
            files.append((_diff_name(line[4:].strip(), after[4:].strip()), []))
            index += 2
            continue
        files[-1][1].append(line)
        index += 1
    if not files[0][1]:
        files.pop(0)
    return [(name, "".join(body).rstrip("\n")) for name, body in files]


def _diff_name(old: str, new: str) -> str:
    def bare(path: str) -> str:
        path = path.split("\t", 1)[0]
        return path[2:] if path.startswith(("a/", "b/")) else path

    if old == "/dev/null":
        return f"{bare(new)} (new file)"
    if new == "/dev/null":
        return f"{bare(old)} (deleted)"
    if bare(old) != bare(new):
        return f"{bare(old)} → {bare(new)}"
    return bare(new)


def _attachment(attachment: Attachment) -> str:
    lines = count(line_count(attachment.content), "line")
    if attachment.name.endswith(".diff"):
        body = highlight_diff(attachment.content)
    elif attachment.name.endswith(".sh"):
        body = highlight_shell(attachment.content)
    else:
        body = escape(attachment.content)
    return (
        f"<details open><summary>{escape(attachment.name)} ({lines})</summary>"
        f"<pre>{body}</pre></details>"
    )


def _actions(view: CardView, ctx: PostContext) -> str:
    interaction, buttons = view.interaction, view.card.actions
    if not buttons:
        return ""
    rows = "".join(_message_field(button) + _action_row(button) for button in buttons)
    return (
        f'<form class="actions" method="post" action="/i/{escape(interaction.id)}/act"'
        f" data-enhance>{ctx.hidden()}{rows}</form>"
    )


def _message_field(button: CardAction) -> str:
    """Where a button takes a message (Keep planning), the field for it, just above it."""
    if not button.takes_message:
        return ""
    label = f"Your message with {quoted(button.label)} (optional)"
    return (
        f'<label class="message">{escape(label)}'
        f'<textarea name="message" rows="2" maxlength="{MESSAGE_MAX_CHARS}"'
        ' placeholder="What should the agent change?"></textarea></label>'
    )


def _action_row(button: CardAction) -> str:
    """The button, what it does (said once), and the exact rule it adds, whole."""
    css = {ButtonStyle.PRIMARY: "primary", ButtonStyle.DANGER: "danger"}.get(button.style, "")
    rule = f' <code class="rule">{escape(button.rule)}</code>' if button.rule else ""
    return (
        f'<div class="action"><button type="submit" name="token" class="{css}"'
        f' value="{escape(button.token)}">{escape(button.label)}</button>'
        f'<span class="effect">{escape(button.explanation)}{rule}</span></div>'
    )


def _question(question: Question, shown: tuple[str, ...] = ()) -> str:
    """A question's fieldset; its text is left out where the card's summary says it already
    (a single question is the card's title and summary)."""
    qid = escape(question.id)
    kind = "checkbox" if question.multi else "radio"
    parts = []
    for option in question.options:
        about = f" <small>{escape(option.description)}</small>" if option.description else ""
        parts.append(
            f'<label class="choice"><input type="{kind}" name="q.{qid}"'
            f' value="{escape(option.id)}"> {escape(option.label)}{about}</label>'
        )
    if question.allow_other or not question.options:
        kind = "password" if question.secret else "text"
        label = "Other:" if question.options else "Answer:"
        parts.append(
            f'<label class="choice other">{label} <input type="{kind}" name="o.{qid}"'
            ' autocomplete="off"></label>'
        )
    required = " data-required" if question.required else ""
    mark = ' <span class="req">(required)</span>' if question.required else ""
    secret = (
        '<p class="meta">Secret: masked here, never shown again, never stored.</p>'
        if question.secret
        else ""
    )
    header = question.header or question.text
    said = question.text.strip() in shown
    text = f"<p>{escape(question.text)}</p>" if question.header and not said else ""
    return (
        f'<fieldset class="question"{required}><legend>{escape(header)}{mark}</legend>'
        f'{text}{secret}{"".join(parts)}<p class="why"></p></fieldset>'
    )


def _form(
    interaction: Interaction, form: QuestionForm | None, ctx: PostContext, summary: str = ""
) -> str:
    if form is None:
        return ""
    questions = "".join(_question(item.question, (summary.strip(),)) for item in form.questions)
    return (
        f'<form class="qform" method="post" action="/i/{escape(interaction.id)}/form"'
        f' data-enhance>{ctx.hidden()}<input type="hidden" name="token"'
        f' value="{escape(form.submit_token)}">{questions}'
        '<button type="submit" class="primary">Submit answers</button></form>'
    )


def _decided_what(interaction: Interaction) -> str:
    fact = interaction.decision
    if fact is None:
        return ""
    if fact.decision.action_id is not None:
        action = interaction.action(fact.decision.action_id)
        if action is None:
            return f"chose {quoted(fact.decision.action_id)}"
        return f"chose {quoted(action_label(action.label, action.scope))}"
    return f"answered {len(fact.decision.answers)} question(s)"


def _timeline(interaction: Interaction) -> str:
    """The facts one by one, in the words of the status line (gateway/render/card_status.py)."""
    items = [f"<li><b>Asked</b> {clock(interaction.created_at)}</li>"]
    if (fact := interaction.decision) is not None:
        what = escape(_decided_what(interaction))
        items.append(
            f"<li><b>Decided</b> {clock(fact.at)} by {escape(str(fact.actor))}: {what}</li>"
        )
    delivery, said = interaction.delivery, delivery_words(interaction)
    if delivery is not None and said is not None:
        items.append(f"<li><b>Delivery</b> {clock(delivery.at)}: {escape(said)}</li>")
    end, ended = interaction.resolution, ending(interaction)
    if end is not None and ended is not None:
        heading, words = ended
        items.append(f"<li><b>{escape(heading)}</b> {clock(end.at)}: {escape(words)}</li>")
    # the status line above says it whole: the facts with their times are there on demand
    return (
        '<details class="history"><summary>History</summary>'
        f'<ol class="timeline">{"".join(items)}</ol></details>'
    )


def _where(view: CardView) -> str:
    """The session the card belongs to, its agent, and the chats that show the card too
    (this console goes without saying; ids only where a pointer rests)."""
    session = view.session
    parts = []
    if session is not None:
        title = escape(view.session_title or "a session")
        parts.append(
            f'<a href="/s/{escape(session.id)}" title="session {escape(session.id)}">{title}</a>'
            f" · {escape(agent_name(session.agent_kind))}"
        )
    others = sorted({c.conversation.platform for c in view.copies} - {PLATFORM})
    if others:
        parts.append("also in " + ", ".join(escape(platform_name(p)) for p in others))
    return f'<p class="meta">{" · ".join(parts)}</p>' if parts else ""


def _refusals(texts: Sequence[str]) -> str:
    """Why a click or a form of this card was refused: next to its buttons or form, as an
    error, so a page without script says it where the person looks (see server.py)."""
    return "".join(f'<p class="refusal" role="alert">{escape(text)}</p>' for text in texts)


def card_html(
    view: CardView,
    ctx: PostContext,
    *,
    with_session: bool = False,
    refusals: Sequence[str] = (),
) -> str:
    interaction, card = view.interaction, view.card
    state = interaction.state
    frame = "live" if state in _LIVE else "done" if state in _GOOD else "gone"
    if state in (InteractionState.CANCELLED, InteractionState.EXPIRED):
        frame = "done"
    blocks = "".join(_block(block) for block in card.blocks)
    attachments = "".join(_attachment(a) for a in card.attachments)
    summary = console_html(card.summary) if card.summary else ""  # the agent's Markdown
    return (
        f'<article class="card {frame}" id="i-{escape(interaction.id)}"'
        f' data-key="i-{escape(interaction.id)}" data-version="{interaction.version}">'
        f'<div class="head"><span class="kind">{escape(interaction.kind.value)}</span>'
        f"<h3>{escape(card.title)}</h3>"
        f'<span class="state {state.value}">{_BADGE.get(state, state.value)}</span></div>'
        f"{_where(view) if with_session else ''}{summary}{blocks}{attachments}"
        f"{_form(interaction, card.form, ctx, card.summary)}{_actions(view, ctx)}"
        f"{_refusals(refusals)}"
        f"{_status(card.status, card.content_hash)}{_timeline(interaction)}</article>"
    )


def notice_html(
    message_id: str, card: Card, version: int, ctx: PostContext, refusals: Sequence[str] = ()
) -> str:
    """A card that is no request's (a message whose files did not come, issue 32): its
    title, its text, and its buttons, which post to ``/m/<id>/act``; none once chosen."""
    summary = console_html(card.summary) if card.summary else ""  # as the platforms show it
    rows = "".join(_action_row(button) for button in card.actions)
    form = (
        f'<form class="actions" method="post" action="/m/{escape(message_id)}/act"'
        f" data-enhance>{ctx.hidden()}{rows}</form>"
        if rows
        else ""
    )
    frame = "live" if rows else "done"
    return (
        f'<article class="card notice {frame}" id="{escape(message_id)}"'
        f' data-key="m-{escape(message_id)}" data-version="{version}">'
        f'<div class="head"><h3>{escape(card.title)}</h3></div>'
        f"{summary}{form}{_refusals(refusals)}</article>"
    )
