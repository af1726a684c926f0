"""``/mode``: the agent's permission mode within the project's ``allowed_modes`` (issue 31).

For Claude Code a mode is its permission mode (``plan`` < ``default`` < ``acceptEdits`` <
``auto`` < ``bypassPermissions``), set by ``set_permission_mode`` before the next message.
For Codex app-server a mode is one of two settings, each named by its own value: the
approval policy (``untrusted``, ``on-request``, ``never``: when it asks) and the sandbox
(``read-only``, ``workspace-write``, ``danger-full-access``: what it may touch). The project's
``allowed_modes = [...]`` lists the values a person may set; the gateway sends them on the next
``turn/start`` (Codex 0.171 has no ``thread/settings/update``), and Codex's acceptance of that
turn is the policy in force (``PolicyChanged``, shown by ``/status``).

An ACP agent's modes are its session modes (codex-acp 0.16: ``read-only``, ``auto``,
``full-access``), set by ``session/set_mode`` before the next prompt; OpenCode's are its
agents (``plan``, ``build``), named on each prompt. Both are the agent's own ids, checked
against what the agent offers (``ModesOffered``), and ordered as the project's
``allowed_modes`` lists them, tightest first: nothing else says which is looser. A mode the
gateway cannot place (the agent's own, not in the list) is left only by an approver's card.

Tightening (more questions, a narrower sandbox) is done at once by whoever may talk to the
project. Loosening is never done by text: it is a request an approver of the project accepts
or refuses (:mod:`gateway.interactions.setting_change`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.config.model import ApprovalPolicy, PermissionMode, ProjectConfig, SandboxMode
from gateway.domain import AgentKind
from gateway.store.session_settings import ChosenSettings

__all__ = [
    "OWN_MODES",
    "ModeChoice",
    "choose_mode",
    "mode_in_force",
    "mode_line",
    "setting_of",
]

# the agents whose modes are their own ids, ordered by the project's allowed_modes
OWN_MODES = frozenset({AgentKind.ACP, AgentKind.OPENCODE})
_OWN = "permission_mode"  # the ledger's column their mode is kept in

# each setting's values from the tightest to the loosest: a move up this list loosens
_ORDER: Mapping[str, tuple[str, ...]] = {
    "approval_policy": (ApprovalPolicy.UNTRUSTED, ApprovalPolicy.ON_REQUEST, ApprovalPolicy.NEVER),
    "sandbox": (SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS),
    # Claude Code: plan changes nothing; acceptEdits takes edits unasked; auto has a classifier
    # decide; bypassPermissions asks nobody (dontAsk is refused in allowed_modes: no order)
    "permission_mode": (
        PermissionMode.PLAN,
        PermissionMode.DEFAULT,
        PermissionMode.ACCEPT_EDITS,
        PermissionMode.AUTO,
        PermissionMode.BYPASS_PERMISSIONS,
    ),
}
_WORDS = {
    "approval_policy": "approval policy",
    "sandbox": "sandbox",
    "permission_mode": "permission mode",
}
_ECHO_MAX = 64


def setting_of(value: str) -> str | None:
    """Which setting ``value`` is a value of (``approval_policy``, ``sandbox``), or None."""
    return next((setting for setting, order in _ORDER.items() if value in order), None)


def mode_in_force(
    project: ProjectConfig, chosen: ChosenSettings, *, agent_mode: str | None = None
) -> dict[str, str]:
    """The settings of the mode the session's next turn asks for: Claude Code's permission
    mode, Codex's approval policy and sandbox, or the mode an ACP agent or OpenCode runs in
    (chosen, else what the agent said: ``agent_mode``; none while neither is known)."""
    options = project.agent_options
    if project.agent in OWN_MODES:
        now = chosen.permission_mode or agent_mode
        return {_OWN: now} if now else {}
    if project.agent is AgentKind.CLAUDE_CODE:
        return {"permission_mode": chosen.permission_mode or options.permission_mode.value}
    return {
        "approval_policy": chosen.approval_policy or options.approval_policy.value,
        "sandbox": chosen.sandbox or options.sandbox.value,
    }


def mode_line(
    project: ProjectConfig, chosen: ChosenSettings, *, agent_mode: str | None = None
) -> str:
    now = mode_in_force(project, chosen, agent_mode=agent_mode)
    if not now:
        return "Mode: the agent's own (not said yet)"
    return "Mode: " + ", ".join(f"{_WORDS[setting]} {value}" for setting, value in now.items())


@dataclass(frozen=True, kw_only=True, slots=True)
class ModeChoice:
    """What ``/mode ARGS`` comes to: the setting and value to apply (None: nothing changes),
    whether it loosens (then an approver must accept it first), and what the person is told."""

    text: str
    setting: str | None = None
    value: str | None = None
    loosens: bool = False
    before: str = ""  # the value in force now


def choose_mode(
    project: ProjectConfig,
    chosen: ChosenSettings,
    args: str,
    *,
    agent_modes: Sequence[str] | None = None,
    agent_mode: str | None = None,
) -> ModeChoice:
    """Pure: what ``/mode ARGS`` does in a session of ``project`` with ``chosen`` settings;
    for an ACP agent or OpenCode, ``agent_modes`` are the modes it offers (None: it did not
    list them) and ``agent_mode`` the one it said it runs in."""
    if project.agent in OWN_MODES:
        return _choose_own_mode(project, chosen, args, agent_modes, agent_mode)
    modes = [str(mode) for mode in project.agent_options.allowed_modes]
    now = mode_in_force(project, chosen)
    line = mode_line(project, chosen)
    if not modes:
        told = "This project lists no modes to choose from (allowed_modes in its config)"
        return ModeChoice(text=f"{line}\n{told}: nothing changes.")
    listing = "\n".join(f"  · /mode {mode}{_note(now, mode)}" for mode in modes)
    typed = args.strip().casefold()
    if not typed:
        return ModeChoice(text=f"{line}\nChoose one of:\n{listing}")
    wanted = next((mode for mode in modes if mode.casefold() == typed), None)
    if wanted is None:
        shown = args.strip()
        shown = shown if len(shown) <= _ECHO_MAX else shown[:_ECHO_MAX] + "…"
        shown = "".join(c if c.isprintable() else "?" for c in shown)
        return ModeChoice(
            text=f"“{shown}” is not one of this project's modes; nothing changed. "
            f"Choose one of:\n{listing}"
        )
    setting = setting_of(wanted)
    assert setting is not None and setting in now  # the config holds the agent's values
    order = _ORDER[setting]
    words = _WORDS[setting]
    if now[setting] == wanted:
        return ModeChoice(text=f"{line}: nothing to change.")
    loosens = order.index(wanted) > order.index(now[setting])
    if loosens:
        text = (
            f"Loosening the {words} from {now[setting]} to {wanted} needs an approver of "
            "this project."
        )
    else:
        text = f"{words.capitalize()}: {wanted}, from the next turn."
    return ModeChoice(
        text=text, setting=setting, value=wanted, loosens=loosens, before=now[setting]
    )


def _choose_own_mode(
    project: ProjectConfig,
    chosen: ChosenSettings,
    args: str,
    offered: Sequence[str] | None,
    agent_mode: str | None,
) -> ModeChoice:
    """``/mode`` for an agent whose modes are its own ids (ACP, OpenCode): the project's
    ``allowed_modes`` are the order, tightest first; what the agent offers is the check."""
    modes = [str(mode) for mode in project.agent_options.allowed_modes]
    agent = project.agent.value
    now = chosen.permission_mode or agent_mode
    line = mode_line(project, chosen, agent_mode=agent_mode)
    if not modes:
        told = "This project lists no modes to choose from (allowed_modes in its config)"
        return ModeChoice(text=f"{line}\n{told}: nothing changes.")
    if project.agent is AgentKind.ACP and not offered:
        return ModeChoice(
            text=f"{line}\n{agent} has not said which modes it offers (it says so as it "
            "starts, if it has any): nothing changed."
        )

    def note(mode: str) -> str:
        if offered is not None and mode not in offered:
            return f" (not offered by {agent})"
        if mode == now:
            return " (in force)"
        return " (asks an approver)" if _own_loosens(modes, now, mode) else ""

    listing = "\n".join(f"  · /mode {mode}{note(mode)}" for mode in modes)
    typed = args.strip()
    if not typed:
        return ModeChoice(text=f"{line}\nChoose one of:\n{listing}")
    wanted = next((mode for mode in modes if mode.casefold() == typed.casefold()), None)
    if wanted is None:
        shown = typed if len(typed) <= _ECHO_MAX else typed[:_ECHO_MAX] + "…"
        shown = "".join(c if c.isprintable() else "?" for c in shown)
        return ModeChoice(
            text=f"“{shown}” is not one of this project's modes; nothing changed. "
            f"Choose one of:\n{listing}"
        )
    if offered is not None and wanted not in offered:
        return ModeChoice(
            text=f"{agent} does not offer the mode {wanted}; nothing changed. {line}."
        )
    if wanted == now:
        return ModeChoice(text=f"{line}: nothing to change.")
    before = now or "the agent's own"
    if _own_loosens(modes, now, wanted):
        text = f"Leaving mode {before} for {wanted} needs an approver of this project."
        return ModeChoice(text=text, setting=_OWN, value=wanted, loosens=True, before=before)
    text = f"Mode: {wanted}, from the next turn."
    return ModeChoice(text=text, setting=_OWN, value=wanted, before=before)


def _own_loosens(order: Sequence[str], now: str | None, wanted: str) -> bool:
    """Whether ``wanted`` is looser than ``now`` in the project's order; a mode in force
    that the order does not place (the agent's own, or none said) is left only by an
    approver's card."""
    if now is None or now not in order:
        return True
    return order.index(wanted) > order.index(now)


def _note(now: Mapping[str, str], mode: str) -> str:
    setting = setting_of(mode)
    if setting is None or setting not in now:
        return ""
    order = _ORDER[setting]
    if now[setting] == mode:
        return " (in force)"
    return " (asks an approver)" if order.index(mode) > order.index(now[setting]) else ""
