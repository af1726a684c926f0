"""``agent-gateway run`` keeps going when a platform is out at start (issue 30): the others
serve meanwhile, the one that is out is tried again, and once it connects it takes messages
without a restart. A platform that refuses its token stops, said, and the others run on;
with none left the gateway does not start. The real python-telegram-bot against the fake
Telegram; the in-process memory platform beside it; the scripted agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.domain import ConversationRef
from gateway.errors import ConfigError
from gateway.platform import NotConnected, Platform
from gateway.platform_links import linked
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from platforms.telegram.config import TelegramConfig
from platforms.telegram.platform import TelegramPlatform
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import REQUESTS, open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import message_update, private_chat
from tests.telegram_harness import ALICE as ALICE_ON_TELEGRAM

pytestmark = pytest.mark.timeout(60)

TELEGRAM_ROOM = ConversationRef(platform="telegram", space=None, channel="111")


def two_platforms(tmp_path: Path, fake: FakeTelegram, token: str = TOKEN) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.demo.auth.telegram]
allow_from = ["111"]
approvers = ["111"]

[projects.demo.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.telegram]
token = "{token}"
base_url = "{fake.base_url}"
poll_timeout_seconds = 1

[platforms.memory]
"""


def memory_and_telegram(
    tmp_path: Path, fake: FakeTelegram, token: str = TOKEN
) -> tuple[Config, TelegramConfig, MemoryPlatform, dict[str, Platform]]:
    """The config of :func:`two_platforms`, its Telegram settings, and both platforms."""
    config = parse_config(two_platforms(tmp_path, fake, token=token), "gw.toml")
    settings = config.platforms.get("telegram", TelegramConfig)
    assert settings is not None
    memory = MemoryPlatform(adopt_unknown=True)
    return config, settings, memory, {"memory": memory, "telegram": TelegramPlatform(settings)}


async def test_a_platform_out_at_start_is_tried_again_while_the_others_serve(
    tmp_path: Path,
) -> None:
    async with FakeTelegram() as fake:
        fake.down = True  # Telegram answers 502 to everything: out
        config, _settings, memory, platforms = memory_and_telegram(tmp_path, fake)
        launcher = ScriptedLauncher(REQUESTS)
        async with (
            linked(platforms, first=0.05, most=0.2) as links,
            Gateway(config, platforms=platforms, launcher=launcher) as gateway,
        ):
            links.attach(gateway)
            assert "telegram" in links.retrying and links.connected == {"memory"}
            with pytest.raises(NotConnected):  # its calls fail as in an outage meanwhile
                await platforms["telegram"].send_text(TELEGRAM_ROOM, "anyone?")
            # a whole approval on the other platform during the outage
            gw = Running(gateway=gateway, memory=memory)
            asked = await open_card(gw, ROOM, "approve")
            ack = await memory.click(ROOM, ALICE, asked.token("Approve"))
            assert ack.accepted, ack.text
            await memory.wait_for(lambda: launcher.received or None)  # written to the agent

            fake.down = False  # Telegram is back: it connects without a restart
            chat = private_chat(ALICE_ON_TELEGRAM)
            await fake.push(message_update(fake, chat, ALICE_ON_TELEGRAM, "hello"))
            said = await fake.wait_for(
                lambda: next(
                    (m for m in fake.bot_messages(chat["id"]) if m.text == "echo: hello"), None
                )
            )
            assert said is not None
            assert links.connected == {"memory", "telegram"} and not links.retrying


async def test_a_refused_token_stops_that_platform_and_the_others_run_on(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config, settings, memory, platforms = memory_and_telegram(tmp_path, fake, token="1:x")
        async with (
            linked(platforms, first=0.05) as links,
            Gateway(config, platforms=platforms, launcher=ScriptedLauncher(REQUESTS)) as gateway,
        ):
            links.attach(gateway)
            assert links.stopped == {
                "telegram": "platforms.telegram.token: Telegram refused the bot token"
            }
            [problem] = gateway.platform_problems.listed()  # the console shows it
            assert problem.platform == "telegram" and "refused the bot token" in problem.text
            gw = Running(gateway=gateway, memory=memory)
            await memory.say(ROOM, ALICE, "hello")
            await gw.text_where(lambda text: text == "echo: hello", ROOM)
        # none left: the gateway does not start
        alone = {"telegram": TelegramPlatform(settings)}
        with pytest.raises(ConfigError, match=r"^platforms\.telegram\.token: Telegram refused"):
            async with linked(alone):
                pass


async def test_a_token_refused_while_running_stops_that_platform_and_the_others_run_on(
    tmp_path: Path,
) -> None:
    async with FakeTelegram() as fake:
        config, _settings, memory, platforms = memory_and_telegram(tmp_path, fake)
        async with (
            linked(platforms, first=0.05) as links,
            Gateway(config, platforms=platforms, launcher=ScriptedLauncher(REQUESTS)) as gateway,
        ):
            links.attach(gateway)
            chat = private_chat(ALICE_ON_TELEGRAM)
            await fake.push(message_update(fake, chat, ALICE_ON_TELEGRAM, "hello"))
            await fake.wait_for(lambda: fake.bot_messages(chat["id"]) or None)
            told = asyncio.Event()
            gateway.platform_problems.listen(told.set)
            fake.token = "999000:revoked"  # revoked at BotFather while the gateway runs
            await told.wait()
            [problem] = gateway.platform_problems.listed()
            assert problem.platform == "telegram"
            assert "refused the bot token while the gateway ran" in problem.text
            assert links.connected == {"memory"} and "telegram" in links.stopped
            assert not links.none_left.is_set()
            gw = Running(gateway=gateway, memory=memory)
            await memory.say(ROOM, ALICE, "hello")
            await gw.text_where(lambda text: text == "echo: hello", ROOM)
            await memory.say(ROOM, ALICE, "/status")
            status = await gw.text_where(lambda text: text.startswith("Session "), ROOM)
            assert "Platform problems" in status
            assert "telegram: Stopped: platforms.telegram.token: Telegram refused" in status
