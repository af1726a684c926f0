"""Policy rules: which rule governs a request, who must agree, and what the votes say.

Issue 17 (DESIGN.md, Authorization). Pure functions over plain data:

- :func:`governing_rule`: the first ``[[projects.X.policy]]`` rule that matches the request
  (its kind, and its detail: a command prefix or regex, a path glob, a network host).
- :func:`requirement`: what that rule asks (N people, who, whether one deny decides), with
  approvers resolved to people through ``[groups]`` and ``[people]``.
- :func:`tally`: the votes counted per person and per action id; whether they decide.

No rule approves on its own: a rule can refuse at once (``action = "deny"``) or ask for more
people, never fewer than one.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from gateway.config.people import People
from gateway.config.policy_rules import PolicyRule, RuleAction, RuleKind, resolve_approvers
from gateway.domain import (
    Action,
    Command,
    Detail,
    Effect,
    FileChange,
    InteractionKind,
    Network,
    OutgoingFile,
    Permissions,
    Scope,
)
from gateway.interactions.machine import Interaction

__all__ = [
    "Requirement",
    "Tally",
    "Vote",
    "command_texts",
    "governing_rule",
    "requirement",
    "rule_kind",
    "send_file_rule",
    "tally",
]


def rule_kind(interaction: Interaction) -> RuleKind | None:
    """The kind a rule's ``kind`` key names for this request."""
    if interaction.kind is InteractionKind.QUESTION:
        return RuleKind.QUESTION
    if interaction.kind is InteractionKind.PLAN:
        return RuleKind.PLAN
    detail = interaction.detail
    if isinstance(detail, Command):
        return RuleKind.COMMAND
    if isinstance(detail, FileChange):
        return RuleKind.FILE_CHANGE
    if isinstance(detail, Network):
        return RuleKind.NETWORK
    if isinstance(detail, Permissions):
        return RuleKind.PERMISSIONS
    if isinstance(detail, OutgoingFile):
        return RuleKind.SEND_FILE
    return None


def _matches(
    rule: PolicyRule,
    detail: Detail | None,
    kind: RuleKind | None,
    texts: Callable[[], tuple[str, ...]],
) -> bool:
    if rule.kind is not None and rule.kind is not kind:
        return False
    if rule.command_prefix is not None or rule.command_regex is not None:
        if not isinstance(detail, Command):
            return False
        prefix = rule.command_prefix
        if prefix is not None and not any(text.startswith(prefix) for text in texts()):
            return False
        pattern = rule.compiled()
        if pattern is not None and not any(pattern.search(text) for text in texts()):
            return False
    if rule.path_glob is not None:
        if isinstance(detail, OutgoingFile):
            if not fnmatchcase(detail.path, rule.path_glob):
                return False
        elif not isinstance(detail, FileChange) or not detail.paths:
            return False
        elif not any(fnmatchcase(path, rule.path_glob) for path in detail.paths):
            return False
    if rule.host is not None:
        if not isinstance(detail, Network) or not fnmatchcase(detail.host, rule.host):
            return False
    return True


def send_file_rule(rules: Sequence[PolicyRule], detail: OutgoingFile) -> PolicyRule | None:
    """The first rule that governs sending this file (``kind = "send_file"``, or a rule of
    any kind whose keys fit a file: ``path_glob``, matched against its work-dir path)."""
    for rule in rules:
        if _matches(rule, detail, RuleKind.SEND_FILE, lambda: ()):
            return rule
    return None


_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})


def command_texts(command: str) -> tuple[str, ...]:
    """The command as the agent gave it and, where it wraps a script in a shell (Codex sends
    ``/bin/bash -lc 'touch x'``), the script too: a rule on ``touch`` matches both."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: only the text as given
        return (command,)
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-lc"):
        return (command, words[2].strip())
    return (command,)


def governing_rule(rules: Sequence[PolicyRule], interaction: Interaction) -> PolicyRule | None:
    """The first rule that matches (first match wins), or None. The command's texts are
    split once for all the rules (shlex is the walk's one slow step)."""
    split: list[tuple[str, ...]] = []

    def texts() -> tuple[str, ...]:
        if not split:
            detail = interaction.detail
            split.append(command_texts(detail.command) if isinstance(detail, Command) else ())
        return split[0]

    kind = rule_kind(interaction)
    for rule in rules:
        if _matches(rule, interaction.detail, kind, texts):
            return rule
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Requirement:
    """What a request needs before it is decided."""

    approvals: int = 1
    approvers: frozenset[str] | None = None  # people; None: the project's approvers
    deny_wins: bool = True
    refusal: str | None = None  # action = "deny": refused at once with this message

    @property
    def counts_votes(self) -> bool:
        return self.approvals > 1


def requirement(
    rule: PolicyRule | None,
    interaction: Interaction,
    groups: Mapping[str, Sequence[str]],
    people: People,
) -> Requirement:
    if rule is None:
        return Requirement()
    if rule.action is RuleAction.DENY:
        return Requirement(refusal=rule.message)
    # a question is answered by one person; approvals and plans may need several
    approvals = 1 if interaction.kind is InteractionKind.QUESTION else rule.approvals
    approvers = resolve_approvers(rule.approvers, groups, people) if rule.approvers else None
    return Requirement(approvals=approvals, approvers=approvers, deny_wins=rule.deny_wins)


@dataclass(frozen=True, kw_only=True, slots=True)
class Vote:
    person: str
    display: str
    action_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Tally:
    needed: int
    votes: tuple[Vote, ...]
    decided_action: str | None  # the action the votes decide, or None: still waiting

    def line(self, actions: Sequence[Action]) -> str:
        """``"1 of 2: alice approved"`` (the leading action's count), for every card copy."""
        if not self.votes:
            return f"0 of {self.needed}"
        counts: dict[str, list[Vote]] = {}
        for vote in self.votes:
            counts.setdefault(vote.action_id, []).append(vote)
        leading = max(counts.values(), key=len)
        said = "; ".join(
            f"{', '.join(v.display for v in group)} {_verb(actions, action_id)}"
            for action_id, group in counts.items()
        )
        return f"{len(leading)} of {self.needed}: {said}"


def _verb(actions: Sequence[Action], action_id: str) -> str:
    action = next((a for a in actions if a.id == action_id), None)
    if action is None:
        return f"chose {action_id}"
    if action.effect is not Effect.ALLOW:
        return "denied"
    if action.scope is Scope.ONCE:
        return "approved"
    return f'approved "{action.label}"'  # a wider grant: which one, since votes differ


def tally(votes: Sequence[Vote], actions: Sequence[Action], req: Requirement) -> Tally:
    """Count ``votes`` (one per person) per action id. A deny decides at once when
    ``deny_wins``; otherwise N votes for the same action decide; a mixed tally waits."""
    effects = {action.id: action.effect for action in actions}
    decided: str | None = None
    if req.deny_wins:
        for vote in votes:
            if effects.get(vote.action_id) in (Effect.DENY, Effect.CANCEL):
                decided = vote.action_id
                break
    if decided is None:
        per_action: dict[str, int] = {}
        for vote in votes:
            per_action[vote.action_id] = per_action.get(vote.action_id, 0) + 1
            if per_action[vote.action_id] >= req.approvals:
                decided = vote.action_id
                break
    return Tally(needed=req.approvals, votes=tuple(votes), decided_action=decided)
