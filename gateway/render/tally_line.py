"""What every copy of a card adds to its status line under issue 17: the tally of votes
("1 of 2: alice approved") and, where people vote, the short content hash of what is being
approved.

The hash earns its place on the card's face where several people vote on one request from
different surfaces: it lets them see they approve the same content. Elsewhere it is a detail
(``Card.content_hash``), which each platform puts behind "details" (issue 29).

Kept apart from ``gateway.render.card_status`` (whose line is also the text of replies and
notices): this is for cards only, drawn by every platform through ``Card.status``.
"""

from __future__ import annotations

from gateway.cards import StatusPart
from gateway.interactions.content_hash import short_hash
from gateway.interactions.machine import Interaction
from gateway.interactions.policy import Requirement, Vote, tally

__all__ = ["card_status", "hash_detail", "votes_line"]


def votes_line(interaction: Interaction) -> str:
    """``"1 of 2: alice approved"``; empty where nobody voted (no rule asked for votes)."""
    if not interaction.votes:
        return ""
    needed = max(vote.needed for vote in interaction.votes)
    votes = [
        Vote(person=v.person, display=str(v.actor), action_id=v.action_id)
        for v in interaction.votes
    ]
    counted = tally(votes, interaction.actions, Requirement(approvals=needed))
    return counted.line(interaction.actions)


def _voted(interaction: Interaction, approvals: int) -> bool:
    """Several people vote on it: its rule asks for more than one approval (``approvals``,
    where the caller knows it), or a vote under such a rule was cast."""
    return approvals > 1 or any(vote.needed > 1 for vote in interaction.votes)


def card_status(
    interaction: Interaction, status: tuple[StatusPart, ...], *, approvals: int = 1
) -> tuple[StatusPart, ...]:
    """``status`` (card_status.status_parts) with the tally and, where people vote, the
    short content hash."""
    extra = [votes_line(interaction)]
    if _voted(interaction, approvals) and interaction.content_hash:
        extra.append(f"content hash {short_hash(interaction.content_hash)}")
    joined = " · ".join(part for part in extra if part)
    if not joined:
        return status
    return (*status, f" · {joined}") if status else (joined,)


def hash_detail(interaction: Interaction, *, approvals: int = 1) -> str:
    """The short content hash where the card's face does not show it (nobody votes), for a
    platform to put behind "details"; empty where the status line carries it."""
    if _voted(interaction, approvals) or not interaction.content_hash:
        return ""
    return short_hash(interaction.content_hash)
