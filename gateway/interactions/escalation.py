"""Escalation: a request nobody answered is also asked elsewhere (issue 17).

A rule's ``escalate_after`` (seconds) and ``escalate_to`` say when and where: after that
long PENDING, the card is ALSO posted (a card copy, not a binding: its buttons decide the
same interaction, by the same compare-and-set) in

- the direct conversation of each account a group, a person or an account names
  (``"leads"``, ``"alice"``, ``"slack:U1"``), asked of its platform; and
- a channel, written ``"PLATFORM:#CHANNEL"`` (``"slack:#C0ESC"``, ``"telegram:#-100123"``),
  or ``"PLATFORM:#SPACE/CHANNEL"`` where the platform's conversations have a space the
  gateway cannot guess (without one, the space of the session's own conversation on that
  platform is taken: a Slack gateway serves one workspace).

Pure: :func:`escalation_of` (what the governing rule asks), :func:`due_at`, the targets and
the notice. The runner's escalation task reads the clock, the ledger records it once
(gateway/store/escalations.py), and a restart never repeats it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.config.policy_rules import PolicyRule, RuleAction
from gateway.domain import ConversationRef
from gateway.interactions.machine import Interaction
from gateway.interactions.policy import governing_rule
from gateway.wording import duration, quoted

__all__ = [
    "ChannelTarget",
    "Escalation",
    "channel_conversation",
    "channel_target",
    "due_at",
    "escalation_notice",
    "escalation_of",
]

CHANNEL_MARK = "#"


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelTarget:
    platform: str
    space: str | None
    channel: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Escalation:
    """What a rule asks when nobody answers: after how long, whose DMs, which channels."""

    after_seconds: float
    accounts: tuple[str, ...]  # "platform:user_id", each asked in its direct conversation
    channels: tuple[ChannelTarget, ...]


def channel_target(entry: str) -> ChannelTarget | None:
    """``"slack:#C0ESC"`` / ``"slack:#T1/C0ESC"`` as a channel; None: not written as one."""
    platform, colon, rest = entry.partition(":")
    if not colon or not platform or not rest.startswith(CHANNEL_MARK):
        return None
    where = rest[len(CHANNEL_MARK) :]
    space, slash, channel = where.rpartition("/")
    if not channel:
        return None
    return ChannelTarget(
        platform=platform, space=space if slash and space else None, channel=channel
    )


def _accounts(
    entries: Iterable[str],
    groups: Mapping[str, Sequence[str]],
    people: Mapping[str, Sequence[str]],
) -> list[str]:
    found: list[str] = []
    for entry in entries:
        if entry in groups:
            found += _accounts(groups[entry], {}, people)
        elif entry in people:
            found += people[entry]
        elif ":" in entry:
            found.append(entry)
    return found


def escalation_of(
    rules: Sequence[PolicyRule],
    interaction: Interaction,
    groups: Mapping[str, Sequence[str]],
    people: Mapping[str, Sequence[str]],
) -> Escalation | None:
    """The escalation the governing rule asks for ``interaction``, or None."""
    rule = governing_rule(rules, interaction)
    if rule is None or rule.action is not RuleAction.ASK or rule.escalate_after is None:
        return None
    channels = [t for e in rule.escalate_to if (t := channel_target(e)) is not None]
    people_entries = [e for e in rule.escalate_to if channel_target(e) is None]
    accounts = _accounts(people_entries, groups, people)
    return Escalation(
        after_seconds=rule.escalate_after,
        accounts=tuple(dict.fromkeys(accounts)),
        channels=tuple(dict.fromkeys(channels)),
    )


def due_at(interaction: Interaction, escalation: Escalation) -> datetime:
    return interaction.created_at + timedelta(seconds=escalation.after_seconds)


def channel_conversation(
    target: ChannelTarget, bound: Sequence[ConversationRef]
) -> ConversationRef:
    """The conversation a channel target names; its space, when not written, is that of
    the session's own conversation on the same platform."""
    space = target.space
    if space is None:
        space = next((c.space for c in bound if c.platform == target.platform), None)
    return ConversationRef(platform=target.platform, space=space, channel=target.channel)


def escalation_notice(
    interaction: Interaction,
    escalation: Escalation,
    people: Sequence[str],
    channels: Sequence[str],
) -> str:
    """What the conversations it was first asked in are told: where else it is asked now."""
    people = list(dict.fromkeys(people))
    places = []
    if people:
        dm = "a direct message" if len(people) == 1 else "direct messages"
        places.append(f"{dm} to {_and(people)}")
    if channels:
        places.append(_and(channels))
    said = ", and in ".join(places) if places else "no other conversation (none could be opened)"
    return (
        f"⏫ {quoted(interaction.title)} ({interaction.id}) was not answered within "
        f"{duration(escalation.after_seconds)}: also asked in {said}."
    )


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
