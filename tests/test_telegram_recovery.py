"""When Telegram or the gateway goes away: a card that could not be sent is sent once Telegram
answers again, and a card left on screen by a gateway that stopped is edited to say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, codex_telegram_config, on_telegram

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


async def test_a_card_that_failed_to_send_is_sent_when_telegram_is_back(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch later.txt", escalated=True), message("Done.")))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        tg.fake.down_at_next_card = True
        await tg.say(ALICE, "please create later.txt")
        await tg.fake.wait_for(lambda: tg.fake.down)  # the card met an outage
        [open_] = await tg.gateway.store.interactions.list_open()
        assert [i.id for i in await tg.gateway.broker.unseen(open_.session_id)] == [open_.id]

        tg.fake.down = False
        card = await tg.card(ALICE.id)  # sent again, without anyone asking
        assert "touch later.txt" in card.text
        await tg.press(ALICE, card, "Allow once")
        await tg.fake.wait_for(lambda: card.markup is None and "done" in card.text)
    assert (codex_home.workspace / "later.txt").exists()


async def test_a_card_left_by_a_stopped_gateway_is_edited_when_it_starts_again(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch never.txt", escalated=True), message("Done.")))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create never.txt")
        card = await tg.card(ALICE.id)
        allow = card.button("Allow once")["callback_data"]

    async with on_telegram(config, fake_telegram) as tg:  # a new process: same ledger
        await tg.fake.wait_for(
            lambda: card.markup is None and "before anyone answered" in card.text
        )
        answer = await tg.click(ALICE, card, allow)  # an old client still shows the button
        assert answer["text"] == "This request belongs to an agent process that has ended."
    assert not (codex_home.workspace / "never.txt").exists()
