"""A question card as each platform draws it (issue 29): the question said once, its options'
descriptions kept in Slack's modal, and the way to refuse it last."""

from __future__ import annotations

from typing import Any

from adapters.claude_requests import open_can_use_tool
from adapters.opencode import question_request
from gateway.cards import QuestionForm
from platforms.slack.forms import FormPlace, build_modal
from tests.card_samples import draw, pending
from tests.servers.fake_anthropic import CHECKS, COLOR
from tests.servers.slack_wire import check_view

PLACE = FormPlace(token="tok-s", channel="C1", thread=None, message_ts="1.2")


def claude_color() -> Any:
    request = {"tool_name": "AskUserQuestion", "input": {"questions": [COLOR]}}
    return open_can_use_tool("ctl:1", request).request


def test_slack_and_discord_say_a_single_question_once() -> None:
    item = pending(claude_color())
    for platform in ("slack", "discord", "telegram", "console"):
        drawn = draw(item, platform)
        assert drawn.text.count("Which color should the button be?") == 1, (platform, drawn.text)
        # the header is the title; on the console it also labels the form's field
        assert drawn.text.count("Color") == (2 if platform == "console" else 1), drawn.text
        assert "Warm" in drawn.text and "Cool" in drawn.text  # the options' descriptions


def test_slacks_modal_keeps_the_options_descriptions() -> None:
    form = draw(pending(claude_color()), "slack").card.form
    assert isinstance(form, QuestionForm)
    modal = build_modal(form, PLACE, title="Color")
    check_view(modal)  # Slack takes it
    [radio] = [b["element"] for b in modal["blocks"] if b.get("type") == "input"][:1]
    assert radio["type"] == "radio_buttons"
    assert [(o["text"]["text"], o["description"]["text"]) for o in radio["options"]] == [
        ("Red", "Warm"),
        ("Blue", "Cool"),
    ]


def test_a_select_of_many_options_says_each_description_after_its_label() -> None:
    many = {
        **CHECKS,
        "options": [{"label": f"Check {n}", "description": f"tool {n}"} for n in range(12)],
    }
    request = {"tool_name": "AskUserQuestion", "input": {"questions": [many]}}
    form = draw(pending(open_can_use_tool("ctl:2", request).request), "slack").card.form
    assert isinstance(form, QuestionForm)
    modal = build_modal(form, PLACE, title="Checks")
    check_view(modal)  # a select has no descriptions of its own
    [select] = [b["element"] for b in modal["blocks"] if b.get("type") == "input"][:1]
    assert select["type"] == "multi_static_select"
    assert select["options"][3]["text"]["text"] == "Check 3: tool 3"


def test_dismiss_is_after_the_options_and_other_on_every_platform() -> None:
    asked = [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [
                {"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cool"},
            ],
        }
    ]
    item = pending(question_request("q:1", asked))
    expected = {
        "telegram": ["Red", "Blue", "✎ Other…", "Dismiss"],
        "slack": ["Red", "Blue", "Answer…", "Dismiss"],
        "discord": ["Red", "Blue", "Answer…", "Dismiss"],
        "console": ["Submit answers", "Dismiss"],
    }
    for platform, labels in expected.items():
        assert draw(item, platform).labels == labels, platform
