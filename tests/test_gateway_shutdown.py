"""A gateway that stops: every platform stops taking input before the runners stop, and what
the runners say while they stop still reaches the people.

The memory platform and the web console around a whole gateway (engine, ledger, the scripted
agent); what a person does while the agent is being stopped (the scripted agent's
``on_stop``) is refused where they did it, and nothing of it is queued."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.store.store import Store
from tests.console_harness import ConsoleRunning, console_gateway, plain_config
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(60)

ALICE = Actor(platform="memory", user_id="alice", display="Alice")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")


async def test_while_the_agents_stop_no_platform_takes_input_and_their_notices_still_arrive(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = plain_config(tmp_path / "data", work)
    seen: dict[str, Any] = {}
    while_stopping: list[Callable[[], Awaitable[None]]] = []

    async def on_stop() -> None:
        for step in while_stopping:
            await step()

    launcher = ScriptedLauncher({}, on_stop=on_stop)
    # unsafe: keep cookies of an IP-address host (127.0.0.1), as a browser does
    async with (
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,
        console_gateway(config, launcher) as running,
    ):
        await running.memory.say(ROOM, ALICE, "hello")
        await running.memory.wait_for(lambda: "echo: hello" in running.memory.texts(ROOM))
        session = await running.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        page = f"{running.console.url}s/{session.id}"
        async with http.get(running.console.login_url) as response:
            csrf = _csrf(await response.text())

        async def alice_types_in_the_room() -> None:
            try:
                await running.memory.say(ROOM, ALICE, "late in the room")
            except PlatformError as exc:
                seen["memory"] = str(exc)

        async def alice_types_on_the_console(running: ConsoleRunning = running) -> None:
            headers = {"Origin": running.console.url.rstrip("/"), "Accept": "application/json"}
            data = {"text": "late on the console", "csrf": csrf}
            async with http.post(f"{page}/say", data=data, headers=headers) as response:
                seen["post"] = (response.status, await response.json())
            async with http.get(page) as response:
                seen["page"] = response.status

        while_stopping += [alice_types_in_the_room, alice_types_on_the_console]

    assert seen["memory"] == "memory platform takes no more input: the gateway is stopping"
    text = "The gateway is stopping: this was not sent. Send it again once it is back."
    assert seen["post"] == (503, {"accepted": False, "text": text, "location": None})
    assert seen["page"] == 200  # pages are still shown while the gateway stops
    said = running.memory.texts(ROOM)
    assert said[0] == "echo: hello"
    assert said[1].startswith(
        "⏹ The gateway is stopping: the agent was stopped."
    )  # sent after input stopped
    assert len(said) == 2
    async with Store.open(tmp_path / "data") as store:
        assert await store.prompts.list_queued(session.id) == []


def _csrf(page: str) -> str:
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]
