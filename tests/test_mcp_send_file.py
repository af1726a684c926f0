"""``agent-gateway mcp`` against the official MCP SDK's client (the conformance client).

The real server process (``python -m gateway mcp``) is started by the SDK's stdio client, as
an agent would start it; it reaches a real :class:`SendFileChannel` (a Unix socket) whose
handler stands in for the core's desk and records each call it was given. What is asserted
is what the model would read (the tool's list, the call's result) and what reached the
gateway (the call, with the session the token names).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import mcp_types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from gateway.send_file_wire import (
    ENV_SOCKET,
    ENV_TOKEN,
    SOCKET_NAME,
    SendFileAnswer,
    SendFileCall,
    encode_call,
)
from gateway.sessions.send_file_channel import (
    UNKNOWN_TOKEN_TEXT,
    Caller,
    SendFileChannel,
    SendFileTokens,
)

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(60)


class RecordingDesk:
    """The core's side, reduced to what this test watches: the calls that reached it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Caller, SendFileCall]] = []

    async def __call__(self, caller: Caller, call: SendFileCall) -> SendFileAnswer:
        self.calls.append((caller, call))
        return SendFileAnswer(call=call.call, sent=True, text=f"sent {call.path} to the chat")


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """The MCP server's stderr (its logs), kept in a file of the test."""
    with (tmp_path / "mcp.stderr").open("w") as file:
        yield file


@asynccontextmanager
async def mcp_client(env: dict[str, str], errlog: TextIO) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "mcp"], env=env, cwd=str(ROOT)
    )
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            yield session


@asynccontextmanager
async def channel(tmp_path: Path) -> AsyncIterator[tuple[SendFileChannel, RecordingDesk]]:
    desk = RecordingDesk()
    data_dir = tmp_path / "d"
    data_dir.mkdir(mode=0o700)
    async with SendFileChannel(data_dir, SendFileTokens(), desk) as served:
        assert served.socket_path == data_dir / SOCKET_NAME
        yield served, desk


def _text(result: mcp_types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, mcp_types.TextContent)
    return content.text


async def test_the_conformance_client_lists_and_calls_send_file(
    tmp_path: Path, errlog: TextIO
) -> None:
    async with channel(tmp_path) as (served, desk):
        token = served.tokens.issue("session-1")
        env = {ENV_SOCKET: str(served.socket_path), ENV_TOKEN: token}
        async with mcp_client(env, errlog) as client:
            init = await client.initialize()
            assert init.server_info.name == "agent-gateway"
            assert init.capabilities.tools is not None
            tools = await client.list_tools()
            (tool,) = tools.tools
            assert tool.name == "send_file"
            assert tool.input_schema["required"] == ["path"]
            assert set(tool.input_schema["properties"]) == {"path", "caption"}

            result = await client.call_tool(
                "send_file", {"path": "out/chart.png", "caption": "the chart"}
            )
            assert not result.is_error
            assert _text(result) == "sent out/chart.png to the chat"
    ((caller, call),) = desk.calls
    assert caller.session_id == "session-1"
    assert call.path == "out/chart.png"
    assert call.caption == "the chart"
    assert call.call.startswith("rpc:")  # keyed by the tool call's MCP request id
    assert call.token == token


async def test_an_ended_process_token_is_refused_and_the_model_reads_why(
    tmp_path: Path, errlog: TextIO
) -> None:
    async with channel(tmp_path) as (served, desk):
        token = served.tokens.issue("session-1")
        served.tokens.revoke(token)  # the agent process that held it ended
        env = {ENV_SOCKET: str(served.socket_path), ENV_TOKEN: token}
        async with mcp_client(env, errlog) as client:
            await client.initialize()
            result = await client.call_tool("send_file", {"path": "report.txt"})
            assert result.is_error
            assert _text(result) == UNKNOWN_TOKEN_TEXT
            forged = {ENV_SOCKET: str(served.socket_path), ENV_TOKEN: "not-a-token"}
        async with mcp_client(forged, errlog) as client:
            await client.initialize()
            result = await client.call_tool("send_file", {"path": "report.txt"})
            assert result.is_error
            assert _text(result) == UNKNOWN_TOKEN_TEXT
    assert desk.calls == []


async def test_bad_arguments_are_a_tool_error_and_another_tool_is_unknown(
    tmp_path: Path, errlog: TextIO
) -> None:
    async with channel(tmp_path) as (served, desk):
        env = {ENV_SOCKET: str(served.socket_path), ENV_TOKEN: served.tokens.issue("s")}
        async with mcp_client(env, errlog) as client:
            await client.initialize()
            result = await client.call_tool("send_file", {"caption": "no path"})
            assert result.is_error
            assert "needs 'path'" in _text(result)
            result = await client.call_tool("send_file", {"path": "a", "to": "everyone"})
            assert result.is_error
            assert "not to" in _text(result)
            with pytest.raises(Exception, match="Unknown tool: rm"):
                await client.call_tool("rm", {"path": "a"})
    assert desk.calls == []


async def test_a_server_not_started_by_the_gateway_says_so(tmp_path: Path, errlog: TextIO) -> None:
    async with mcp_client({}, errlog) as client:
        await client.initialize()
        result = await client.call_tool("send_file", {"path": "a.txt"})
        assert result.is_error
        assert "not started by agent-gateway" in _text(result)


async def test_a_gateway_that_is_gone_is_said(tmp_path: Path, errlog: TextIO) -> None:
    env = {ENV_SOCKET: str(tmp_path / "absent.sock"), ENV_TOKEN: "t"}
    async with mcp_client(env, errlog) as client:
        await client.initialize()
        result = await client.call_tool("send_file", {"path": "a.txt"})
        assert result.is_error
        assert "the gateway is not reachable" in _text(result)


async def test_the_socket_is_only_for_the_gateway_s_user(tmp_path: Path, errlog: TextIO) -> None:
    async with channel(tmp_path) as (served, _desk):
        assert served.socket_path.stat().st_mode & 0o777 == 0o600
    assert not served.socket_path.exists()


async def test_a_call_whose_mcp_server_hangs_up_is_given_up(tmp_path: Path) -> None:
    """The agent withdrew its call (a stopped turn): the gateway stops waiting for it."""
    started, given_up = asyncio.Event(), asyncio.Event()

    async def waits_for_a_click(caller: Caller, call: SendFileCall) -> SendFileAnswer:
        started.set()
        try:
            await asyncio.Event().wait()  # a decision that never comes
        except asyncio.CancelledError:
            given_up.set()
            raise
        raise AssertionError("unreachable")

    data_dir = tmp_path / "d"
    data_dir.mkdir(mode=0o700)
    async with SendFileChannel(data_dir, SendFileTokens(), waits_for_a_click) as served:
        token = served.tokens.issue("session-1")
        reader, writer = await asyncio.open_unix_connection(str(served.socket_path))
        writer.write(encode_call(SendFileCall(token=token, call="rpc:1", path="a.txt")))
        await writer.drain()
        async with asyncio.timeout(10):
            await started.wait()
        writer.close()  # the MCP server's call was cancelled: it hangs up
        async with asyncio.timeout(10):
            await given_up.wait()
        assert await reader.read() == b""  # and nothing was answered
