"""Telegram end to end with the real Codex app-server: a phone approves, denies, and is refused
what it may not do; every click is answered; every copy of a card tells how it ended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, CAROL, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


async def test_a_command_is_approved_from_a_phone(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create hello.txt")
        card = await tg.card(ALICE.id)
        assert "touch hello.txt" in card.text
        assert [b["text"] for b in card.buttons] == [
            "Allow once",
            "Always allow `touch hello.txt`",
            "Deny",
            "Deny and stop the turn",
        ]
        assert all(len(b["callback_data"].encode()) <= 64 for b in card.buttons)

        deny = card.button("Deny")["callback_data"]
        refused = await tg.press(CAROL, card, "Allow once")
        assert refused["text"] == "You may not decide this request."

        answer = await tg.press(ALICE, card, "Allow once")
        assert answer["text"].startswith("Approved: Allow once.")
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("Done."))
        decided = await tg.fake.wait_for(
            lambda: card.markup is None and "done" in card.text and card
        )
        assert "Approved" in decided.text and "@alice" in decided.text
        assert (codex_home.workspace / "hello.txt").exists()

        late = await tg.click(ALICE, card, deny)
        assert "already decided by @alice" in late["text"].lower()
        assert tg.fake.too_many == []
