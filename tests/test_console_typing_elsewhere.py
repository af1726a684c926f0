"""Typing on the console page of a session started on another platform (the page the engine
binds every session to): the message goes to that session, as typing in its own chat does,
and never starts a second session on a page that shows the first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.console_harness import client, console_gateway, logged_in, origin, plain_config
from tests.gateway_harness import ALICE, ROOM
from tests.scripted_launcher import ScriptedLauncher
from tests.test_console_files import on_console, texts

pytestmark = pytest.mark.timeout(60)


async def test_a_message_typed_on_the_page_of_a_session_started_elsewhere_goes_to_it(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launcher = ScriptedLauncher({})
    async with console_gateway(plain_config(tmp_path / "data", work), launcher) as running:
        memory, console, store = running.memory, running.console, running.gateway.store
        await memory.say(ROOM, ALICE, "hello from the chat")
        await memory.wait_for(lambda: "echo: hello from the chat" in memory.texts(ROOM) or None)
        [session] = await store.sessions.list_sessions()
        [page] = [
            c for c in await store.sessions.list_bindings(session.id) if c.platform == "console"
        ]
        async with client() as http:
            csrf = await logged_in(http, running)
            said = {"csrf": csrf, "text": "and from the console"}
            url = f"{console.url}s/{session.id}/say"
            async with http.post(url, data=said, headers=origin(running)) as r:
                reply = await r.json()
        assert reply["accepted"], reply
        assert reply.get("location") is None  # the page stays the session's
        echo = "echo: and from the console"
        await on_console(console, lambda: echo in texts(console, page) or None)
        await memory.wait_for(lambda: echo in memory.texts(ROOM) or None)  # its chat too
        assert [s.id for s in await store.sessions.list_sessions()] == [session.id]
