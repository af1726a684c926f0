"""send_file on the console, with the real Codex: a picture the agent sends is shown inline
in the session's page and can be downloaded; anything else is a download link."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.domain import ConversationRef
from platforms.memory.platform import MemoryPlatform
from tests.codex_env import CodexHome
from tests.console_harness import (
    CONSOLE_TABLES,
    ConsoleRunning,
    client,
    console_gateway,
    logged_in,
)
from tests.gateway_harness import ALICE, ROOM, gateway_config
from tests.servers.fake_responses import FakeResponses, message
from tests.test_telegram_send_file import PNG, send_file_turn

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


async def shown_on_the_console(running: ConsoleRunning) -> None:
    """A first turn ("hello" → "Hello."), until the console shows it: the session is bound
    to the console's page too before a file comes."""
    await running.memory.say(ROOM, ALICE, "hello")
    await running.memory.wait_for(lambda: "Hello." in running.memory.texts(ROOM))
    [session] = await running.gateway.store.sessions.list_sessions()
    mirror = ConversationRef(
        platform="console", space=None, channel="console", thread=f"s-{session.id}"
    )
    async with asyncio.timeout(30):
        seen = 0
        while not any(m.text == "Hello." for m in running.console.feed.messages([mirror])):
            seen = await running.console.changes.wait_past(seen)


async def test_a_picture_is_shown_inline_and_a_log_is_a_download(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    (codex_home.workspace / "build.log").write_text("ok\n")
    fake_model.enqueue(
        (message("Hello."),),
        send_file_turn("chart.png", "the chart"),  # type: ignore[arg-type]
        send_file_turn("build.log"),  # type: ignore[arg-type]
    )
    config = gateway_config(codex_bin, codex_home, tmp_path / "d", extra=CONSOLE_TABLES)
    async with console_gateway(config) as running:
        await shown_on_the_console(running)
        await running.memory.say(ROOM, ALICE, "send me the chart")
        await running.memory.wait_for(
            lambda: any(t.endswith("(72 bytes) to the chat") for t in running.memory.texts(ROOM))
        )
        await running.memory.say(ROOM, ALICE, "and the log")
        await running.memory.wait_for(
            lambda: any(t.endswith("(3 bytes) to the chat") for t in running.memory.texts(ROOM))
        )
        [session] = await running.gateway.store.sessions.list_sessions()
        [picture, log] = [
            m
            for m in running.console.feed.messages(
                [
                    c
                    for c in await running.gateway.store.sessions.list_bindings(session.id)
                    if c.platform == "console"
                ]
            )
            if m.file is not None
        ]
        async with client() as http:
            await logged_in(http, running)
            async with http.get(f"{running.console.url}s/{session.id}") as response:
                page = await response.text()
            assert f'<img class="sent-file" src="/f/{picture.id}" alt="chart.png">' in page
            assert f'href="/f/{log.id}?download=1" download="build.log">📎 build.log</a>' in page
            assert "the chart" in page  # the caption
            async with http.get(f"{running.console.url}f/{picture.id}") as response:
                assert response.status == 200
                assert await response.read() == PNG
                assert response.headers["Content-Type"] == "image/png"
                assert response.headers["X-Content-Type-Options"] == "nosniff"
            async with http.get(f"{running.console.url}f/{log.id}") as response:
                assert await response.read() == b"ok\n"
                assert response.headers["Content-Type"] == "application/octet-stream"
                assert response.headers["Content-Disposition"].startswith("attachment;")
        async with client() as stranger:  # not logged in: nothing
            async with stranger.get(f"{running.console.url}f/{picture.id}") as response:
                assert await response.read() != PNG


async def test_too_large_for_one_platform_the_person_sees_a_line_and_the_agent_is_told(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue((message("Hello."),), send_file_turn("chart.png"))  # type: ignore[arg-type]
    memory = MemoryPlatform()
    memory.file_max_bytes = 10
    config = gateway_config(codex_bin, codex_home, tmp_path / "d", extra=CONSOLE_TABLES)
    async with console_gateway(config, memory=memory) as running:
        await shown_on_the_console(running)
        await running.memory.say(ROOM, ALICE, "send me the chart")
        told = await running.memory.wait_for(
            lambda: next((t for t in memory.texts(ROOM) if t.endswith("10 bytes")), None)
        )
        assert told.endswith(
            "The tool said: sent chart.png (72 bytes) to the chat; not to memory: "
            "this chat takes files of up to 10 bytes"
        )
        assert (
            "📎 The agent sent `chart.png` (72 bytes), not shown here: this chat takes files"
            " of up to 10 bytes." in memory.texts(ROOM)
        )
        assert not [m for m in memory.messages(ROOM) if m.file is not None]
        [session] = await running.gateway.store.sessions.list_sessions()
        bound = await running.gateway.store.sessions.list_bindings(session.id)
        shown = running.console.feed.messages([c for c in bound if c.platform == "console"])
        assert [m.file.name for m in shown if m.file is not None] == ["chart.png"]


async def test_a_file_in_a_new_session_s_first_turn_reaches_the_console_too(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    """No turn before it. The session is bound to the console's page before its agent starts
    (Gateway.show_everywhere runs before the runner), so no binding race; the race there was
    is Codex's: a fast first turn searched its tools before the MCP server was up and did
    not find send_file ("unsupported call", seen under load). The server is ``required``
    now, so the thread waits for it."""
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png"))  # type: ignore[arg-type]
    config = gateway_config(codex_bin, codex_home, tmp_path / "d", extra=CONSOLE_TABLES)
    async with console_gateway(config) as running:
        await running.memory.say(ROOM, ALICE, "send me the chart")
        told = await running.memory.wait_for(
            lambda: next((t for t in running.memory.texts(ROOM) if t.endswith("to the chat")), None)
        )
        assert told.endswith("The tool said: sent chart.png (72 bytes) to the chat")
        [session] = await running.gateway.store.sessions.list_sessions()
        bound = await running.gateway.store.sessions.list_bindings(session.id)
        shown = running.console.feed.messages([c for c in bound if c.platform == "console"])
        assert [m.file.name for m in shown if m.file is not None] == ["chart.png"]
