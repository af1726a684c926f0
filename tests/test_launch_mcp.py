"""How the launcher gives an agent the gateway's MCP server (issue 33): codex-acp as Codex's
own pre-approved config on its command line (its ``mcpServers`` entry would ask), any other
ACP agent as ACP ``mcpServers``, the token never in an argv; an attached OpenCode server
under the session's own name, the other sessions' tools denied."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.acp import AcpCodec
from adapters.launch import ConfiguredLauncher
from adapters.mcp_config import opencode_added_server, opencode_other_sessions_tools
from adapters.opencode import OpenCodeCodec
from gateway.config.model import ProjectConfig
from gateway.sessions.agents import GatewayMcpServer
from platforms.registry import parse_config

SERVER = GatewayMcpServer(
    name="agent-gateway",
    command=("/usr/bin/python3", "-m", "gateway", "mcp"),
    env={"AGENT_GATEWAY_SEND_FILE_TOKEN": "sekrit", "AGENT_GATEWAY_SEND_FILE_SOCKET": "/s"},
    session_id="s1",
)


def project(argv: list[str], tmp_path: Path) -> ProjectConfig:
    (tmp_path / "w").mkdir(exist_ok=True)
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "d"))}
[projects.demo]
work_dir = {json.dumps(str(tmp_path / "w"))}
agent = "acp"
argv = {json.dumps(argv)}
[projects.demo.auth.memory]
allow_from = ["alice"]
[platforms.memory]
"""
    return parse_config(text, "test.toml").projects["demo"]


def session_new(codec: AcpCodec) -> dict[str, object]:
    codec.start()
    (initialize,) = (json.loads(line) for line in codec.data_to_send())
    answer = {"protocolVersion": 1, "agentCapabilities": {}}
    codec.feed(json.dumps({"jsonrpc": "2.0", "id": initialize["id"], "result": answer}).encode())
    (opened,) = (json.loads(line) for line in codec.data_to_send())
    assert opened["method"] == "session/new"
    return dict(opened["params"])


def test_codex_acp_gets_the_server_as_codex_config_with_the_tool_pre_approved(
    tmp_path: Path,
) -> None:
    launcher = ConfiguredLauncher(env_source={})
    codec, argv = launcher.codec_and_argv(
        project(["/opt/bin/codex-acp"], tmp_path), resume_native_id=None, mcp_server=SERVER
    )
    assert argv[0] == "/opt/bin/codex-acp"
    overrides = dict(argv[i + 1].split("=", 1) for i in range(1, len(argv), 2) if argv[i] == "-c")
    key = "mcp_servers.agent-gateway"
    assert overrides[f"{key}.default_tools_approval_mode"] == '"approve"'
    assert overrides[f"{key}.command"] == '"/usr/bin/python3"'
    assert json.loads(overrides[f"{key}.env_vars"]) == sorted(SERVER.env)
    assert int(overrides[f"{key}.tool_timeout_sec"]) >= 3600  # a person's click takes time
    assert overrides[f"{key}.required"] == "true"  # the thread waits for it to be up
    assert not [part for part in argv if "sekrit" in part]  # the token is not in the argv
    assert isinstance(codec, AcpCodec)
    assert session_new(codec)["mcpServers"] == []  # an entry would replace it, and ask


def test_another_acp_agent_gets_the_server_in_mcp_servers(tmp_path: Path) -> None:
    launcher = ConfiguredLauncher(env_source={})
    codec, argv = launcher.codec_and_argv(
        project(["/opt/bin/other-agent", "--acp"], tmp_path),
        resume_native_id=None,
        mcp_server=SERVER,
    )
    assert argv == ["/opt/bin/other-agent", "--acp"]
    assert isinstance(codec, AcpCodec)
    (entry,) = session_new(codec)["mcpServers"]  # type: ignore[misc]
    assert entry["name"] == "agent-gateway"
    assert {"name": "AGENT_GATEWAY_SEND_FILE_TOKEN", "value": "sekrit"} in entry["env"]


def test_an_attached_opencode_server_gets_the_session_s_own_server_and_denies_the_others() -> None:
    named, body = opencode_added_server(SERVER)
    assert body["name"] == named.name == "agent-gateway-s1"
    assert body["config"] == {
        "type": "local",
        "command": list(SERVER.command),
        "environment": dict(SERVER.env),
        "enabled": True,
    }
    codec = OpenCodeCodec(
        allowed_tools=("agent-gateway-s1_send_file",),
        denied_tools=opencode_other_sessions_tools(SERVER),
    )
    opened = codec.open_session()
    assert opened.body is not None
    # OpenCode: the last matching rule wins
    assert opened.body["permission"] == [
        {"permission": "*", "pattern": "*", "action": "ask"},
        {"permission": "agent-gateway-*_send_file", "pattern": "*", "action": "deny"},
        {"permission": "agent-gateway-s1_send_file", "pattern": "*", "action": "allow"},
    ]
