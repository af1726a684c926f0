"""What a person reads on a card, from the agent's request to each surface: the real Codex
request parser, the platform-neutral card, the console's HTML and Telegram's message. Each
fact is shown once, a new file is a diff, labels stay short with the rule they add shown
whole, and an ended card says what happened in a person's words."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import escape, unescape

from adapters.claude_requests import open_can_use_tool
from adapters.codex_requests import (
    file_changes_from_item,
    open_command_approval,
    open_file_change_approval,
)
from gateway.cards import Card
from gateway.domain import Action, Actor, Decision, Effect, InteractionRequest, Resolution, Scope
from gateway.interactions.machine import (
    DecisionFact,
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    InteractionState,
    ResolutionFact,
)
from gateway.render.interaction_card import render_interaction
from platforms.console.cards_html import PostContext, card_html
from platforms.console.views import CardView
from platforms.discord.render import render_card as discord_render
from platforms.slack.render import render_card as slack_render
from platforms.telegram.render import BUTTON_MAX_CHARS, RenderedCard, render_card
from tests.card_samples import pending
from tests.servers.telegram_wire import visible_text

T0 = datetime(2026, 12, 1, 9, 15, 2, tzinfo=UTC)
WORK = "/home/ada/project"
COMMAND = "/bin/sh -c 'echo hello | tee hello.txt'"
REASON = "The demo wants to write hello.txt in its work dir"
YOU = Actor(platform="console", user_id="you", display="You")


def interaction(request: InteractionRequest, **facts: object) -> Interaction:
    return pending(request, at=T0, **facts)


def card(item: Interaction) -> Card:
    return render_interaction(item, token_for=lambda choice: f"tok-{choice}")


def console_text(item: Interaction) -> tuple[str, str]:
    """(the HTML, the text a person reads in it)."""
    html = card_html(
        CardView(interaction=item, card=card(item), session=None, copies=()),
        PostContext(csrf="c", back="/"),
    )
    return html, unescape(re.sub(r"<[^>]+>", "", html))


def telegram(item: Interaction) -> tuple[RenderedCard, str]:
    drawn = render_card(card(item), None, private=True, limit=4096)
    return drawn, visible_text(drawn.html)


def command_request(prefix: list[str]) -> InteractionRequest:
    params = {
        "threadId": "t",
        "turnId": "u",
        "itemId": "i",
        "command": COMMAND,
        "cwd": WORK,
        "reason": REASON,
        "availableDecisions": [
            "accept",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": prefix}},
            "decline",
            "cancel",
        ],
    }
    return open_command_approval("rpc:1", params).request


def new_file_request() -> InteractionRequest:
    item = {
        "type": "fileChange",
        "id": "i",
        "changes": [
            {
                "path": f"{WORK}/greeting.py",
                "kind": {"type": "add"},
                "diff": '"""Written by the demo."""\n\nprint("Hello")\n',
            }
        ],
        "status": "inProgress",
    }
    changes = file_changes_from_item(item, WORK)
    return open_file_change_approval("rpc:2", {"itemId": "i"}, changes).request


# --- each fact once ----------------------------------------------------------------------


def test_the_command_cards_reason_is_said_once() -> None:
    item = interaction(command_request(["/bin/sh", "-c", "echo hello | tee hello.txt"]))
    _, console = console_text(item)
    _, phone = telegram(item)
    assert console.count(REASON) == 1
    assert phone.count(REASON) == 1
    assert "Reason" not in console and "Reason" not in phone


def test_a_new_file_is_a_diff_of_added_lines_and_its_path_is_shown_once() -> None:
    item = interaction(new_file_request())
    html, console = console_text(item)
    drawn, phone = telegram(item)
    for shown in (console, phone):
        assert shown.count("greeting.py") == 1  # relative to the work dir, once
        assert WORK not in shown
        assert "*** Add File" not in shown
    assert '<pre class="diff">' in html
    assert '<span class="add">+print(&quot;Hello&quot;)</span>' in html  # coloured as added
    assert '<span class="add">+&quot;&quot;&quot;Written by the demo.&quot;&quot;&quot;</span>' in (
        html
    )
    assert '<code class="language-diff">' in drawn.html
    assert '+print("Hello")' in phone


# --- labels ------------------------------------------------------------------------------


def test_a_rule_button_has_a_short_label_and_the_whole_rule_beside_its_explanation() -> None:
    prefix = ["/usr/bin/python3", "-m", "pytest", "--maxfail=1", "--disable-warnings", "-q"]
    rule = " ".join(prefix)
    item = interaction(command_request(prefix))
    labels = [action.label for action in card(item).actions]
    assert labels == [
        "Allow once",
        "Always allow commands like this",
        "Deny",
        "Deny and stop the turn",
    ]
    html, console = console_text(item)
    drawn, phone = telegram(item)
    buttons = [button.label for row in drawn.keyboard for button in row]
    assert buttons == labels  # nothing cut, no backticks
    assert all(len(label) <= BUTTON_MAX_CHARS and "`" not in label for label in buttons)
    assert f"<code>{rule}</code>" in drawn.html and phone.count(rule) == 1
    assert f'<code class="rule">{rule}</code>' in html and console.count(rule) == 1


def test_a_rule_that_is_the_whole_command_is_said_as_the_rule_beside_its_button() -> None:
    """The command is what runs now, the rule what lasts: a person reads the rule where the
    button that adds it is explained, on every surface (issue 29), in the command's words."""
    item = interaction(command_request(["/bin/sh", "-c", "echo hello | tee hello.txt"]))
    assert [action.label for action in card(item).actions][1] == "Always allow this command"
    html, console = console_text(item)
    drawn, phone = telegram(item)
    assert console.count(COMMAND) == 2 and phone.count(COMMAND) == 2  # the command, the rule
    assert f"<code>{escape(COMMAND, quote=False)}</code>" in drawn.html
    assert f'<code class="rule">{escape(COMMAND)}</code>' in html
    assert "any command that starts with it" in phone  # what "always" adds, on the phone too


def test_a_button_explanation_does_not_echo_its_label() -> None:
    _, console = console_text(interaction(command_request(["/bin/sh"])))
    assert "Run it this time." in console
    assert "allows it, this time only" not in console.lower()
    explained = Action(id="x", label="Allow", effect=Effect.ALLOW, scope=Scope.SESSION)
    _, bare = console_text(interaction(command_request(["/bin/sh"]), actions=(explained,)))
    assert "Allows it, for the rest of this session." in bare


def test_a_label_too_long_for_a_phone_gives_way_and_is_kept_whole_in_the_explanation() -> None:
    long = "Allow, and give access to /home/ada/project/vendor/third_party/generated"
    action = Action(
        id="dirs", label=long, effect=Effect.ALLOW, scope=Scope.SESSION, description="Also there."
    )
    item = interaction(command_request(["/bin/sh"]), actions=(action,))
    [button] = card(item).actions
    assert button.label == "Allow for this session"
    _, console = console_text(item)
    assert f"{long}: Also there." in console


# --- how a card ended --------------------------------------------------------------------


def test_the_orphaned_card_says_what_happened_and_what_to_do_in_a_persons_words() -> None:
    item = interaction(
        command_request(["/bin/sh"]),
        state=InteractionState.ORPHANED,
        version=2,
        delivery=DeliveryFact(
            outcome=DeliveryOutcome.SKIPPED,
            at=T0 + timedelta(seconds=2),
            error="not written: the runtime ended first",
        ),
        resolution=ResolutionFact(
            how=Resolution.ORPHANED,
            at=T0 + timedelta(seconds=2),
            by="gateway",
            note="exited with code 17",
        ),
    )
    _, console = console_text(item)
    _, phone = telegram(item)
    said = (
        "The agent process ended (exited with code 17) before anyone answered: no answer can "
        "reach it now · your next message starts the agent again"
    )
    assert said in console and said in phone
    for shown in (console, phone):
        assert "not written" not in shown and "nothing written" not in shown
        assert "Resolved" not in shown and "by gateway" not in shown
    assert console.count("exited with code 17") == 2  # the status line and the timeline's end


def test_the_status_line_and_the_timeline_write_times_and_names_alike() -> None:
    request = command_request(["/bin/sh"])
    decided_at = T0 + timedelta(seconds=95)
    item = interaction(
        request,
        state=InteractionState.RESOLVED,
        decision=DecisionFact(actor=YOU, decision=Decision(action_id="accept"), at=decided_at),
        delivery=DeliveryFact(outcome=DeliveryOutcome.OK, at=decided_at),
        resolution=ResolutionFact(how=Resolution.ANSWERED, at=decided_at, by="agent"),
    )
    _, console = console_text(item)
    status = card(item).status_line
    assert status == 'Approved ("Allow once") by You at 09:16 UTC · sent to the agent · done'
    assert 'chose "Allow once"' in console  # the same straight quotes
    assert "09:16 UTC" in console and "09:16:37" not in console  # the same clock
    assert "“" not in console and "”" not in console


def test_a_rule_too_long_for_a_telegram_message_goes_whole_as_a_file() -> None:
    rule = "python3 -c " + "x" * 5000
    item = interaction(command_request(["python3", "-c", "x" * 5000]))
    drawn, phone = telegram(item)
    assert len(phone) <= 4096
    [attached] = [a for a in drawn.attachments if a.name == "rule.txt"]
    assert attached.content == rule
    assert "(the rule is attached as rule.txt)" in phone
    assert [b.label for row in drawn.keyboard for b in row][1].startswith(
        "Always allow commands like this"
    )


# --- a question's buttons ------------------------------------------------------------------


def claude_question() -> InteractionRequest:
    """Claude's AskUserQuestion, through the real parser: its actions are "Answer" (which
    gives the answers), "Do not answer" and "Do not answer and stop the turn"."""
    tool_input = {
        "questions": [
            {
                "question": "Which database?",
                "header": "Database",
                "options": [{"label": "Postgres"}, {"label": "SQLite"}],
                "multiSelect": True,
            }
        ]
    }
    request = {"tool_name": "AskUserQuestion", "input": tool_input}
    return open_can_use_tool("ctl:1", request).request


def test_a_question_card_offers_one_way_to_answer_on_every_surface() -> None:
    """Claude's own "Answer" carries no answers: beside the form's "Answer…" it could only be
    refused. The core leaves it out, so no surface draws both."""
    item = interaction(claude_question())
    assert [a.label for a in card(item).actions] == [
        "Do not answer",
        "Do not answer and stop the turn",
    ]
    html, _ = console_text(item)
    console_buttons = [unescape(b) for b in re.findall(r"<button[^>]*>([^<]*)</button>", html)]
    drawn, _ = telegram(item)
    telegram_buttons = [button.label for row in drawn.keyboard for button in row]
    slack_blocks = slack_render(card(item)).blocks
    slack_buttons = [
        element["text"]["text"]
        for block in slack_blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    discord_buttons = [
        button["label"]
        for row in discord_render(card(item)).components
        for button in row["components"]
    ]
    for surface, labels in [
        ("console", console_buttons),
        ("telegram", telegram_buttons),
        ("slack", slack_buttons),
        ("discord", discord_buttons),
    ]:
        assert "Answer" not in labels, (surface, labels)
        assert "Do not answer" in labels, (surface, labels)
        # the form's own way: a button that opens it, or the submit of a form drawn inline
        answering = [label for label in labels if label.endswith(("Answer…", "answers", "Submit"))]
        assert len(answering) == 1, (surface, labels)
