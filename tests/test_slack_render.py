"""Cards drawn as Block Kit and events read as messages (pure): within Slack's limits as the
fake Slack's checker (tests/servers/slack_wire.py) holds them, with nothing the agent wrote
able to ping or link."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.cards import (
    At,
    ButtonStyle,
    Card,
    CardAction,
    CodeBlock,
    FieldsBlock,
    FormQuestion,
    QuestionForm,
    TextBlock,
)
from gateway.domain import Effect, Option, Question
from gateway.platform import RefusedForGood
from platforms.outbox import MessageGone
from platforms.slack.config import ChannelMode
from platforms.slack.inbound import Foreign, Heard, click_of, command_text, conversation, heard
from platforms.slack.outbox import permanent_refusal
from platforms.slack.render import ANSWER_ACTION, MAX_BLOCKS, render_card
from tests.servers.slack_people import (
    BOT_USER_ID,
    TEAM_ID,
    Person,
    block_actions_payload,
    event_callback,
    message_event,
)
from tests.servers.slack_wire import buttons_of, check_message, seen_text

ALICE = Person("U0ALICE", "alice")


def allow_deny() -> tuple[CardAction, ...]:
    return (
        CardAction(label="Allow once", token="t0", style=ButtonStyle.PRIMARY, effect=Effect.ALLOW),
        CardAction(
            label="Allow for this session",
            token="t1",
            style=ButtonStyle.DEFAULT,
            effect=Effect.ALLOW,
        ),
        CardAction(label="Deny", token="t2", style=ButtonStyle.DANGER, effect=Effect.DENY),
    )


def test_an_approval_card_has_a_button_per_action_with_its_token_and_a_confirm_past_once() -> None:
    card = Card(
        title="Run a command?",
        summary="The agent wants to <!channel> list files & more",
        blocks=(CodeBlock(code="ls <@U0BOB> && rm -rf /tmp/x", language="sh"),),
        actions=allow_deny(),
        status=("Waiting for a decision",),
    )
    drawn = render_card(card)
    check_message(drawn.blocks, drawn.text)
    buttons = [button for _, button in buttons_of(drawn.blocks)]
    assert [b["value"] for b in buttons] == ["t0", "t1", "t2"]
    assert len({b["action_id"] for b in buttons}) == 3
    assert [b.get("style") for b in buttons] == ["primary", None, "danger"]
    assert [("confirm" in b) for b in buttons] == [False, True, False]
    seen = seen_text(drawn.text, drawn.blocks)
    assert "<!channel>" not in seen and "&lt;!channel&gt;" in seen
    assert "&lt;@U0BOB&gt; &amp;&amp; rm" in seen
    assert drawn.blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Run a command?", "emoji": True},
    }
    assert drawn.blocks[-1]["type"] == "context"
    assert seen.splitlines()[-1] == "Waiting for a decision"


def test_a_card_past_every_limit_is_cut_to_fit_and_says_so() -> None:
    long_label = "Allow " + "x" * 200
    card = Card(
        title="T" * 400,
        summary="<" * 5000,  # 20,000 characters once escaped
        blocks=(
            *(TextBlock(text=f"part {i} " + "&" * 2000) for i in range(60)),
            FieldsBlock(fields=tuple((f"k{i}", "v" * 3000) for i in range(12))),
        ),
        actions=(CardAction(label=long_label, token="t", effect=Effect.ALLOW),),
        status=("Waiting",),
    )
    drawn = render_card(card)
    check_message(drawn.blocks, drawn.text)
    assert len(drawn.blocks) == MAX_BLOCKS
    assert "more part(s) not shown" in seen_text(drawn.text, drawn.blocks)
    assert [b["type"] for b in drawn.blocks[-2:]] == ["actions", "context"]
    ((_, button),) = buttons_of(drawn.blocks)
    assert len(button["text"]["text"]) == 75 and button["value"] == "t"


def test_a_decided_card_has_no_buttons_and_its_status_in_context() -> None:
    card = Card(title="Run a command?", status=("Approved by @alice · delivered · done",))
    drawn = render_card(card)
    check_message(drawn.blocks, drawn.text)
    assert buttons_of(drawn.blocks) == []
    assert drawn.blocks[-1]["elements"][0]["text"] == "Approved by @alice · delivered · done"


def _form(*questions: Question) -> QuestionForm:
    return QuestionForm(
        questions=tuple(
            FormQuestion(
                question=q, option_tokens=tuple(f"q{i}.{j}" for j in range(len(q.options)))
            )
            for i, q in enumerate(questions)
        ),
        submit_token="s",
    )


COLOUR = Question(
    id="c",
    header="Colour",
    text="Which?",
    options=(Option(id="r", label="Red"), Option(id="b", label="Blue")),
)


def test_one_single_choice_question_is_a_button_per_option_else_answer_opens_a_modal() -> None:
    direct = render_card(Card(title="Pick", form=_form(COLOUR)))
    check_message(direct.blocks, direct.text)
    assert [b["value"] for _, b in buttons_of(direct.blocks)] == ["q0.0", "q0.1"]

    secret = Question(id="k", header="Key", text="Your key", secret=True)
    for form in (_form(COLOUR, secret), _form(Question(**{**_q(COLOUR), "multi": True}))):
        drawn = render_card(Card(title="Answer", form=form))
        check_message(drawn.blocks, drawn.text)
        ((_, button),) = buttons_of(drawn.blocks)
        assert button["action_id"] == ANSWER_ACTION and button["value"] == "s"


def _q(question: Question) -> dict[str, Any]:
    return {name: getattr(question, name) for name in Question.__dataclass_fields__}


# --- inbound --------------------------------------------------------------------------------


def _message(
    text: str, *, channel_type: str = "channel", person: Person = ALICE, **kw: Any
) -> dict[str, Any]:
    event = message_event(
        person,
        kind="message",
        channel="C0GEN",
        channel_type=channel_type,
        text=text,
        ts="100.000001",
        **kw,
    )
    return event_callback(event)


def _heard(
    body: dict[str, Any], mode: ChannelMode = ChannelMode.MENTIONS
) -> Heard | Foreign | None:
    return heard(body, team_id=TEAM_ID, bot_user_id=BOT_USER_ID, mode=mode)


def test_a_mention_at_the_top_of_a_channel_starts_a_session_in_its_thread() -> None:
    found = _heard(_message(f"<@{BOT_USER_ID}> list the files"))
    assert isinstance(found, Heard)
    assert found.conversation == conversation(TEAM_ID, "C0GEN", "100.000001")
    assert found.text == "list the files" and found.message_id == "100.000001"
    assert found.actor.user_id == ALICE.id and not found.needs_session
    assert _heard(_message("just chatting")) is None
    assert isinstance(_heard(_message("just chatting"), ChannelMode.ALL), Heard)


def test_in_a_thread_a_bare_reply_needs_a_session_a_mention_does_not() -> None:
    bare = _heard(_message("yes", thread_ts="99.000001"))
    assert isinstance(bare, Heard) and bare.needs_session
    assert bare.conversation.thread == "99.000001"
    stop = _heard(_message(f"<@{BOT_USER_ID}> /stop", thread_ts="99.000001"))
    assert isinstance(stop, Heard) and not stop.needs_session and stop.text == "/stop"


def test_a_direct_message_is_always_taken() -> None:
    found = _heard(_message("hello", channel_type="im"))
    assert isinstance(found, Heard) and found.direct
    assert found.conversation == conversation(TEAM_ID, "C0GEN", None)


def test_bots_edits_subtypes_and_other_teams_are_not_taken() -> None:
    body = _message(f"<@{BOT_USER_ID}> hi")
    for change in (
        {"bot_id": "B1"},
        {"subtype": "message_changed"},
        {"user": BOT_USER_ID},
        {"subtype": "channel_join"},
    ):
        changed = {**body, "event": {**body["event"], **change}}
        assert _heard(changed) is None
    guest = _heard(_message(f"<@{BOT_USER_ID}> hi", person=Person("U0G", "g", team="T0OTHER")))
    assert guest == Foreign(team="T0OTHER", user="U0G")


def test_a_click_reads_its_cards_conversation_and_token_only() -> None:
    message = {"type": "message", "ts": "200.000001", "thread_ts": "100.000001", "blocks": []}
    block = {"block_id": "b"}
    button = {
        "type": "button",
        "action_id": "gw.act.0",
        "value": "a1:tok",
        "text": {"type": "plain_text", "text": "Allow"},
    }
    payload = block_actions_payload(
        ALICE,
        channel={"id": "C0GEN", "name": "gen"},
        message=message,
        block=block,
        element=button,
        trigger_id="1.2.x",
        response_url="http://x",
        action_ts="1",
    )
    click = click_of(payload, team_id=TEAM_ID)
    assert not isinstance(click, Foreign) and click is not None
    assert click.conversation == conversation(TEAM_ID, "C0GEN", "100.000001")
    assert click.token == "a1:tok" and click.actor.display == "@alice"
    assert click.trigger_id == "1.2.x" and click.message_ts == "200.000001"
    assert isinstance(click_of(payload, team_id="T0ELSE"), Foreign)


def test_the_slash_command_spells_the_gateways_commands() -> None:
    assert command_text("stop") == "/stop"
    assert command_text("  ") == "/help"
    assert command_text("/new fix it") == "/new fix it"


def test_the_agents_markdown_is_slack_mrkdwn_and_pings_no_one() -> None:
    from platforms.slack.render import mrkdwn

    shown = mrkdwn("**Done**: see `hello.txt` <!channel> <@U1>")
    assert shown.startswith("*Done*: see `hello.txt`")
    assert "<!channel>" not in shown and "<@U1>" not in shown
    assert "&lt;!channel&gt;" in shown


def test_a_message_slack_will_not_edit_is_gone_for_good() -> None:
    for error in ("message_not_found", "cant_update_message"):
        assert isinstance(permanent_refusal(error), MessageGone)
    archived = permanent_refusal("is_archived")
    assert isinstance(archived, RefusedForGood) and not isinstance(archived, MessageGone)


def test_the_notification_says_what_is_asked_and_of_whom_and_times_are_each_readers() -> None:
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    asked = Card(
        title="Run a command",
        blocks=(CodeBlock(code="touch a<b.txt\necho two", language="sh"),),
        actions=(CardAction(label="Allow once", token="t", effect=Effect.ALLOW),),
        status=("Waiting for a decision",),
        content_hash="5a0426e840",
    )
    drawn = render_card(asked, mention="<@U0ALICE> <@U0BOB>: waiting for you.")
    assert drawn.text == "Run a command: touch a&lt;b.txt · waiting for <@U0ALICE> <@U0BOB>"
    [context] = [b for b in drawn.blocks if b["type"] == "context"]
    assert [e["text"] for e in context["elements"]] == [
        "Waiting for a decision",
        "Details: content hash 5a0426e840",
    ]
    decided = Card(
        title="Run a command",
        blocks=asked.blocks,
        status=("Approved by @alice", At(at), " · sent to the agent"),
        content_hash="5a0426e840",
    )
    drawn = render_card(decided)
    [context] = [b for b in drawn.blocks if b["type"] == "context"]
    assert context["elements"][0]["text"] == (
        "Approved by @alice at <!date^1796117400^{date_short_pretty} {time}|09:30 UTC>"
        " · sent to the agent"
    )
    # an edit notifies nobody: what is asked and where it stands, its time in UTC
    assert drawn.text == (
        "Run a command: touch a&lt;b.txt · Approved by @alice at 09:30 UTC · sent to the agent"
    )
    check_message(drawn.blocks, drawn.text)
