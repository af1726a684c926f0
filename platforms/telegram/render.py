"""A card as a Telegram message: HTML text, an inline keyboard, and files (pure).

The text uses the Bot API's HTML mode (``<b>``, ``<i>``, ``<pre><code>``); everything from
the agent is escaped, its Markdown (a plan) drawn by gateway/render/markdown.py. A command is
shown in a code block, a diff in a ``diff`` code block.
The Bot API counts its 4096 characters after the markup is parsed: when the text would be
longer, the largest command or diff (or plan) goes as a file (sendDocument) and the card
says so, then long prose is clipped. A pending card has one button per action the agent
offers (callback_data = the action token); a question form shows the step of the person
answering (see forms.py); a decided card has no buttons and shows the status line.

What a button grants beyond its label is a line under the command, with the rule whole. The
form's buttons come before the card's actions: refusing a question is last.

The status line's times are ``date_time`` entities (``<tg-time>``, Bot API 9.5): each reader
sees their own time, and a client that cannot draw one shows its UTC text. The content hash,
where the card carries it as a detail, is a spoiler under the status: there, not in the way.

An action that takes a message (a plan's Keep planning) has a second button beside it,
``m:<token>``: pressed, the bot asks for the message with a ForceReply prompt, and the
reply is the press with that message (updates.py). The plain button sends it without one.

Local buttons of a form carry ``f<form id>:<op>`` (``t<i>``: type the answer to question
*i*, ``n`` next, ``b`` back, ``k`` skip); they only move a person's own draft.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from gateway.cards import (
    Attachment,
    Block,
    Card,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    FormQuestion,
    StatusPart,
    TextBlock,
    status_text,
)
from gateway.domain import Question
from gateway.render.markdown import telegram_html
from gateway.wording import attached_notice, clock_time
from platforms.form_drafts import Draft, Form

__all__ = [
    "BUTTON_MAX_CHARS",
    "MESSAGE_PREFIX",
    "Button",
    "RenderedCard",
    "local_data",
    "parse_local_data",
    "render_card",
    "visible_length",
]

BUTTON_MAX_CHARS = 60
MESSAGE_PREFIX = "m:"  # before an action token: press it with a message (asked for)
_LANGUAGE = re.compile(r"[^a-z0-9+#-]")
# a form's own buttons: f<form id>:<op>, the form id its request's (at most 48 characters)
_LOCAL = re.compile(r"^f(?P<form>[A-Za-z0-9_-]{1,48}):(?P<op>t[0-9]{1,2}|n|b|k)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Button:
    label: str
    data: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedCard:
    html: str
    keyboard: tuple[tuple[Button, ...], ...]
    attachments: tuple[Attachment, ...]


def local_data(form_id: str, op: str) -> str:
    return f"f{form_id}:{op}"


def parse_local_data(data: str) -> tuple[str, str] | None:
    match = _LOCAL.match(data)
    return (match["form"], match["op"]) if match else None


def visible_length(text: str) -> int:
    """What the Bot API counts: the text after the HTML markup is parsed."""
    return len(html.unescape(re.sub(r"<[^>]*>", "", text)))


def _e(text: str) -> str:
    return html.escape(text, quote=False)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _time_html(at: datetime) -> str:
    """``at`` as a ``date_time`` entity: the reader's own clock time ("t"), the UTC text where
    a client cannot show it."""
    return f' at <tg-time unix="{int(at.timestamp())}" format="t">{_e(clock_time(at))}</tg-time>'


def _status_html(status: tuple[StatusPart, ...]) -> str:
    return status_text(tuple(_e(p) if isinstance(p, str) else p for p in status), at=_time_html)


# --- text ----------------------------------------------------------------------------------


def _block_html(block: Block) -> str:
    match block:
        case CodeBlock(code=code, language=language):
            lang = _LANGUAGE.sub("", language.lower())
            attribute = f' class="language-{lang}"' if lang else ""
            return f"<pre><code{attribute}>{_e(code)}</code></pre>"
        case DiffBlock(diff=diff):
            return f'<pre><code class="language-diff">{_e(diff)}</code></pre>'
        case TextBlock(text=text, markdown=True):
            return telegram_html(text)
        case TextBlock(text=text):
            return _e(text)
        case FieldsBlock(fields=fields):
            return "\n".join(f"<b>{_e(key)}:</b> {_e(value)}" for key, value in fields)


def _question_html(
    number: str, question: Question, draft: Draft | None, index: int, shown: tuple[str, ...] = ()
) -> str:
    """The question (what the card's title and summary already say is not said again)."""
    header = "" if question.header in shown else question.header
    title = f"{number}{header}".strip()
    text = "" if question.text in shown else _e(question.text)
    lines = [((f"<b>{_e(title)}</b>\n" if title else "") + text).strip()]
    if question.secret:
        lines.append("<i>🔒 Secret: answered in a private chat, never shown.</i>")
    for option in question.options:
        if option.description:
            lines.append(f"• {_e(option.label)}: {_e(option.description)}")
    if draft is not None and draft.other.get(index) and not question.secret:
        lines.append(f"✎ Your answer: {_e(draft.other[index])}")
    if draft is not None and index in draft.secret:
        lines.append("🔒 Answer received (not shown).")
    return "\n".join(line for line in lines if line)


def _answer_summary(item: FormQuestion, draft: Draft, index: int) -> str:
    question = item.question
    name = _e(question.header or question.text)
    if index in draft.secret:
        return f"• <b>{name}</b>: 🔒 given, not shown"
    if not draft.answered(index):
        return f"• <b>{name}</b>: (skipped)"
    labels = [question.options[o].label for o in draft.chosen.get(index, ())]
    if draft.other.get(index):
        labels.append(draft.other[index])
    return f"• <b>{name}</b>: {_e(', '.join(labels))}"


def _form_html(form: Form | None, card: Card) -> str:
    if card.form is None:
        return ""
    items = card.form.questions
    draft = form.draft_shown() if form is not None else None
    step = draft.step if draft is not None else 0
    parts: list[str] = []
    if draft is not None:
        parts.append(f"<i>✎ Answering: {_e(str(draft.actor))}</i>")
    if len(items) > 1 and step >= len(items) and draft is not None:
        parts.append("<b>Your answers</b>")
        parts += [_answer_summary(item, draft, i) for i, item in enumerate(items)]
        parts.append("Submit them, or go back to change one.")
    elif len(items) > 1:
        parts.append(
            _question_html(f"Question {step + 1} of {len(items)}: ", *_at(items, step, draft))
        )
    elif items:
        parts.append(_question_html("", items[0].question, draft, 0, (card.title, card.summary)))
    return "\n\n".join(parts)


def _at(
    items: tuple[FormQuestion, ...], step: int, draft: Draft | None
) -> tuple[Question, Draft | None, int]:
    return items[step].question, draft, step


@dataclass(kw_only=True, slots=True)
class _Rule:
    """A button whose label does not say all it grants (it was shortened, it reaches beyond
    this once, it adds a rule): its label, what it does, and the rule, whole (a label is cut
    at 60 characters; the body is not)."""

    label: str
    explanation: str
    rule: str
    attached: str = ""  # the file the rule went to, where it did not fit

    def html(self) -> str:
        head = f"<b>{_e(self.label)}</b>: {_e(self.explanation)}"
        if not self.rule:
            return head
        if self.attached:
            return f"{head} (the rule is attached as {_e(self.attached)})"
        return f"{head}\n<code>{_e(self.rule)}</code>"


@dataclass(kw_only=True, slots=True)
class _Parts:
    title: str
    summary: str
    blocks: list[Block]
    form: str
    status: tuple[StatusPart, ...]
    rules: list[_Rule] = field(default_factory=list)
    content_hash: str = ""

    def html(self) -> str:
        pieces = [f"<b>{_e(self.title)}</b>"]
        if self.summary and self.summary != self.title:
            pieces.append(telegram_html(self.summary))  # the agent's words, in its Markdown
        pieces += [_block_html(block) for block in self.blocks]
        pieces += [rule.html() for rule in self.rules]
        if self.form:
            pieces.append(self.form)
        if self.status:
            pieces.append(f"<i>{_status_html(self.status)}</i>")
        if self.content_hash:
            pieces.append(f"Details: <tg-spoiler>content hash {_e(self.content_hash)}</tg-spoiler>")
        return "\n\n".join(piece for piece in pieces if piece)


_ATTACHABLE = {CodeBlock: ("command", "command.sh"), DiffBlock: ("diff", "changes.diff")}


def _attach_largest(parts: _Parts) -> Attachment | None:
    """Move the largest command or diff block to a file; None if there is none left."""
    found = [
        (len(b.code if isinstance(b, CodeBlock) else b.diff), i, b)
        for i, b in enumerate(parts.blocks)
        if isinstance(b, CodeBlock | DiffBlock)
    ]
    rules = [(len(r.rule), i) for i, r in enumerate(parts.rules) if not r.attached]
    if rules and (not found or max(rules)[0] > max(f[0] for f in found)):
        _, at = max(rules)
        name = "rule.txt" if at == 0 else f"rule-{at + 1}.txt"
        parts.rules[at].attached = name
        return Attachment(name=name, content=parts.rules[at].rule)
    if not found:
        return None
    _, index, block = max(found, key=lambda f: (f[0], f[1]))
    what, name = _ATTACHABLE[type(block)]
    content = block.code if isinstance(block, CodeBlock) else block.diff
    parts.blocks[index] = TextBlock(text=attached_notice(what, name, content))
    moved = Attachment(name=name, content=content)
    _rules_in_files(parts, (moved,))
    return moved


def _rules_in_files(parts: _Parts, files: tuple[Attachment, ...]) -> None:
    """A rule that is the whole command (Codex's "Always allow this command") points at the
    command's file where the command went to one: one file, not the same text twice."""
    for rule in parts.rules:
        same = next((f for f in files if rule.rule and f.content == rule.rule), None)
        if same is not None and not rule.attached:
            rule.attached = same.name


def _clip_prose(parts: _Parts, overflow: int) -> bool:
    """Shorten the longest piece of prose by ``overflow``; False if nothing is left to cut."""
    candidates = [(len(parts.summary), -1)] + [
        (len(b.text), i) for i, b in enumerate(parts.blocks) if isinstance(b, TextBlock)
    ]
    size, index = max(candidates)
    if size <= 40:
        return False
    keep = max(40, size - overflow - 1)
    if index < 0:
        parts.summary = _clip(parts.summary, keep)
    else:
        block = parts.blocks[index]
        assert isinstance(block, TextBlock)
        parts.blocks[index] = replace(block, text=_clip(block.text, keep))
    return True


def _fit(parts: _Parts, limit: int) -> tuple[str, tuple[Attachment, ...]]:
    attachments: list[Attachment] = []
    while True:
        text = parts.html()
        overflow = visible_length(text) - limit
        if overflow <= 0:
            return text, tuple(attachments)
        moved = _attach_largest(parts)
        if moved is not None:
            attachments.append(moved)
        elif not _clip_prose(parts, overflow):
            # the question texts themselves are too long: show them plain, clipped
            plain = html.unescape(re.sub(r"<[^>]*>", "", parts.form))
            parts.form = _e(_clip(plain, max(200, len(plain) - overflow - 1)))
            text = parts.html()
            if visible_length(text) > limit:
                raise ValueError("card cannot be drawn within the message limit")
            return text, tuple(attachments)


# --- buttons -------------------------------------------------------------------------------


def _b(label: str, data: str) -> Button:
    return Button(label=_clip(label, BUTTON_MAX_CHARS), data=data)


_SEE_ATTACHED = re.compile(r"(?: \(see [^()]*\))+$")


def _with_a_message(label: str) -> str:
    """ "Keep planning (see attached plan)" → "✎ Keep planning, with a message (see attached
    plan)": the button that asks for a message beside the action's own."""
    tail = _SEE_ATTACHED.search(label)
    base, see = (label[: tail.start()], tail.group()) if tail else (label, "")
    return f"✎ {base}, with a message{see}"


def _form_keyboard(card: Card, form: Form | None, private: bool) -> list[tuple[Button, ...]]:
    if card.form is None:
        return []
    items = card.form.questions
    form_id = form.form_id if form is not None else "0"
    draft = form.draft_shown() if form is not None else None
    step = min(draft.step if draft is not None else 0, len(items))
    rows: list[tuple[Button, ...]] = []
    if len(items) > 1 and step == len(items):
        rows.append((_b("✅ Submit answers", card.form.submit_token),))
        rows.append((_b("« Back", local_data(form_id, "b")),))
        return rows
    item, question = items[step], items[step].question
    chosen = set(draft.chosen.get(step, ())) if draft is not None else set()
    if question.secret:
        where = "🔒 Type the answer" if private else "🔒 Answer in a private chat"
        rows.append((_b(where, local_data(form_id, f"t{step}")),))
    else:
        for o_index, (option, token) in enumerate(
            zip(question.options, item.option_tokens, strict=True)
        ):
            mark = (
                ("☑ " if o_index in chosen else "☐ ")
                if question.multi
                else ("● " if o_index in chosen else "")
            )
            rows.append((_b(mark + option.label, token),))
        if question.allow_other or not question.options:
            word = "✎ Other…" if question.options else "✎ Answer…"
            rows.append((_b(word, local_data(form_id, f"t{step}")),))
    nav: list[Button] = []
    if step > 0:
        nav.append(_b("« Back", local_data(form_id, "b")))
    if not question.required:
        nav.append(_b("Skip", local_data(form_id, "k")))
    if len(items) == 1 and question.multi:
        nav.append(_b("✅ Submit", card.form.submit_token))
    elif len(items) > 1 and (question.multi or (draft is not None and draft.answered(step))):
        nav.append(_b("Next »", local_data(form_id, "n")))
    if nav:
        rows.append(tuple(nav))
    return rows


def render_card(card: Card, form: Form | None, *, private: bool, limit: int) -> RenderedCard:
    """The message for ``card`` (with the form step of the person answering, if any)."""
    parts = _Parts(
        title=card.title,
        summary=card.summary,
        blocks=list(card.blocks),
        form=_form_html(form, card),
        status=card.status,
        content_hash=card.content_hash,
        rules=[
            _Rule(label=action.label, explanation=action.explanation, rule=action.rule)
            for action in card.actions
            if action.explain_on_card or action.rule
        ],
    )
    _rules_in_files(parts, card.attachments)
    text, extra = _fit(parts, limit)
    attached = tuple(a.name for a in extra)
    suffix = "".join(f" (see {name})" for name in attached)

    def button(label: str, data: str) -> Button:
        return Button(label=_clip(label, BUTTON_MAX_CHARS - len(suffix)) + suffix, data=data)

    # a question's own buttons come first: refusing it (Dismiss, Do not answer) is last, away
    # from where a hurried tap lands
    rows: list[tuple[Button, ...]] = _form_keyboard(card, form, private)
    rows += [
        (button(action.label, action.token),)
        if not action.takes_message
        else (
            button(action.label, action.token),
            button(_with_a_message(action.label), MESSAGE_PREFIX + action.token),
        )
        for action in card.actions
    ]
    return RenderedCard(html=text, keyboard=tuple(rows), attachments=card.attachments + extra)
