"""A card on a phone, with the real Codex app-server and the fake Bot API: what "always"
would allow is shown whole in the card's text (a button is cut at 60 characters), and a
request nobody answered in time says so on its card and on its command's line, never that
someone declined it."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.scripted_gateway import with_expiry
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, codex_telegram_config, on_telegram

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

BUTTON_MAX = 60  # Telegram cuts a button's text past this


async def test_the_rule_always_would_add_is_shown_whole_and_its_button_is_short(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    prefix = ["python3", "-c", "import pathlib; pathlib.Path('hello-from-a-rule.txt').touch()"]
    command = " ".join(prefix[:2]) + f' "{prefix[2]}"'
    rule = f'python3 -c "{prefix[2]}"'
    assert len(rule) > BUTTON_MAX
    fake_model.enqueue((shell(command, escalated=True, prefix_rule=prefix), message("Done.")))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create the file")
        card = await tg.card(ALICE.id)
    labels = [b["text"] for b in card.buttons]
    assert labels == [
        "Allow once",
        "Always allow commands like this",
        "Deny",
        "Deny and stop the turn",
    ]
    assert all(
        len(label) <= BUTTON_MAX and "…" not in label and "`" not in label for label in labels
    )
    shown = re.search(
        r"<code>([^<]*)</code>", card.html.split("Always allow commands like this")[1]
    )
    assert shown is not None
    assert html.unescape(shown.group(1)) == (
        "python3 -c 'import pathlib; pathlib.Path('\"'\"'hello-from-a-rule.txt'\"'\"').touch()'"
    )
    assert "commands starting with these words run without asking" in card.text


async def test_an_expired_command_says_nobody_answered_on_its_card_and_its_line(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(with_expiry(config, 0.5), fake_telegram) as tg:
        await tg.say(ALICE, "please create hello.txt")
        card = await tg.card(ALICE.id)
        await tg.fake.wait_for(lambda: card.markup is None and "Timed out" in card.text)
        line = await tg.bot_message(ALICE.id, lambda m: "(expired: nobody answered)" in m.text)
        notice = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("⌛"))
        await tg.bot_message(ALICE.id, lambda m: "Done." in m.text)
    assert re.search(
        r"Timed out: nobody answered within \d+(\.\d)? s · a refusal was sent to the agent",
        card.text,
    )
    # the command in monospace (a code entity), not in backticks
    assert "✗ /bin/bash -c 'touch hello.txt' (expired: nobody answered)" in line.text
    assert line.entities_of("code") == ["/bin/bash -c 'touch hello.txt'"]
    assert not any("(declined)" in text for text in tg.texts(ALICE.id))
    # one short line pointing at the card, before the agent's reply to the refusal
    assert notice.text.endswith("timed out: its card says what became of it.")
    assert notice.reply_to == card.message_id  # a reply to the card: it points at it
    assert "nobody answered within" not in notice.text and "“" not in notice.text
    texts = tg.texts(ALICE.id)
    assert texts.index(notice.text) < next(i for i, t in enumerate(texts) if "Done." in t)
    assert not (codex_home.workspace / "hello.txt").exists()
