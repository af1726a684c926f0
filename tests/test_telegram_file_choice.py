"""A picture whose download keeps failing on Telegram (the Bot API's file server answers 502)
is not sent without it (issue 32): the message waits for its author's choice, through the
real python-telegram-bot against the fake Bot API and the real Codex app-server against the
scripted model. "Send without the file" gives the model the caption and a line naming the
picture, and no image; "Try again", once the file is served, gives it the picture, even
after a gateway restart in between."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message
from tests.servers.fake_telegram import FakeTelegram
from tests.servers.telegram_people import photo_update, private_chat
from tests.telegram_harness import ALICE, on_telegram, telegram_config
from tests.test_telegram_files import PNG, user_images

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

FAILING = 3  # every try of one fetch (gateway/sessions/file_fetch.py) answered 502


def is_choice(m: object) -> bool:
    return "did not come" in getattr(m, "text", "")


async def test_send_without_the_picture_gives_codex_the_caption_and_names_what_did_not_come(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("Without the picture, then."),))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    fake_telegram.file_fails = FAILING
    async with on_telegram(config, fake_telegram) as tg:
        update = photo_update(
            fake_telegram, private_chat(ALICE), ALICE, PNG, caption="why is this broken?"
        )
        await tg.fake.push(update)
        card = await tg.card(ALICE.id, is_choice)
        labels = [b["text"] for b in card.buttons]
        assert labels == ["Send without the file", "Try again", "Drop it"]
        assert "after 3 tries" in card.text and "502" in card.text
        assert fake_model.model_requests() == []  # nothing went while it waits
        retry = card.button("Try again")["callback_data"]  # the card loses its buttons
        answer = await tg.press(ALICE, card, "Send without the file")
        await tg.bot_message(ALICE.id, lambda m: "Without the picture, then." in m.text)
        told = await tg.bot_message(ALICE.id, lambda m: "Sent to the agent without" in m.text)
        again = await tg.click(ALICE, card, retry)
    assert answer["text"].startswith("📎 Sending your message without photo-")
    assert again["text"] == "This message was already sent without its file."
    assert "photo-" in told.text
    [request] = fake_model.model_requests()
    assert user_images(request.input) == []
    [text] = [t for t in request.user_texts() if "why is this broken?" in t]
    assert "refused or could not be downloaded: photo-" in text
    assert len(fake_telegram.downloads) == FAILING  # not fetched again


async def test_try_again_after_a_restart_gives_codex_the_picture(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("Hello."),), (message("A red dot."),))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    fake_telegram.file_fails = FAILING
    async with on_telegram(config, fake_telegram) as tg:
        # a turn first: Codex keeps a thread (to resume after the restart) once it had one
        await tg.say(ALICE, "hello")
        await tg.bot_message(ALICE.id, lambda m: "Hello." in m.text)
        update = photo_update(
            fake_telegram, private_chat(ALICE), ALICE, PNG, caption="why is this broken?"
        )
        await tg.fake.push(update)
        card = await tg.card(ALICE.id, is_choice)
    assert fake_telegram.file_fails == 0  # the file server answers again
    async with on_telegram(config, fake_telegram) as tg:  # the same data dir: a restart
        answer = await tg.press(ALICE, card, "Try again")
        await tg.bot_message(ALICE.id, lambda m: "A red dot." in m.text)
    assert answer["text"] == "🔁 Trying the file again."
    request = fake_model.model_requests()[-1]
    assert user_images(request.input) == [PNG]
    assert any("why is this broken?" in t for t in request.user_texts())
    assert len(fake_telegram.downloads) == FAILING + 1
