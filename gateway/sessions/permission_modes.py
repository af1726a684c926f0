"""``/mode``: the agent's permission mode within the project's ``allowed_modes`` (issue 31).

For Claude Code a mode is its permission mode (``plan`` < ``default`` < ``acceptEdits`` <
``auto`` < ``bypassPermissions``), set by ``set_permission_mode`` before the next message.
For Codex app-server a mode is one of two settings, each named by its own value: the
approval policy (``untrusted``, ``on-request``, ``never``: when it asks) and the sandbox
(``read-only``, ``workspace-write``, ``danger-full-access``: what it may touch). The project's
``allowed_modes = [...]`` lists the values a person may set; the gateway sends them on the next
``turn/start`` (Codex 0.171 has no ``thread/settings/update``), and Codex's acceptance of that
turn is the policy in force (``PolicyChanged``, shown by ``/status``).

Tightening (more questions, a narrower sandbox) is done at once by whoever may talk to the
project. Loosening is never done by text: it is a request an approver of the project accepts
or refuses (:mod:`gateway.interactions.setting_change`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.config.model import ApprovalPolicy, PermissionMode, ProjectConfig, SandboxMode
from gateway.domain import AgentKind
from gateway.store.session_settings import ChosenSettings

__all__ = ["ModeChoice", "choose_mode", "mode_in_force", "mode_line", "setting_of"]

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


def mode_in_force(project: ProjectConfig, chosen: ChosenSettings) -> dict[str, str]:
    """The settings of the mode the session's next turn asks for: Claude Code's permission
    mode, or Codex's approval policy and sandbox."""
    options = project.agent_options
    if project.agent is AgentKind.CLAUDE_CODE:
        return {"permission_mode": chosen.permission_mode or options.permission_mode.value}
    return {
        "approval_policy": chosen.approval_policy or options.approval_policy.value,
        "sandbox": chosen.sandbox or options.sandbox.value,
    }


def mode_line(project: ProjectConfig, chosen: ChosenSettings) -> str:
    now = mode_in_force(project, chosen)
    return "Mode: " + ", ".join(f"{_WORDS[setting]} {value}" for setting, value in now.items())


@dataclass(frozen=True, kw_only=True, slots=True)
class ModeChoice:
    """What ``/mode ARGS`` comes to: the setting and value to apply (None: nothing changes),
    whether it loosens (then an approver must accept it first), and what the person is told."""

    text: str
    setting: str | None = None
    value: str | None = None
    loosens: bool = False


def choose_mode(project: ProjectConfig, chosen: ChosenSettings, args: str) -> ModeChoice:
    """Pure: what ``/mode ARGS`` does in a session of ``project`` with ``chosen`` settings."""
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
    return ModeChoice(text=text, setting=setting, value=wanted, loosens=loosens)


def _note(now: Mapping[str, str], mode: str) -> str:
    setting = setting_of(mode)
    if setting is None or setting not in now:
        return ""
    order = _ORDER[setting]
    if now[setting] == mode:
        return " (in force)"
    return " (asks an approver)" if order.index(mode) > order.index(now[setting]) else ""
