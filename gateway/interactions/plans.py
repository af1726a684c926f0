"""A plan the gateway originates: Codex proposes a plan in a plan-mode turn and ends the turn;
nothing in the agent waits for an answer (DESIGN.md, ``Interaction``: a plan with no native
key). The person's decision becomes the next turn, the way Codex's own client does it
(docs/decisions.md, "Codex plans"): Implement is a default-mode turn that says "Implement the
plan."; Keep planning is a plan-mode turn with the person's message.

A message typed while such a card waits is a prompt like any other: it replaces the card
(resolved as superseded), it never decides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.domain import (
    Action,
    Decision,
    Effect,
    InteractionKind,
    InteractionOrigin,
    InteractionRequest,
    Plan,
)
from gateway.errors import InvalidDecision

__all__ = [
    "DEFAULT_MODE",
    "IMPLEMENT",
    "IMPLEMENT_TEXT",
    "KEEP_PLANNING",
    "KEEP_PLANNING_TEXT",
    "PLAN_MODE",
    "NextTurn",
    "next_turn",
    "plan_prompt_key",
    "proposed_plan",
]

IMPLEMENT = "implement"
KEEP_PLANNING = "keep-planning"
PLAN_MODE = "plan"
DEFAULT_MODE = "default"
# Codex 0.171's TUI: "Yes, implement this plan" sends this in default mode.
IMPLEMENT_TEXT = "Implement the plan."
KEEP_PLANNING_TEXT = "Keep planning: the plan is not approved yet."


@dataclass(frozen=True, kw_only=True, slots=True)
class NextTurn:
    """The prompt a decision on a gateway plan becomes."""

    text: str
    mode: str


def proposed_plan(markdown: str) -> InteractionRequest:
    """The plan card's request: an empty native key marks it as the gateway's own."""
    actions = (
        Action(
            id=IMPLEMENT,
            label="Implement",
            effect=Effect.ALLOW,
            description="The agent leaves plan mode and carries out the plan.",
        ),
        Action(
            id=KEEP_PLANNING,
            label="Keep planning",
            effect=Effect.DENY,
            description="The agent stays in plan mode; your message tells it what to change.",
        ),
    )
    return InteractionRequest(
        native_key="",
        origin=InteractionOrigin.PLAN,
        kind=InteractionKind.PLAN,
        title="Implement the plan?",
        summary="The agent proposes a plan and waits for you before changing anything.",
        detail=Plan(markdown=markdown),
        actions=actions,
    )


def plan_prompt_key(interaction_id: str) -> str:
    """The queued turn a decision on the plan card ``interaction_id`` becomes is keyed by it:
    queued once, and known again when it starts."""
    return f"plan:{interaction_id}"


def next_turn(decision: Decision) -> NextTurn:
    match decision.action_id:
        case "implement":
            return NextTurn(text=IMPLEMENT_TEXT, mode=DEFAULT_MODE)
        case "keep-planning":
            message = (decision.message or "").strip()
            return NextTurn(text=message or KEEP_PLANNING_TEXT, mode=PLAN_MODE)
    raise InvalidDecision(f"{decision.action_id!r} is not an action of this plan")
