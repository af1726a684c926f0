"""The platform-neutral card: what an interaction looks like before a platform draws it.

A :class:`Card` is a title, a summary, blocks (code, a diff, text, fields), buttons each
carrying a signed token, an optional form of questions, a status line and attachments. It is
made by :func:`gateway.render.interaction_card.render_interaction`; each platform turns it into
its own blocks, keyboards or components.

The status line carries the instants it names as :class:`At`, never as text: each platform
shows one in its reader's own time zone (Slack's date formatting, Discord's embed timestamp,
Telegram's date_time entity, the browser's clock), with the UTC text where it cannot
(:attr:`Card.status_line`, a notification). The content hash rides along apart
(:attr:`Card.content_hash`), for a platform to put behind "details".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from gateway.domain import Effect, Question, Scope
from gateway.wording import clock_time

__all__ = [
    "FIELD_MAX_CHARS",
    "LABEL_MAX_CHARS",
    "LABEL_SHORT_CHARS",
    "TITLE_MAX_CHARS",
    "At",
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
    "StatusPart",
    "TextBlock",
    "block_text_length",
    "card_text_length",
    "status_text",
]

TITLE_MAX_CHARS = 200
FIELD_MAX_CHARS = 500
LABEL_MAX_CHARS = 75  # Slack's limit for button text, the strictest
# A label longer than this is not kept: it would wrap to several lines on a phone (and be cut
# at Telegram's 60 characters). The action's own short words stand in, and the whole label
# goes to its explanation, shown in full beside the button.
LABEL_SHORT_CHARS = 40


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
    """One button: the token is the only thing the platform sends back.

    ``label`` is short; ``explanation`` says what it does (never the label again);
    ``rule`` is the exact lasting rule it adds (a command prefix), whole: a platform shows
    it beside the explanation, never in the label, where it would be cut.

    ``explain_on_card``: the label alone does not say all that a click grants (it was
    shortened, it reaches beyond this once, or it adds a rule), so every platform shows the
    explanation (and the rule) in the card's text, not only where it has room for a hint."""

    label: str
    token: str
    style: ButtonStyle = ButtonStyle.DEFAULT
    effect: Effect | None = None
    scope: Scope = Scope.ONCE
    explanation: str = ""
    rule: str = ""
    explain_on_card: bool = False
    # the person may add a message the agent reads (a plan's Keep planning): a platform
    # asks for it with the button (a text field, a modal), and sends it with the click
    takes_message: bool = False


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


@dataclass(frozen=True, slots=True)
class At:
    """An instant on a status line, read "at 09:17 UTC" where a platform cannot show it in
    its reader's own time zone. Aware, always: a naive time would be read as local."""

    when: datetime

    def __post_init__(self) -> None:
        if self.when.tzinfo is None:
            raise ValueError("a time on a card must carry its time zone")


# a status line is words and instants: ("Approved by Ann", At(t), " · sent to the agent")
StatusPart = str | At


def status_text(
    parts: tuple[StatusPart, ...], at: Callable[[datetime], str] = lambda t: f" at {clock_time(t)}"
) -> str:
    """The status line as one text, each instant drawn by ``at`` (" at 09:17 UTC" unless a
    platform draws it its own way); the words are given as they are (escape them first)."""
    return "".join(part if isinstance(part, str) else at(part.when) for part in parts)


@dataclass(frozen=True, kw_only=True, slots=True)
class Card:
    """``status`` is where the request stands (words and instants: see :class:`At`);
    ``content_hash`` is the short hash of what is asked, for a platform to show behind
    "details": empty where the status itself names it (several people vote on the request,
    and the hash lets them see they approve the same thing)."""

    title: str
    summary: str = ""
    blocks: tuple[Block, ...] = ()
    actions: tuple[CardAction, ...] = ()
    form: QuestionForm | None = None
    status: tuple[StatusPart, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    content_hash: str = ""
    # the session's /name, for a notification that shows no fact (it is the card's first
    # fact too): "" where the session has none
    session: str = ""

    @property
    def status_line(self) -> str:
        """The status as plain text, its times in UTC: what a notification or a surface
        without its own clock reads."""
        return status_text(self.status)


def block_text_length(block: Block) -> int:
    """A block's share of :func:`card_text_length` (the card's length is additive over its
    blocks)."""
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
    length += sum(block_text_length(block) for block in card.blocks)
    if card.form is not None:
        for item in card.form.questions:
            question = item.question
            length += len(question.header) + len(question.text) + 4
            length += sum(
                len(option.label) + len(option.description) + 4 for option in question.options
            )
    return length
