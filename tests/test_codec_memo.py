"""The ledger codec and the content hash remember what they decoded (branch cpu36): the same
values as a fresh decode, frozen, and a big text is never kept."""

from __future__ import annotations

import hashlib

import pytest

from gateway.domain import Action, Answer, Command, Effect, FileChange, Option, Question, Scope
from gateway.interactions.content_hash import content_hash
from gateway.store.codec import (
    decode_actions,
    decode_answers,
    decode_detail,
    decode_questions,
    encode_actions,
    encode_answers,
    encode_detail,
    encode_questions,
)
from gateway.store.interaction_rows import interaction_from_row

ACTIONS = (
    Action(id="accept", label="Allow once", effect=Effect.ALLOW),
    Action(
        id="acceptForSession",
        label="Allow for the session",
        effect=Effect.ALLOW,
        scope=Scope.SESSION,
        rule="git status",
    ),
    Action(id="decline", label="Deny", effect=Effect.DENY, description="No."),
)
QUESTIONS = (
    Question(
        id="q",
        header="Pick",
        text="Which one?",
        options=(Option(id="a", label="A"), Option(id="b", label="B", description="bee")),
        secret=True,
    ),
)


def test_a_request_read_again_decodes_to_the_same_frozen_values() -> None:
    actions_json, questions_json = encode_actions(ACTIONS), encode_questions(QUESTIONS)
    detail_json = encode_detail(Command(command="ls -la", cwd="/w", reason="look"))
    assert detail_json is not None
    first = (
        decode_actions(actions_json),
        decode_questions(questions_json),
        decode_detail(detail_json),
    )
    again = (
        decode_actions(actions_json),
        decode_questions(questions_json),
        decode_detail(detail_json),
    )
    assert first == (ACTIONS, QUESTIONS, Command(command="ls -la", cwd="/w", reason="look"))
    assert all(a is b for a, b in zip(first, again, strict=True))  # remembered, not decoded
    assert decode_detail(None) is None


def test_a_big_diff_is_decoded_each_time_and_not_kept() -> None:
    big = FileChange(paths=("a.py",), diff="+x\n" * 20_000, reason="")
    text = encode_detail(big)
    assert text is not None and len(text) > 4096
    first, again = decode_detail(text), decode_detail(text)
    assert first == again == big
    assert first is not again


def test_the_content_hash_is_the_same_remembered_or_not() -> None:
    def by_hand(*parts: str) -> str:
        digest = hashlib.sha256()
        for part in parts:
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "big"))
            digest.update(encoded)
        return digest.hexdigest()

    small = ("approval", "Run a command", "", '{"command": "ls"}', "[]", "[]")
    big = ("approval", "Edit", "", "x" * 40_000, "[]", "[]")
    for parts in (small, small, big, big):
        kind, title, summary, detail_json, actions_json, questions_json = parts
        assert content_hash(
            kind=kind,
            title=title,
            summary=summary,
            detail_json=detail_json,
            actions_json=actions_json,
            questions_json=questions_json,
        ) == by_hand(*parts)
    moved = ("approval", "Run a command", "", '{"command": "l', 's"}[]', "[]")
    assert by_hand(*moved) != by_hand(*small)  # no two splits hash alike, remembered or not


def test_each_read_of_a_decisions_answers_is_a_dict_of_its_own() -> None:
    text = encode_answers({"q": Answer(option_ids=("a",)), "r": Answer(other="free text")})
    first = decode_answers(text)
    first["q"] = Answer(other="changed by a reader")
    del first["r"]
    assert decode_answers(text) == {
        "q": Answer(option_ids=("a",)),
        "r": Answer(other="free text"),
    }


def test_a_row_of_an_unknown_kind_is_refused_as_before() -> None:
    row = {
        "decided_at": None,
        "delivered_at": None,
        "resolved_at": None,
        "id": "i1",
        "session_id": "s1",
        "runtime_epoch": 1,
        "turn_id": None,
        "native_key": "rpc:1",
        "kind": "telepathy",
    }
    with pytest.raises(ValueError, match="telepathy"):
        interaction_from_row(row)
