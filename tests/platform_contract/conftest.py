"""Every case runs on every platform: the ``driver`` fixture is one per platform.

A new platform joins with a driver (``<name>_driver.py``: a :class:`Driver` over its fake
server and its real SDK, the cases it cannot take named with their reasons) and a line here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.platform import PlatformLimits
from tests.platform_contract.console_driver import ConsoleDriver
from tests.platform_contract.contract import Driver
from tests.platform_contract.discord_driver import DiscordDriver
from tests.platform_contract.memory_driver import MemoryDriver
from tests.platform_contract.slack_driver import SlackDriver
from tests.platform_contract.telegram_driver import TelegramDriver
from tests.servers.fake_discord import FakeDiscord
from tests.servers.fake_slack import FakeSlack
from tests.servers.fake_telegram import FakeTelegram

# "memory-public": the memory platform without a private surface (a Discord channel's shape)
PLATFORMS = ["memory", "memory-public", "console", "telegram", "slack", "discord"]


@pytest.fixture(params=PLATFORMS)
async def driver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Driver]:
    name = request.param
    if name == "memory":
        yield MemoryDriver(tmp_path)
    elif name == "memory-public":
        yield MemoryDriver(tmp_path, PlatformLimits(has_private_surface=False))
    elif name == "console":
        yield ConsoleDriver(tmp_path)
    elif name == "telegram":
        async with FakeTelegram() as fake:
            yield TelegramDriver(tmp_path, fake)
    elif name == "slack":
        async with FakeSlack() as fake:
            yield SlackDriver(tmp_path, fake)
    elif name == "discord":
        async with FakeDiscord() as fake:
            yield DiscordDriver(tmp_path, fake)
    else:
        raise AssertionError(name)
