"""The expiry policy: which pending interactions are due, and what the agent is told.

DESIGN.md: ``PENDING ──expiry policy fired──▶ EXPIRED``, and the configured outcome is
delivered as "timed out", never as "the user declined". Pure: the runner's expiry task
(gateway/sessions/runner.py) reads the clock and the ledger, the broker commits and writes.

What is written goes through the request's own native key, as one of the actions the agent
offered (nothing the agent does not support is ever sent):

- ``deny``: the plain refusal (effect deny, this time or this turn only: a timeout never
  adds a standing rule); where the agent offers none, its deny-and-stop.
- ``cancel``: the deny-and-stop action; where the agent offers none, the plain refusal and
  then the turn's native interrupt.
- Neither offered (a Codex question has no decline): nothing is written and the delivery is
  recorded as skipped with the reason; with ``cancel`` the turn is still interrupted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.config.model import ExpiryOutcome
from gateway.domain import Action, Decision, Effect, InteractionOrigin, InteractionState, Scope
from gateway.interactions.machine import Interaction
from gateway.wording import duration

__all__ = [
    "TIMED_OUT_MESSAGE",
    "ExpiryPlan",
    "due_at",
    "is_due",
    "plan_expiry",
    "waited",
]

# What an agent that takes a message with a refusal (Claude's deny) tells its model.
TIMED_OUT_MESSAGE = "Nobody answered this request in time: it timed out, so it is refused."

# the outcome words a card and a notice use: "<outcome> sent to the agent"
DENY_WORDS = "deny"
STOP_WORDS = "deny and stop"

_PLAIN_SCOPES = (Scope.ONCE, Scope.TURN)  # a refusal that adds no standing rule


@dataclass(frozen=True, kw_only=True, slots=True)
class ExpiryPlan:
    """What the gateway does when an interaction expires."""

    action: Action | None  # written through the native key; None: nothing is written
    interrupt: bool  # also stop the turn (cancel asked and no deny-and-stop was offered)
    outcome: str  # what the card says was sent: "deny", "deny and stop"; "" when nothing
    not_written: str | None = None  # why nothing is written (a skipped delivery's reason)

    @property
    def decision(self) -> Decision | None:
        """The decision written to the agent: the refusal, saying it timed out."""
        if self.action is None:
            return None
        return Decision(action_id=self.action.id, message=TIMED_OUT_MESSAGE)


def due_at(interaction: Interaction, after_seconds: float) -> datetime:
    return interaction.created_at + timedelta(seconds=after_seconds)


def is_due(interaction: Interaction, after_seconds: float, now: datetime) -> bool:
    """PENDING and older than ``after_seconds`` (a decided one is never expired)."""
    return (
        interaction.state is InteractionState.PENDING and due_at(interaction, after_seconds) <= now
    )


def waited(interaction: Interaction) -> str:
    """How long an expired interaction waited, as a card and a notice say it: "30 s",
    "1 min 35 s" (gateway/wording.py)."""
    end = interaction.resolution.at if interaction.resolution else interaction.updated_at
    return duration((end - interaction.created_at).total_seconds())


def _refusal(interaction: Interaction, effect: Effect) -> Action | None:
    for scope in _PLAIN_SCOPES:
        for action in interaction.actions:
            if action.effect is effect and action.scope is scope:
                return action
    return None


def plan_expiry(interaction: Interaction, outcome: ExpiryOutcome) -> ExpiryPlan:
    """The action to write (if any) for ``interaction`` under the configured ``outcome``."""
    if interaction.origin is InteractionOrigin.SETTING:
        return ExpiryPlan(
            action=None,
            interrupt=False,
            outcome="",
            not_written="nothing changed: nobody accepted it in time",
        )
    if interaction.origin is InteractionOrigin.PLAN:
        return ExpiryPlan(
            action=None,
            interrupt=False,
            outcome="",
            not_written="not written: the gateway's own plan has no agent request to answer",
        )
    deny = _refusal(interaction, Effect.DENY)
    stop = _refusal(interaction, Effect.CANCEL)
    none_offered = f"not written: the agent offers no way to decline this {interaction.kind.value}"
    if outcome is ExpiryOutcome.DENY:
        if deny is not None:
            return ExpiryPlan(action=deny, interrupt=False, outcome=DENY_WORDS)
        if stop is not None:  # the only refusal the agent offers also stops the turn
            return ExpiryPlan(action=stop, interrupt=False, outcome=STOP_WORDS)
        return ExpiryPlan(action=None, interrupt=False, outcome="", not_written=none_offered)
    if stop is not None:
        return ExpiryPlan(action=stop, interrupt=False, outcome=STOP_WORDS)
    if deny is not None:
        return ExpiryPlan(action=deny, interrupt=True, outcome=STOP_WORDS)
    return ExpiryPlan(
        action=None,
        interrupt=True,
        outcome="",
        not_written=f"{none_offered}; the turn is stopped instead",
    )
