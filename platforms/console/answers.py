"""A submitted question form, read into answers keyed by question id (pure).

Fields: ``q.<question id>`` (one per chosen option: radio buttons or checkboxes; the value
is the option id) and ``o.<question id>`` (the "other" text, or the answer to a question
without options). Nothing is checked here beyond the shape: whether the answers fit the
questions (required, single choice, known options) is the ledger's decision, so that the
console and every other platform are held to the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.domain import Answer, Question

__all__ = ["answers_from_form"]


def answers_from_form(
    questions: Sequence[Question], values: Callable[[str], list[str]]
) -> dict[str, Answer]:
    """``values(name)`` is every value posted under ``name`` (``MultiDict.getall``)."""
    answers: dict[str, Answer] = {}
    for question in questions:
        option_ids = tuple(dict.fromkeys(values(f"q.{question.id}")))
        typed = [text.strip() for text in values(f"o.{question.id}") if text.strip()]
        other = typed[0] if typed else None
        if option_ids or other is not None:
            answers[question.id] = Answer(option_ids=option_ids, other=other)
    return answers
