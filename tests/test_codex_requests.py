"""The Codex codec's server requests: each request type as an interaction, each decision as
its reply, and every way a decision can be refused (schema: codex-0.171 ServerRequest)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gateway.domain import (
    Answer,
    Command,
    Decision,
    Effect,
    FileChange,
    InteractionKind,
    Network,
    Permissions,
    Resolution,
    Scope,
)
from gateway.errors import AlreadyAnswered, CodecUsageError, RequestClosed
from gateway.events import InteractionClosed, InteractionOpened, Respond, Warning
from tests.codex_harness import COMMAND, COMMAND_PARAMS, THREAD, TURN, running

# --- command approvals ---------------------------------------------------------------------


def test_command_approval_offers_exactly_the_available_decisions_plus_decline() -> None:
    request = running().asked(COMMAND, COMMAND_PARAMS)
    assert request.kind is InteractionKind.APPROVAL
    assert request.turn_native_id == TURN
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("accept", Effect.ALLOW, Scope.ONCE),
        ("rule", Effect.ALLOW, Scope.ALWAYS),
        ("decline", Effect.DENY, Scope.ONCE),
        ("cancel", Effect.CANCEL, Scope.ONCE),
    ]
    rule = request.actions[1]
    # a short label (a phone's button), the rule whole beside its description
    assert rule.label == "Always allow commands like this" and "`" not in rule.label
    assert rule.rule == "touch hello.txt" and "lasting rule" in rule.description
    shown = dataclasses.replace(request, native_key="")
    assert "rpc:0" not in repr(shown) and "'id': 0" not in repr(shown)


@pytest.mark.parametrize(
    ("action_id", "wire"),
    [
        ("accept", "accept"),
        ("decline", "decline"),
        ("cancel", "cancel"),
        (
            "rule",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "hello.txt"]}},
        ),
    ],
)
def test_the_reply_echoes_the_exact_decision_offered(action_id: str, wire: object) -> None:
    session = running()
    request = session.asked(COMMAND, COMMAND_PARAMS)
    [reply] = session.send(
        Respond(native_key=request.native_key, decision=Decision(action_id=action_id))
    )
    assert reply == {"jsonrpc": "2.0", "id": 0, "result": {"decision": wire}}


def test_every_command_decision_variant_of_the_schema_becomes_an_action() -> None:
    session = running()
    params = {
        **COMMAND_PARAMS,
        "availableDecisions": [
            "accept",
            "acceptForSession",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["git", "status"]}},
            {
                "applyNetworkPolicyAmendment": {
                    "network_policy_amendment": {"host": "pypi.org", "action": "allow"}
                }
            },
            {
                "applyNetworkPolicyAmendment": {
                    "network_policy_amendment": {"host": "evil.test", "action": "deny"}
                }
            },
            "decline",
            "cancel",
        ],
    }
    request = session.asked(COMMAND, params)
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("accept", Effect.ALLOW, Scope.ONCE),
        ("session", Effect.ALLOW, Scope.SESSION),
        ("rule", Effect.ALLOW, Scope.ALWAYS),
        ("net-allow", Effect.ALLOW, Scope.ALWAYS),
        ("net-deny", Effect.DENY, Scope.ALWAYS),
        ("decline", Effect.DENY, Scope.ONCE),
        ("cancel", Effect.CANCEL, Scope.ONCE),
    ]
    assert request.actions[2].rule == "git status"
    assert request.actions[3].label == "Always allow this host"  # the card's own subject
    assert request.actions[4].label == "Always block this host"
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(action_id="net-deny")))
    assert reply["result"]["decision"] == params["availableDecisions"][4]


@pytest.mark.parametrize(
    "strange",
    [
        "approveEverything",
        {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": []}},  # would allow anything
        {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "h"}}},
    ],
    ids=["unknown string", "empty prefix rule", "network rule without action"],
)
def test_an_unknown_decision_variant_is_not_offered_and_is_reported(strange: object) -> None:
    session = running()
    params = {**COMMAND_PARAMS, "availableDecisions": ["accept", strange, "cancel"]}
    events = session.ask(COMMAND, params)
    [opened] = [e for e in events if isinstance(e, InteractionOpened)]
    assert [a.id for a in opened.request.actions] == ["accept", "decline", "cancel"]
    assert any(isinstance(e, Warning) and e.code == "unknown_decision" for e in events)


@pytest.mark.parametrize(
    ("kind", "proposed", "expected"),
    [
        ("command", ["touch", "hello.txt"], ["accept", "rule", "decline", "cancel"]),
        ("command", None, ["accept", "decline", "cancel"]),
        ("humanCommand", ["touch", "hello.txt"], ["accept", "decline", "cancel"]),
    ],
)
def test_without_available_decisions_the_safe_defaults_are_offered(
    kind: str, proposed: list[str] | None, expected: list[str]
) -> None:
    params = {k: v for k, v in COMMAND_PARAMS.items() if k != "availableDecisions"}
    params.update(kind=kind, proposedExecpolicyAmendment=proposed)
    assert [a.id for a in running().asked(COMMAND, params).actions] == expected


def test_input_for_a_running_terminal_is_not_shown_as_a_new_command() -> None:
    request = running().asked(COMMAND, {**COMMAND_PARAMS, "kind": "writeStdin"})
    assert "running command" in request.title
    assert isinstance(request.detail, Command) and request.detail.stdin_for_running_process


def test_a_network_approval_shows_the_host_asked_for() -> None:
    params = {
        k: v
        for k, v in COMMAND_PARAMS.items()
        if k not in ("command", "proposedExecpolicyAmendment")
    }
    params["networkApprovalContext"] = {"host": "pypi.org", "protocol": "https"}
    params["availableDecisions"] = ["accept", "acceptForSession", "cancel"]
    request = running().asked(COMMAND, params)
    assert "pypi.org" in request.title
    assert request.detail == Network(
        host="pypi.org", protocol="https", reason=COMMAND_PARAMS["reason"]
    )


def test_additional_permissions_of_a_command_are_shown() -> None:
    extra = {"fileSystem": {"write": ["/outside"]}, "network": {"enabled": True}}
    request = running().asked(COMMAND, {**COMMAND_PARAMS, "additionalPermissions": extra})
    assert "write /outside" in request.summary and "network access" in request.summary


# --- file change approvals -----------------------------------------------------------------

PATCH = "item/fileChange/requestApproval"


def test_a_file_change_approval_shows_the_changes_of_its_item() -> None:
    session = running()
    changes = [
        {"path": "/w/new.txt", "kind": {"type": "add"}, "diff": "hello\n"},
        {
            "path": "/w/old.txt",
            "kind": {"type": "update", "move_path": "/w/moved.txt"},
            "diff": "@@ -1 +1 @@\n-a\n+b",
        },
    ]
    item = {"type": "fileChange", "id": "p1", "changes": changes, "status": "inProgress"}
    session.feed({"method": "item/started", "params": {"item": item, "turnId": TURN}})
    request = session.asked(
        PATCH, {"threadId": THREAD, "turnId": TURN, "itemId": "p1", "reason": None}
    )
    assert isinstance(request.detail, FileChange)
    assert request.detail.paths == ("/w/new.txt", "/w/old.txt", "/w/moved.txt")
    # a new file is a diff like any other change: added lines, from /dev/null
    assert "--- /dev/null\n+++ /w/new.txt\n@@ -0,0 +1,1 @@\n+hello\n" in request.detail.diff
    assert "--- /w/old.txt\n+++ /w/moved.txt\n@@ -1 +1 @@\n-a\n+b\n" in request.detail.diff
    assert "***" not in request.detail.diff
    assert [(a.id, a.scope) for a in request.actions] == [
        ("accept", Scope.ONCE),
        ("session", Scope.SESSION),
        ("decline", Scope.ONCE),
        ("cancel", Scope.ONCE),
    ]
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(action_id="session")))
    assert reply["result"] == {"decision": "acceptForSession"}


def test_changes_in_the_work_dir_are_shown_relative_to_it_and_the_summary_names_none() -> None:
    session = running()  # its work dir: /work/project
    changes = [
        {"path": "/work/project/src/app.py", "kind": {"type": "add"}, "diff": "a\nb\n"},
        {"path": "/work/project/old.py", "kind": {"type": "delete"}, "diff": "gone\n"},
    ]
    item = {"type": "fileChange", "id": "p1", "changes": changes, "status": "inProgress"}
    session.feed({"method": "item/started", "params": {"item": item, "turnId": TURN}})
    request = session.asked(
        PATCH, {"threadId": THREAD, "turnId": TURN, "itemId": "p1", "reason": "Tidy up"}
    )
    assert isinstance(request.detail, FileChange)
    assert request.detail.diff == (
        "--- /dev/null\n+++ b/src/app.py\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        "--- a/old.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-gone\n"
    )
    assert request.summary == "Tidy up"  # the diff names the files: the summary does not


def test_a_file_change_approval_without_its_item_says_the_changes_are_unknown() -> None:
    request = running().asked(PATCH, {"threadId": THREAD, "turnId": TURN, "itemId": "nope"})
    assert isinstance(request.detail, FileChange) and request.detail.paths == ()
    assert "did not announce" in request.summary


# --- permissions approvals (recorded: permissions_grant_turn, _session, permissions_deny) ----

PERMISSIONS = "item/permissions/requestApproval"
ASKED_PERMISSIONS = {
    "network": None,
    "fileSystem": {
        "read": None,
        "write": ["/outside"],
        "entries": [{"path": {"type": "path", "path": "/outside"}, "access": "write"}],
    },
}
PERMISSIONS_PARAMS = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_1",
    "cwd": "/work/project",
    "reason": "I need to write the report outside the workspace",
    "permissions": ASKED_PERMISSIONS,
}


@pytest.mark.parametrize(
    ("action_id", "result"),
    [
        ("turn", {"permissions": ASKED_PERMISSIONS, "scope": "turn"}),
        ("session", {"permissions": ASKED_PERMISSIONS, "scope": "session"}),
        ("deny", {"permissions": {}, "scope": "turn"}),
    ],
)
def test_permissions_are_granted_for_the_chosen_scope_or_not_at_all(
    action_id: str, result: dict[str, Any]
) -> None:
    session = running()
    request = session.asked(PERMISSIONS, PERMISSIONS_PARAMS)
    assert isinstance(request.detail, Permissions)
    assert request.detail.requested == ("write /outside", "write /outside")
    assert request.detail.reason == PERMISSIONS_PARAMS["reason"]
    assert [(a.id, a.effect, a.scope) for a in request.actions] == [
        ("turn", Effect.ALLOW, Scope.TURN),
        ("session", Effect.ALLOW, Scope.SESSION),
        ("deny", Effect.DENY, Scope.ONCE),
    ]
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(action_id=action_id)))
    assert reply["result"] == result


# --- questions -----------------------------------------------------------------------------

QUESTIONS = "item/tool/requestUserInput"
QUESTION_PARAMS: dict[str, Any] = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_rui_1",
    "isBlocking": True,
    "questions": [
        {
            "id": "color",
            "header": "Color",
            "question": "Which color should I use?",
            "isOther": True,
            "isSecret": False,
            "options": [
                {"label": "Red (Recommended)", "description": "warm"},
                {"label": "Blue", "description": "cool"},
            ],
        },
        {
            "id": "token",
            "header": "Token",
            "question": "API token?",
            "isSecret": True,
            "options": None,
        },
    ],
}


def test_questions_get_stable_option_ids_and_keep_their_flags() -> None:
    request = running().asked(QUESTIONS, QUESTION_PARAMS)
    assert request.kind is InteractionKind.QUESTION
    color, token = request.questions
    assert [(o.id, o.label, o.description) for o in color.options] == [
        ("0", "Red (Recommended)", "warm"),
        ("1", "Blue", "cool"),
    ]
    assert (color.header, color.text, color.allow_other, color.secret) == (
        "Color",
        "Which color should I use?",
        True,
        False,
    )
    assert token.options == () and token.allow_other and token.secret and token.required


def test_answers_go_back_as_labels_and_free_text_by_question_id() -> None:
    session = running()
    session.asked(QUESTIONS, QUESTION_PARAMS)
    answers = {"color": Answer(option_ids=("1",)), "token": Answer(other=" s3cr3t ")}
    [reply] = session.send(Respond(native_key="rpc:0", decision=Decision(answers=answers)))
    assert reply["result"] == {
        "answers": {
            "color": {"answers": ["Blue"]},
            "token": {"answers": ["user_note: s3cr3t"]},
        }
    }


@pytest.mark.parametrize(
    "answers",
    [
        {"color": Answer(option_ids=("1",))},  # the token is missing
        {"color": Answer(option_ids=("1",)), "token": Answer(other="   ")},
        {"color": Answer(option_ids=("7",)), "token": Answer(other="t")},
        {"color": Answer(option_ids=("0", "1")), "token": Answer(other="t")},
        {
            "color": Answer(option_ids=("1",)),
            "token": Answer(other="t"),
            "extra": Answer(other="x"),
        },
    ],
    ids=["missing", "blank", "unknown option", "two options", "unasked question"],
)
def test_an_incomplete_or_invalid_answer_is_refused_and_nothing_is_sent(
    answers: dict[str, Answer],
) -> None:
    session = running()
    session.asked(QUESTIONS, QUESTION_PARAMS)
    with pytest.raises(CodecUsageError):
        session.codec.send(Respond(native_key="rpc:0", decision=Decision(answers=answers)))
    assert session.sent() == []
    complete = {"color": Answer(option_ids=("0",)), "token": Answer(other="t")}
    assert session.send(Respond(native_key="rpc:0", decision=Decision(answers=complete)))


def test_free_text_is_refused_where_the_question_takes_none() -> None:
    session = running()
    params = {
        **QUESTION_PARAMS,
        "questions": [{**QUESTION_PARAMS["questions"][0], "isOther": False}],
    }
    session.asked(QUESTIONS, params)
    with pytest.raises(CodecUsageError):
        session.codec.send(
            Respond(native_key="rpc:0", decision=Decision(answers={"color": Answer(other="green")}))
        )


# --- answering, once -----------------------------------------------------------------------


def test_a_request_is_answered_once_and_closed_as_answered() -> None:
    session = running()
    session.asked(COMMAND, COMMAND_PARAMS)
    accept = Respond(native_key="rpc:0", decision=Decision(action_id="accept"))
    assert len(session.send(accept)) == 1
    # a second attempt (the gateway's sweep, after a write it could not record) writes nothing
    with pytest.raises(AlreadyAnswered):
        session.codec.send(accept)
    assert session.sent() == []
    [closed] = session.feed(
        {"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 0}}
    )
    assert closed == InteractionClosed(native_key="rpc:0", how=Resolution.ANSWERED)
    with pytest.raises(RequestClosed):
        session.codec.send(accept)


def test_a_request_withdrawn_by_the_agent_closes_as_cancelled_and_cannot_be_answered() -> None:
    session = running()
    session.asked(COMMAND, COMMAND_PARAMS)
    [closed] = session.feed(
        {"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 0}}
    )
    assert closed.how is Resolution.CANCELLED_BY_AGENT  # type: ignore[union-attr]
    with pytest.raises(RequestClosed):
        session.codec.send(Respond(native_key="rpc:0", decision=Decision(action_id="accept")))
    assert session.sent() == []


@pytest.mark.parametrize("action_id", ["session", "allow", None])
def test_an_action_the_request_did_not_offer_is_refused(action_id: str | None) -> None:
    session = running()
    session.asked(COMMAND, COMMAND_PARAMS)  # no acceptForSession offered
    with pytest.raises(CodecUsageError):
        session.codec.send(Respond(native_key="rpc:0", decision=Decision(action_id=action_id)))
    assert session.sent() == []


def test_an_unknown_native_key_is_refused() -> None:
    with pytest.raises(CodecUsageError):
        running().codec.send(Respond(native_key="rpc:9", decision=Decision(action_id="accept")))


def test_server_request_ids_are_their_own_and_string_ids_work() -> None:
    session = running()
    request = session.asked(COMMAND, COMMAND_PARAMS, request_id=3)  # our turn/start was id 3
    assert request.native_key == "rpc:3"
    session.feed({"id": "abc", "method": QUESTIONS, "params": QUESTION_PARAMS})
    [reply] = session.send(Respond(native_key="rpc:3", decision=Decision(action_id="cancel")))
    assert reply == {"jsonrpc": "2.0", "id": 3, "result": {"decision": "cancel"}}
    answers = {"color": Answer(option_ids=("0",)), "token": Answer(other="t")}
    [reply] = session.send(Respond(native_key="rpc:s:abc", decision=Decision(answers=answers)))
    assert reply["id"] == "abc"


# --- what the gateway does not support -----------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "mcpServer/elicitation/request",
        "item/tool/call",
        "account/chatgptAuthTokens/refresh",
        "attestation/generate",
        "applyPatchApproval",
        "execCommandApproval",
        "some/futureRequest",
    ],
)
def test_an_unsupported_request_is_refused_with_method_not_found_and_reported(method: str) -> None:
    session = running()
    [warning] = session.ask(method, {"threadId": THREAD}, request_id=4)
    assert isinstance(warning, Warning) and warning.code == "unsupported_request"
    assert method in warning.message
    [reply] = session.sent()
    assert reply["id"] == 4 and reply["error"]["code"] == -32601 and "result" not in reply
    assert (
        session.feed(
            {"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 4}}
        )
        == []
    )


def test_an_unreadable_supported_request_is_refused_with_invalid_params() -> None:
    session = running()
    [warning] = session.ask(QUESTIONS, {"threadId": THREAD, "questions": []})
    assert isinstance(warning, Warning) and warning.code == "malformed_message"
    [reply] = session.sent()
    assert reply["error"]["code"] == -32602
