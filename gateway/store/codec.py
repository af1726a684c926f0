"""JSON columns of the ledger: an interaction's detail, actions, questions and answers.

Secret answers are redacted here, before anything reaches SQL: an answer to a question
marked ``secret`` is stored as ``Answer(option_ids=(), other=SECRET_MARKER)``. Neither the
chosen options nor the text are kept (not even hashed: a short secret's hash is as good as
the secret to a guesser), so the ledger, its WAL and its backups never hold one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gateway.domain import (
    Action,
    Answer,
    Command,
    Decision,
    Detail,
    Effect,
    FileChange,
    Network,
    Option,
    OutgoingFile,
    Permissions,
    Plan,
    Question,
    Scope,
    Text,
)
from gateway.errors import StoreError

__all__ = [
    "SECRET_MARKER",
    "decode_actions",
    "decode_answers",
    "decode_detail",
    "decode_questions",
    "dumps",
    "encode_actions",
    "encode_answers",
    "encode_detail",
    "encode_questions",
    "redact_secret_answers",
]

SECRET_MARKER = "[secret answer: not stored]"

# Decoding a request's detail, actions and questions is memoised on the stored text: the
# values are frozen (tuples of frozen dataclasses), the text of a row never changes once
# written, and a request is read several times per approval (its card, the click, the
# decision, the delivery) while most requests of an agent offer the same actions. Texts
# longer than _MEMO_MAX_CHARS (a big diff) are decoded each time rather than kept.
_MEMO_ENTRIES = 512
_MEMO_MAX_CHARS = 4096


_T = TypeVar("_T")


def _memoised(decode: Callable[[str], _T]) -> Callable[[str], _T]:
    cached = functools.lru_cache(maxsize=_MEMO_ENTRIES)(decode)

    @functools.wraps(decode)
    def read(text: str) -> _T:
        return cached(text) if len(text) <= _MEMO_MAX_CHARS else decode(text)

    return read


def dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def encode_detail(detail: Detail | None) -> str | None:
    if detail is None:
        return None
    match detail:
        case Command():
            body: dict[str, Any] = {
                "type": "command",
                "command": detail.command,
                "cwd": detail.cwd,
                "reason": detail.reason,
                "stdin_for_running_process": detail.stdin_for_running_process,
            }
        case Network():
            body = {
                "type": "network",
                "host": detail.host,
                "protocol": detail.protocol,
                "port": detail.port,
                "reason": detail.reason,
            }
        case FileChange():
            body = {
                "type": "file_change",
                "paths": list(detail.paths),
                "diff": detail.diff,
                "reason": detail.reason,
                "grant_root": detail.grant_root,
            }
        case Permissions():
            body = {
                "type": "permissions",
                "description": detail.description,
                "scope": detail.scope.value,
                "reason": detail.reason,
                "requested": list(detail.requested),
            }
        case Plan():
            body = {"type": "plan", "markdown": detail.markdown}
        case Text():
            body = {"type": "text", "text": detail.text}
        case OutgoingFile():
            body = {
                "type": "outgoing_file",
                "path": detail.path,
                "size": detail.size,
                "media_type": detail.media_type,
                "preview": detail.preview,
                "caption": detail.caption,
                "reason": detail.reason,
            }
    return dumps(body)


def decode_detail(text: str | None) -> Detail | None:
    return None if text is None else _decode_detail(text)


@_memoised
def _decode_detail(text: str) -> Detail:
    body = json.loads(text)
    kind = body["type"]
    if kind == "command":
        return Command(
            command=body["command"],
            cwd=body["cwd"],
            reason=body["reason"],
            stdin_for_running_process=body["stdin_for_running_process"],
        )
    if kind == "network":
        return Network(
            host=body["host"], protocol=body["protocol"], port=body["port"], reason=body["reason"]
        )
    if kind == "file_change":
        return FileChange(
            paths=tuple(body["paths"]),
            diff=body["diff"],
            reason=body["reason"],
            grant_root=body["grant_root"],
        )
    if kind == "permissions":
        return Permissions(
            description=body["description"],
            scope=Scope(body["scope"]),
            reason=body["reason"],
            requested=tuple(body["requested"]),
        )
    if kind == "plan":
        return Plan(markdown=body["markdown"])
    if kind == "text":
        return Text(text=body["text"])
    if kind == "outgoing_file":
        return OutgoingFile(
            path=body["path"],
            size=body["size"],
            media_type=body["media_type"],
            preview=body["preview"],
            caption=body["caption"],
            reason=body["reason"],
        )
    raise StoreError(f"unknown detail type {kind!r} in the ledger")


def encode_actions(actions: tuple[Action, ...]) -> str:
    return dumps(
        [
            {
                "id": a.id,
                "label": a.label,
                "effect": a.effect.value,
                "scope": a.scope.value,
                "description": a.description,
                **({"rule": a.rule} if a.rule else {}),
            }
            for a in actions
        ]
    )


@_memoised
def decode_actions(text: str) -> tuple[Action, ...]:
    return tuple(
        Action(
            id=a["id"],
            label=a["label"],
            effect=Effect(a["effect"]),
            scope=Scope(a["scope"]),
            description=a["description"],
            rule=a.get("rule", ""),
        )
        for a in json.loads(text)
    )


def encode_questions(questions: tuple[Question, ...]) -> str:
    return dumps(
        [
            {
                "id": q.id,
                "header": q.header,
                "text": q.text,
                "options": [
                    {"id": o.id, "label": o.label, "description": o.description} for o in q.options
                ],
                "multi": q.multi,
                "allow_other": q.allow_other,
                "secret": q.secret,
                "required": q.required,
            }
            for q in questions
        ]
    )


@_memoised
def decode_questions(text: str) -> tuple[Question, ...]:
    return tuple(
        Question(
            id=q["id"],
            header=q["header"],
            text=q["text"],
            options=tuple(
                Option(id=o["id"], label=o["label"], description=o["description"])
                for o in q["options"]
            ),
            multi=q["multi"],
            allow_other=q["allow_other"],
            secret=q["secret"],
            required=q["required"],
        )
        for q in json.loads(text)
    )


def redact_secret_answers(decision: Decision, questions: tuple[Question, ...]) -> Decision:
    """``decision`` with every answer to a secret question replaced by the marker."""
    secret_ids = {q.id for q in questions if q.secret}
    if not secret_ids & decision.answers.keys():
        return decision
    answers = {
        question_id: Answer(other=SECRET_MARKER) if question_id in secret_ids else answer
        for question_id, answer in decision.answers.items()
    }
    return Decision(action_id=decision.action_id, answers=answers, message=decision.message)


def encode_answers(answers: Mapping[str, Answer]) -> str:
    return dumps(
        {
            question_id: {"option_ids": list(answer.option_ids), "other": answer.other}
            for question_id, answer in answers.items()
        }
    )


def decode_answers(text: str) -> dict[str, Answer]:
    """A decision's answers: a dict of its own (the Answers in it are frozen and shared)."""
    return dict(_decode_answers(text))


@_memoised
def _decode_answers(text: str) -> dict[str, Answer]:
    return {
        question_id: Answer(option_ids=tuple(a["option_ids"]), other=a["other"])
        for question_id, a in json.loads(text).items()
    }
