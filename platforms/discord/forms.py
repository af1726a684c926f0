"""A card's question form as Discord modals, and their submissions as answers (pure).

A form that one click cannot answer (render.py ``answers_by_buttons``) is answered in
modals: "Answer…" on the card opens the first page; a modal must be the interaction's first
response, within 3 s, so the platform asks ``Inbox.may_answer`` and sends it at once. A
modal (title :data:`TITLE_MAX`, ``custom_id`` ``"agw:" + submit token``) holds at most
:data:`COMPONENTS_MAX` components; each question is a ``Label`` (text :data:`LABEL_MAX`,
description :data:`DESCRIPTION_MAX`: the header as label, the question as description, or,
too long for one, a ``TextDisplay`` before it, counted among the five) around:

- single choice: a ``RadioGroup`` (2-10 options), else a ``Select`` (up to 25);
- multiple choice: a ``CheckboxGroup`` (up to 10, min/max), else a multi ``Select``;
- "other", free text and secrets: a ``TextInput`` (up to 4,000 characters), ``required`` as
  asked where it is the question's only input; a question with options and "other" has two
  inputs, neither required, and validation asks for one of them.

More than five components: pages (a question is never split); a page's submit is answered
ephemerally with "Next", since a modal cannot answer a modal. A modal shows no errors, so a
submission is validated here (:func:`read_page`), and what is missing is said ephemerally
with a button that reopens the page pre-filled (:func:`build_page` with the draft; never a
secret). Nothing is defaulted.

The answers in progress are each person's :class:`~platforms.form_drafts.Draft`, kept by the
platform's ``PendingForms`` by the form's submit token (platforms/form_drafts.py: in memory
on one host, in the ledger, sealed, where several share it); secrets live there only until
the form is handed over, and are never echoed or logged.

What comes out is plain data (:class:`Page` of :class:`Input`); the platform builds
discord.py's ``ui`` items from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.cards import QuestionForm
from gateway.domain import Answer, Question
from gateway.errors import InvalidDecision
from gateway.render.commands import parse_answers
from platforms.form_drafts import Draft

__all__ = [
    "COMPONENTS_MAX",
    "Input",
    "InputKind",
    "Page",
    "PageRead",
    "answers_of",
    "build_page",
    "missing",
    "pages_of",
    "read_page",
]

TITLE_MAX = 45
COMPONENTS_MAX = 5
LABEL_MAX = 45
DESCRIPTION_MAX = 100
OPTION_MAX = 100
TEXT_INPUT_MAX = 4000
TEXT_DISPLAY_MAX = 4000
SECRET_HINT = "Only you see what you type; it is never shown or kept."
SMALL_CHOICE = 10  # radio groups and checkbox groups hold at most this many
SELECT_MAX = 25

InputKind = str  # "radio" | "checkbox" | "select" | "text" | "display"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


@dataclass(frozen=True, kw_only=True, slots=True)
class Input:
    """One top-level component of a modal: a Label around an input, or a TextDisplay."""

    kind: InputKind
    custom_id: str  # unique in the modal: "q<i>" or "q<i>.other" ("" for a display)
    question: int
    label: str = ""
    description: str = ""
    text: str = ""  # a TextDisplay's text
    options: tuple[tuple[str, str, str], ...] = ()  # (label, value, description)
    defaults: tuple[str, ...] = ()  # the values chosen before (reopened pre-filled)
    min_values: int = 0
    max_values: int = 1
    required: bool = False
    paragraph: bool = False  # a TextInput of several lines
    value: str = ""  # a TextInput's text typed before (never a secret's)
    placeholder: str = ""  # a TextInput's grey hint
    max_length: int = TEXT_INPUT_MAX


@dataclass(frozen=True, kw_only=True, slots=True)
class Page:
    title: str
    number: int  # from 0
    count: int
    inputs: tuple[Input, ...]

    @property
    def questions(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(item.question for item in self.inputs))


def _head(index: int, question: Question) -> tuple[list[Input], str, str]:
    """A TextDisplay if the question is too long for the label's description, and the
    label's text and description."""
    label = question.header or question.text or "Answer"
    about = question.text if question.header else ""
    if len(label) > LABEL_MAX and not about:
        label, about = _clip(label, LABEL_MAX), label
    if len(about) <= DESCRIPTION_MAX:
        return [], _clip(label, LABEL_MAX), about
    display = Input(
        kind="display", custom_id="", question=index, text=_clip(about, TEXT_DISPLAY_MAX)
    )
    return [display], _clip(label, LABEL_MAX), ""


def _options(question: Question) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (_clip(option.label, OPTION_MAX), str(j), _clip(option.description, OPTION_MAX))
        for j, option in enumerate(question.options)
    )


def _question_inputs(index: int, question: Question, draft: Draft | None) -> list[Input]:
    inputs, label, about = _head(index, question)
    chosen = draft.chosen.get(index, ()) if draft is not None else ()
    typed = draft.other.get(index, "") if draft is not None else ""
    key = f"q{index}"
    if question.secret or not question.options:
        inputs.append(
            Input(
                kind="text",
                custom_id=key,
                question=index,
                label=label,
                description=about,
                required=question.required,
                paragraph=not question.secret,
                value="" if question.secret else typed,  # a secret is never shown again
                placeholder=SECRET_HINT if question.secret else "",
            )
        )
        return inputs
    if len(question.options) > SELECT_MAX:
        raise ValueError(
            f"a question of {len(question.options)} options does not fit Discord's {SELECT_MAX}"
        )
    alone = not question.allow_other
    required = question.required and alone
    n = len(question.options)
    if question.multi:
        kind = "checkbox" if n <= SMALL_CHOICE else "select"
        low, high = (1 if required else 0), n
    else:
        kind = "radio" if 2 <= n <= SMALL_CHOICE else "select"
        low, high = (1 if required else 0), 1
    inputs.append(
        Input(
            kind=kind,
            custom_id=key,
            question=index,
            label=label,
            description=about,
            options=_options(question),
            defaults=tuple(str(j) for j in chosen),
            min_values=low,
            max_values=high,
            required=required,
        )
    )
    if question.allow_other:
        inputs.append(
            Input(
                kind="text",
                custom_id=f"{key}.other",
                question=index,
                label="Other",
                description=_clip(f"Another answer to: {label}", DESCRIPTION_MAX),
                value=typed,
            )
        )
    return inputs


def pages_of(form: QuestionForm) -> list[tuple[int, ...]]:
    """The questions of each page: in order, at most five components a page, a question
    never split."""
    pages: list[list[int]] = [[]]
    used = 0
    for index, item in enumerate(form.questions):
        size = len(_question_inputs(index, item.question, None))
        if used + size > COMPONENTS_MAX and pages[-1]:
            pages.append([])
            used = 0
        pages[-1].append(index)
        used += size
    return [tuple(page) for page in pages]


def build_page(form: QuestionForm, number: int, *, title: str, draft: Draft | None = None) -> Page:
    """Page ``number`` of the form's modal, pre-filled from ``draft`` (never a secret)."""
    pages = pages_of(form)
    if not 0 <= number < len(pages):
        raise ValueError(f"the form has {len(pages)} page(s), not {number + 1}")
    inputs = [
        piece
        for index in pages[number]
        for piece in _question_inputs(index, form.questions[index].question, draft)
    ]
    suffix = f" ({number + 1}/{len(pages)})" if len(pages) > 1 else ""
    name = _clip(title.strip() or "Answer", TITLE_MAX - len(suffix)) + suffix
    return Page(title=name, number=number, count=len(pages), inputs=tuple(inputs))


# --- submissions ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PageRead:
    """What one page's submission did to the draft: the questions still unanswered on it
    (by header or text) and what was refused; nothing refused or missing: go on."""

    missing: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing and not self.refused


def _name(question: Question) -> str:
    return _clip(question.header or question.text or "a question", 60)


def _picked(raw: str | Sequence[str] | None, question: Question) -> tuple[int, ...] | None:
    """The option indexes a value names; None when one is not an option of the question."""
    values = [raw] if isinstance(raw, str) else list(raw or [])
    picked: list[int] = []
    for value in values:
        if not value:
            continue
        if not value.isdigit() or not 0 <= int(value) < len(question.options):
            return None
        picked.append(int(value))
    return tuple(dict.fromkeys(picked))


def _text(raw: str | Sequence[str] | None) -> str:
    return (raw if isinstance(raw, str) else "").strip()


def read_page(
    form: QuestionForm,
    page: Page,
    values: Mapping[str, str | Sequence[str]],
    draft: Draft,
) -> PageRead:
    """Take one page's submitted ``values`` (by component ``custom_id``) into ``draft``.

    Every question of the page is replaced by what was submitted (a person who cleared an
    answer cleared it); refused values are never echoed (a secret least of all)."""
    missing: list[str] = []
    refused: list[str] = []
    for index in page.questions:
        question = form.questions[index].question
        key = f"q{index}"
        draft.chosen.pop(index, None)
        draft.other.pop(index, None)
        draft.secret.pop(index, None)
        if question.secret or not question.options:
            text = _text(values.get(key))
            if text and question.secret:
                try:
                    draft.secret[index] = parse_answers([question], text, private=True)[question.id]
                except (InvalidDecision, KeyError):
                    refused.append(f"“{_name(question)}” was not taken: type it again.")
            elif text:
                draft.other[index] = text
        else:
            picked = _picked(values.get(key), question)
            other = _text(values.get(f"{key}.other")) if question.allow_other else ""
            if picked is None:
                refused.append(f"“{_name(question)}”: choose one of the options shown.")
                continue
            if picked and other and not question.multi:
                refused.append(f"“{_name(question)}”: choose an option or type another, not both.")
                draft.chosen[index] = picked
                draft.other[index] = other
                continue
            if picked:
                draft.chosen[index] = picked
            if other:
                draft.other[index] = other
        said = any(_name(question) in line for line in refused)
        if question.required and not draft.answered(index) and not said:
            missing.append(_name(question))
    return PageRead(missing=tuple(missing), refused=tuple(refused))


def missing(form: QuestionForm, draft: Draft) -> tuple[int, ...]:
    """The required questions the draft has not answered, by index."""
    return tuple(
        index
        for index, item in enumerate(form.questions)
        if item.question.required and not draft.answered(index)
    )


def answers_of(form: QuestionForm, draft: Draft) -> dict[str, Answer]:
    """The draft's answers, by question id (unanswered optional questions left out)."""
    found: dict[str, Answer] = {}
    for index, item in enumerate(form.questions):
        question = item.question
        if index in draft.secret:
            found[question.id] = draft.secret[index]
        elif draft.answered(index):
            found[question.id] = Answer(
                option_ids=tuple(question.options[o].id for o in draft.chosen.get(index, ())),
                other=draft.other.get(index),
            )
    return found
