"""Scheduled work on the fake Bot API with the real python-telegram-bot (issue 35), the
scripted agent (tests/scripted_launcher.py) and the scheduler's clock in a file the test sets
(gateway/clock.py).

Telegram does not say a person's time zone: a schedule reads its times in the zone of the
person's ``[people.NAME]`` table, else the project's, else UTC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.clock import FileClock
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.servers.telegram_people import Person
from tests.telegram_harness import ALICE, BOB, OnTelegram, on_telegram, telegram_config

pytestmark = pytest.mark.timeout(120)

START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # 21:00 in Tokyo, 13:00 in Berlin
PEOPLE = """
[people.alice]
accounts = ["telegram:111"]
time_zone = "Asia/Tokyo"
"""


@asynccontextmanager
async def scheduled(
    fake: FakeTelegram, tmp_path: Path, *, telegram: str = "", project: str = ""
) -> AsyncIterator[tuple[OnTelegram, FileClock]]:
    (tmp_path / "work").mkdir()
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    config = telegram_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=telegram,
        project=project,
        policy=PEOPLE,
    )
    async with on_telegram(
        config, fake, ScriptedLauncher(REQUESTS), schedule_clock=clock
    ) as running:
        yield running, clock


async def answer(
    tg: OnTelegram,
    person: Person,
    text: str,
    starts: str,
    *,
    chat: dict[str, object] | None = None,
    thread: int | None = None,
) -> Sent:
    """``person`` says ``text`` (in their private chat unless ``chat``); the bot's next
    message there that starts with ``starts``."""
    chat_id = int(str(chat["id"])) if chat is not None else person.id

    def there() -> list[Sent]:
        return [m for m in tg.fake.bot_messages(chat_id) if m.thread == thread]

    before = len(there())
    await tg.say(person, text, chat=chat, thread=thread)
    return await tg.fake.wait_for(
        lambda: next((m for m in there()[before:] if m.text.startswith(starts)), None), 30.0
    )


async def tick(tg: OnTelegram, clock: FileClock, moment: datetime) -> None:
    """Move the scheduler's clock to ``moment`` and let it make one pass."""
    clock.set(moment)
    assert tg.gateway.scheduler is not None
    await tg.gateway.scheduler.tick()


async def test_at_reads_the_time_in_the_zone_of_the_persons_people_table(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scheduled(fake_telegram, tmp_path) as (tg, clock):
        made = await answer(tg, ALICE, "/at 09:00 check the nightly build", "⏰ Schedule")
        assert made.text.splitlines()[0] == (
            "⏰ Schedule S1 made: once (Asia/Tokyo), next run 2026-03-28 09:00 JST (00:00 UTC)."
        )
        # Bob has no zone of his own, and the project none: UTC
        bobs = await answer(tg, BOB, "/at 09:00 tidy the branches", "⏰ Schedule")
        assert bobs.text.splitlines()[0] == (
            "⏰ Schedule S2 made: once (UTC), next run 2026-03-28 09:00 UTC."
        )
        listed = await answer(tg, ALICE, "/schedules", "⏰ Schedule S1")
        assert "S1: once (Asia/Tokyo) · next 2026-03-28 09:00 JST (00:00 UTC)" in listed.text

        await tick(tg, clock, datetime(2026, 3, 27, 23, 59, tzinfo=UTC))  # 08:59 in Tokyo
        assert "⏰ scheduled: check the nightly build" not in tg.texts(ALICE.id)
        await tick(tg, clock, datetime(2026, 3, 28, 0, 0, tzinfo=UTC))  # 09:00 in Tokyo
        await tg.bot_message(ALICE.id, lambda m: m.text == "⏰ scheduled: check the nightly build")
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: check the nightly build")
        assert "⏰ scheduled: tidy the branches" not in tg.texts(BOB.id)
