"""Question forms in Slack modals: built within Slack's limits (the fake Slack's checker),
read back purely, and through the gateway: "Answer…" opens a modal only for someone who may
answer, a missing answer is refused in place, a secret reaches the agent and no screen."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.cards import FormQuestion, QuestionForm
from gateway.domain import Answer, Option, Question
from platforms.slack.forms import Errors, FormPlace, build_modal, place_of, read_submission
from platforms.slack.platform import SLACK_LIMITS
from tests.platform_contract.contract import FORM, SECRET, requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack
from tests.servers.slack_people import state_values
from tests.servers.slack_wire import check_view, inputs_of
from tests.slack_harness import ALICE, CAROL, GENERAL, on_slack, read, slack_config

pytestmark = pytest.mark.timeout(60)

PLACE = FormPlace(token="a1:tok:s", channel="C0GEN", thread="1.000001", message_ts="2.000001")
MANY = tuple(Option(id=f"o{i}", label=f"Option {i} " + "x" * 90) for i in range(40))


def form_of(*questions: Question) -> QuestionForm:
    return QuestionForm(
        questions=tuple(FormQuestion(question=q) for q in questions), submit_token="a1:tok:s"
    )


def test_each_kind_of_question_is_its_input_and_the_modal_is_within_slacks_limits() -> None:
    form = form_of(
        *FORM.questions,
        Question(id="big", header="Big", text="One of many", options=MANY),
        Question(id="bigm", header="Bigm", text="Some of many", options=MANY, multi=True),
        Question(id="pick", header="Pick", text="Or say", options=MANY[:3], allow_other=True),
        *SECRET.questions,
    )
    view = build_modal(form, PLACE, title="The agent asks a very long question title")
    check_view(view)
    kinds = [(b["block_id"], e["type"], b["optional"]) for b, e in inputs_of(view["blocks"])]
    assert kinds == [
        ("q0", "radio_buttons", False),
        ("q1", "checkboxes", False),
        ("q2", "plain_text_input", False),
        ("q3", "static_select", False),
        ("q4", "multi_static_select", False),
        ("q5", "radio_buttons", True),  # with "other": either one, checked on submit
        ("q5.other", "plain_text_input", True),
        ("q6", "plain_text_input", False),
    ]
    assert len(view["title"]["text"]) <= 24
    assert place_of(view) == PLACE


def test_a_submission_is_read_as_answers_or_refused_in_place() -> None:
    form = form_of(
        *FORM.questions,
        Question(id="pick", header="Pick", text="Or say", options=MANY[:3], allow_other=True),
    )
    blocks = build_modal(form, PLACE, title="t")["blocks"]
    answers = read_submission(
        form,
        state_values(
            blocks,
            {"q0": "Red", "q1": ["Red", "Blue"], "q2": "staging", "q3.other": "my own"},
        ),
    )
    assert answers == {
        "env": Answer(option_ids=("red",)),
        "langs": Answer(option_ids=("red", "blue")),
        "note": Answer(other="staging"),
        "pick": Answer(other="my own"),
    }
    missing = read_submission(form, state_values(blocks, {"q0": "Red", "q1": ["Red"]}))
    assert isinstance(missing, Errors)
    assert set(missing.errors) == {"q2", "q3"}  # nothing defaulted


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_a_form_is_answered_in_a_modal_and_a_stranger_gets_none(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "form")
        card = await slack.card(GENERAL, said.ts)
        assert card.labels == ["Answer…"]
        refused = await slack.click(CAROL, card, "Answer…")
        assert read(refused.text) == "You may not decide this request."
        assert fake.modals(CAROL) == []

        await fake.click(ALICE, card, "Answer…")
        modal = await fake.wait_for(lambda: fake.modals(ALICE))
        assert [m.title for m in modal] == ["The agent asks"]
        # Slack's client will not send it without the required answers
        assert await fake.submit(ALICE, {"Env": "Red"}) is None
        assert set(modal[0].errors) == {"q1", "q2"}
        sent = await fake.submit(ALICE, {"Env": "Green", "Langs": ["Red", "Blue"], "Note": "hi"})
        assert sent is not None
        await sent.settled()
        assert modal[0].closed
        await fake.wait_for(lambda: launcher.received)
        await fake.wait_for(lambda: not card.labels and "Answered" in card.seen)
    assert launcher.received[0].answers == {
        "env": Answer(option_ids=("green",)),
        "langs": Answer(option_ids=("red", "blue")),
        "note": Answer(other="hi"),
    }


async def test_a_secret_is_typed_in_a_modal_and_never_shown(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "secret")
        card = await slack.card(GENERAL, said.ts)
        await fake.click(ALICE, card, "Answer…")
        await fake.wait_for(lambda: fake.modals(ALICE))
        sent = await fake.submit(ALICE, {"Token": "hunter2-deploy"})
        assert sent is not None
        await sent.settled()
        await fake.wait_for(lambda: launcher.received)
        await fake.wait_for(lambda: not card.labels)
    assert launcher.received[0].answers == {"token": Answer(other="hunter2-deploy")}
    shown = [m.seen for m in fake.replies(GENERAL, said.ts)]
    shown += [e.text for e in fake.ephemeral]
    assert not any("hunter2" in text for text in shown)
