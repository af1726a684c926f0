"""``/sessions`` and ``/switch`` on the fake Bot API (issue 31), with the scripted agent
(tests/scripted_launcher.py) and the real python-telegram-bot: the list is paged past ten,
and an approver lists, but cannot open, a session of someone's private chat."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.servers.telegram_people import Person
from tests.telegram_harness import (
    ALICE,
    BOB,
    GROUP,
    GROUP_ID,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = pytest.mark.timeout(120)


@asynccontextmanager
async def scripted(fake: FakeTelegram, tmp_path: Path) -> AsyncIterator[OnTelegram]:
    (tmp_path / "work").mkdir()
    config = telegram_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=f'groups = {{ "{GROUP_ID}" = "all" }}',
    )
    async with on_telegram(config, fake, ScriptedLauncher(REQUESTS)) as running:
        yield running


async def said_back(
    tg: OnTelegram, person: Person, text: str, starts: str, *, group: bool = False
) -> Sent:
    """``person`` says ``text`` (in the group, or their private chat); the bot's next message
    that starts with ``starts``."""
    chat = GROUP_ID if group else person.id
    before = len(tg.fake.bot_messages(chat))
    await tg.say(person, text, chat=GROUP if group else None)
    return await tg.fake.wait_for(
        lambda: next(
            (m for m in tg.fake.bot_messages(chat)[before:] if m.text.startswith(starts)), None
        ),
        30.0,
    )


async def test_sessions_pages_past_ten_in_a_private_chat(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_back(tg, ALICE, "message 1", "echo: message 1")
        for n in range(2, 12):
            await said_back(tg, ALICE, "/new", "A new session starts")
            await said_back(tg, ALICE, f"message {n}", f"echo: message {n}")
        first = (await said_back(tg, ALICE, "/sessions", "Sessions")).text.splitlines()
        assert first[0] == "Sessions 1 to 10 of 11, newest first:"
        assert first[1].startswith("1. ") and first[1].endswith(" · current here")
        assert [line.split(". ")[0] for line in first[1:11]] == [str(n) for n in range(1, 11)]
        assert first[11] == "More: /sessions 2."
        second = (await said_back(tg, ALICE, "/sessions 2", "Sessions")).text.splitlines()
        assert second[0] == "Sessions 11 to 11 of 11, newest first:"
        assert second[1].startswith("11. ") and " · ended · " in second[1]


async def test_an_approver_lists_but_cannot_open_a_session_of_a_private_chat(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_back(tg, BOB, "my secret plan", "echo: my secret plan")
        await said_back(tg, ALICE, "hello all", "echo: hello all", group=True)
        listing = await said_back(tg, ALICE, "/sessions", "Sessions", group=True)
        lines = listing.text.splitlines()
        assert lines[0] == "Sessions 1 to 2 of 2, newest first:"
        assert lines[1].endswith(" · current here")
        assert lines[2].endswith(" · listed only: held in another conversation")
        refused = await said_back(tg, ALICE, "/switch 2", "Session ", group=True)
        assert refused.text.endswith("it is listed to you, not opened here. Nothing was changed.")
        assert not any("secret" in m.text for m in tg.fake.bot_messages(GROUP_ID))
