"""A chat Telegram paces holds up only its own cards (issue 36): the real Codex app-server
against the fake model, the fake Bot API answering every message and edit in Alice's chat
429 (retry after 5 s) while Bob's chat is paced as ever. Bob's card settles at once while
Alice's edit still waits; hers settles once her chat is let go, and no card lane outlives
its work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import ALICE, BOB, OnTelegram, codex_telegram_config, on_telegram

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

RETRY_AFTER = 5  # what Telegram says to wait in Alice's chat: the outbox tries 8 times


def settled(card: Sent) -> bool:
    """The card as it ends: its buttons gone, the decision written to the agent."""
    return card.markup is None and "sent to the agent" in card.text


def edit_refused(tg: OnTelegram, chat_id: int) -> bool:
    return any(
        method == "editMessageText" and chat == chat_id for method, chat, _ in tg.fake.too_many
    )


async def test_a_card_in_another_chat_settles_while_a_paced_chat_waits(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue(
        (shell("touch alice.txt", escalated=True), message("Done for Alice.")),
        (shell("touch bob.txt", escalated=True), message("Done for Bob.")),
    )
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create alice.txt")
        alice_card = await tg.card(ALICE.id, lambda m: "touch alice.txt" in m.text)
        await tg.say(BOB, "please create bob.txt")
        bob_card = await tg.card(BOB.id, lambda m: "touch bob.txt" in m.text)

        tg.fake.hold(ALICE.id, retry_after=RETRY_AFTER)
        try:
            answer = await tg.press(ALICE, alice_card, "Allow once")
            assert answer["text"] == "Approved: Allow once. Sent to the agent."
            # her card's edit went and was refused: it waits in her chat's lane
            await tg.fake.wait_for(lambda: edit_refused(tg, ALICE.id))

            await tg.press(BOB, bob_card, "Allow once")
            # Alice's chat refuses everything until let go: Bob's card did not wait for hers
            await tg.fake.wait_for(lambda: settled(bob_card))
            assert 'Approved ("Allow once") by @bob' in bob_card.text
            assert alice_card.markup is not None  # still the card as it was asked
            assert "Approved" not in alice_card.text
            assert str(ALICE.id) in {c.channel for c in tg.gateway.broker.refreshing()}
        finally:
            tg.fake.release(ALICE.id)
        await tg.fake.wait_for(lambda: settled(alice_card), deadline=8 * RETRY_AFTER)
        assert 'Approved ("Allow once") by @alice' in alice_card.text
        # the edit that waited and what changed meanwhile: never the card as asked again
        shown = alice_card.versions
        first = next(i for i, text in enumerate(shown) if "Approved" in text)
        assert first > 0 and all("Approved" in text for text in shown[first:])
        assert shown[-1] == alice_card.text
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("Done for Alice."))
        await tg.bot_message(BOB.id, lambda m: m.text.endswith("Done for Bob."))
        while tg.gateway.broker.refreshing():  # each lane ends once its cards are drawn
            await tg.gateway.broker.refreshed()
    assert (codex_home.workspace / "alice.txt").exists()
    assert (codex_home.workspace / "bob.txt").exists()
    # Bob's chat was never refused anything: his card did not wait for hers
    assert all(chat != BOB.id for _, chat, _ in fake_telegram.too_many)
