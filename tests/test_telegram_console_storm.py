"""Telegram in a 429 storm, the web console beside it: the console's card edits still land.

Each platform has its own card-refresh lane (gateway/sessions/broker.py), so Telegram's retry-after,
waited out in its outbox, holds back only Telegram. The real python-telegram-bot against the
fake Bot API, the real console, the scripted agent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.console.config import ConsoleConfig
from platforms.console.platform import ConsolePlatform
from platforms.registry import parse_config
from platforms.telegram.config import TelegramConfig
from platforms.telegram.platform import TelegramPlatform
from tests.console_harness import CONSOLE_TABLES
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import ALICE, OnTelegram, telegram_config_text

pytestmark = pytest.mark.timeout(60)


async def test_with_telegram_in_a_429_storm_the_consoles_card_edits_still_land(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    text = telegram_config_text(fake_telegram, tmp_path / "data", work_dir=tmp_path / "work")
    config = parse_config(text + CONSOLE_TABLES, "storm.toml")
    telegram_settings = config.platforms.get("telegram", TelegramConfig)
    console_settings = config.platforms.get("console", ConsoleConfig)
    assert telegram_settings is not None and console_settings is not None
    telegram = TelegramPlatform(telegram_settings)
    console = ConsolePlatform(console_settings)
    platforms = {"telegram": telegram, "console": console}
    launcher = ScriptedLauncher(REQUESTS)
    async with connected(platforms), Gateway(config, platforms=platforms, launcher=launcher) as gw:
        tg = OnTelegram(gateway=gw, telegram=telegram, fake=fake_telegram, launcher=launcher)
        await tg.say(ALICE, "approve")
        card = await tg.card(ALICE.id)
        [asked] = await gw.store.interactions.list_open()
        copies = await gw.store.cards.list_for(asked.id)
        assert {c.conversation.platform for c in copies} == {"telegram", "console"}

        fake_telegram.storm(30, retry_after=5)
        answer = await tg.press(ALICE, card, "Approve")
        assert answer["text"].startswith("Approved. ")

        [page] = [c.conversation for c in copies if c.conversation.platform == "console"]

        def on_the_console() -> str | None:
            for shown in console.feed.messages([page]):
                if shown.card is not None and not shown.card.actions:
                    return shown.card.status_line
            return None

        seen = 0
        async with asyncio.timeout(10):
            while (status := on_the_console()) is None:
                seen = await console.changes.wait_past(seen)
        assert status.startswith('Approved ("Approve") by @alice')
        # meanwhile Telegram's copy waits out its 429s: still the card as first sent
        assert telegram_card(fake_telegram, card).buttons
        await fake_telegram.wait_for(lambda: fake_telegram.too_many or None)

        fake_telegram.storm(0)
        edited = await fake_telegram.wait_for(
            lambda: (now := telegram_card(fake_telegram, card)) and not now.buttons and now
        )
        assert "Approved" in edited.text
    assert launcher.received and len(launcher.received) == 1


def telegram_card(fake: FakeTelegram, card: Sent) -> Sent:
    return next(m for m in fake.bot_messages(ALICE.id) if m.message_id == card.message_id)
