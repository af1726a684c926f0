"""Telegram with the real Codex app-server (issue 31): a message typed while a command runs
gets the queued notice with "Send into this turn now"; pressed by its author, the message
goes into the running turn (the model's next request of the same turn carries it), and a
second press is answered plainly. /compact is in the bot's command menu."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.command_gate import command_gate
from tests.servers.fake_responses import FakeResponses, ModelRequest, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

STEERED = "also mention bananas"


def _bananas(request: ModelRequest) -> str:
    return "Bananas, as asked." if STEERED in request.user_texts() else "No bananas."


async def test_the_queued_notice_button_steers_from_a_phone(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("cat gate"), message(_bananas)))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "read the gate")
        async with command_gate(codex_home.workspace / "gate") as gate:
            await tg.say(ALICE, STEERED)
            notice = await tg.card(ALICE.id, lambda m: "Queued" in m.text)
            assert [b["text"] for b in notice.buttons] == ["Send into this turn now"]
            answer = await tg.press(ALICE, notice, "Send into this turn now")
            assert answer["text"] == "↪ Sent into the running turn."
            again = await tg.press(ALICE, notice, "Send into this turn now")
            assert "no longer waiting" in again["text"]
            os.write(gate, b"open\n")
        await tg.bot_message(ALICE.id, lambda m: "Bananas, as asked." in m.text)
    requests = fake_model.model_requests()
    assert {r.turn_id for r in requests} == {requests[0].turn_id}
    assert STEERED in requests[-1].user_texts()
    menu = [c["command"] for c in fake_telegram.commands]
    assert "compact" in menu
