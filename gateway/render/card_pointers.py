"""The short notices that point at a card: pure.

A card's edit notifies nobody, so when a card changes for a reason nobody acted on (nobody
answered in time; the gateway restarted), one short new message says so and points at the
card, which carries the detail: what the agent was told, what a next message does. Said in
full in both places, it was read twice (docs/decisions.md, issue 29).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.interactions.machine import Interaction
from gateway.wording import quoted

__all__ = ["expiry_notice", "restart_notice"]


def _named(interactions: Sequence[Interaction]) -> str:
    return ", ".join(f"{quoted(i.title)} ({i.id})" for i in interactions)


def expiry_notice(expired: Interaction) -> str:
    """'⌛ "Run a command" (k3x…) timed out: its card says what became of it.'"""
    return f"⌛ {_named([expired])} timed out: its card says what became of it."


def restart_notice(ended: Sequence[Interaction]) -> str:
    """The gateway restarted and ended the agent, whose requests ``ended`` can no longer be
    answered: their cards say what became of them and what a next message does."""
    if len(ended) == 1:
        return f"↻ The gateway restarted: the card of {_named(ended)} says what became of it."
    return f"↻ The gateway restarted: the cards of {_named(ended)} say what became of them."
