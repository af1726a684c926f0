"""The ``[[projects.X.policy]]``, ``[groups]`` and ``[people]`` tables (issue 17).

Shapes only: pydantic checks each rule's keys and that a regex compiles; rules that span
tables (a group or person that is not defined, ``approvals`` larger than the people who may
give them) are :func:`policy_problems`, run with the config's other checks so
that every problem names its key and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.config.people import People

__all__ = ["PolicyRule", "RuleAction", "RuleKind", "policy_problems", "resolve_approvers"]

Loc = tuple[str | int, ...]


class RuleKind(StrEnum):
    """What a rule matches: the interaction's kind, or the kind of its detail."""

    COMMAND = "command"
    FILE_CHANGE = "file_change"
    NETWORK = "network"
    PERMISSIONS = "permissions"
    QUESTION = "question"
    PLAN = "plan"
    SEND_FILE = "send_file"  # a file the agent sends to the chat (issue 33)


class RuleAction(StrEnum):
    ASK = "ask"  # ask the approvers (N of them); the default
    DENY = "deny"  # refuse at once, with ``message``: no person is asked


class PolicyRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=False)

    kind: RuleKind | None = None  # None: any kind
    command_prefix: str | None = Field(default=None, min_length=1)
    command_regex: str | None = Field(default=None, min_length=1)
    path_glob: str | None = Field(default=None, min_length=1)
    host: str | None = Field(default=None, min_length=1)  # a glob: "*.example.com"
    action: RuleAction = RuleAction.ASK
    message: str | None = Field(default=None, min_length=1, max_length=2000)
    approvals: int = Field(default=1, ge=1, le=50)
    # "slack:U1" (platform-qualified), a person of [people], or a group of [groups];
    # empty: the project's approvers
    approvers: tuple[str, ...] = ()
    deny_wins: bool = True
    expiry: float | None = Field(default=None, gt=0)  # seconds; overrides the project's
    escalate_after: float | None = Field(default=None, gt=0)
    escalate_to: tuple[str, ...] = ()

    @field_validator("command_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression Python can compile: {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PolicyRule:
        if self.command_prefix is not None and self.command_regex is not None:
            raise ValueError("set command_prefix or command_regex, not both")
        if self.action is RuleAction.DENY and self.message is None:
            raise ValueError('action = "deny" needs a message: the agent is told it')
        return self

    def compiled(self) -> re.Pattern[str] | None:
        return None if self.command_regex is None else _compile(self.command_regex)


_CACHE: dict[str, re.Pattern[str]] = {}


def _compile(pattern: str) -> re.Pattern[str]:
    compiled = _CACHE.get(pattern)
    if compiled is None:
        compiled = _CACHE[pattern] = re.compile(pattern)
    return compiled


def resolve_approvers(
    entries: Iterable[str], groups: Mapping[str, Sequence[str]], people: People
) -> frozenset[str]:
    """Approver entries (accounts, people, groups of either) as the people they name."""
    found: set[str] = set()
    for entry in entries:
        if entry in groups:
            found |= resolve_approvers(groups[entry], {}, people)
        elif entry in people:
            found.add(entry)
        else:
            found.add(people.person(entry))
    return frozenset(found)


def policy_problems(
    projects: Mapping[str, Sequence[PolicyRule]],
    groups: Mapping[str, Sequence[str]],
    people_table: Mapping[str, Sequence[str]],
) -> list[tuple[Loc, str]]:
    """Rules that span tables: unknown groups or people, N larger than the approvers."""
    found: list[tuple[Loc, str]] = []
    people = People(people_table)
    for name, members in groups.items():
        for member in members:
            if ":" not in member and member not in people:
                found.append(
                    (
                        ("groups", name),
                        f'"{member}" is neither a person of [people] nor an id '
                        'written as "platform:id"',
                    )
                )
    for name, accounts in people_table.items():
        for account in accounts:
            if ":" not in account:
                found.append((("people", name), f'"{account}" should be written "platform:id"'))
    for project, rules in projects.items():
        for index, rule in enumerate(rules):
            where: Loc = ("projects", project, "policy", index)
            unknown = [
                entry
                for entry in rule.approvers
                if ":" not in entry and entry not in groups and entry not in people
            ]
            for entry in unknown:
                found.append(((*where, "approvers"), f'unknown group or person "{entry}"'))
            if rule.approvers and not unknown and rule.action is RuleAction.ASK:
                resolved = resolve_approvers(rule.approvers, groups, people)
                if rule.approvals > len(resolved):
                    found.append(
                        (
                            (*where, "approvals"),
                            f"{rule.approvals} approvals asked of {len(resolved)} "
                            f"{'person' if len(resolved) == 1 else 'people'}",
                        )
                    )
            found += _escalation_problems(where, rule, groups, people)
    return found


def _escalation_problems(
    where: Loc, rule: PolicyRule, groups: Mapping[str, Sequence[str]], people: People
) -> list[tuple[Loc, str]]:
    """``escalate_after`` and ``escalate_to`` go together; each target is a group, a person,
    an account (its direct conversation) or a channel written ``"platform:#channel"``."""
    found: list[tuple[Loc, str]] = []
    if rule.escalate_after is not None and not rule.escalate_to:
        found.append(((*where, "escalate_after"), "set escalate_to too: where to ask next"))
    if rule.escalate_to and rule.escalate_after is None:
        found.append(((*where, "escalate_to"), "set escalate_after too: after how many seconds"))
    if rule.escalate_to and rule.action is RuleAction.DENY:
        found.append(((*where, "escalate_to"), 'a rule with action = "deny" asks nobody'))
    if rule.escalate_after is not None and rule.expiry is not None:
        if rule.escalate_after >= rule.expiry:
            found.append(
                ((*where, "escalate_after"), "the request expires first: make it less than expiry")
            )
    for entry in rule.escalate_to:
        platform, colon, rest = entry.partition(":")
        if colon:
            if not platform or not rest.lstrip("#").rpartition("/")[2]:
                found.append(((*where, "escalate_to"), f'"{entry}" names no account or channel'))
        elif entry not in groups and entry not in people:
            found.append(((*where, "escalate_to"), f'unknown group or person "{entry}"'))
    return found
