"""The Telegram platform with the scripted agent: webhook mode and its secret, who may talk,
which group messages are for the bot, and commands meant for another bot."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from gateway.cards import Card
from gateway.domain import ConversationRef
from gateway.platform import RefusedForGood
from platforms.outbox import MessageGone
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.servers.telegram_people import group_chat
from tests.telegram_harness import (
    ALICE,
    BOB,
    MALLORY,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cret-Token_for-webhooks"


@asynccontextmanager
async def scripted(
    fake: FakeTelegram, tmp_path: Path, telegram: str = "", sock: socket.socket | None = None
) -> AsyncIterator[OnTelegram]:
    (tmp_path / "work").mkdir(exist_ok=True)
    config = telegram_config(fake, tmp_path / "data", work_dir=tmp_path / "work", telegram=telegram)
    async with on_telegram(config, fake, ScriptedLauncher({}), webhook_socket=sock) as running:
        yield running


async def test_webhook_mode_takes_updates_only_with_the_secret_token(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/telegram/hook"
        options = f'mode = "webhook"\nwebhook_url = "{url}"\nsecret_token = "{SECRET}"'
        async with scripted(fake_telegram, tmp_path, options, sock) as tg:
            await tg.fake.wait_for(lambda: tg.fake.webhook)
            assert tg.fake.webhook == {"url": url, "secret_token": SECRET}
            await tg.say(ALICE, "hello by webhook")
            await tg.bot_message(ALICE.id, lambda m: m.text == "echo: hello by webhook")

            forged = {"update_id": 999, "message": {"message_id": 77, "date": 0,
                      "chat": {"id": ALICE.id, "type": "private"}, "from": ALICE.user(),
                      "text": "forged"}}  # fmt: skip
            async with aiohttp.ClientSession() as http:
                for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
                    async with http.post(url, json=forged, headers=headers) as reply:
                        assert reply.status == 403
            await tg.say(ALICE, "after the forgery")
            await tg.bot_message(ALICE.id, lambda m: m.text == "echo: after the forgery")
            assert "echo: forged" not in tg.texts(ALICE.id)
    assert fake_telegram.webhook_deliveries == [200, 200]


REFUSED_444 = (
    "You are not allowed to use this bot. Your Telegram id is 444: ask its owner to add"
    ' "444" to allow_from in the project\'s auth.telegram settings.'
)


async def test_a_stranger_is_told_their_id_once_in_private_and_allowed_people_are_known_by_it(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(MALLORY, "let me in")
        await tg.bot_message(MALLORY.id, lambda m: m.text == REFUSED_444)
        await tg.say(MALLORY, "/status")  # a command too: the same one refusal
        await tg.fake.wait_for(lambda: tg.texts(MALLORY.id) == [REFUSED_444] * 2)
        await tg.say(BOB, "hello")
        await tg.bot_message(BOB.id, lambda m: m.text == "echo: hello")
        private = ConversationRef(platform="telegram", space=None, channel=str(BOB.id))
        session = await tg.gateway.store.sessions.lookup(private)
        assert session is not None and session.initiator is not None
        assert session.initiator.key() == "telegram:222"


async def test_a_group_in_mentions_mode_takes_mentions_replies_and_its_own_commands(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    group = group_chat(-100777, "Plain group")
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(ALICE, "people talking among themselves", chat=group)
        await tg.say(ALICE, "/status@another_bot", chat=group)
        await tg.say(ALICE, "@gateway_bot first", chat=group)
        answer = await tg.bot_message(-100777, lambda m: m.text == "echo: first")
        await tg.say(BOB, "and a reply to the bot", chat=group, reply_to=answer)
        await tg.bot_message(-100777, lambda m: m.text == "echo: and a reply to the bot")
        await tg.say(ALICE, "/help@gateway_bot", chat=group)
        await tg.bot_message(-100777, lambda m: m.text.startswith("Commands:"))
        texts = tg.texts(-100777)
        assert not any("among themselves" in t or "No session" in t for t in texts)


async def test_in_a_group_a_stranger_hears_nothing_and_the_log_keeps_no_text(
    fake_telegram: FakeTelegram, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    group = group_chat(-100888, "Open group")
    async with scripted(fake_telegram, tmp_path, 'group_mode = "all"') as tg:
        await tg.say(MALLORY, "anyone listening? my secret plan", chat=group)
        await tg.say(MALLORY, "@gateway_bot do it", chat=group)
        await tg.say(MALLORY, "/help", chat=group)
        # one chat's updates are handled in order: Alice's answer comes after Mallory's
        await tg.say(ALICE, "hello", chat=group)
        await tg.bot_message(-100888, lambda m: m.text == "echo: hello")
        assert tg.texts(-100888) == ["echo: hello"]
        refused = await tg.gateway.store.audit.entries(event="message.refused")
        assert [e.actor for e in refused] == ["telegram:444"] * 3
        assert all(e.details["answered"] is False for e in refused)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "telegram:444" in logged and "not answered" in logged
    assert "secret plan" not in logged and "do it" not in logged
    assert fake_telegram.rejected == []


async def test_an_edit_of_a_deleted_card_is_message_gone(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    """Telegram's "message to edit not found" is the outbox's MessageGone, as Slack's
    message_not_found and Discord's 10008: a refusal for good, not asked again."""
    chat = ConversationRef(platform="telegram", space=None, channel=str(ALICE.id))
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(ALICE, "hello")  # the chat Telegram knows
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: hello")
        ref = await tg.telegram.send_card(chat, Card(title="Run?"))
        tg.fake.message(ALICE.id, int(ref.message_id)).deleted = True
        with pytest.raises(MessageGone) as gone:
            await tg.telegram.edit_card(ref, Card(title="Run?", status=("Allowed",)))
        assert isinstance(gone.value, RefusedForGood)
        assert "not found" in str(gone.value)


async def test_model_and_mode_are_registered_and_in_help(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        registered = await tg.fake.wait_for(lambda: tg.fake.commands, 30)
        assert {"model", "mode"} <= {command["command"] for command in registered}
        await tg.say(BOB, "/help")
        await tg.bot_message(
            BOB.id, lambda m: "/model [name]" in m.text and "/mode [mode]" in m.text
        )
