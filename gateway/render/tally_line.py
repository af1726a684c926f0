"""What every copy of a card adds to its status line under issue 17: the tally of votes
("1 of 2: alice approved") and the short content hash of what is being approved.

Kept apart from ``gateway.render.card_status`` (whose line is also the text of replies and
notices): this is for cards only, drawn by every platform through ``Card.status_line``.
"""

from __future__ import annotations

from gateway.interactions.content_hash import short_hash
from gateway.interactions.machine import Interaction
from gateway.interactions.policy import Requirement, Vote, tally

__all__ = ["card_status_line", "votes_line"]


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


def card_status_line(interaction: Interaction, status: str) -> str:
    """``status`` (card_status.status_line) with the tally and the short content hash."""
    parts = [status] if status else []
    votes = votes_line(interaction)
    if votes:
        parts.append(votes)
    if interaction.content_hash:
        parts.append(f"content hash {short_hash(interaction.content_hash)}")
    return " · ".join(parts)
