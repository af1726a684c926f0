"""Question forms as Discord modals (pure): within a modal's limits, paged past five
components, a submission validated (nothing defaulted, a secret never echoed or shown
again), a page reopened pre-filled, and each person's own draft."""

from __future__ import annotations

import pytest

from gateway.cards import Card, FormQuestion, QuestionForm
from gateway.domain import Actor, Answer, ConversationRef, Option, Question
from platforms.discord.forms import (
    COMPONENTS_MAX,
    DESCRIPTION_MAX,
    LABEL_MAX,
    TITLE_MAX,
    answers_of,
    build_page,
    missing,
    pages_of,
    read_page,
)
from platforms.form_drafts import Draft, MemoryForms

ANN = Actor(platform="discord", user_id="111", display="@ann")
HERE = ConversationRef(platform="discord", space="1", channel="2")


def options(n: int) -> tuple[Option, ...]:
    return tuple(
        Option(id=f"id{j}", label=f"Option {j}", description=f"about {j}") for j in range(n)
    )


def form(*questions: Question) -> QuestionForm:
    return QuestionForm(
        questions=tuple(FormQuestion(question=q) for q in questions), submit_token="sub"
    )


RADIO = Question(id="color", header="Colour", text="Which colour?", options=options(3))
CHECK = Question(id="tags", header="Tags", text="Which tags?", options=options(4), multi=True)
SELECT = Question(id="city", header="City", text="Which city?", options=options(12))
OTHER = Question(id="name", header="Name", text="A name?", options=options(2), allow_other=True)
SECRET = Question(id="key", header="API key", text="Your key?", secret=True)
EVERYTHING = form(RADIO, CHECK, SELECT, OTHER, SECRET)


def test_each_question_is_the_input_its_shape_asks_for() -> None:
    first = build_page(EVERYTHING, 0, title="Codex asks")
    kinds = [(i.kind, i.custom_id) for i in first.inputs]
    assert kinds == [
        ("radio", "q0"),
        ("checkbox", "q1"),
        ("select", "q2"),  # twelve options: more than a radio group takes
        ("radio", "q3"),
        ("text", "q3.other"),  # "other": a second input of the same question
    ]
    radio, checkbox, select = first.inputs[:3]
    assert (radio.label, radio.description) == ("Colour", "Which colour?")
    assert radio.required and (radio.min_values, radio.max_values) == (1, 1)
    assert [o[1] for o in radio.options] == ["0", "1", "2"]
    assert (checkbox.min_values, checkbox.max_values) == (1, 4)
    assert len(select.options) == 12 and select.max_values == 1


def test_more_than_five_components_are_pages_and_a_question_is_never_split() -> None:
    assert pages_of(EVERYTHING) == [(0, 1, 2, 3), (4,)]
    assert pages_of(form(RADIO, OTHER, SELECT, OTHER)) == [(0, 1, 2), (3,)]  # not split
    first = build_page(EVERYTHING, 0, title="Codex asks")
    name, other = first.inputs[3:]
    assert (name.kind, name.required) == ("radio", False)  # "other" may answer it instead
    assert (other.kind, other.custom_id, other.required) == ("text", "q3.other", False)
    second = build_page(EVERYTHING, 1, title="Codex asks")
    assert second.title == "Codex asks (2/2)" and second.count == 2
    (secret,) = second.inputs
    assert (secret.kind, secret.paragraph, secret.required) == ("text", False, True)
    assert "never shown" in secret.placeholder and secret.description == "Your key?"
    for page in (build_page(EVERYTHING, 0, title="x" * 80), second):
        assert len(page.inputs) <= COMPONENTS_MAX
        assert len(page.title) <= TITLE_MAX
        for item in page.inputs:
            assert len(item.label) <= LABEL_MAX and len(item.description) <= DESCRIPTION_MAX
    with pytest.raises(ValueError):
        build_page(EVERYTHING, 2, title="x")


def test_a_question_too_long_for_a_label_is_shown_above_it_and_counted() -> None:
    long = Question(id="q", header="Why", text="because " * 40, options=options(3))
    page = build_page(form(long), 0, title="t")
    assert [i.kind for i in page.inputs] == ["display", "radio"]
    assert page.inputs[0].text.startswith("because because")
    assert page.inputs[1].description == ""


def test_too_many_options_for_a_select_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="26 options"):
        build_page(form(Question(id="q", header="", text="?", options=options(26))), 0, title="t")


def test_a_missing_answer_is_named_and_the_page_reopens_with_what_was_given() -> None:
    page = build_page(EVERYTHING, 0, title="t")
    draft = Draft(actor=ANN)
    read = read_page(EVERYTHING, page, {"q0": "1", "q1": [], "q2": ["11"]}, draft)
    assert not read.complete
    assert read.missing == ("Tags", "Name") and read.refused == ()
    again = build_page(EVERYTHING, 0, title="t", draft=draft)
    assert again.inputs[0].defaults == ("1",)
    assert again.inputs[1].defaults == ()
    assert again.inputs[2].defaults == ("11",)
    values = {"q0": "1", "q1": ["0", "3"], "q2": ["11"], "q3.other": "Zed"}
    read = read_page(EVERYTHING, again, values, draft)
    assert read.complete
    assert missing(EVERYTHING, draft) == (4,)  # the next page's


def test_a_forged_value_or_an_option_and_other_together_is_refused() -> None:
    page = build_page(EVERYTHING, 0, title="t")
    values = {"q0": "7", "q1": ["0"], "q2": ["1"], "q3": "0", "q3.other": "Zed"}
    read = read_page(EVERYTHING, page, values, Draft(actor=ANN))
    assert read.refused == (
        "“Colour”: choose one of the options shown.",
        "“Name”: choose an option or type another, not both.",
    )
    assert read.missing == ()  # said once, not twice


def test_a_whole_form_gives_every_answer_and_the_secret_is_never_shown_again() -> None:
    draft = Draft(actor=ANN)
    first = build_page(EVERYTHING, 0, title="t")
    second = build_page(EVERYTHING, 1, title="t")
    values = {"q0": "2", "q1": ["1"], "q2": ["5"], "q3": [], "q3.other": "Zed"}
    assert read_page(EVERYTHING, first, values, draft).complete
    assert read_page(EVERYTHING, second, {"q4": "sk-secret-123"}, draft).complete
    assert answers_of(EVERYTHING, draft) == {
        "color": Answer(option_ids=("id2",)),
        "tags": Answer(option_ids=("id1",)),
        "city": Answer(option_ids=("id5",)),
        "name": Answer(other="Zed"),
        "key": Answer(other="sk-secret-123"),
    }
    assert build_page(EVERYTHING, 0, title="t", draft=draft).inputs[4].value == "Zed"
    reopened = build_page(EVERYTHING, 1, title="t", draft=draft)
    assert reopened.inputs[0].value == ""  # a secret is never shown again


def test_optional_questions_may_be_left_empty_and_nothing_is_defaulted() -> None:
    optional = Question(id="o", header="Notes", text="Anything else?", required=False)
    page = build_page(form(optional), 0, title="t")
    assert page.inputs[0].required is False and page.inputs[0].paragraph
    draft = Draft(actor=ANN)
    assert read_page(form(optional), page, {}, draft).complete
    assert answers_of(form(optional), draft) == {}


async def test_drafts_by_submit_token_are_each_persons_and_go_when_decided() -> None:
    forms: MemoryForms[str] = MemoryForms()
    asked = forms.new(HERE, Card(title="t", form=form(RADIO)))
    assert asked is not None
    forms.keep("sub", asked)
    found = await forms.get("sub", ANN)
    assert found is not None
    mine = found.draft(ANN)
    again = await forms.get("sub", ANN)
    assert again is not None and again.drafts[ANN.user_id] is mine
    bob = Actor(platform="discord", user_id="222")
    assert found.draft(bob) is not mine
    await forms.drop_draft("sub", ANN)  # handed over: hers is gone, Bob's is not
    assert set(found.drafts) == {"222"}
    forms.update("sub", HERE, Card(title="t", status=("Answered",)))  # decided
    assert await forms.get("sub", ANN) is None
