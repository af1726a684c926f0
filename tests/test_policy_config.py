"""Policy rules, groups and people in the config: what loads, what is refused (naming the
key and the line), and which rule governs a request."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.config.people import People
from gateway.domain import (
    Action,
    Command,
    Effect,
    FileChange,
    InteractionKind,
    InteractionState,
    Network,
)
from gateway.errors import ConfigError
from gateway.interactions.machine import Interaction
from gateway.interactions.policy import Requirement, Vote, governing_rule, requirement, tally
from platforms.registry import parse_config

BASE = """\
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"

[projects.web.auth.memory]
allow_from = ["*"]

[platforms.memory]

[people]
alice = ["memory:alice", "telegram:42"]
bob = ["memory:bob"]

[groups]
ops = ["alice", "bob", "memory:carol"]
"""

RULES = """
[[projects.web.policy]]
kind = "command"
command_prefix = "rm "
action = "deny"
message = "No rm here."

[[projects.web.policy]]
command_regex = "^git push"
approvals = 2
approvers = ["ops"]

[[projects.web.policy]]
kind = "file_change"
path_glob = "infra/*"
approvals = 2
approvers = ["alice", "memory:carol"]
deny_wins = false
"""


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "gw.toml", env={})
    return str(caught.value)


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def interaction(detail: object, kind: InteractionKind = InteractionKind.APPROVAL) -> Interaction:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Interaction(
        id="i1",
        session_id="s1",
        runtime_epoch=1,
        turn_id=None,
        native_key="k",
        kind=kind,
        title="Run a command",
        summary="",
        detail=detail,  # type: ignore[arg-type]
        actions=(
            Action(id="accept", label="Approve", effect=Effect.ALLOW),
            Action(id="decline", label="Deny", effect=Effect.DENY),
        ),
        questions=(),
        state=InteractionState.PENDING,
        version=1,
        created_at=now,
        updated_at=now,
    )


def test_rules_load_and_first_match_wins() -> None:
    config = parse_config(BASE + RULES, "gw.toml", env={})
    rules = config.projects["web"].policy
    people = People(config.people)

    rm = governing_rule(rules, interaction(Command(command="rm -rf build")))
    assert rm is rules[0]
    assert requirement(rm, interaction(Command(command="rm x")), config.groups, people) == (
        Requirement(refusal="No rm here.")
    )
    push = interaction(Command(command="git push origin main"))
    needed = requirement(governing_rule(rules, push), push, config.groups, people)
    assert needed.approvals == 2
    assert needed.approvers == frozenset({"alice", "bob", "memory:carol"})
    assert governing_rule(rules, interaction(Command(command="ls"))) is None
    # Codex wraps commands in a shell: the script inside is matched too
    wrapped = interaction(Command(command="/bin/bash -lc 'rm -rf build'"))
    assert governing_rule(rules, wrapped) is rules[0]
    assert governing_rule(rules, interaction(Command(command="bash -c 'git push'"))) is rules[1]
    patch = interaction(FileChange(paths=("infra/main.tf",), diff=""))
    assert governing_rule(rules, patch) is rules[2]
    assert governing_rule(rules, interaction(FileChange(paths=("src/a",), diff=""))) is None
    assert governing_rule(rules, interaction(Network(host="example.com"))) is None


def test_a_question_is_answered_by_one_person() -> None:
    config = parse_config(
        BASE + "[[projects.web.policy]]\napprovals = 3\napprovers = ['ops']\n", "gw.toml", env={}
    )
    asked = interaction(None, InteractionKind.QUESTION)
    rule = governing_rule(config.projects["web"].policy, asked)
    assert requirement(rule, asked, config.groups, People(config.people)).approvals == 1


@pytest.mark.parametrize(
    ("rule", "needle", "key", "says"),
    [
        (
            "approvers = ['nobody']\n",
            "approvers",
            "projects.web.policy.0.approvers",
            'unknown group or person "nobody"',
        ),
        (
            "approvals = 4\napprovers = ['ops']\n",
            "approvals",
            "projects.web.policy.0.approvals",
            "4 approvals asked of 3 people",
        ),
        (
            "command_regex = '(unclosed'\n",
            "command_regex",
            "projects.web.policy.0.command_regex",
            "not a regular expression",
        ),
        ("action = 'deny'\n", "action", "projects.web.policy.0", 'action = "deny" needs a message'),
        ("kind = 'sometimes'\n", "kind", "projects.web.policy.0.kind", "should be"),
    ],
)
def test_a_bad_rule_is_refused_naming_key_and_line(
    rule: str, needle: str, key: str, says: str
) -> None:
    # the second rule is the bad one: its index and line are named, not the first rule's
    text = BASE + "\n[[projects.web.policy]]\napprovals = 1\n\n[[projects.web.policy]]\n" + rule
    rows = text.splitlines()
    second = max(n for n, row in enumerate(rows, 1) if row == "[[projects.web.policy]]")
    on_key = next(n for n, row in enumerate(rows, 1) if n > second and row.startswith(needle))
    key = key.replace("policy.0", "policy.1")
    line = second if key.endswith("policy.1") else on_key
    assert f"gw.toml:{line}: {key}: {says}" in refusal(text)


def test_a_group_member_that_is_nobody_is_refused() -> None:
    text = BASE.replace('ops = ["alice", "bob", "memory:carol"]', 'ops = ["alice", "dave"]')
    message = refusal(text)
    assert f"gw.toml:{line_of(text, 'ops =')}: groups.ops:" in message
    assert '"dave"' in message


def test_votes_count_per_action_and_deny_wins() -> None:
    actions = interaction(None).actions
    two = Requirement(approvals=2)
    one = [Vote(person="alice", display="alice", action_id="accept")]
    assert tally(one, actions, two).decided_action is None
    assert tally(one, actions, two).line(actions) == "1 of 2: alice approved"
    both = [*one, Vote(person="bob", display="bob", action_id="accept")]
    assert tally(both, actions, two).decided_action == "accept"
    denied = [*one, Vote(person="bob", display="bob", action_id="decline")]
    assert tally(denied, actions, two).decided_action == "decline"
    mixed = tally(denied, actions, Requirement(approvals=2, deny_wins=False))
    assert mixed.decided_action is None
    assert mixed.line(actions) == "1 of 2: alice approved; bob denied"


def test_n_approvals_the_projects_approvers_cannot_give_is_refused() -> None:
    # no approvers in the rule, and the project's are the session's initiator alone
    text = BASE + "\n[[projects.web.policy]]\nkind = 'command'\napprovals = 2\n"
    where = line_of(text, "approvals = 2")
    assert (
        f"gw.toml:{where}: projects.web.policy.0.approvals: 2 approvals asked of the project's"
        " approvers, who are 1: list approvers in the rule"
    ) in refusal(text)
    listed = text.replace('allow_from = ["*"]', 'allow_from = ["*"]\napprovers = ["alice", "bob"]')
    assert parse_config(listed, "gw.toml", env={}).projects["web"].policy[0].approvals == 2
