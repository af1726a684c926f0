"""Telegram with the real Codex app-server and the real python-telegram-bot (fake Bot API):
/stop said once, naming who stopped the turn, on the card too; chat text beside a waiting
card told once per card, then marked with a reaction; a reply to a card answered with the
whole notice and the card again, whose buttons decide the request once."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from gateway.domain import ConversationRef, Resolution
from gateway.interactions.machine import Interaction
from platforms.telegram.platform import QUEUED_REACTION
from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import (
    ALICE,
    BOB,
    OnTelegram,
    codex_telegram_config,
    on_telegram,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

WHEN = r"\d\d:\d\d UTC"  # how a status line writes a time (gateway/wording.py)
NOT_A_DECISION = "Queued as a message for the agent, not as a decision."


def asking(fake_model: FakeResponses) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    fake_model.scenario = (message(lambda request: f"heard: {request.user_texts()[-1]}"),)


async def waiting_card(tg: OnTelegram) -> Sent:
    await tg.say(ALICE, "please create hello.txt")
    return await tg.card(ALICE.id)


def after(tg: OnTelegram, sent: Sent) -> list[Sent]:
    """The bot's messages in Alice's chat after ``sent``."""
    return [m for m in tg.fake.bot_messages(ALICE.id) if m.message_id > sent.message_id]


async def test_stop_is_one_notice_naming_who_stopped_and_the_card_says_so(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    asking(fake_model)
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        card = await waiting_card(tg)
        stop = await tg.say(ALICE, "/stop")
        notice = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("⏹"))
        assert notice.text == "⏹ Stopped by @alice."
        await tg.fake.wait_for(lambda: card.markup is None)
        assert re.search(
            rf"Stopped by @alice at {WHEN} before anyone answered · nothing was sent to the agent",
            card.text,
        )
        assert "Cancelled by the agent" not in card.text
        # after /stop, a new message runs at once: no /resume needed
        await tg.say(ALICE, "say hi instead")
        await tg.bot_message(ALICE.id, lambda m: m.text == "heard: say hi instead")
        stop_id = stop["message"]["message_id"]
        notices = [m.text for m in tg.fake.bot_messages(ALICE.id) if m.message_id > stop_id]
        assert [t for t in notices if t.startswith("⏹")] == ["⏹ Stopped by @alice."]
        assert not any("Stopping" in t or "interrupted" in t for t in notices)
        [record] = await interactions_of(tg)
    assert record.resolution is not None and record.resolution.how is Resolution.STOPPED
    assert record.resolution.by == f"telegram:{ALICE.id}"
    assert not (codex_home.workspace / "hello.txt").exists()


async def test_the_notice_is_said_once_per_card_then_a_reaction_marks_each_message(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    asking(fake_model)
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        card = await waiting_card(tg)
        await tg.say(ALICE, "ok")
        await tg.bot_message(ALICE.id, lambda m: m.text.startswith(NOT_A_DECISION))
        marked = []
        for text in ("yes", "go ahead"):
            update = await tg.say(ALICE, text)
            said = tg.fake.message(ALICE.id, update["message"]["message_id"])
            await tg.fake.wait_for(lambda said=said: said.reactions == [QUEUED_REACTION])
            marked.append(said)
        notices = [m for m in after(tg, card) if m.text.startswith(NOT_A_DECISION)]
        assert len(notices) == 1  # once for this card; each later message got a reaction
        assert card.buttons  # still waiting: nothing typed decided it

        await tg.press(ALICE, card, "Allow once")
        await tg.bot_message(ALICE.id, lambda m: m.text == "heard: go ahead")
    assert (codex_home.workspace / "hello.txt").exists()
    assert fake_telegram.too_many == []


async def test_a_reply_to_a_card_gets_the_notice_and_its_buttons_again_which_decide_once(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    asking(fake_model)
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        card = await waiting_card(tg)
        await tg.say(ALICE, "ok")  # the notice for this card is said once...
        await tg.bot_message(ALICE.id, lambda m: m.text.startswith(NOT_A_DECISION))
        # ...yet a reply to the card always gets it whole, with the card's buttons again
        await tg.say(ALICE, "what will this do?", reply_to=card)
        again = await tg.card(ALICE.id, lambda m: m.message_id > card.message_id)
        notice = next(
            m
            for m in after(tg, card)
            if "Decide with the buttons below" in m.text and m.message_id < again.message_id
        )
        assert notice.text.startswith(NOT_A_DECISION)
        assert [b["text"] for b in again.buttons] == [b["text"] for b in card.buttons]
        assert "touch hello.txt" in again.text

        deny = card.button("Deny")["callback_data"]  # the first copy's, for later
        answer = await tg.press(BOB, again, "Allow once")
        assert answer["text"] == "Approved: Allow once. Sent to the agent."
        for copy in (card, again):  # both copies end the same, no buttons left
            await tg.fake.wait_for(
                lambda copy=copy: (
                    copy.markup is None and 'Approved ("Allow once") by @bob' in copy.text
                )
            )
        late = await tg.click(ALICE, card, deny)
        assert late["text"].startswith("Already decided by @bob: ")
        await tg.bot_message(ALICE.id, lambda m: m.text == "heard: what will this do?")
        [record] = await interactions_of(tg)
        copies = await tg.gateway.store.cards.list_for(record.id)
        decisions = decision_rows(tg, record.id)
    assert decisions == 1  # one decision, by the copy drawn again
    assert record.decision is not None and record.decision.actor.user_id == str(BOB.id)
    assert [c.again for c in copies] == [0, 1]
    assert {c.message_ref for c in copies} == {str(card.message_id), str(again.message_id)}
    assert (codex_home.workspace / "hello.txt").exists()


async def interactions_of(tg: OnTelegram) -> list[Interaction]:
    chat = ConversationRef(platform="telegram", space=None, channel=str(ALICE.id))
    session = await tg.gateway.store.sessions.lookup(chat)
    assert session is not None
    return await tg.gateway.store.interactions.list_recent(session_id=session.id)


def decision_rows(tg: OnTelegram, interaction_id: str) -> int:
    uri = f"file:{tg.gateway.store.path}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM decisions WHERE interaction_id = ?", (interaction_id,)
        ).fetchone()
    return int(row[0])
