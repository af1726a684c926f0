"""The shared form drafts (platforms/form_drafts.py) on their own, as a platform other than
Telegram would keep them: forms by a card message key of its own (a channel and a message
timestamp), each person's answers apart, what a submit hands to ``Inbox.on_form``, and the
bounds."""

from __future__ import annotations

import os
from dataclasses import replace

from gateway.action_tokens import TOKEN_MAX_BYTES, token_bytes, token_factory
from gateway.cards import Card, FormQuestion, QuestionForm
from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.domain import Actor, ConversationRef, Option, Question
from platforms.form_drafts import (
    MAX_DRAFTS,
    MAX_FORMS,
    MemoryForms,
    OpenPrompt,
    Redraw,
    Refuse,
    Submit,
)
from platforms.telegram.render import local_data, parse_local_data

HERE = ConversationRef(platform="chat", space="T1", channel="C1", thread="1700000000.0001")
ALICE = Actor(platform="chat", user_id="U1", display="alice")
BOB = Actor(platform="chat", user_id="U2", display="bob")
SIZES = (Option(id="s", label="Small"), Option(id="l", label="Large"))
EXTRAS = (Option(id="c", label="Cheese"), Option(id="o", label="Olives"))

MessageKey = tuple[str, str]  # (channel, message ts)


def card_of(*questions: Question) -> Card:
    items = tuple(
        FormQuestion(question=q, option_tokens=tuple(f"o{i}.{j}" for j in range(len(q.options))))
        for i, q in enumerate(questions)
    )
    return Card(title="Order", form=QuestionForm(questions=items, submit_token="submit"))


ORDER = card_of(
    Question(id="size", header="Size", text="Which size?", options=SIZES),
    Question(id="extras", header="Extras", text="Anything on it?", options=EXTRAS, multi=True),
    Question(id="note", header="Note", text="A note?", allow_other=True, required=False),
)


async def test_each_person_answers_in_their_own_draft_and_submits_only_theirs() -> None:
    forms: MemoryForms[MessageKey] = MemoryForms()
    form = forms.new(HERE, ORDER)
    assert form is not None and not form.direct
    forms.keep(("C1", "1700000001.0002"), form)

    assert form.choose(ALICE, 0, 1) == Redraw(ack="● Large")
    assert form.choose(BOB, 0, 0) == Redraw(ack="● Small")
    assert form.choose(ALICE, 1, 0) == Redraw(ack="☑ Cheese")
    assert form.choose(ALICE, 1, 1) == Redraw(ack="☑ Olives")
    assert form.choose(ALICE, 1, 0) == Redraw(ack="☐ Cheese")
    assert form.draft_shown() is form.draft(ALICE)  # the last to act is shown
    assert form.ask_text(ALICE, 2) == OpenPrompt(question=2, private=False)
    assert form.typed(ALICE, 2, "well done", in_private=False) == Redraw(ack="Answer noted.")

    submitted = form.submit(ALICE)
    assert isinstance(submitted, Submit) and not submitted.private
    assert {k: (a.option_ids, a.other) for k, a in submitted.answers.items()} == {
        "size": (("l",), None),
        "extras": (("o",), None),
        "note": ((), "well done"),
    }
    await forms.drop_draft(("C1", "1700000001.0002"), ALICE)
    # Alice's answers are not Bob's: his own draft still misses a required answer
    assert form.submit(BOB) == Refuse(ack="Answer “Extras” first.")
    assert form.draft_shown() is form.draft(BOB) and form.draft(BOB).step == 1
    assert ALICE.user_id not in form.drafts


def test_a_secret_is_taken_only_in_private_and_a_submit_says_so() -> None:
    secret = card_of(Question(id="t", header="Token", text="Token?", allow_other=True, secret=True))
    form = MemoryForms[MessageKey]().new(HERE, secret)
    assert form is not None and not form.direct
    assert form.ask_text(ALICE, 0) == OpenPrompt(question=0, private=True)
    assert isinstance(form.typed(ALICE, 0, "hunter2", in_private=False), Refuse)
    done = form.typed(ALICE, 0, "hunter2", in_private=True)
    assert isinstance(done, Submit) and done.private and done.answers["t"].other == "hunter2"


async def test_forms_and_drafts_are_bounded_and_each_dropped_form_is_said() -> None:
    dropped: list[MessageKey] = []
    forms: MemoryForms[MessageKey] = MemoryForms(on_forget=dropped.append)
    keys = [("C1", f"{n}.0") for n in range(MAX_FORMS + 1)]
    for key in keys:
        form = forms.new(HERE, ORDER)
        assert form is not None
        forms.keep(key, form)
    assert dropped == [keys[0]] and forms.peek(keys[0]) is None

    form = await forms.get(keys[-1], ALICE)
    assert form is not None
    people = [
        Actor(platform="chat", user_id=f"U{n}", display=f"p{n}") for n in range(MAX_DRAFTS + 1)
    ]
    for person in people:
        form.choose(person, 0, 0)
    assert len(form.drafts) == MAX_DRAFTS and people[0].user_id not in form.drafts

    forms.update(keys[-1], HERE, Card(title="Order", status=("Decided",)))  # no questions left
    assert dropped == [keys[0], keys[-1]] and forms.peek(keys[-1]) is None
    forms.update(("C9", "1.0"), HERE, ORDER)  # a card sent by an earlier process
    assert forms.peek(("C9", "1.0")) is not None


def test_a_form_is_named_by_its_request_on_every_host_and_its_buttons_fit_telegram() -> None:
    assert ORDER.form is not None
    key = os.urandom(HMAC_KEY_BYTES)
    longest = "x" * (TOKEN_MAX_BYTES - token_bytes(0))  # the longest request id a token takes
    submit = token_factory(key, longest, 1)("s")
    card = replace(ORDER, form=replace(ORDER.form, submit_token=submit))
    on_a = MemoryForms[MessageKey]().new(HERE, card)
    on_b = MemoryForms[MessageKey]().new(HERE, card)  # another process: the same id
    assert on_a is not None and on_b is not None and on_a.form_id == on_b.form_id == longest
    data = local_data(on_a.form_id, "t12")
    assert len(data.encode()) <= 64 and parse_local_data(data) == (longest, "t12")
    other = MemoryForms[MessageKey]().new(HERE, ORDER)  # no token of ours: a digest
    assert other is not None and parse_local_data(local_data(other.form_id, "n"))
