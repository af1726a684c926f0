"""The agent versions the adapters are proven with, and what ``check`` says of another one.

The test suite runs the real binaries at these versions (``scripts/agent-versions.env``, which
tests/test_proven_versions.py holds to this table). An older agent may lack a message the
adapter relies on; a newer one may have changed one: neither stops the gateway (an agent
that speaks the protocol works), both are said, with what to do.

Codex's Linux sandbox, which runs the commands a person approves for Codex and codex-acp,
needs bubblewrap (``bwrap``): its absence is said too, with the package that installs it.
"""

from __future__ import annotations

import re
import shutil
import sys

from gateway.config.model import ProjectConfig, SandboxMode
from gateway.domain import AgentKind

__all__ = ["PROVEN", "runs_codex_acp", "sandbox_warning", "version_warning"]

# kind: (the version proven, the program's name as people know it, how to install that one)
PROVEN: dict[AgentKind, tuple[str, str, str]] = {
    AgentKind.CODEX_APP_SERVER: ("0.171.0", "codex", "npm install -g @openai/codex@0.171.0"),
    AgentKind.CODEX_EXEC: ("0.171.0", "codex", "npm install -g @openai/codex@0.171.0"),
    AgentKind.CLAUDE_CODE: (
        "2.1.197",
        "claude",
        "npm install -g @anthropic-ai/claude-code@2.1.197",
    ),
    AgentKind.OPENCODE: ("1.18.33", "opencode", "npm install -g opencode-ai@1.18.33"),
}
# ACP is a protocol, not one agent: the one proven is Zed's codex-acp
CODEX_ACP = ("0.16.0", "codex-acp", "npm install -g @zed-industries/codex-acp@0.16.0")

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def _proven_for(project: ProjectConfig, said: str) -> tuple[str, str, str] | None:
    if project.agent is AgentKind.ACP:
        return CODEX_ACP if "codex-acp" in said or runs_codex_acp(project) else None
    return PROVEN.get(project.agent)


def runs_codex_acp(project: ProjectConfig) -> bool:
    """The project's ACP agent is Zed's codex-acp (its argv names it: the binary, its npm
    package, ``npx @zed-industries/codex-acp``)."""
    return any("codex-acp" in part for part in project.argv())


def version_warning(project: ProjectConfig, said: str) -> str | None:
    """What to say of the version the agent printed (``said``: its ``--version``, or an ACP
    agent's name and version), or None for the version proven or one that cannot be read."""
    proven = _proven_for(project, said)
    found = _VERSION.search(said)
    if proven is None or found is None:
        return None
    version, name, install = proven
    have = tuple(int(part) for part in found.groups())
    want = tuple(int(part) for part in version.split("."))
    if have < want:
        return (
            f"{name} {found.group(0)} is older than {version}, the version the gateway is "
            f"proven with: some requests may not reach you as cards; upgrade it ({install})"
        )
    if have > want:
        return (
            f"{name} {found.group(0)} is newer than {version}, the version the gateway is "
            "proven with: untested (tell us what breaks)"
        )
    return None


def sandbox_warning(project: ProjectConfig) -> str | None:
    """Codex or codex-acp on Linux without bubblewrap: the sandbox its approved commands run
    in cannot start. None elsewhere, or where the project runs without a sandbox."""
    codex = project.agent in (AgentKind.CODEX_APP_SERVER, AgentKind.CODEX_EXEC) or (
        project.agent is AgentKind.ACP and runs_codex_acp(project)
    )
    if not codex or not sys.platform.startswith("linux") or project.attached:
        return None
    if project.agent_options.sandbox is SandboxMode.DANGER_FULL_ACCESS:
        return None
    if shutil.which("bwrap") is not None:
        return None
    return (
        "bwrap (bubblewrap) is not installed: Codex runs the commands you approve in its "
        "Linux sandbox, which needs it (Debian/Ubuntu: apt install bubblewrap)"
    )
