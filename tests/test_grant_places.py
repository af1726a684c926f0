"""Where each agent keeps a lasting grant, as /grants and /revoke name it
(gateway/sessions/grant_kinds.py): never one agent's place for another's grant."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from gateway.config.model import ProjectConfig
from gateway.domain import Actor, AgentKind, Scope
from gateway.sessions.grant_kinds import GrantKind, grant_kind, settings_place
from gateway.store.records import Grant
from platforms.registry import parse_config

ALWAYS = Grant(
    id=1,
    session_id="s1",
    interaction_id="i1",
    action_id="7",
    scope=Scope.ALWAYS,
    description="Yes, always: Run a command",
    actor=Actor(platform="memory", user_id="alice", display="Alice"),
    granted_at=datetime(2026, 12, 5, 5, 30, tzinfo=UTC),
)


def project(agent: str, env: dict[str, str]) -> ProjectConfig:
    lines = "\n".join(f'{name} = "{value}"' for name, value in env.items())
    argv = 'argv = ["some-acp-agent"]\n' if agent == "acp" else ""
    text = f"""
[projects.p]
work_dir = "/srv/p"
agent = "{agent}"
{argv}
[projects.p.agent_options.env]
{lines}

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    return parse_config(text, "gw.toml", env={}).projects["p"]


def test_claude_names_its_own_settings_file_where_the_project_puts_it() -> None:
    place = settings_place(
        AgentKind.CLAUDE_CODE, project("claude-code", {"CLAUDE_CONFIG_DIR": "/c"})
    )
    assert place.startswith("Claude's user settings (/c/settings.json, permissions.allow)")
    at_home = settings_place(AgentKind.CLAUDE_CODE, project("claude-code", {"HOME": "/home/ada"}))
    assert "/home/ada/.claude/settings.json" in at_home


def test_codex_network_rules_are_named_in_its_rules_directory() -> None:
    place = settings_place(
        AgentKind.CODEX_APP_SERVER, project("codex-app-server", {"CODEX_HOME": "/x"})
    )
    assert place == "a network rule in Codex's rules (/x/rules): remove it there"


def test_another_acp_agent_is_said_not_known_not_sent_to_claude() -> None:
    place = settings_place(AgentKind.ACP, project("acp", {}))
    assert "the gateway does not know where this agent keeps it" in place
    assert "Claude" not in place


@pytest.mark.parametrize(
    ("agent", "action_id", "kind"),
    [
        (AgentKind.ACP, "approved-execpolicy-amendment", GrantKind.CODEX_RULE),  # codex-acp
        (AgentKind.ACP, "7", GrantKind.AGENT_SETTINGS),
        (AgentKind.CODEX_APP_SERVER, "rule", GrantKind.CODEX_RULE),
        (AgentKind.OPENCODE, "always", GrantKind.OPENCODE_SERVER),
    ],
)
def test_where_each_always_lives(agent: AgentKind, action_id: str, kind: GrantKind) -> None:
    grant = replace(ALWAYS, action_id=action_id)
    assert grant_kind(agent, grant) is kind
