"""A setting change an approver must accept (issue 31): a looser ``/mode``, as a request.

Nothing is loosened by text: a person who asks for fewer questions or a wider sandbox gets a
card like any other, which an approver of the project accepts or refuses. Its origin is
:attr:`~gateway.domain.InteractionOrigin.SETTING`: its delivery is applying the setting (the
ledger's choice, which the next ``turn/start`` carries), once; no turn ends it, and the end of
the agent process that was running when it was asked does not orphan it.

What to apply is the id of the allowing action, ``<setting>=<value>``: kept with the
interaction in the ledger, named by the decision, read back by :func:`change_of`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.domain import (
    Action,
    Effect,
    InteractionKind,
    InteractionOrigin,
    InteractionRequest,
    Permissions,
    Scope,
)
from gateway.interactions.machine import Interaction, new_short_id

__all__ = ["SettingChange", "accepted", "change_of", "setting_request"]

_KEEP = "keep="  # the refusing action's id: keep=<the value in force when asked>
_WORDS = {
    "approval_policy": "approval policy",
    "sandbox": "sandbox",
    "permission_mode": "permission mode",
}
_WHAT = {
    "approval_policy": "the agent asks before fewer actions",
    "sandbox": "the agent may touch more without asking",
    "permission_mode": "the agent asks before fewer actions",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SettingChange:
    setting: str  # "approval_policy", "sandbox" or "permission_mode"
    value: str
    before: str  # the value in force when it was asked


def setting_request(setting: str, value: str, *, now: str, asker: str) -> InteractionRequest:
    """The card an approver sees for loosening ``setting`` from ``now`` to ``value``, asked
    by ``asker``. The native key is the gateway's own and new each time, so a second ask
    after a refusal is a new request."""
    words = _WORDS[setting]
    actions = (
        Action(
            id=f"{setting}={value}",
            label="Allow for this session",
            effect=Effect.ALLOW,
            scope=Scope.SESSION,
            description=f"The {words} becomes {value} from the agent's next turn.",
        ),
        Action(
            id=f"{_KEEP}{now}",
            label="Deny",
            effect=Effect.DENY,
            description=f"The {words} stays {now}.",
        ),
    )
    return InteractionRequest(
        native_key=f"setting:{new_short_id()}",
        origin=InteractionOrigin.SETTING,
        kind=InteractionKind.APPROVAL,
        title=f"Loosen the {words}: {now} → {value}?",
        summary=f"{asker} asked with /mode: {_WHAT[setting]}.",
        detail=Permissions(
            description=f"{words} {value} (now {now})",
            scope=Scope.SESSION,
            reason=f"asked by {asker} with /mode",
            requested=(f"{words}: {value}",),
        ),
        actions=actions,
    )


def change_of(interaction: Interaction) -> SettingChange | None:
    """What accepting ``interaction`` applies; None if it is no setting change."""
    if interaction.origin is not InteractionOrigin.SETTING:
        return None
    before = next(
        (a.id.removeprefix(_KEEP) for a in interaction.actions if a.id.startswith(_KEEP)), ""
    )
    for action in interaction.actions:
        setting, equals, value = action.id.partition("=")
        if action.effect is Effect.ALLOW and equals and setting in _WORDS:
            return SettingChange(setting=setting, value=value, before=before)
    return None


def accepted(interaction: Interaction) -> bool:
    """Whether the decision on the setting change ``interaction`` applies it."""
    change, fact = change_of(interaction), interaction.decision
    return (
        change is not None
        and fact is not None
        and fact.decision.action_id == f"{change.setting}={change.value}"
    )
