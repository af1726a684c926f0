"""Cards drawn as a Discord embed and buttons (pure): within Discord's limits, every button
carrying its token as ``agw:<token>``, nothing the agent wrote able to ping anyone, and a new
card naming who may decide it once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.cards import (
    At,
    Attachment,
    ButtonStyle,
    Card,
    CardAction,
    CodeBlock,
    DiffBlock,
    FieldsBlock,
    FormQuestion,
    QuestionForm,
)
from gateway.domain import Effect, Option, Question, Scope
from platforms.discord.render import (
    BUTTONS_PER_ROW,
    CUSTOM_ID_MAX,
    DESCRIPTION_MAX,
    EMBED_TOTAL_MAX,
    LABEL_MAX,
    ROWS_MAX,
    answers_by_buttons,
    custom_id,
    mention_line,
    no_pings,
    render_card,
    token_of,
)
from tests.servers.discord_wire import check_message

TOKEN = "a1:Xk3f9Qa2:0:7:Hc2mB0q1n8Zk"


def allow_deny() -> tuple[CardAction, ...]:
    return (
        CardAction(label="Allow once", token="t0", style=ButtonStyle.PRIMARY, effect=Effect.ALLOW),
        CardAction(
            label="Always allow `git status`",
            token="t1",
            effect=Effect.ALLOW,
            scope=Scope.ALWAYS,
            explanation="Allows it now and from now on, without asking",
            rule="git status",
        ),
        CardAction(label="Deny", token="t2", style=ButtonStyle.DANGER, effect=Effect.DENY),
    )


def buttons(drawn: Any) -> list[dict[str, Any]]:
    return [button for row in drawn.components for button in row["components"]]


def embed_length(embed: dict[str, Any]) -> int:
    fields = embed.get("fields", [])
    return (
        len(embed.get("title", ""))
        + len(embed.get("description", ""))
        + len(embed.get("footer", {}).get("text", ""))
        + sum(len(f["name"]) + len(f["value"]) for f in fields)
    )


def within_limits(drawn: Any) -> None:
    embed = drawn.embed
    assert len(embed.get("description", "")) <= DESCRIPTION_MAX
    assert embed_length(embed) <= EMBED_TOTAL_MAX
    assert len(embed.get("fields", [])) <= 25
    assert len(drawn.components) <= ROWS_MAX
    for row in drawn.components:
        assert row["type"] == 1 and 1 <= len(row["components"]) <= BUTTONS_PER_ROW
        for button in row["components"]:
            assert len(button["label"]) <= LABEL_MAX
            assert len(button["custom_id"]) <= CUSTOM_ID_MAX


def test_a_custom_id_carries_the_token_and_nothing_else_is_ours() -> None:
    assert custom_id(TOKEN) == "agw:" + TOKEN
    assert token_of(custom_id(TOKEN)) == TOKEN
    assert token_of("agw:") is None
    assert token_of("other:" + TOKEN) is None
    assert token_of("agw:" + "x" * 100) is None
    with pytest.raises(ValueError, match="100"):
        custom_id("x" * 97)


def test_an_approval_card_is_one_embed_with_a_button_per_action() -> None:
    card = Card(
        title="Run a command?",
        summary="The agent wants to list files, @everyone",
        blocks=(
            CodeBlock(code="ls <@123> && echo ```", language="sh"),
            FieldsBlock(fields=(("Directory", "/srv/web"),)),
        ),
        actions=allow_deny(),
        status=("Waiting for a decision",),
    )
    drawn = render_card(card)
    within_limits(drawn)
    assert [b["custom_id"] for b in buttons(drawn)] == ["agw:t0", "agw:t1", "agw:t2"]
    assert [b["style"] for b in buttons(drawn)] == [1, 2, 4]
    embed = drawn.embed
    assert embed["title"] == "Run a command?"
    assert embed["footer"] == {"text": "Waiting for a decision"}
    assert embed["fields"] == [{"name": "Directory", "value": "/srv/web", "inline": True}]
    description = embed["description"]
    assert "@everyone" not in description and "@\u200beveryone" in description
    assert "```sh\nls <@123> && echo ``\u200b`\n```" in description  # code kept as typed
    # a lasting grant says what it does and the rule whole, once
    assert "**Always allow \\`git status\\`**: Allows it now and from now on" in description
    assert description.count("```\ngit status\n```") == 1
    assert drawn.content == "" and drawn.allowed_mentions == no_pings()


def test_a_new_card_names_its_approvers_once_and_lets_only_them_be_pinged() -> None:
    card = Card(title="Run?", actions=allow_deny(), status=("Waiting",))
    drawn = render_card(card, approvers=("111", "role:901"))
    assert drawn.content == "<@111> <@&901>: waiting for you."
    assert drawn.allowed_mentions == {"parse": [], "users": ["111"], "roles": ["901"]}
    assert "<@111>" not in drawn.embed.get("description", "")
    decided = render_card(Card(title="Run?", status=("Allowed by @ann",)), approvers=("111",))
    assert decided.content == "" and decided.allowed_mentions == no_pings()
    assert decided.components == []
    assert mention_line(("role:x", "bob")) == ("", no_pings())


def test_a_body_too_long_moves_the_code_to_a_file_and_says_so() -> None:
    diff = "+" + "x" * 9000
    card = Card(
        title="Apply changes?",
        summary="Edits one file",
        blocks=(DiffBlock(diff=diff, paths=("a.py",)),),
        actions=allow_deny(),
        attachments=(Attachment(name="plan.md", content="plan"),),
    )
    drawn = render_card(card)
    within_limits(drawn)
    assert [f.name for f in drawn.files] == ["plan.md", "changes.diff"]
    assert drawn.files[1].content == diff
    assert "*The diff is attached as changes.diff.*" in drawn.embed["description"]


def test_a_body_too_long_without_code_is_attached_whole_and_cut() -> None:
    card = Card(title="Plan", summary="word " * 3000, actions=allow_deny())
    drawn = render_card(card)
    within_limits(drawn)
    assert [f.name for f in drawn.files] == ["request.md"]
    assert drawn.files[0].content.startswith("word word")
    assert drawn.embed["description"].endswith("the whole request is attached as request.md.*")


def test_facts_past_the_embed_budget_go_to_the_body_not_lost() -> None:
    facts = tuple((f"Key {i}", "v" * 900) for i in range(30))
    drawn = render_card(Card(title="Facts", blocks=(FieldsBlock(fields=facts),)))
    within_limits(drawn)
    shown = {f["name"] for f in drawn.embed.get("fields", [])}
    described = drawn.embed["description"] + "".join(f.content for f in drawn.files)
    for key, _ in facts:
        assert key in shown or f"**{key}**" in described


def form(*questions: Question) -> QuestionForm:
    return QuestionForm(
        questions=tuple(
            FormQuestion(
                question=q, option_tokens=tuple(f"o{i}.{j}" for j in range(len(q.options)))
            )
            for i, q in enumerate(questions)
        ),
        submit_token="sub",
    )


def options(n: int) -> tuple[Option, ...]:
    return tuple(Option(id=f"o{j}", label=f"Option {j}") for j in range(n))


def test_one_single_choice_question_is_answered_by_its_option_buttons() -> None:
    question = Question(id="q", header="Pick", text="Which one?", options=options(3))
    drawn = render_card(Card(title="Question", form=form(question)))
    within_limits(drawn)
    assert [b["custom_id"] for b in buttons(drawn)] == ["agw:o0.0", "agw:o0.1", "agw:o0.2"]
    assert "**Pick** Which one?" in drawn.embed["description"]
    other = Question(id="q", header="Pick", text="?", options=options(3), allow_other=True)
    drawn = render_card(Card(title="Question", form=form(other)))
    assert [b["label"] for b in buttons(drawn)][-1] == "Answer…"
    assert buttons(drawn)[-1]["custom_id"] == "agw:sub"


@pytest.mark.parametrize(
    "question",
    [
        Question(id="q", header="", text="?", options=options(26)),
        Question(id="q", header="", text="?", options=options(3), multi=True),
        Question(id="q", header="", text="Password?", secret=True),
        Question(id="q", header="", text="Say something"),
    ],
)
def test_every_other_form_is_one_answer_button_that_opens_a_modal(question: Question) -> None:
    card = Card(title="Question", form=form(question))
    assert not answers_by_buttons(card)
    drawn = render_card(card)
    within_limits(drawn)
    assert [(b["label"], b["custom_id"]) for b in buttons(drawn)] == [("Answer…", "agw:sub")]


def test_a_secret_question_says_where_it_is_answered() -> None:
    secret = Question(id="q", header="Token", text="Your API token?", secret=True)
    drawn = render_card(Card(title="Question", form=form(secret)))
    assert "answered in a form only you see" in drawn.embed["description"]


def test_twenty_five_options_fill_five_rows_of_five() -> None:
    question = Question(id="q", header="", text="?", options=options(25))
    drawn = render_card(Card(title="Question", form=form(question)))
    within_limits(drawn)
    assert [len(row["components"]) for row in drawn.components] == [5] * 5


def test_the_status_time_is_the_embed_timestamp_and_the_hash_a_details_field() -> None:
    """Discord draws no ``<t:…>`` in a footer: the footer keeps the words, the embed's
    ``timestamp`` the instant (shown beside it in each reader's zone); the hash is a field."""
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    card = Card(
        title="Run?",
        status=("Approved by @ann", At(at), " · sent to the agent"),
        content_hash="5a0426e840",
    )
    drawn = render_card(card)
    assert drawn.embed["footer"] == {"text": "Approved by @ann · sent to the agent"}
    assert drawn.embed["timestamp"] == "2026-12-01T09:30:00+00:00"
    assert drawn.embed["fields"][-1] == {
        "name": "Details",
        "value": "content hash 5a0426e840",
        "inline": True,
    }
    assert check_message({"embeds": [drawn.embed]}) == {}
    # the fake refuses a time Discord could not place in a reader's zone
    naive = {**drawn.embed, "timestamp": "2026-12-01T09:30:00"}
    assert "embeds.0.timestamp" in check_message({"embeds": [naive]})


def test_the_details_field_never_costs_a_fact() -> None:
    """25 facts and the hash: the details field is the 25th field, the fact it displaced is
    in the body."""
    facts = tuple((f"k{i}", f"v{i}") for i in range(25))
    card = Card(title="Run?", blocks=(FieldsBlock(fields=facts),), content_hash="5a0426e840")
    drawn = render_card(card)
    assert len(drawn.embed["fields"]) == 25
    assert drawn.embed["fields"][-1]["name"] == "Details"
    assert "**k24**: v24" in drawn.embed["description"]
