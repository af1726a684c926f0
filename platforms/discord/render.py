"""A card as a Discord message: one embed and rows of buttons, within Discord's limits (pure).

What comes out is plain data in the shapes of Discord's API (an embed object, action rows of
buttons, an ``allowed_mentions`` object, files by name and content); the platform turns it
into discord.py's objects. Discord's limits (discord.com/developers/docs/resources/message,
/interactions/message-components) are kept here, before Discord refuses a message with
50035: an embed's title :data:`TITLE_MAX`, description :data:`DESCRIPTION_MAX`, at most
:data:`FIELDS_MAX` fields of :data:`FIELD_NAME_MAX`/:data:`FIELD_VALUE_MAX`, footer
:data:`FOOTER_MAX`, and :data:`EMBED_TOTAL_MAX` characters in all; at most :data:`ROWS_MAX`
rows of :data:`BUTTONS_PER_ROW` buttons, a label :data:`LABEL_MAX`, a ``custom_id``
:data:`CUSTOM_ID_MAX`.

- A button's ``custom_id`` is ``"agw:" + its action token``: nothing else of a click is
  trusted, and it means the same after a restart (the platform registers a DynamicItem for
  the prefix).
- The body is the embed's description: the summary (the agent's Markdown), code and diffs
  in code blocks, what each button grants beyond its label (and the rule it adds, whole),
  the questions (what the title and summary say not again); facts are fields; the status line
  is the footer, its time the embed's ``timestamp`` (which Discord shows beside the footer in
  each reader's zone: ``<t:…>`` markup is not drawn in a footer); the content hash, where the
  card carries it as a detail, is the last field, "Details". A body too long for the
  description moves its largest code block to a file first (the card says so), then the whole
  body (the card says so again).
- Nothing in the agent's text pings anyone: it is defused (gateway/render/markdown.py) and every
  send says whom it may ping. A new card names who may decide it, once, in the message's
  content, and lets exactly them be pinged; an edit pings nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from gateway.cards import (
    At,
    Attachment,
    Block,
    ButtonStyle,
    Card,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    QuestionForm,
    TextBlock,
    status_text,
)
from gateway.render.markdown import discord_escape, discord_markdown

__all__ = [
    "BUTTONS_PER_ROW",
    "CUSTOM_ID_MAX",
    "CUSTOM_ID_PREFIX",
    "DESCRIPTION_MAX",
    "EMBED_TOTAL_MAX",
    "LABEL_MAX",
    "MESSAGE_ID_PREFIX",
    "ROWS_MAX",
    "RenderedCard",
    "answers_by_buttons",
    "custom_id",
    "mention_line",
    "no_pings",
    "render_card",
    "rendered_length",
    "token_of",
]

TITLE_MAX = 256
DESCRIPTION_MAX = 4096
FIELDS_MAX = 25
FIELD_NAME_MAX = 256
FIELD_VALUE_MAX = 1024
FOOTER_MAX = 2048
EMBED_TOTAL_MAX = 6000
ROWS_MAX = 5
BUTTONS_PER_ROW = 5
LABEL_MAX = 80
CUSTOM_ID_MAX = 100
CUSTOM_ID_PREFIX = "agw:"
# a button that asks for a message first (Keep planning: a modal), whatever process sent it
MESSAGE_ID_PREFIX = "agwm:"
CONTENT_MAX = 2000


def rendered_length(text: str) -> int:
    """How many characters Discord counts in the agent's Markdown ``text`` as it is sent
    (escapes and defused mentions included)."""
    return len(discord_markdown(text))


# Discord's button styles
_STYLE = {ButtonStyle.PRIMARY: 1, ButtonStyle.DEFAULT: 2, ButtonStyle.DANGER: 4}
_ZWSP = "\u200b"
_COLOUR_PENDING = 0x5865F2  # blurple: waiting for someone
_COLOUR_DONE = 0x4F545C  # grey: decided, nothing to click


def custom_id(token: str, prefix: str = CUSTOM_ID_PREFIX) -> str:
    """The ``custom_id`` of a button or modal that carries ``token``."""
    made = prefix + token
    if len(made) > CUSTOM_ID_MAX:
        raise ValueError(f"a custom_id takes {CUSTOM_ID_MAX} characters; this one is {len(made)}")
    return made


def token_of(custom: str) -> str | None:
    """The token a ``custom_id`` carries; None for one that is not ours."""
    if not custom.startswith(CUSTOM_ID_PREFIX) or len(custom) > CUSTOM_ID_MAX:
        return None
    return custom[len(CUSTOM_ID_PREFIX) :] or None


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def no_pings() -> dict[str, Any]:
    """``allowed_mentions`` that ping nobody: what every send and edit carries unless it is
    a new card's mention of its approvers."""
    return {"parse": []}


def mention_line(approvers: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The content that names who may decide a new card (user ids, ``role:<id>``), and the
    ``allowed_mentions`` that lets exactly them be pinged; ``("", no_pings())`` for
    nobody."""
    users = [who for who in approvers if who.isdigit()]
    roles = [who.removeprefix("role:") for who in approvers if who.startswith("role:")]
    roles = [role for role in roles if role.isdigit()]
    if not users and not roles:
        return "", no_pings()
    names = [f"<@{user}>" for user in users] + [f"<@&{role}>" for role in roles]
    text = clip(" ".join(names), CONTENT_MAX - 20) + ": waiting for you."
    return text, {"parse": [], "users": users, "roles": roles}


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedCard:
    content: str  # the approvers' mention of a new card, else ""
    embed: dict[str, Any]
    components: list[dict[str, Any]]  # action rows of buttons
    files: tuple[Attachment, ...] = ()
    allowed_mentions: dict[str, Any] = field(default_factory=no_pings)


# --- the body ------------------------------------------------------------------------------


def _fence(code: str, language: str = "") -> str:
    # a fence inside would end Discord's block early: broken with a zero-width space
    return f"```{language}\n{code.replace('```', f'``{_ZWSP}`')}\n```"


_ATTACHABLE = {CodeBlock: ("command", "command.sh"), DiffBlock: ("diff", "changes.diff")}


@dataclass(kw_only=True, slots=True)
class _Body:
    summary: str
    blocks: list[Block]
    rules: list[str]
    questions: str
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        pieces = [discord_markdown(self.summary) if self.summary.strip() else ""]
        pieces += [_block_text(block) for block in self.blocks]
        pieces += self.rules
        pieces.append(self.questions)
        pieces += [f"*{discord_escape(note)}*" for note in self.notes]
        return "\n\n".join(piece for piece in pieces if piece.strip())


def _block_text(block: Block) -> str:
    match block:
        case CodeBlock(code=code, language=language):
            return _fence(code, language)
        case DiffBlock(diff=diff):
            return _fence(diff, "diff")
        case TextBlock(text=text, markdown=markdown):
            return discord_markdown(text) if markdown else discord_escape(text)
        case FieldsBlock():
            return ""  # fields of the embed


def _rules(card: Card) -> list[str]:
    """A button whose label does not say all it grants (shortened, beyond this once, a
    rule): what it does, and the rule whole (a label is cut at 80 characters; the body is
    not)."""
    lines = []
    for action in card.actions:
        if not (action.explain_on_card or action.rule):
            continue
        head = f"**{discord_escape(action.label)}**"
        if action.explanation:
            head += f": {discord_escape(action.explanation)}"
        lines.append(f"{head}\n{_fence(action.rule)}" if action.rule else head)
    return lines


def _questions(form: QuestionForm | None, shown: tuple[str, ...] = ()) -> str:
    """The questions; a header or text the card's title or summary already says is not said
    again (a single question is the card's title and summary)."""
    if form is None:
        return ""
    lines: list[str] = []
    for item in form.questions:
        question = item.question
        header = "" if question.header.strip() in shown else question.header
        text = "" if question.text.strip() in shown else question.text
        head = f"**{discord_escape(header)}** " if header else ""
        if head or text:
            lines.append(f"{head}{discord_escape(text)}".strip())
        if question.secret:
            lines.append("🔒 Secret: answered in a form only you see, never shown here.")
        elif question.multi:
            lines.append("(choose any)")
        for option in question.options:
            about = f": {discord_escape(option.description)}" if option.description else ""
            lines.append(f"• {discord_escape(option.label)}{about}")
    return "\n".join(lines)


def _diff(block: Block) -> str:
    return block.diff if isinstance(block, DiffBlock) else ""


def _fit(body: _Body, limit: int) -> tuple[str, list[Attachment]]:
    """The description within ``limit``: the largest code block to a file at a time, then
    the whole body (the card says which file holds what)."""
    files: list[Attachment] = []
    text = body.text()
    while len(text) > limit:
        sizes = [
            (len(_block_text(block)), i)
            for i, block in enumerate(body.blocks)
            if isinstance(block, CodeBlock | DiffBlock)
        ]
        if not sizes:
            break
        _, at = max(sizes)
        block = body.blocks.pop(at)
        what, name = _ATTACHABLE[type(block)]
        if any(file.name == name for file in files):
            name = f"{len(files) + 1}-{name}"
        content = block.code if isinstance(block, CodeBlock) else _diff(block)
        files.append(Attachment(name=name, content=content))
        body.notes.append(f"The {what} is attached as {name}.")
        text = body.text()
    if len(text) > limit:
        whole = body.text()
        files.append(Attachment(name="request.md", content=whole))
        note = "\n\n*… cut here: the whole request is attached as request.md.*"
        text = clip(whole, limit - len(note)) + note
    return text, files


def _fields(card: Card, room: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The card's facts as embed fields while they fit ``room`` characters (and
    :data:`FIELDS_MAX`); the rest as lines of the body, so nothing is lost."""
    fields: list[dict[str, Any]] = []
    lines: list[str] = []
    for block in card.blocks:
        if not isinstance(block, FieldsBlock):
            continue
        for key, value in block.fields:
            name = clip(key, FIELD_NAME_MAX) or "-"
            shown = discord_escape(value) or "-"
            size = len(name) + len(shown)
            if len(fields) < FIELDS_MAX and len(shown) <= FIELD_VALUE_MAX and size <= room:
                fields.append({"name": name, "value": shown, "inline": len(value) <= 40})
                room -= size
            else:
                lines.append(f"**{discord_escape(key)}**: {shown}")
    return fields, lines


def _details_field(card: Card) -> list[dict[str, Any]]:
    """The content hash where the card's face does not show it: a field of its own, last."""
    if not card.content_hash:
        return []
    return [{"name": "Details", "value": f"content hash {card.content_hash}", "inline": True}]


# --- buttons -------------------------------------------------------------------------------


def answers_by_buttons(card: Card) -> bool:
    """One click answers the form: one single-choice question, not secret, whose options
    (and the card's actions) fit the buttons a message has."""
    form = card.form
    if form is None or len(form.questions) != 1:
        return False
    question = form.questions[0].question
    other = 1 if question.allow_other else 0
    room = ROWS_MAX * BUTTONS_PER_ROW - len(card.actions) - other
    return not question.multi and not question.secret and 0 < len(question.options) <= room


def _button(
    label: str, token: str, style: ButtonStyle, prefix: str = CUSTOM_ID_PREFIX
) -> dict[str, Any]:
    return {
        "type": 2,
        "style": _STYLE[style],
        "label": clip(label.strip() or "…", LABEL_MAX),
        "custom_id": custom_id(token, prefix),
    }


def _buttons(card: Card) -> list[dict[str, Any]]:
    """The form's own buttons first (the options, "Answer…"), then the card's actions:
    refusing a question (Dismiss, Do not answer) is last, away from a hurried tap."""
    buttons: list[dict[str, Any]] = []
    form = card.form
    if form is not None:
        direct = answers_by_buttons(card)
        if direct:
            item = form.questions[0]
            buttons += [
                _button(option.label, item.option_tokens[j], ButtonStyle.DEFAULT)
                for j, option in enumerate(item.question.options)
            ]
        if not direct or form.questions[0].question.allow_other:
            buttons.append(_button("Answer…", form.submit_token, ButtonStyle.PRIMARY))
    buttons += [
        _button(
            action.label,
            action.token,
            action.style,
            MESSAGE_ID_PREFIX if action.takes_message else CUSTOM_ID_PREFIX,
        )
        for action in card.actions
    ]
    if len(buttons) > ROWS_MAX * BUTTONS_PER_ROW:
        raise ValueError(
            f"a card takes {ROWS_MAX * BUTTONS_PER_ROW} buttons; this one has {len(buttons)}"
        )
    return buttons


def _rows(buttons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": 1, "components": buttons[i : i + BUTTONS_PER_ROW]}
        for i in range(0, len(buttons), BUTTONS_PER_ROW)
    ]


# --- the card ------------------------------------------------------------------------------


def render_card(card: Card, *, approvers: tuple[str, ...] = ()) -> RenderedCard:
    """The message of ``card``; pure. ``approvers`` (user ids, ``role:<id>``) are named
    once, for a new card only; a card with no buttons (decided) names nobody."""
    buttons = _buttons(card)
    title = clip(card.title.strip() or "Request", TITLE_MAX)
    footer = clip(status_text(card.status, at=lambda _: ""), FOOTER_MAX)
    moments = [part.when for part in card.status if isinstance(part, At)]
    details = _details_field(card)
    fields, field_lines = _fields(
        card,
        EMBED_TOTAL_MAX
        - DESCRIPTION_MAX
        - len(title)
        - len(footer)
        - sum(len(f["name"]) + len(f["value"]) for f in details),
    )
    kept = FIELDS_MAX - len(details)  # a fact the details field displaces goes to the body
    field_lines = [
        *(f"**{discord_escape(f['name'])}**: {f['value']}" for f in fields[kept:]),
        *field_lines,
    ]
    fields = [*fields[:kept], *details]
    used = len(title) + len(footer) + sum(len(f["name"]) + len(f["value"]) for f in fields)
    body = _Body(
        summary=card.summary if card.summary.strip() != card.title.strip() else "",
        blocks=[block for block in card.blocks if not isinstance(block, FieldsBlock)],
        rules=[*field_lines, *_rules(card)],
        questions=_questions(card.form, (card.title.strip(), card.summary.strip())),
    )
    description, files = _fit(body, min(DESCRIPTION_MAX, EMBED_TOTAL_MAX - used))
    embed: dict[str, Any] = {
        "type": "rich",
        "title": title,
        "color": _COLOUR_PENDING if buttons else _COLOUR_DONE,
    }
    if description:
        embed["description"] = description
    if fields:
        embed["fields"] = fields
    if footer:
        embed["footer"] = {"text": footer}
    if moments:  # the latest instant the status names, in each reader's own zone
        embed["timestamp"] = moments[-1].astimezone(UTC).isoformat()
    content, allowed = mention_line(approvers) if buttons else ("", no_pings())
    return RenderedCard(
        content=content,
        embed=embed,
        components=_rows(buttons),
        files=(*card.attachments, *files),
        allowed_mentions=allowed,
    )
