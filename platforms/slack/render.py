"""A card as a Slack message: Block Kit blocks within Slack's limits (pure).

Block Kit's limits (docs.slack.dev/reference/block-kit) are checked here before Slack
refuses a message with ``invalid_blocks``: a header's text at most :data:`HEADER_MAX`
characters, a section's :data:`SECTION_MAX` (counted on the string as sent, after ``&<>``
are escaped), ten fields of :data:`FIELD_MAX` each, a button's label :data:`BUTTON_MAX`, at
most :data:`MAX_BLOCKS` blocks. Everything from the agent is escaped, so ``<!channel>`` or
``<@U…>`` in a command or in the agent's text pings no one.

A pending card has one button per :class:`~gateway.cards.CardAction` (``value`` = its action
token, ``action_id`` unique in the message), primary or danger as the core styled it, and a
confirm dialog on a grant that reaches beyond this once (the core styles only the one-time
allow as primary: an allow drawn in the default style is a grant for the turn, the session or
always). A question form is one button per option where one click decides (one single-choice
question, not secret: the option tokens), else one "Answer…" button (``value`` = the submit
token) that opens a modal (forms.py); the core leaves out an allow action beside a form
(Claude's "Answer": gateway/render/interaction_card.py). A decided card has no buttons; its status
line is a context block.

What a button grants beyond its label (it was shortened, it reaches beyond this once, it adds
a rule) is a section above the buttons, with the rule whole, and its confirm dialog says the
same; a lasting refusal asks to confirm too. The form's buttons come before the card's
actions: refusing a question is last.

The status line's times use Slack's date formatting (``<!date^…|09:17 UTC>``), so each reader
sees their own time; the content hash, where the card carries it as a detail, is a second
element of that context block. The message's ``text`` (a phone's notification) says what is
asked and of whom, never the hash.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gateway.cards import (
    Block,
    ButtonStyle,
    Card,
    CardAction,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    TextBlock,
    status_text,
)
from gateway.domain import Effect, Scope
from gateway.render.markdown import slack_mrkdwn, slack_time
from gateway.wording import clock_time

__all__ = [
    "ACTION_PREFIX",
    "ANSWER_ACTION",
    "BUTTON_MAX",
    "FIELD_MAX",
    "HEADER_MAX",
    "MAX_BLOCKS",
    "MESSAGE_PREFIX",
    "OPTION_PREFIX",
    "SECTION_MAX",
    "RenderedCard",
    "clip",
    "escape",
    "mrkdwn",
    "render_card",
    "text_blocks",
]

HEADER_MAX = 150
SECTION_MAX = 3000
FIELD_MAX = 2000
FIELDS_PER_SECTION = 10
BUTTON_MAX = 75
MAX_BLOCKS = 50
ACTIONS_PER_BLOCK = 25
FALLBACK_MAX = 3000  # the notification text beside the blocks
CONFIRM_MAX = 300  # a confirm dialog's text
_RULE_ON_CARD = " (the whole rule is on the card)"

# action_ids: unique within a message; what a click means is only ever its value (a token)
ACTION_PREFIX = "gw.act."
OPTION_PREFIX = "gw.opt."
ANSWER_ACTION = "gw.answer"
MESSAGE_PREFIX = "gw.msg."  # a button that asks for a message first (Keep planning)

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_MENTION = re.compile(r"<@[A-Z0-9]+>")
ASKED_MAX = 200  # of the command (or summary) a notification quotes


def escape(text: str) -> str:
    """Slack's three control characters escaped: the text links and pings nothing."""
    return text.translate(_ESCAPES)


def mrkdwn(markdown: str) -> str:
    """The agent's Markdown as Slack mrkdwn, by the shared renderer (gateway/render/markdown.py):
    ``&<>`` escaped, so nothing in the agent's text pings or links. Every text of the agent
    that Slack shows goes through here."""
    return slack_mrkdwn(markdown)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedCard:
    text: str  # the notification text (shown where blocks are not: a phone's banner)
    blocks: list[dict[str, Any]]


# --- pieces --------------------------------------------------------------------------------


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _escaped_pieces(raw: str, limit: int) -> Iterator[str]:
    """``raw`` escaped, in pieces of at most ``limit`` characters each, cut at line ends
    where it can be and never inside an escape."""
    piece = ""
    for line in raw.splitlines(keepends=True):
        escaped = escape(line)
        if len(piece) + len(escaped) <= limit:
            piece += escaped
            continue
        if piece:
            yield piece
            piece = ""
        while len(escaped) > limit:  # one line longer than a piece: cut between escapes
            cut = limit
            amp = escaped.rfind("&", cut - 4, cut)
            if amp != -1 and escaped.find(";", amp) >= cut:
                cut = amp
            yield escaped[:cut]
            escaped = escaped[cut:]
        piece = escaped
    if piece:
        yield piece


def text_blocks(raw: str, *, markdown: bool) -> list[dict[str, Any]]:
    """Sections showing ``raw`` (the agent's Markdown if ``markdown``), each within
    :data:`SECTION_MAX` as sent."""
    if not raw.strip():
        return []
    if markdown:
        converted = mrkdwn(raw)
        if len(converted) <= SECTION_MAX:
            return [_section(converted)]
    # too long for one section (or literal text): escaped pieces, each within the limit
    return [_section(piece) for piece in _escaped_pieces(raw, SECTION_MAX) if piece.strip()]


def _code_blocks(code: str) -> list[dict[str, Any]]:
    fence = "```"
    limit = SECTION_MAX - 2 * len(fence) - 2
    return [
        _section(f"{fence}\n{piece}\n{fence}")
        for piece in _escaped_pieces(code.replace(fence, "``\u200b`"), limit)
        if piece
    ]


def _fields(pairs: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    fields = [
        {"type": "mrkdwn", "text": clip(f"*{escape(key)}*\n{escape(value)}", FIELD_MAX)}
        for key, value in pairs
    ]
    return [
        {"type": "section", "fields": fields[i : i + FIELDS_PER_SECTION]}
        for i in range(0, len(fields), FIELDS_PER_SECTION)
    ]


def _block(block: Block) -> list[dict[str, Any]]:
    match block:
        case CodeBlock(code=code):
            return _code_blocks(code)
        case DiffBlock(diff=diff):
            return _code_blocks(diff)
        case TextBlock(text=text, markdown=markdown):
            return text_blocks(text, markdown=markdown)
        case FieldsBlock(fields=fields):
            return _fields(fields)


def _confirm(action: CardAction) -> dict[str, Any] | None:
    """A grant beyond this once asks again (the core styles only a one-time allow primary),
    and so does a lasting refusal (Codex's "Always block this host" adds a rule). The dialog
    says what the click grants (the explanation) and the rule it adds, whole where
    it fits Slack's 300 characters, else as far as it fits and where the rest is."""
    grants = action.effect is Effect.ALLOW and action.style is ButtonStyle.DEFAULT
    blocks = action.effect is not Effect.ALLOW and (action.scope is Scope.ALWAYS or action.rule)
    if not (grants or blocks):
        return None
    said = escape(action.explanation or action.label)
    if action.rule:
        rule = escape(action.rule).replace("`", "'")
        whole = f"{said}\n`{rule}`"
        if len(whole) > CONFIRM_MAX:
            room = CONFIRM_MAX - len(said) - len(_RULE_ON_CARD) - 4
            whole = f"{said}\n`{clip(rule, max(room, 20))}`{_RULE_ON_CARD}"
        said = whole
    return {
        "title": _plain("Allow beyond this once?" if grants else "Refuse from now on?"),
        "text": {"type": "mrkdwn", "text": clip(said, CONFIRM_MAX)},
        "confirm": _plain("Allow" if grants else "Refuse"),
        "deny": _plain("Cancel"),
    }


def _explanations(card: Card) -> list[dict[str, Any]]:
    """What a button grants where its label cannot say it all (it was shortened, it reaches
    beyond this once, it adds a rule), and the rule, whole: a section above the buttons."""
    blocks: list[dict[str, Any]] = []
    for action in card.actions:
        if not (action.explain_on_card or action.rule):
            continue
        head = f"*{escape(action.label)}*"
        if action.explanation:
            head += f": {escape(action.explanation)}"
        blocks.append(_section(clip(head, SECTION_MAX)))
        if action.rule:
            blocks.extend(_code_blocks(action.rule))
    return blocks


def _button(label: str, value: str, action_id: str, style: ButtonStyle) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": _plain(clip(label, BUTTON_MAX)),
        "value": value,
        "action_id": action_id,
    }
    if style is not ButtonStyle.DEFAULT:
        button["style"] = style.value
    return button


def _buttons(card: Card) -> list[dict[str, Any]]:
    """The form's own buttons first (the options, "Answer…"), then the card's actions:
    refusing a question (Dismiss, Do not answer) is last, away from a hurried tap."""
    buttons: list[dict[str, Any]] = []
    form = card.form
    if form is not None:
        items = form.questions
        question = items[0].question if len(items) == 1 else None
        direct = (
            question is not None
            and not question.multi
            and not question.secret
            and bool(question.options)
        )
        if direct:
            for j, option in enumerate(items[0].question.options):
                token = items[0].option_tokens[j]
                buttons.append(
                    _button(option.label, token, f"{OPTION_PREFIX}{j}", ButtonStyle.DEFAULT)
                )
        if not direct or (question is not None and question.allow_other):
            buttons.append(
                _button("Answer…", form.submit_token, ANSWER_ACTION, ButtonStyle.PRIMARY)
            )
    for index, action in enumerate(card.actions):
        prefix = MESSAGE_PREFIX if action.takes_message else ACTION_PREFIX
        button = _button(action.label, action.token, f"{prefix}{index}", action.style)
        confirm = _confirm(action)
        if confirm is not None:
            button["confirm"] = confirm
        buttons.append(button)
    return buttons


def _questions(card: Card) -> list[dict[str, Any]]:
    """The questions; a header or text the card's title or summary already says is not said
    again (a single question is the card's title and summary)."""
    if card.form is None:
        return []
    shown = (card.title.strip(), card.summary.strip())
    lines: list[str] = []
    for item in card.form.questions:
        question = item.question
        header = "" if question.header.strip() in shown else question.header
        text = "" if question.text.strip() in shown else question.text
        head = f"*{escape(header)}* " if header else ""
        secret = " :lock: (secret: only you see what you type)" if question.secret else ""
        if head or text or secret:
            lines.append(f"{head}{escape(text)}{secret}".strip())
        for option in question.options:
            about = f": {escape(option.description)}" if option.description else ""
            lines.append(f"  • {escape(option.label)}{about}")
    return [_section(piece) for piece in _split_lines(lines)]


def _split_lines(lines: list[str]) -> list[str]:
    pieces: list[str] = []
    current = ""
    for line in lines:
        line = clip(line, SECTION_MAX)
        if current and len(current) + 1 + len(line) > SECTION_MAX:
            pieces.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    if current:
        pieces.append(current)
    return pieces


# --- the card ------------------------------------------------------------------------------


def render_card(card: Card, *, mention: str = "") -> RenderedCard:
    """The blocks of ``card``; pure. ``mention`` (``<@U…>`` of its approvers, for a new
    card only) is said once, under the header. Past :data:`MAX_BLOCKS` the body is cut and
    the card says so; the header, buttons and status always stay."""
    title = card.title.strip() or "Request"
    head: list[dict[str, Any]] = [{"type": "header", "text": _plain(clip(title, HEADER_MAX))}]
    body: list[dict[str, Any]] = []
    if mention:
        body.append(_section(mention))
    if card.summary.strip() != title:  # the header says it already
        body.extend(text_blocks(card.summary, markdown=True))
    for block in card.blocks:
        body.extend(_block(block))
    body.extend(_explanations(card))
    body.extend(_questions(card))
    tail: list[dict[str, Any]] = []
    buttons = _buttons(card)
    for i in range(0, len(buttons), ACTIONS_PER_BLOCK):
        tail.append({"type": "actions", "elements": buttons[i : i + ACTIONS_PER_BLOCK]})
    status = _status_context(card)
    if status is not None:
        tail.append(status)
    room = MAX_BLOCKS - len(head) - len(tail)
    if len(body) > room:
        cut = len(body) - (room - 1)
        body = [
            *body[: room - 1],
            _section(f"_… {cut} more part(s) not shown: Slack shows {MAX_BLOCKS} blocks._"),
        ]
    return RenderedCard(text=_notification(card, mention), blocks=[*head, *body, *tail])


def _status_context(card: Card) -> dict[str, Any] | None:
    """The status line, its times in each reader's zone, and the content hash as a detail
    beside it (its own element, after the status: never in the notification)."""
    elements: list[dict[str, Any]] = []
    if card.status:
        status = status_text(
            tuple(escape(p) if isinstance(p, str) else p for p in card.status),
            at=lambda t: f" at {slack_time(t, clock_time(t))}",
        )
        if len(status) > SECTION_MAX:  # never cut inside a date's markup: the plain words
            status = clip(escape(card.status_line), SECTION_MAX)
        elements.append({"type": "mrkdwn", "text": status})
    if card.content_hash:
        elements.append({"type": "mrkdwn", "text": f"Details: content hash {card.content_hash}"})
    return {"type": "context", "elements": elements} if elements else None


def _asked(card: Card) -> str:
    """What the card asks, in a line: the command (the first code block's first line), else
    the summary; empty where there is neither."""
    for block in card.blocks:
        if isinstance(block, CodeBlock) and block.code.strip():
            return block.code.strip().splitlines()[0]
    summary = card.summary.strip()
    return summary.splitlines()[0] if summary and summary != card.title.strip() else ""


def _notification(card: Card, mention: str) -> str:
    """The message's ``text``, which a phone's notification shows: what is asked and of
    whom ("Run a command: touch hello.txt · waiting for <@U1>"); for an edit (nobody is
    notified), what is asked and where it stands."""
    title = clip(card.title.strip() or "Request", HEADER_MAX)
    if card.session:  # which session asks: a banner shows no fact
        title = f"{clip(card.session, HEADER_MAX)} · {title}"
    asked = clip(_asked(card), ASKED_MAX)
    head = escape(f"{title}: {asked}" if asked else title)
    people = _MENTION.findall(mention)
    if people and (card.actions or card.form is not None):
        tail = "waiting for " + " ".join(people)
    else:
        tail = escape(clip(card.status_line, FALLBACK_MAX - 2 * len(head)))
    return f"{head} · {tail}" if tail else head
