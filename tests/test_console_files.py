"""Files picked in the console's message box reach the agent (issue 32): posted with the
message as multipart, spooled by the console, fetched by the session's host into the inbox,
a picture given as an image to an agent that takes pictures."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import aiohttp
import pytest

from gateway.domain import ConversationRef
from platforms.console.platform import ConsolePlatform
from tests.console_harness import client, console_gateway, logged_in, origin, plain_config
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
INBOX = Path(".agent-gateway/inbox")


async def on_console(console: ConsolePlatform, probe: Callable[[], T | None]) -> T:
    async with asyncio.timeout(20):
        while True:
            seen = console.changes.count
            found = probe()
            if found is not None:
                return found
            await console.changes.wait_past(seen)


def texts(console: ConsolePlatform, conversation: ConversationRef) -> list[str]:
    return [m.text for m in console.feed.messages([conversation]) if m.text is not None]


async def test_files_picked_in_the_message_box_reach_the_agent(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launcher = ScriptedLauncher({}, pictures=True)
    async with console_gateway(plain_config(tmp_path / "data", work), launcher) as running:
        console = running.console
        async with client() as http:
            csrf = await logged_in(http, running)
            started = {"csrf": csrf, "project": "demo", "text": "hello"}
            async with http.post(f"{console.url}new", data=started, headers=origin(running)) as r:
                reply = await r.json()
            assert reply["accepted"], reply
            session_id = reply["location"].rsplit("/", 1)[1]
            bound = await running.gateway.store.sessions.list_bindings(session_id)
            [room] = [c for c in bound if c.platform == "console"]
            await on_console(console, lambda: "echo: hello" in texts(console, room) or None)
            form = aiohttp.FormData()
            form.add_field("csrf", csrf)
            form.add_field("text", "why is this broken?")
            form.add_field("files", PNG, filename="screen.png", content_type="image/png")
            form.add_field("files", b"Traceback: boom\n", filename="error.log")
            url = f"{console.url}s/{session_id}/say"
            async with http.post(url, data=form, headers=origin(running)) as r:
                said = await r.json()
            assert said["accepted"], said
            echo = await on_console(
                console,
                lambda: next(
                    (t for t in texts(console, room) if t.startswith("echo: why is this")), None
                ),
            )
    shown = texts(console, room)
    assert "why is this broken?\n📎 screen.png\n📎 error.log" in shown  # what the person sent
    assert "[image: screen.png, image/png]" in echo  # the picture as a picture
    assert f"error.log (text/plain, 16 bytes): {work / INBOX / 'error.log'}" in echo
    assert (work / INBOX / "screen.png").read_bytes() == PNG
    [prompt] = [p for p in launcher.prompts if p.text.startswith("why is this broken?")]
    assert [i.name for i in prompt.images] == ["screen.png"]
