"""A card's question form as a Slack modal, and a submitted modal as answers (pure).

Slack has modals: a person presses "Answer…" on the card, the app asks the core whether they
may answer (``Inbox.may_answer``) and opens a modal (``views.open``) within the 3 s the
click's ``trigger_id`` lives. Each question is an input block:

- single choice: ``radio_buttons`` (up to 10 options), else ``static_select`` (up to 100);
- multiple choice: ``checkboxes`` (up to 10), else ``multi_static_select``;
- "other" and free text: ``plain_text_input``; a secret too (Slack has no masked input; only
  the person sees their modal), never echoed, logged or kept after it is handed over.

A required question is ``optional: false`` where one input answers it (Slack's client then
refuses to send the modal without it); a question with options *and* "other" has two inputs,
both optional, and :func:`read_submission` refuses it in place (``response_action:
"errors"``) when neither is given. Nothing is defaulted. The modal's ``private_metadata``
carries the form's submit token and the card's conversation and message, which is all a
submission is trusted with besides the person.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.cards import QuestionForm
from gateway.domain import Answer, Question
from gateway.errors import InvalidDecision
from gateway.render.commands import parse_answers
from platforms.slack.render import clip, escape

__all__ = [
    "CALLBACK_ID",
    "MESSAGE_CALLBACK_ID",
    "Errors",
    "FormPlace",
    "build_message_modal",
    "build_modal",
    "message_of",
    "place_of",
    "read_submission",
]

CALLBACK_ID = "gw.form"
MESSAGE_CALLBACK_ID = "gw.message"  # the modal of a button that takes a message
_MESSAGE_BLOCK = "message"
TITLE_MAX = 24
OPTION_MAX = 75
LABEL_MAX = 2000
TEXT_MAX = 3000
MAX_MODAL_BLOCKS = 100
SMALL_CHOICE = 10  # radio buttons and checkboxes hold at most this many options


@dataclass(frozen=True, kw_only=True, slots=True)
class FormPlace:
    """What a modal's private_metadata says: the submit token and the card it belongs to."""

    token: str
    channel: str
    thread: str | None
    message_ts: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Errors:
    """Refused in place: a message per input block (``response_action: "errors"``)."""

    errors: dict[str, str]


def _action_id(block_id: str) -> str:
    """An input's action_id: unique in the view, as Slack requires."""
    return f"{block_id}.v"


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def _options(question: Question, *, described: bool) -> list[dict[str, Any]]:
    """The options as Slack draws them; an option's description (what the card's buttons
    said beside it) goes with it: as the option's own ``description`` in radio buttons and
    checkboxes, after its label in a select, which has no such field."""
    options: list[dict[str, Any]] = []
    for j, option in enumerate(question.options):
        label, about = option.label, option.description.strip()
        if about and not described:
            label = f"{label}: {about}"
        drawn: dict[str, Any] = {"text": _plain(clip(label, OPTION_MAX)), "value": str(j)}
        if about and described:
            drawn["description"] = _plain(clip(about, OPTION_MAX))
        options.append(drawn)
    return options


def _label(question: Question) -> str:
    return clip(question.header or question.text or "Answer", LABEL_MAX)


def _input(
    block_id: str, label: str, element: dict[str, Any], *, optional: bool, hint: str = ""
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": block_id,
        "label": _plain(label),
        "element": {**element, "action_id": _action_id(block_id)},
        "optional": optional,
    }
    if hint:
        block["hint"] = _plain(clip(hint, LABEL_MAX))
    return block


def _question_blocks(index: int, question: Question) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if question.header and question.text:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": clip(escape(question.text), TEXT_MAX)},
            }
        )
    label = _label(question)
    block_id = f"q{index}"
    if question.secret or not question.options:
        hint = "Only you see what you type; it is never shown or kept." if question.secret else ""
        element = {"type": "plain_text_input", "multiline": not question.secret}
        blocks.append(_input(block_id, label, element, optional=not question.required, hint=hint))
        return blocks
    few = len(question.options) <= SMALL_CHOICE
    kind = (
        ("checkboxes" if few else "multi_static_select")
        if question.multi
        else ("radio_buttons" if few else "static_select")
    )
    element = {"type": kind, "options": _options(question, described=few)}
    if kind.endswith("select"):
        element["placeholder"] = _plain("Choose…")
    one_input = not question.allow_other
    blocks.append(_input(block_id, label, element, optional=not (question.required and one_input)))
    if question.allow_other:
        other = {"type": "plain_text_input", "multiline": False}
        blocks.append(_input(f"q{index}.other", "Other", other, optional=True))
    return blocks


def build_modal(form: QuestionForm, place: FormPlace, *, title: str) -> dict[str, Any]:
    """The modal asking ``form``'s questions."""
    blocks: list[dict[str, Any]] = []
    for index, item in enumerate(form.questions):
        blocks.extend(_question_blocks(index, item.question))
    if len(blocks) > MAX_MODAL_BLOCKS:  # at most 50 questions of two inputs: not in sight
        raise ValueError(f"a form of {len(form.questions)} questions does not fit a modal")
    metadata = {"t": place.token, "c": place.channel, "h": place.thread, "m": place.message_ts}
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "title": _plain(clip(title or "Answer", TITLE_MAX)),
        "submit": _plain("Send"),
        "close": _plain("Cancel"),
        "private_metadata": json.dumps(metadata, separators=(",", ":")),
        "blocks": blocks,
    }


def build_message_modal(place: FormPlace) -> dict[str, Any]:
    """The modal a button that takes a message opens (Keep planning): one optional
    paragraph; sending it is the press of ``place.token``."""
    metadata = {"t": place.token, "c": place.channel, "h": place.thread, "m": place.message_ts}
    element = {
        "type": "plain_text_input",
        "multiline": True,
        "max_length": TEXT_MAX,
        "placeholder": _plain("What should the agent change?"),
    }
    return {
        "type": "modal",
        "callback_id": MESSAGE_CALLBACK_ID,
        "title": _plain("What should change?"),
        "submit": _plain("Send"),
        "close": _plain("Cancel"),
        "private_metadata": json.dumps(metadata, separators=(",", ":")),
        "blocks": [_input(_MESSAGE_BLOCK, "Your message (optional)", element, optional=True)],
    }


def message_of(state: dict[str, Any]) -> str | None:
    """What was typed in a message modal (None: nothing)."""
    field = (state.get(_MESSAGE_BLOCK) or {}).get(_action_id(_MESSAGE_BLOCK)) or {}
    typed = field.get("value") if isinstance(field, dict) else None
    return typed.strip() or None if isinstance(typed, str) else None


def place_of(view: dict[str, Any]) -> FormPlace | None:
    """The place a submitted modal names (None: not one of ours, or altered)."""
    try:
        data = json.loads(str(view.get("private_metadata") or ""))
        place = FormPlace(
            token=str(data["t"]),
            channel=str(data["c"]),
            thread=str(data["h"]) if data.get("h") else None,
            message_ts=str(data["m"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return place if place.token and place.channel else None


def _state(values: dict[str, Any], block_id: str) -> dict[str, Any]:
    found = values.get(block_id, {}).get(_action_id(block_id))
    return found if isinstance(found, dict) else {}


def _chosen(state: dict[str, Any], question: Question) -> tuple[str, ...] | None:
    """The option ids chosen; None when a value is not one of the question's options."""
    picked = state.get("selected_options")
    if picked is None:
        one = state.get("selected_option")
        picked = [one] if one else []
    ids: list[str] = []
    for option in picked:
        try:
            j = int(str(option.get("value")))
        except (TypeError, ValueError, AttributeError):
            return None
        if not 0 <= j < len(question.options):
            return None
        ids.append(question.options[j].id)
    return tuple(ids)


def read_submission(form: QuestionForm, values: dict[str, Any]) -> dict[str, Answer] | Errors:
    """The answers of a submitted modal (``view.state.values``), or what to show in place."""
    answers: dict[str, Answer] = {}
    errors: dict[str, str] = {}
    for index, item in enumerate(form.questions):
        question = item.question
        block_id = f"q{index}"
        if question.secret or not question.options:
            text = str(_state(values, block_id).get("value") or "").strip()
            if not text:
                if question.required:
                    errors[block_id] = "This question needs an answer."
                continue
            if question.secret:
                try:
                    answers[question.id] = parse_answers([question], text, private=True)[
                        question.id
                    ]
                except (InvalidDecision, KeyError) as exc:
                    errors[block_id] = clip(f"Not taken: {exc}", 150)  # never echoes it
                continue
            answers[question.id] = Answer(other=text)
            continue
        chosen = _chosen(_state(values, block_id), question)
        if chosen is None:
            errors[block_id] = "Choose one of the options shown."
            continue
        other = ""
        if question.allow_other:
            other = str(_state(values, f"q{index}.other").get("value") or "").strip()
        if other and chosen and not question.multi:
            errors[f"q{index}.other"] = "Choose an option or type another answer, not both."
            continue
        if not chosen and not other:
            if question.required:
                errors[block_id] = "This question needs an answer."
            continue
        answers[question.id] = Answer(option_ids=chosen, other=other or None)
    return Errors(errors=errors) if errors else answers
