"""The fake Discord as a fixture, and a real discord.py client run against it.

``fake_discord`` (a fixture of this plugin, listed in conftest's ``pytest_plugins``) starts
:class:`tests.servers.fake_discord.FakeDiscord` on loopback and points discord.py's
``Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY`` at it for one test (put back after).
:func:`connected` runs a ``discord.Client`` in a task until the block ends, READY (with its
guilds) seen first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import discord
import pytest

from tests.servers.fake_discord import TOKEN, FakeDiscord

__all__ = ["connected", "fake_discord"]


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST v10 and gateway) on loopback, discord.py redirected to it."""
    logging.getLogger("discord").setLevel(logging.WARNING)  # DEBUG logs bodies and tokens
    async with FakeDiscord() as fake:
        undo = fake.redirect()
        try:
            yield fake
        finally:
            undo()


@contextlib.asynccontextmanager
async def connected(
    client: discord.Client, fake: FakeDiscord, *, token: str = TOKEN, deadline: float = 10.0
) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``client`` against ``fake`` until the block ends (ready first); yields its task."""
    task = asyncio.create_task(client.start(token))
    ready = asyncio.create_task(client.wait_until_ready())
    try:
        done, _ = await asyncio.wait({task, ready}, timeout=deadline, return_when="FIRST_COMPLETED")
        if task in done:
            task.result()  # raises what start() raised
        if ready not in done:
            raise TimeoutError("the client did not get ready")
        yield task
    finally:
        ready.cancel()
        await client.close()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(task, deadline)


# A platform under test takes the fake's URLs from its config instead of redirect():
#   api_base = fake_discord.api_base        -> discord.http.Route.BASE
#   gateway  = fake_discord.gateway_url     -> DiscordWebSocket.DEFAULT_GATEWAY (yarl.URL)
#   token    = tests.servers.fake_discord.TOKEN
# and Client(guild_ready_timeout=...) small, or READY waits 2 s after the last GUILD_CREATE.
