"""What a standing grant is, where it lives, and how it is taken back (issue 17). Pure.

A grant (the ``grants`` table: a person chose an action whose scope is the session or
"always") lives where the agent keeps it, and each place has its own way back:

- **the agent process** (Codex ``acceptForSession``, Claude's rules for the session): there is
  no call to take it back; ending the process drops it, and the next epoch resumes the
  thread without it. Only while the epoch it was given in is live is it in force.
- **Codex's rules file** (an exec-policy amendment, "Always allow commands like this"): Codex
  appends ``prefix_rule(pattern=[...], decision="allow")`` to
  ``$CODEX_HOME/rules/default.rules``; revoking names the file and line and offers to remove
  that line (and ends the process, which holds the rule in memory too). codex-acp, an ACP
  agent over Codex, does the same for its ``approved-execpolicy-amendment`` option (seen on
  codex-acp 0.16.0: ``prefix_rule(pattern=["/bin/bash", "-c", "echo hi > hello.txt"], ...)``).
- **the OpenCode server** (its "always"): 1.18.33 keeps it in the server's memory (and a
  server that saves it keeps it in its saved permissions, ``/api/permission/saved``);
  revoking deletes any saved permission for those patterns and ends the server (one per
  epoch, so only while that epoch is live is it in force); the next epoch's server starts
  without it.
- **elsewhere in the agent's own settings**: named, to be removed there, where the gateway
  knows the place: Claude's rules saved to its user settings, Codex's network amendments
  (``network_rule`` lines in its rules directory). Any other ACP agent's "always" is kept
  wherever that agent keeps it, which the gateway does not know and says so: it never names
  another agent's file.

"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from gateway.config.model import ProjectConfig
from gateway.domain import AgentKind, Command, FileChange, Scope
from gateway.interactions.machine import Interaction
from gateway.store.records import Grant

__all__ = [
    "GrantKind",
    "RuleLine",
    "claude_settings_file",
    "codex_rules_file",
    "find_rule_line",
    "grant_kind",
    "opencode_permission",
    "remove_rule_line",
    "rule_words",
    "settings_place",
]

CODEX_RULES = Path("rules") / "default.rules"
# codex-acp's "always" option: Codex's exec-policy amendment, written to the rules file
CODEX_ACP_AMENDMENT = "approved-execpolicy-amendment"


class GrantKind(StrEnum):
    PROCESS = "process"  # lives in the agent process: ended to revoke
    CODEX_RULE = "codex_rule"  # a line of Codex's rules file
    AGENT_SETTINGS = "agent_settings"  # the agent's own settings: removed there, by hand
    OPENCODE_SERVER = "opencode_server"  # OpenCode's server: saved ones deleted, server ended


def _is_codex(kind: AgentKind) -> bool:
    return kind.value.startswith("codex")


def grant_kind(agent: AgentKind, grant: Grant) -> GrantKind:
    if grant.scope is Scope.SESSION:
        return GrantKind.PROCESS
    if agent is AgentKind.OPENCODE:
        return GrantKind.OPENCODE_SERVER
    if _is_codex(agent) and grant.action_id.startswith("rule"):
        return GrantKind.CODEX_RULE
    if agent is AgentKind.ACP and grant.action_id == CODEX_ACP_AMENDMENT:
        return GrantKind.CODEX_RULE
    return GrantKind.AGENT_SETTINGS


def settings_place(agent: AgentKind, project: ProjectConfig) -> str:
    """Where an ``AGENT_SETTINGS`` grant is kept, in words, and what to do about it."""
    match agent:
        case AgentKind.CLAUDE_CODE:
            settings = claude_settings_file(project)
            return f"Claude's user settings ({settings}, permissions.allow): remove it there"
        case AgentKind.CODEX_APP_SERVER | AgentKind.CODEX_EXEC:
            rules = codex_rules_file(project).parent
            return f"a network rule in Codex's rules ({rules}): remove it there"
        case _:
            return (
                "the agent's own settings: the gateway does not know where this agent keeps "
                "it, so it cannot be removed from here (see the agent's documentation)"
            )


def _agent_env(project: ProjectConfig, name: str) -> str:
    """``name`` as the agent sees it: the project's value, else the gateway's; "" if unset."""
    given = project.agent_options.env.get(name)
    return given.get_secret_value() if given is not None else os.environ.get(name, "")


def claude_settings_file(project: ProjectConfig) -> Path:
    """Where Claude keeps its user settings: ``settings.json`` in its config directory,
    ``CLAUDE_CONFIG_DIR`` else ``~/.claude`` (read in the 2.1.197 binary: user settings are
    ``join(configDir, "settings.json")``, the config dir ``CLAUDE_CONFIG_DIR ?? ~/.claude``)."""
    home = _agent_env(project, "HOME") or str(Path.home())
    config_dir = _agent_env(project, "CLAUDE_CONFIG_DIR") or str(Path(home) / ".claude")
    return Path(config_dir) / "settings.json"


def codex_rules_file(project: ProjectConfig) -> Path:
    """Where Codex writes exec-policy amendments: ``$CODEX_HOME/rules/default.rules``
    (``CODEX_HOME`` as the project gives it to the agent, else the gateway's, else
    ``~/.codex``)."""
    home = _agent_env(project, "CODEX_HOME") or str(Path.home() / ".codex")
    return Path(home) / CODEX_RULES


def rule_words(interaction: Interaction, action_id: str) -> tuple[str, ...] | None:
    """The command prefix an amendment allows: the action's rule, else the whole command."""
    action = interaction.action(action_id)
    text = action.rule if action is not None and action.rule else None
    if text is None and isinstance(interaction.detail, Command):
        text = interaction.detail.command
    if text is None:
        return None
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class RuleLine:
    path: Path
    number: int  # from 1
    text: str


_PATTERN = re.compile(r"pattern\s*=\s*(\[[^\]]*\])")


def find_rule_line(path: Path, words: tuple[str, ...]) -> RuleLine | None:
    """The ``prefix_rule`` line of ``path`` allowing exactly ``words``; None if none."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for number, line in enumerate(lines, start=1):
        if "prefix_rule" not in line or '"allow"' not in line:
            continue
        found = _PATTERN.search(line)
        if found is None:
            continue
        try:
            pattern = json.loads(found.group(1))
        except ValueError:
            continue
        if tuple(pattern) == words:
            return RuleLine(path=path, number=number, text=line.strip())
    return None


def remove_rule_line(rule: RuleLine) -> bool:
    """Remove that line if it still reads the same; False when the file changed."""
    try:
        lines = rule.path.read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return False
    if len(lines) < rule.number or lines[rule.number - 1].strip() != rule.text:
        return False
    del lines[rule.number - 1]
    rule.path.write_text("".join(lines), encoding="utf-8")
    return True


def opencode_permission(interaction: Interaction, action_id: str) -> tuple[str | None, list[str]]:
    """What an OpenCode "always" allowed: its permission (``bash``, ``edit``; None where the
    card does not say) and the patterns (the action's rule, ``"echo *, ls *"``)."""
    action = interaction.action(action_id)
    patterns = [p for p in (action.rule if action is not None else "").split(", ") if p]
    if isinstance(interaction.detail, Command):
        return "bash", patterns
    if isinstance(interaction.detail, FileChange):
        return "edit", patterns
    return None, patterns
