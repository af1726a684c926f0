"""Telegram end to end with the real Codex app-server: what a lasting rule's button adds is
on the card, whole, for a command full of HTML's own characters (``<``, ``>``, ``&``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

COMMAND = "echo '<b>fish & chips</b>' > menu.html && cat menu.html"


async def test_an_html_laden_commands_always_button_shows_its_rule(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell(COMMAND, escalated=True), message("Done.")))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please write menu.html")
        card = await tg.card(ALICE.id)
        assert [b["text"] for b in card.buttons] == [
            "Allow once",
            "Always allow this command",
            "Deny",
            "Deny and stop the turn",
        ]
        command = f'/bin/bash -c "{COMMAND}"'
        # what runs, then what lasts, beside the button that adds it: both whole, escaped
        escaped = command.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert f'<code class="language-sh">{escaped}</code>' in card.html
        rule_line = "<b>Always allow this command</b>: Run it, and add a lasting rule"
        assert rule_line in card.html
        assert card.html.count(f"<code>{escaped}</code>") == 1
        assert card.text.count(command) == 2
        answer = await tg.press(ALICE, card, "Deny")
        assert answer["text"].startswith("Denied")
