"""What a person reads on Telegram while the real Codex streams: one message edited in place,
split at 4096 characters, the final text exact, Telegram's limits never crossed (no 429), a
429 storm survived with nothing lost, and a message delivered twice answered once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, codex_telegram_config, on_telegram

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(150)]

LONG = "\n".join(f"line {n:04d}: the agent explains step {n} at some length." for n in range(280))


def heard(fake_model: FakeResponses) -> None:
    fake_model.scenario = (message(lambda request: f"heard: {request.user_texts()[-1]}"),)


async def test_5000_deltas_are_one_growing_text_with_no_429_and_the_exact_end(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    assert len(LONG) > 3 * 4096
    fake_model.enqueue((message(LONG, chunks=5000),))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "explain at length")
        # each part ends at a line break, which a message does not show
        shown = await tg.fake.wait_for(lambda: "\n".join(tg.texts(ALICE.id)) == LONG or None, 90)
        messages = tg.fake.bot_messages(ALICE.id)
        assert shown
        assert len(messages) == 4 and all(len(m.text) <= 4096 for m in messages)
        edits = sum(len(m.versions) - 1 for m in messages)
        assert edits < 100  # coalesced: nowhere near one edit per delta
    assert fake_telegram.too_many == []


async def test_a_429_storm_in_the_middle_of_a_turn_loses_nothing(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch storm.txt", escalated=True), message(LONG, chunks=400)))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "create storm.txt then explain")
        card = await tg.card(ALICE.id)
        tg.fake.storm(4.0, retry_after=2)
        answer = await tg.press(ALICE, card, "Allow once")  # answering a click is not limited
        assert answer["text"].startswith("Approved")

        def whole() -> bool:
            texts = [m.text for m in tg.fake.bot_messages(ALICE.id) if m is not card]
            return LONG in "\n".join(texts).split("touch storm.txt'\n\n", 1)[-1]

        await tg.fake.wait_for(whole, 90)
        await tg.fake.wait_for(lambda: card.markup is None and "done" in card.text, 60)
    assert fake_telegram.too_many, "the storm happened"
    assert (codex_home.workspace / "storm.txt").exists()


async def test_a_message_delivered_twice_is_one_prompt(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    heard(fake_model)
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        update = await tg.say(ALICE, "first")
        await tg.fake.push(update)  # Telegram delivers it again (the offset was not confirmed)
        await tg.say(ALICE, "second")
        await tg.bot_message(ALICE.id, lambda m: m.text == "heard: second")
        assert tg.texts(ALICE.id).count("heard: first") == 1
    prompts = [t for r in fake_model.model_requests() for t in r.user_texts()[-1:]]
    assert prompts.count("first") == 1
