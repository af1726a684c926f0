"""Chat text: commands are explicit; everything else, "ok" and "yes" included, is a prompt."""

from __future__ import annotations

import pytest

from gateway.domain import Action, Answer, Effect, Option, Question, Scope
from gateway.errors import InvalidDecision
from gateway.render.commands import (
    COMMANDS,
    HELP_TEXT,
    AnswerCommand,
    ApproveCommand,
    ChatPrompt,
    CommandName,
    CommandUsage,
    ControlCommand,
    DenyCommand,
    NotForUs,
    UnknownCommand,
    WithdrawCommand,
    parse_answers,
    parse_chat_text,
    resolve_action,
    slash,
    spell_commands,
)


@pytest.mark.parametrize(
    "text",
    [
        "ok",
        "yes",
        "y",
        "approve",
        "Approve it",
        "允许",
        "同意",
        "deny",
        "stop",
        "please /approve abc",
        "/usr/bin/python crashed",  # a path, not a command
        "/ stop",
        "",
        "   ",
    ],
)
def test_free_text_is_a_prompt_never_a_decision(text: str) -> None:
    assert parse_chat_text(text) == ChatPrompt(text=text)


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("/stop", CommandName.STOP, ""),
        ("/resume", CommandName.RESUME, ""),
        ("/clear", CommandName.CLEAR, ""),
        ("/status", CommandName.STATUS, ""),
        ("/new", CommandName.NEW, ""),
        ("/new api", CommandName.NEW, "api"),
        ("/pending", CommandName.PENDING, ""),
        ("/help", CommandName.HELP, ""),
        ("/start", CommandName.HELP, ""),  # what Telegram sends when a chat is opened
        ("  /stop", CommandName.STOP, ""),
        ("/STOP", CommandName.STOP, ""),
        ("/stop now please", CommandName.STOP, "now please"),
        ("/status\n", CommandName.STATUS, ""),
    ],
)
def test_control_commands(text: str, name: CommandName, args: str) -> None:
    assert parse_chat_text(text) == ControlCommand(name=name, args=args)


def test_telegram_bot_suffixes() -> None:
    assert parse_chat_text("/stop@gw_bot", bot_username="gw_bot") == ControlCommand(
        name=CommandName.STOP
    )
    assert parse_chat_text("/stop@GW_Bot", bot_username="@gw_bot") == ControlCommand(
        name=CommandName.STOP
    )
    assert parse_chat_text("/stop@other_bot", bot_username="gw_bot") == NotForUs(bot="other_bot")
    assert parse_chat_text("/approve@gw_bot k3m9 accept", bot_username="gw_bot") == (
        ApproveCommand(interaction_id="k3m9", action="accept")
    )
    # without a known username, any suffix is taken as ours
    assert parse_chat_text("/status@gw_bot") == ControlCommand(name=CommandName.STATUS)


def test_approve_deny_and_answer() -> None:
    assert parse_chat_text("/approve k3m9x2p7qa") == ApproveCommand(interaction_id="k3m9x2p7qa")
    assert parse_chat_text("/approve k3m9x2p7qa 2") == ApproveCommand(
        interaction_id="k3m9x2p7qa", action="2"
    )
    assert parse_chat_text("/approve k3 Yes, for this session") == ApproveCommand(
        interaction_id="k3", action="Yes, for this session"
    )
    assert parse_chat_text("/deny k3") == DenyCommand(interaction_id="k3")
    assert parse_chat_text("/deny k3 use the staging db instead") == DenyCommand(
        interaction_id="k3", message="use the staging db instead"
    )
    assert parse_chat_text("/answer k3 2") == AnswerCommand(interaction_id="k3", text="2")
    assert parse_chat_text("/answer k3\n1\nmy own words") == AnswerCommand(
        interaction_id="k3", text="1\nmy own words"
    )


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("/approve", CommandName.APPROVE),
        ("/approve   ", CommandName.APPROVE),
        ("/deny", CommandName.DENY),
        ("/answer", CommandName.ANSWER),
        ("/answer k3", CommandName.ANSWER),
        ("/approve not/an/id", CommandName.APPROVE),
    ],
)
def test_decision_commands_without_what_they_need_say_how_to_use_them(
    text: str, name: CommandName
) -> None:
    result = parse_chat_text(text)
    assert isinstance(result, CommandUsage)
    assert result.name is name
    assert result.message.startswith(f"Usage: /{name}")


def test_plan_is_a_prompt_in_plan_mode_and_needs_its_text() -> None:
    assert parse_chat_text("/plan add a dark theme\nand tests") == ChatPrompt(
        text="add a dark theme\nand tests", mode="plan"
    )
    assert parse_chat_text("/plan@bot tidy up", bot_username="bot") == ChatPrompt(
        text="tidy up", mode="plan"
    )
    usage = parse_chat_text("/plan   ")
    assert isinstance(usage, CommandUsage) and usage.message == "Usage: /plan TEXT"
    assert parse_chat_text("ok") == ChatPrompt(text="ok")  # no mode: never a plan decision


def test_an_unknown_command_is_not_sent_to_the_agent() -> None:
    assert parse_chat_text("/aprove k3") == UnknownCommand(name="aprove")


def test_help_lists_every_command() -> None:
    for info in COMMANDS:
        assert info.usage in HELP_TEXT
    assert {info.name for info in COMMANDS} == set(CommandName)


# --- matching /approve and /deny to the offered actions ------------------------------------

ACCEPT = Action(id="accept", label="Yes", effect=Effect.ALLOW)
SESSION = Action(
    id="acceptForSession", label="Yes, for this session", effect=Effect.ALLOW, scope=Scope.SESSION
)
DECLINE = Action(id="decline", label="No", effect=Effect.DENY)
CANCEL = Action(id="cancel", label="No, and stop", effect=Effect.CANCEL)
OFFERED = (ACCEPT, SESSION, DECLINE, CANCEL)


def test_an_action_is_named_by_id_number_or_label() -> None:
    assert resolve_action(OFFERED, "acceptForSession") is SESSION
    assert resolve_action(OFFERED, "2") is SESSION
    assert resolve_action(OFFERED, "yes, FOR this session") is SESSION


def test_a_bare_approve_or_deny_takes_the_narrowest_offered_choice() -> None:
    assert resolve_action(OFFERED, None) is ACCEPT
    assert resolve_action(OFFERED, None, deny=True) is DECLINE
    assert resolve_action((ACCEPT, CANCEL), None, deny=True) is CANCEL


def test_an_unclear_or_missing_action_asks_the_person_to_choose() -> None:
    with pytest.raises(InvalidDecision, match="1 = accept"):
        resolve_action(OFFERED, "maybe")
    with pytest.raises(InvalidDecision, match="say which"):
        resolve_action((SESSION, DECLINE), None)  # nothing "once" is offered: no guessing
    with pytest.raises(InvalidDecision):
        resolve_action(OFFERED, "5")


# --- /answer -------------------------------------------------------------------------------

DB = Question(
    id="db",
    header="Database",
    text="Which database?",
    options=(Option(id="pg", label="Postgres"), Option(id="lite", label="SQLite")),
)
TOOLS = Question(
    id="tools",
    header="Tools",
    text="Which tools?",
    options=(Option(id="ruff", label="ruff"), Option(id="mypy", label="mypy")),
    multi=True,
    allow_other=True,
)
NAME = Question(id="name", header="Name", text="Project name?")
NOTE = Question(id="note", header="Note", text="Anything else?", required=False)
TOKEN = Question(id="token", header="Token", text="API token?", secret=True)


def test_an_answer_is_an_option_number_a_label_or_text() -> None:
    assert parse_answers((DB,), "2") == {"db": Answer(option_ids=("lite",))}
    assert parse_answers((DB,), "postgres") == {"db": Answer(option_ids=("pg",))}
    assert parse_answers((TOOLS,), "1, 2") == {"tools": Answer(option_ids=("ruff", "mypy"))}
    assert parse_answers((TOOLS,), "black") == {"tools": Answer(other="black")}
    assert parse_answers((NAME,), "  web shop ") == {"name": Answer(other="web shop")}


def test_several_questions_take_one_line_each() -> None:
    answers = parse_answers((DB, NAME, NOTE), "1\nweb shop\n-")
    assert answers == {"db": Answer(option_ids=("pg",)), "name": Answer(other="web shop")}
    with pytest.raises(InvalidDecision, match="one answer per line"):
        parse_answers((DB, NAME), "1")


def test_unclear_answers_are_refused_without_echoing_them() -> None:
    with pytest.raises(InvalidDecision, match="from 1 to 2") as caught:
        parse_answers((DB,), "7")
    with pytest.raises(InvalidDecision, match="by number") as caught:
        parse_answers((DB,), "mongodb")
    assert "mongodb" not in str(caught.value)


def test_a_secret_question_is_only_answered_in_private() -> None:
    with pytest.raises(InvalidDecision, match="private") as caught:
        parse_answers((TOKEN,), "sk-secret-123")
    assert "sk-secret-123" not in str(caught.value)
    assert parse_answers((TOKEN,), "sk-secret-123", private=True) == {
        "token": Answer(other="sk-secret-123")
    }


def test_commands_named_in_the_gateways_text_are_spelled_as_the_platform_takes_them() -> None:
    def mention(name: str) -> str:
        return f"@agent {name}"

    text = "Paused: /resume to send, /clear to drop. /approve ID [action]; /stop."
    assert spell_commands(text, mention) == (
        "Paused: @agent resume to send, @agent clear to drop. @agent approve ID [action];"
        " @agent stop."
    )
    # paths, longer words and unknown commands are not commands
    untouched = "ran /bin/stop and a/stop, /stopping, /stop/x, /unknown"
    assert spell_commands(untouched, mention) == untouched
    assert spell_commands(HELP_TEXT, slash) == HELP_TEXT


def test_withdraw_names_a_request() -> None:
    assert parse_chat_text("/withdraw ab12cd34ef") == WithdrawCommand(interaction_id="ab12cd34ef")
    assert isinstance(parse_chat_text("/withdraw"), CommandUsage)
