"""A turn as a Telegram chat shows it, with an agent the test moves by hand
(tests/puppet_launcher.py): "typing…" while the agent works and says nothing, none after the
turn's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.puppet_launcher import PuppetLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, on_telegram, telegram_config

pytestmark = pytest.mark.timeout(60)


def typing_in(fake: FakeTelegram, chat_id: int) -> list[dict[str, Any]]:
    return [p for p in fake.calls_to("sendChatAction") if int(p["chat_id"]) == chat_id]


async def test_the_chat_shows_typing_while_the_agent_works_and_not_after_its_answer(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = telegram_config(fake_telegram, tmp_path / "data", work_dir=tmp_path / "work")
    puppet = PuppetLauncher()
    async with on_telegram(config, fake_telegram, puppet) as tg:
        await tg.say(ALICE, "think it through")
        agent, _ = await puppet.prompt()
        agent.start_turn()  # and says nothing for a while
        [typing] = await tg.fake.wait_for(lambda: typing_in(tg.fake, ALICE.id) or None)
        assert typing["action"] == "typing"
        agent.said("m1", "Thought it through.")
        agent.complete()
        await tg.bot_message(ALICE.id, lambda m: m.text == "Thought it through.")
        await tg.fake.wait_for(lambda: not tg.telegram.typing)  # the turn's end stopped it
    calls = [
        "typing" if name == "sendChatAction" else str(params.get("text"))
        for name, params in fake_telegram.calls
        if name in ("sendChatAction", "sendMessage")
    ]
    assert calls[0] == "typing"  # before any text of the turn
    assert "typing" not in calls[calls.index("Thought it through.") :]  # never after it
