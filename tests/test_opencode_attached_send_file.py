"""send_file on an attached OpenCode server (``url``: the gateway does not start it): the real
``opencode serve`` 1.18.33, started by the test, is given the gateway's MCP server at runtime
(``POST /mcp``), under a name of the session's own, on attach and again on resume (a new
token: the old one is refused); a server that will not take it is said once, and the session
goes on without the tool."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

import tests.servers.fake_chat_completions as fc
from adapters.opencode import basic_auth
from gateway.platform import ConversationRef
from platforms.memory.platform import MemoryPlatform
from tests.gateway_harness import ALICE, ROOM
from tests.opencode_env import OpenCodeHome, Server, opencode_server
from tests.servers.fake_chat_completions import FakeChatCompletions
from tests.test_gateway_opencode_attached import attached_config, gateway_on
from tests.test_telegram_send_file import PNG

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]


async def mcp_status(server: Server) -> dict[str, str]:
    """Each MCP server the OpenCode server has, by name, with its status (``GET /mcp``)."""
    headers = {"Authorization": basic_auth(server.password)}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.get(f"{server.url}/mcp") as answer,
    ):
        found = await answer.json()
    return {name: str(status.get("status")) for name, status in found.items()}


def tool_of(request: fc.ChatRequest) -> str:
    """The send_file tool the model is offered (exactly one: the session's own)."""
    names = [t.get("function", {}).get("name", "") for t in request.body.get("tools") or []]
    [tool] = [name for name in names if name.endswith("_send_file")]
    return tool


def send_file_turn(path: str | Callable[[fc.ChatRequest], str]) -> list[object]:
    def call(request: fc.ChatRequest) -> fc.Reply:
        named = path if isinstance(path, str) else path(request)
        return fc.Reply(tool=(tool_of(request), {"path": named}))

    return [call, fc.text(lambda r: f"The tool said: {r.tool_result()}")]


async def test_an_attached_server_is_given_send_file_and_keeps_it_after_a_restart(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    (opencode_home.workspace / "chart.png").write_bytes(PNG)
    (opencode_home.workspace / "report.txt").write_text("all green\n")
    memory = MemoryPlatform()
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        fake_chat.enqueue(send_file_turn("chart.png"))
        async with gateway_on(config, memory) as gw:
            await gw.memory.say(ROOM, ALICE, "send me the chart")
            told = await gw.text_where(lambda text: text.endswith("to the chat"))
            assert told.endswith("The tool said: sent chart.png (72 bytes) to the chat")
            assert not gw.cards()  # OpenCode asked nothing of its own
            [(first, status)] = (await mcp_status(server)).items()
            assert status == "connected"
        assert server.process.running
        # let go of with the session: the ended token's server is not left connected
        assert (await mcp_status(server))[first] != "connected"
        fake_chat.enqueue(send_file_turn("report.txt"))
        async with gateway_on(config, memory) as gw:  # reattached: the session resumed
            await gw.memory.say(ROOM, ALICE, "and the report")
            told = await gw.text_where(lambda text: text.endswith("(10 bytes) to the chat"))
            assert told.endswith("The tool said: sent report.txt (10 bytes) to the chat")
            assert not gw.cards()
        files = [m.file for m in memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content) for f in files] == [
            ("chart.png", PNG),
            ("report.txt", b"all green\n"),
        ]


async def test_a_server_that_cannot_run_the_tool_is_said_once_and_the_session_goes_on(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    memory = MemoryPlatform()
    # a server whose environment breaks the gateway's Python: the MCP server it is given
    # cannot start, and OpenCode answers POST /mcp with its failure
    broken = {"PYTHONHOME": str(tmp_path / "no-python-here")}
    async with opencode_server(opencode_bin, opencode_home, extra_env=broken) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        fake_chat.enqueue([fc.text("First answer.")], [fc.text("Second answer.")])
        async with gateway_on(config, memory) as gw:
            await gw.memory.say(ROOM, ALICE, "hello")
            await gw.text_where(lambda text: "First answer." in text)
            await gw.memory.say(ROOM, ALICE, "and again")
            await gw.text_where(lambda text: "Second answer." in text)
            notices = [t for t in gw.memory.texts(ROOM) if "send_file" in t]
            assert len(notices) == 1, notices
            assert notices[0].startswith(
                "⚠ the attached OpenCode server was not given the send_file tool, so this "
                "session cannot send files: opencode did not start it ("
            )
        for request in fake_chat.model_requests():
            names = [t.get("function", {}).get("name", "") for t in request.body.get("tools") or []]
            assert not [name for name in names if name.endswith("_send_file")]


async def test_two_sessions_on_one_server_each_have_their_own_send_file_only(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    (opencode_home.workspace / "a.txt").write_text("for room one\n")
    (opencode_home.workspace / "b.txt").write_text("for room two\n")
    other = ConversationRef(platform="memory", space="team", channel="room", thread="t2")
    memory = MemoryPlatform()
    async with opencode_server(opencode_bin, opencode_home) as server:
        config = attached_config(server, opencode_home, tmp_path / "d", server.password)
        async with gateway_on(config, memory) as gw:
            # one scenario for turn 1 of both sessions (the fake keys scenarios by turn): the
            # file named by the session's own prompt
            fake_chat.enqueue(
                send_file_turn(lambda r: "b.txt" if "send b" in str(r.messages) else "a.txt")
            )
            await gw.memory.say(ROOM, ALICE, "send a")
            await gw.text_where(lambda text: text.endswith("to the chat"))
            await gw.memory.say(other, ALICE, "send b")
            await gw.text_where(lambda text: text.endswith("to the chat"), other)
        offered = {tool_of(request) for request in fake_chat.model_requests()}
        assert len(offered) == 2  # each session was offered its own tool, and only that one
        assert [m.file.name for m in memory.messages(ROOM) if m.file is not None] == ["a.txt"]
        assert [m.file.name for m in memory.messages(other) if m.file is not None] == ["b.txt"]
