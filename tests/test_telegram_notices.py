"""What a phone is told on Telegram, with the real Codex app-server and the fake Bot API: one
short new message when a turn's last words came by an edit (edits notify nobody), none when
its last message was new, a card that notifies, a crash explained in words (no terminal
escapes, no unrelated warning shown as its cause), and no Codex warning about the features
the gateway itself enabled."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from gateway.config.model import Config
from platforms.turn_end import DONE
from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import ALICE, OnTelegram, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

# a command that runs in the sandbox until the test lets it end
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done; echo found"


def config_for(
    fake: FakeTelegram, home: CodexHome, codex_bin: str, tmp_path: Path, **options: Any
) -> Config:
    return telegram_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home, **options
    )


def send_of(fake: FakeTelegram, sent: Sent) -> dict[str, Any]:
    """The sendMessage call that made ``sent`` (the n-th sendMessage to its chat)."""
    calls = [p for p in fake.calls_to("sendMessage") if int(p["chat_id"]) == sent.chat_id]
    ours = [m for m in fake.bot_messages(sent.chat_id) if m.document is None]
    return calls[ours.index(sent)]


def notifies(call: dict[str, Any]) -> bool:
    return call.get("disable_notification") in (None, False, "false")


async def answered_again(tg: OnTelegram, text: str, answer: str) -> None:
    """Alice sends ``text`` and its answer is shown: everything of the turn before it is over
    (a conversation's turns are shown in order, each one's end before the next one's start)."""
    await tg.say(ALICE, text)
    await tg.bot_message(ALICE.id, lambda m: m.text == answer)


async def test_a_turn_whose_last_words_came_by_an_edit_ends_with_one_message_that_notifies(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell(WAIT_FOR_GO), message("Found it.")), (message("Next.", chunks=1),))
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "look for it")
        first = await tg.bot_message(ALICE.id, lambda m: True)  # the command, running
        assert DONE not in tg.texts(ALICE.id)
        (codex_home.workspace / "go").touch()
        done = await tg.bot_message(ALICE.id, lambda m: m.text == DONE)
        answer = tg.fake.message(ALICE.id, first.message_id)
        assert answer.text.endswith("Found it.") and len(answer.versions) >= 2  # edited
        assert done.message_id > answer.message_id  # after the answer, a new message
        assert notifies(send_of(tg.fake, done))
        await answered_again(tg, "and next?", "Next.")
        # one for the turn, never one per edit; none for the next turn, sent whole
        assert tg.texts(ALICE.id) == [answer.text, DONE, "Next."]
    assert fake_telegram.rejected == [] and fake_telegram.too_many == []


async def test_a_card_notifies_and_an_answer_sent_new_after_it_needs_no_extra_message(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue(
        (shell("touch made.txt", escalated=True), message("Made it.", chunks=1)),
        (message("Next.", chunks=1),),
    )
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "make made.txt")
        card = await tg.card(ALICE.id)
        assert notifies(send_of(tg.fake, card))  # a card waiting for the person is told of
        await tg.press(ALICE, card, "Allow once")
        made = await tg.bot_message(ALICE.id, lambda m: m.text == "Made it.")
        assert made.message_id > card.message_id and notifies(send_of(tg.fake, made))
        await answered_again(tg, "and next?", "Next.")
        # what came after the card was a new message, which notified: nothing more
        assert DONE not in tg.texts(ALICE.id)
    assert fake_telegram.rejected == []


async def test_a_short_answer_sent_whole_gets_no_extra_message(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("Hello there.", chunks=1),), (message("Again.", chunks=1),))
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await answered_again(tg, "hello", "Hello there.")
        await answered_again(tg, "hello again", "Again.")
        assert tg.texts(ALICE.id) == ["Hello there.", "Again."]
        hello = tg.fake.bot_messages(ALICE.id)[0]
        assert hello.versions == ["Hello there."] and notifies(send_of(tg.fake, hello))
    assert fake_telegram.rejected == []


async def test_a_crash_is_told_in_words_without_escapes_or_an_unrelated_warning(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch never.txt", escalated=True), message("Never.")))
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "make never.txt")
        await tg.card(ALICE.id)
        [epoch] = await tg.gateway.store.sessions.live_epochs()
        assert epoch.pgid is not None
        os.killpg(epoch.pgid, signal.SIGKILL)
        notice = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("⚠"))
    text = notice.text
    assert "\x1b" not in text and "[0m" not in text
    assert "bubblewrap" not in text.lower()
    assert text.startswith("⚠ The agent process ended unexpectedly (killed by a signal).")
    assert "Your next message starts it again" in text and "/new starts a fresh one" in text
    assert DONE not in [m.text for m in fake_telegram.bot_messages(ALICE.id)]
    assert fake_telegram.rejected == []


async def test_codex_does_not_warn_about_the_features_the_gateway_enabled(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("Ready.", chunks=1),))
    config = config_for(
        fake_telegram,
        codex_home,
        codex_bin,
        tmp_path,
        features=("default_mode_request_user_input",),
    )
    async with on_telegram(config, fake_telegram) as tg:
        # Codex warns when the thread starts, before the turn: a notice shown before its text
        await answered_again(tg, "are you there?", "Ready.")
        texts = tg.texts(ALICE.id)
    assert texts == ["Ready."]
    assert not any("Under-development" in t or "suppress_unstable" in t for t in texts)
