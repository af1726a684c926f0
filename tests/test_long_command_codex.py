"""A 20,000-character command from the real Codex app-server, approved from Telegram (issue 17:
nothing approved unseen).

What the person gets: the whole command as a file, sent before any button that could approve
it; the card says the file's name and how long it is in words ("1 line, 20,000 characters"),
every button says "(see attached command)", and the card's status line ends with the short
hash of what is approved, the hash the ledger keeps for the request and its decision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.interactions.content_hash import short_hash
from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

TEMPLATE = "printf '%s' '{}' > long.txt"
# what the command writes: the command is 20,000 characters, Telegram's message 4,096
WORDS = ("a generated word " * 1200)[: 20_000 - len(TEMPLATE.format(""))]


def with_buttons(params: dict[str, Any]) -> bool:
    """Whether a Bot API call sets inline buttons (sent as a JSON string in form data)."""
    markup = params.get("reply_markup")
    if isinstance(markup, str):
        markup = json.loads(markup)
    return bool((markup or {}).get("inline_keyboard"))


async def test_a_20000_character_command_is_attached_hashed_and_buttons_come_after_it(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    command = TEMPLATE.format(WORDS)
    assert len(command) == 20_000
    fake_model.enqueue(
        (shell(command, escalated=True, justification="Write the file"), message("Written."))
    )
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "write the long file")
        card = await tg.card(ALICE.id)
        waiting = card.text
        [request] = await tg.gateway.store.interactions.list_open()
        [document] = [m for m in fake_telegram.bot_messages(ALICE.id) if m.document]
        calls = list(fake_telegram.calls)
        answer = await tg.press(ALICE, card, "Allow once")
        assert answer["text"].startswith("Approved: Allow once"), answer
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("Written."))
        decided = await tg.gateway.store.audit.entries(event="interaction.decided")
    # the whole command, as a file
    name, content = document.document  # type: ignore[misc]
    assert name == "command.sh"
    assert command in content.decode()
    # before any button: the file's call comes first, and the card is a later message
    sends = [n for n, (method, _) in enumerate(calls) if method == "sendDocument"]
    buttons = [n for n, (_, params) in enumerate(calls) if with_buttons(params)]
    assert len(sends) == 1 and buttons and sends[0] < buttons[0], calls
    assert document.message_id < card.message_id
    # the card: what is attached and how long, in words; no command text on it
    shown = len(content.decode())
    assert f"(1 line, {shown:,} characters) is attached as command.sh" in card.text, card.text
    assert WORDS not in card.text and len(card.text) <= 4096
    assert all(b["text"].endswith("(see attached command)") for b in card.buttons), card.buttons
    # the rule "Always allow this command" adds is the command: its file, not a second one
    assert "The rule is the whole command, attached as command.sh." in waiting
    # the short hash, on the card, of what the ledger keeps and the decision records
    assert request.content_hash
    assert card.text.rstrip().endswith(f"content hash {short_hash(request.content_hash)}")
    [entry] = decided
    assert entry.details["content_hash"] == request.content_hash
    assert (codex_home.workspace / "long.txt").read_text() == WORDS
