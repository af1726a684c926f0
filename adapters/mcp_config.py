"""The gateway's MCP server as each agent's own MCP configuration names it (issue 33).

Pure: a :class:`gateway.sessions.agents.GatewayMcpServer` in, the agent's config shape out.
The tool is pre-approved in each (so that the gateway's policy is the one decision, and a
person never gets the agent's card and then the gateway's):

- Codex (app-server ``thread/start``/``thread/resume`` ``config``, ``codex exec -c``):
  ``mcp_servers.<name>`` with ``default_tools_approval_mode = "approve"`` (without it an MCP
  tool call asks the client, ``mcpServer/elicitation/request``: FACTS-session-features.md)
  and a tool timeout long enough for a person's click, ``required`` so that the thread
  waits for the server to be up (else a fast first turn searches the tools before it is
  and does not find send_file);
- Claude Code: ``--mcp-config`` JSON (``{"mcpServers": {...}}``), its tools named
  ``mcp__<name>__<tool>`` added to the allowed tools;
- ACP ``session/new``/``session/load``: ``mcpServers`` as a list of ``{name, command, args,
  env: [{name, value}]}`` (ACP schema McpServerStdio). ACP's entry has no approval setting,
  and codex-acp 0.16 builds its Codex entry from it with none (so Codex asks, and codex-acp
  turns that into its own ``session/request_permission``): codex-acp gets the server the way
  ``codex exec`` does instead, as ``-c`` overrides on its command line
  (:func:`codex_exec_overrides`, the token in its env through ``env_vars``), and no
  ``mcpServers`` entry that would replace it.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.jsonrpc import JsonObject, JsonValue
from gateway.sessions.agents import GatewayMcpServer

__all__ = [
    "TOOL_TIMEOUT_SECONDS",
    "acp_mcp_servers",
    "claude_allowed_tools",
    "claude_mcp_config",
    "codex_exec_overrides",
    "codex_mcp_servers",
    "opencode_added_server",
    "opencode_config_content",
    "opencode_other_sessions_tools",
    "opencode_tool_name",
]

# A send_file call may wait for a person's decision: Codex's default tool timeout (60 s)
# would give up on it while the card is still on screen.
TOOL_TIMEOUT_SECONDS = 24 * 3600


def _args(server: GatewayMcpServer) -> list[JsonValue]:
    return list(server.command[1:])


def codex_mcp_servers(server: GatewayMcpServer) -> JsonObject:
    """``{"<name>": {...}}``: the value of Codex's ``mcp_servers`` config key."""
    entry: JsonObject = {
        "command": server.command[0],
        "args": _args(server),
        "env": dict(server.env),
        "default_tools_approval_mode": "approve",
        "tool_timeout_sec": TOOL_TIMEOUT_SECONDS,
        "required": True,
    }
    return {server.name: entry}


def codex_exec_overrides(
    server: GatewayMcpServer,
) -> tuple[dict[str, str | int | list[str]], dict[str, str]]:
    """``codex exec -c`` overrides for the server, and the env ``codex exec`` runs with: the
    server's env (its token) goes through ``env_vars`` (names passed on from codex's own
    env), never into the argv, which every local user can read in /proc."""
    key = f"mcp_servers.{server.name}"
    overrides: dict[str, str | int | list[str]] = {
        f"{key}.command": server.command[0],
        f"{key}.args": list(server.command[1:]),
        f"{key}.env_vars": sorted(server.env),
        f"{key}.default_tools_approval_mode": "approve",
        f"{key}.tool_timeout_sec": TOOL_TIMEOUT_SECONDS,
        f"{key}.required": True,
    }
    return overrides, dict(server.env)


def claude_mcp_config(server: GatewayMcpServer) -> JsonObject:
    """The JSON of Claude Code's ``--mcp-config``."""
    entry: JsonObject = {
        "type": "stdio",
        "command": server.command[0],
        "args": _args(server),
        "env": dict(server.env),
    }
    return {"mcpServers": {server.name: entry}}


def claude_allowed_tools(server: GatewayMcpServer) -> tuple[str, ...]:
    """Claude Code names MCP tools ``mcp__<server>__<tool>``, the server's name as written."""
    return tuple(f"mcp__{server.name}__{tool}" for tool in server.tools)


def opencode_config_content(server: GatewayMcpServer) -> JsonObject:
    """What ``OPENCODE_CONFIG_CONTENT`` adds to OpenCode's config: the server as a local MCP
    server, and its tools allowed in the permission table."""
    entry: JsonObject = {
        "type": "local",
        "command": list(server.command),
        "environment": dict(server.env),
        "enabled": True,
    }
    allowed: JsonObject = {opencode_tool_name(server, tool): "allow" for tool in server.tools}
    return {"mcp": {server.name: entry}, "permission": allowed}


def opencode_added_server(server: GatewayMcpServer) -> tuple[GatewayMcpServer, JsonObject]:
    """The server as an attached OpenCode server is given it at runtime (``POST /mcp``
    ``{name, config}``, OpenCode's McpLocalConfig), under a name of its session's own: one
    attached server runs the sessions of many conversations, its MCP servers are shared by
    all of them, and each call must carry the token of the session that made it."""
    named = replace(server, name=f"{server.name}-{server.session_id}")
    entry: JsonObject = {
        "type": "local",
        "command": list(server.command),
        "environment": dict(server.env),
        "enabled": True,
    }
    return named, {"name": named.name, "config": entry}


def opencode_tool_name(server: GatewayMcpServer, tool: str) -> str:
    """OpenCode names an MCP tool ``<server>_<tool>``, each part's other characters as
    ``_``."""
    return f"{_opencode_name(server.name)}_{tool}"


def _opencode_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def opencode_other_sessions_tools(server: GatewayMcpServer) -> tuple[str, ...]:
    """Patterns (OpenCode's wildcards) of the tools other sessions' servers of this name give
    an attached server (:func:`opencode_added_server`), which this session denies."""
    return tuple(f"{_opencode_name(server.name)}-*_{tool}" for tool in server.tools)


def acp_mcp_servers(server: GatewayMcpServer) -> list[JsonValue]:
    env: list[JsonValue] = [{"name": k, "value": v} for k, v in server.env.items()]
    entry: JsonObject = {
        "name": server.name,
        "command": server.command[0],
        "args": _args(server),
        "env": env,
    }
    return [entry]
