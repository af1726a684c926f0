"""What each Claude Code ``can_use_tool`` becomes (the card a person sees, the actions
offered) and what each decision sends back; and the ``claude`` command line."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.claude_launch import ClaudeLaunch
from adapters.claude_replies import QuestionsReply
from adapters.claude_requests import OpenedRequest, open_can_use_tool
from gateway.domain import (
    Answer,
    Command,
    Decision,
    Effect,
    FileChange,
    InteractionKind,
    Plan,
    Scope,
    Text,
)
from gateway.errors import CodecUsageError, ConfigError, MalformedMessage

KEY = "cc:r1"
CWD = "/work/project"
RULE = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "touch hello.txt"}],
    "behavior": "allow",
    "destination": "localSettings",
}
DIRECTORY = {"type": "addDirectories", "directories": [CWD], "destination": "session"}
ACCEPT_EDITS = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
# recorded 2.1.197 can_use_tool of a Bash call (bash_allow.jsonl)
BASH: dict[str, Any] = {
    "subtype": "can_use_tool",
    "tool_name": "Bash",
    "display_name": "Bash",
    "input": {"command": "touch hello.txt", "description": "Create hello.txt"},
    "description": "Create hello.txt",
    "permission_suggestions": [RULE, DIRECTORY, ACCEPT_EDITS],
    "blocked_path": f"{CWD}/hello.txt",
    "tool_use_id": "toolu_1",
}
QUESTIONS: dict[str, Any] = {
    "questions": [
        {
            "question": "Which color should the button be?",
            "header": "Color",
            "options": [{"label": "Red", "description": "Warm"}, {"label": "Blue"}],
            "multiSelect": False,
        },
        {
            "question": "Which checks should run?",
            "header": "Checks",
            "options": [{"label": "Lint"}, {"label": "Types"}, {"label": "Tests"}],
            "multiSelect": True,
        },
    ]
}


def tool(name: str, tool_input: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"subtype": "can_use_tool", "tool_name": name, "input": tool_input, **extra}


def opened(request: dict[str, Any], **options: Any) -> OpenedRequest:
    return open_can_use_tool(KEY, request, cwd=CWD, **options)


def encode(request: dict[str, Any], decision: Decision) -> dict[str, Any]:
    result = opened(request).reply.encode(decision)
    return dict(result.response)


# --- approvals -------------------------------------------------------------------------------


def test_a_bash_call_shows_the_command_and_every_suggestion_as_its_own_action() -> None:
    made = opened(BASH)
    request = made.request
    assert request.kind is InteractionKind.APPROVAL and request.title == "Run a command"
    assert request.detail == Command(command="touch hello.txt", cwd=CWD, reason="Create hello.txt")
    # two sentences, each ending with its full stop
    assert request.summary == "Create hello.txt. It touches /work/project/hello.txt."
    offered = [(a.id, a.effect, a.scope, a.label) for a in request.actions]
    assert offered == [
        ("allow", Effect.ALLOW, Scope.ONCE, "Allow once"),
        ("grant-1", Effect.ALLOW, Scope.SESSION, "Allow calls like this for this session"),
        # each says what it grants besides this call; the folder and the mode's effect are
        # said whole in the description, shown beside the button on every platform
        ("grant-2", Effect.ALLOW, Scope.SESSION, "Allow + folder access for the session"),
        ("grant-3", Effect.ALLOW, Scope.SESSION, "Allow + accept all edits for the session"),
        ("deny", Effect.DENY, Scope.ONCE, "Deny"),
        ("stop", Effect.CANCEL, Scope.ONCE, "Deny and stop the turn"),
    ]
    assert request.actions[1].rule == "Bash(touch hello.txt)"  # shown whole beside it
    assert "/work/project without asking" in request.actions[2].description
    assert "file edits are accepted without asking" in request.actions[3].description
    assert made.warnings == ()


def test_each_grant_sends_exactly_its_own_update() -> None:
    tool_input = BASH["input"]
    # a project-settings rule is dropped by the CLI in an untrusted workspace: session instead
    assert encode(BASH, Decision(action_id="grant-1")) == {
        "behavior": "allow",
        "updatedInput": tool_input,
        "updatedPermissions": [{**RULE, "destination": "session"}],
    }
    assert encode(BASH, Decision(action_id="grant-2"))["updatedPermissions"] == [DIRECTORY]
    assert encode(BASH, Decision(action_id="grant-3"))["updatedPermissions"] == [ACCEPT_EDITS]
    assert encode(BASH, Decision(action_id="allow")) == {
        "behavior": "allow",
        "updatedInput": tool_input,
    }


def test_deny_carries_the_message_and_stop_also_interrupts() -> None:
    denied = opened(BASH).reply.encode(Decision(action_id="deny", message="  use /tmp  "))
    assert denied.response == {"behavior": "deny", "message": "use /tmp"} and not denied.stops_turn
    plain = encode(BASH, Decision(action_id="deny"))
    assert plain == {"behavior": "deny", "message": "The user denied this tool call."}
    stopped = opened(BASH).reply.encode(Decision(action_id="stop"))
    assert stopped.response["interrupt"] is True and stopped.stops_turn


def test_a_rule_saved_in_user_settings_is_offered_as_always() -> None:
    user_rule = {**RULE, "destination": "userSettings"}
    [_, grant, *_] = opened({**BASH, "permission_suggestions": [user_rule]}).request.actions
    assert grant.scope is Scope.ALWAYS and grant.label == "Always allow calls like this"
    assert grant.rule == "Bash(touch hello.txt)"
    assert "later session" in grant.description


@pytest.mark.parametrize("mode", ["bypassPermissions", "auto"])
def test_a_switch_to_a_mode_without_approvals_is_not_offered(mode: str) -> None:
    suggestion = {"type": "setMode", "mode": mode, "destination": "session"}
    request = {**BASH, "permission_suggestions": [suggestion]}
    made = opened(request)
    assert [a.id for a in made.request.actions] == ["allow", "deny", "stop"]
    assert made.warnings and mode in made.warnings[0]
    allowed = opened(request, allow_dangerous=True)
    assert [a.id for a in allowed.request.actions] == ["allow", "grant-1", "deny", "stop"]


def test_suggestions_this_gateway_does_not_know_are_reported_not_offered() -> None:
    odd = [{"type": "removeRules", "rules": [], "destination": "session"}, "nonsense"]
    made = opened({**BASH, "permission_suggestions": odd})
    assert [a.id for a in made.request.actions] == ["allow", "deny", "stop"]
    assert len(made.warnings) == 2
    with pytest.raises(CodecUsageError, match="not offered"):
        made.reply.encode(Decision(action_id="grant-1"))


def test_an_edit_shows_the_file_and_a_diff_of_the_replacement() -> None:
    edit = {
        "file_path": f"{CWD}/src/a.py",
        "old_string": "x = 1\ny = 2",
        "new_string": "x = 1\ny = 3",
    }
    request = opened(tool("Edit", edit, permission_suggestions=[ACCEPT_EDITS])).request
    assert request.title == "Edit src/a.py"
    assert "a.py" not in request.summary  # the title and the diff name it already
    assert request.detail == FileChange(
        paths=(f"{CWD}/src/a.py",),
        diff="--- a/src/a.py\n+++ b/src/a.py\n@@ one occurrence @@\n x = 1\n-y = 2\n+y = 3\n",
    )
    assert [a.id for a in request.actions] == ["allow", "grant-1", "deny", "stop"]


def test_write_multi_edit_and_notebook_edit_show_what_they_write() -> None:
    write = opened(tool("Write", {"file_path": "/elsewhere/new.py", "content": "a\nb\n"}))
    assert isinstance(write.request.detail, FileChange)
    assert write.request.title == "Write a file"
    assert write.request.detail.diff == (
        "--- /elsewhere/new.py\n+++ /elsewhere/new.py\n@@ the whole file @@\n+a\n+b\n"
    )
    edits = [
        {"old_string": "a", "new_string": "b"},
        {"old_string": "c", "new_string": "d", "replace_all": True},
    ]
    multi = opened(tool("MultiEdit", {"file_path": f"{CWD}/m.txt", "edits": edits})).request
    assert isinstance(multi.detail, FileChange)
    assert "@@ edit 1 @@\n-a\n+b\n@@ edit 2, every occurrence @@\n-c\n+d\n" in multi.detail.diff
    notebook = {"notebook_path": f"{CWD}/n.ipynb", "new_source": "print(1)", "cell_id": "c1"}
    cell = opened(tool("NotebookEdit", notebook)).request
    assert (
        isinstance(cell.detail, FileChange)
        and "@@ replace cell c1 @@\n+print(1)" in cell.detail.diff
    )


def test_any_other_tool_shows_its_input() -> None:
    request = opened(tool("WebFetch", {"url": "https://example.org"}, description="Fetch")).request
    assert request.title == "Use WebFetch"
    assert (
        isinstance(request.detail, Text) and '"url": "https://example.org"' in request.detail.text
    )
    huge = opened(tool("mcp__x__y", {"blob": "z" * 10_000})).request
    assert isinstance(huge.detail, Text) and huge.detail.text.endswith("(input truncated)")


@pytest.mark.parametrize(
    "request_",
    [
        {"subtype": "can_use_tool", "input": {}},
        tool("Bash", {"description": "no command"}),
        tool("Edit", {"old_string": "a"}),
        tool("AskUserQuestion", {"questions": []}),
        tool("AskUserQuestion", {"questions": [{"header": "no question text"}]}),
    ],
)
def test_malformed_requests_raise(request_: dict[str, Any]) -> None:
    with pytest.raises(MalformedMessage):
        opened(request_)


# --- questions -------------------------------------------------------------------------------


def test_ask_user_question_becomes_questions_with_other_always_allowed() -> None:
    request = opened(tool("AskUserQuestion", QUESTIONS)).request
    assert request.kind is InteractionKind.QUESTION
    assert [(q.id, q.header, q.multi, q.allow_other, q.required) for q in request.questions] == [
        ("q0", "Color", False, True, True),
        ("q1", "Checks", True, True, True),
    ]
    assert [(o.id, o.label, o.description) for o in request.questions[0].options] == [
        ("0", "Red", "Warm"),
        ("1", "Blue", ""),
    ]
    assert [(a.id, a.effect) for a in request.actions] == [
        ("answer", Effect.ALLOW),
        ("decline", Effect.DENY),
        ("stop", Effect.CANCEL),
    ]


def test_answers_are_keyed_by_question_text_and_multi_select_labels_joined() -> None:
    answers = {"q0": Answer(option_ids=("1",)), "q1": Answer(option_ids=("0", "2"), other="Docs")}
    response = encode(tool("AskUserQuestion", QUESTIONS), Decision(answers=answers))
    assert response == {
        "behavior": "allow",
        "updatedInput": {
            **QUESTIONS,
            "answers": {
                "Which color should the button be?": "Blue",
                "Which checks should run?": "Lint, Tests, Docs",
            },
        },
    }
    other = {"q0": Answer(other=" Green "), "q1": Answer(option_ids=("1",))}
    response = encode(tool("AskUserQuestion", QUESTIONS), Decision(answers=other))
    assert response["updatedInput"]["answers"]["Which color should the button be?"] == "Green"


@pytest.mark.parametrize(
    ("answers", "complaint"),
    [
        ({}, "required"),
        ({"q0": Answer(option_ids=("0",))}, "'q1' is required"),
        ({"q0": Answer(option_ids=("0", "1")), "q1": Answer(other="x")}, "one option or text"),
        ({"q0": Answer(option_ids=("0",), other="x"), "q1": Answer(other="x")}, "one option"),
        ({"q0": Answer(option_ids=("7",)), "q1": Answer(other="x")}, "no option '7'"),
        ({"q0": Answer(other="   "), "q1": Answer(other="x")}, "'q0' is required"),
        ({"q0": Answer(other="a"), "q1": Answer(other="b"), "q9": Answer(other="c")}, "not asked"),
    ],
)
def test_an_allow_without_every_answer_is_never_sent(
    answers: dict[str, Answer], complaint: str
) -> None:
    reply = opened(tool("AskUserQuestion", QUESTIONS)).reply
    assert isinstance(reply, QuestionsReply)
    for action_id in (None, "answer"):
        with pytest.raises(CodecUsageError, match=complaint):
            reply.encode(Decision(action_id=action_id, answers=answers))


def test_questions_can_be_declined_or_stop_the_turn() -> None:
    request = tool("AskUserQuestion", QUESTIONS)
    declined = encode(request, Decision(action_id="decline"))
    assert declined == {
        "behavior": "deny",
        "message": "The user declined to answer these questions.",
    }
    stopped = opened(request).reply.encode(Decision(action_id="stop", message="enough"))
    assert stopped.response == {"behavior": "deny", "message": "enough", "interrupt": True}
    with pytest.raises(CodecUsageError, match="takes no answers"):
        encode(request, Decision(action_id="decline", answers={"q0": Answer(other="x")}))


# --- plans -----------------------------------------------------------------------------------


def test_exit_plan_mode_is_a_plan_to_approve_or_to_keep_working_on() -> None:
    made = opened(tool("ExitPlanMode", {"plan": "# Plan\n1. do it"}))
    assert made.request.kind is InteractionKind.PLAN
    assert made.request.detail == Plan(markdown="# Plan\n1. do it")
    assert [a.id for a in made.request.actions] == ["approve", "keep-planning"]
    approved = made.reply.encode(Decision(action_id="approve"))
    assert approved.response == {"behavior": "allow", "updatedInput": {"plan": "# Plan\n1. do it"}}
    feedback = made.reply.encode(Decision(action_id="keep-planning", message="add tests"))
    assert feedback.response == {"behavior": "deny", "message": "add tests"}
    with pytest.raises(CodecUsageError, match="not offered"):
        made.reply.encode(Decision(action_id="allow"))
    assert opened(tool("ExitPlanMode", {})).warnings  # no plan text: said so


# --- the command line ------------------------------------------------------------------------

SID = "0b7c6a52-9d7e-4b8f-a1c2-3d4e5f607182"


def test_a_new_session_names_its_id_up_front() -> None:
    assert ClaudeLaunch(command=("npx", "claude"), session_id=SID).argv() == [
        "npx",
        "claude",
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-prompt-tool",
        "stdio",
        "--permission-mode",
        "default",
        "--include-partial-messages",
        f"--session-id={SID}",
    ]


def test_options_and_resume() -> None:
    launch = ClaudeLaunch(
        session_id=SID,
        permission_mode="plan",
        model="sonnet",
        allowed_tools=("Read", "Bash(git status)"),
        disallowed_tools=("WebFetch",),
        extra_args=("--max-turns", "5"),
    ).resumed()
    argv = launch.argv()
    assert argv[argv.index("--permission-mode") + 1] == "plan"
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert argv[argv.index("--allowedTools") + 1] == "Read,Bash(git status)"
    assert argv[argv.index("--disallowedTools") + 1] == "WebFetch"
    assert argv[-3:] == [f"--resume={SID}", "--max-turns", "5"]
    assert f"--session-id={SID}" not in argv


@pytest.mark.parametrize("mode", ["bypassPermissions", "auto"])
def test_modes_without_approvals_need_an_explicit_opt_in(mode: str) -> None:
    with pytest.raises(ConfigError, match="allow_dangerous"):
        ClaudeLaunch(permission_mode=mode)
    argv = ClaudeLaunch(permission_mode=mode, allow_dangerous=True).argv()
    assert argv[argv.index("--permission-mode") + 1] == mode


@pytest.mark.parametrize(
    "options",
    [
        {"permission_mode": "yolo"},
        {"session_id": "not-a-uuid"},
        {"session_id": "--print"},
        {"command": ()},
        {"extra_args": ("--permission-prompt-tool", "mcp__x")},
        {"extra_args": ("--dangerously-skip-permissions",)},
        {"extra_args": ("--resume=abc",)},
        {"allowed_tools": ("Read,Write",)},
    ],
)
def test_a_launch_that_would_undo_the_gateway_s_own_flags_is_refused(
    options: dict[str, Any],
) -> None:
    with pytest.raises(ConfigError):
        ClaudeLaunch(**options)


def test_a_session_can_be_resumed_by_any_id_the_cli_gave() -> None:
    assert ClaudeLaunch(session_id="older-id", resume=True).argv()[-1] == "--resume=older-id"
