"""An update the core could not take is not confirmed to Telegram: it is given again and taken
once, in its chat's order; one that fails every time is given up with a reply to the person.

The failures are injected at the platform's seam, the Inbox (:class:`FlakyInbox`): a busy
ledger raises StoreError for a while, a bug of ours raises every time. Everything else is
real: the engine and ledger, the scripted agent, python-telegram-bot and the fake Bot API,
by long polling and by webhook."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.domain import Answer, InteractionKind, InteractionRequest, Option, Question
from gateway.platform import Inbox
from platforms.telegram.taking import MAX_ATTEMPTS
from platforms.telegram.updates import CLICK_REFUSED, MESSAGE_REFUSED
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.servers.telegram_people import callback_update
from tests.telegram_harness import (
    ALICE,
    BOB,
    GROUP,
    GROUP_ID,
    FlakyInbox,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = pytest.mark.timeout(90)

SECRET = "s3cret-Token_for-webhooks"
COLOURS = (Option(id="red", label="Red"), Option(id="green", label="Green"))
REQUESTS = {
    "ask-multi": InteractionRequest(
        native_key="multi",
        kind=InteractionKind.QUESTION,
        title="The agent asks",
        questions=(
            Question(id="colours", header="Colours", text="Which?", options=COLOURS, multi=True),
        ),
    ),
    "ask-one": InteractionRequest(
        native_key="one",
        kind=InteractionKind.QUESTION,
        title="The agent asks",
        questions=(Question(id="pick", header="Pick", text="Which one?", options=COLOURS),),
    ),
    "ask-secret": InteractionRequest(
        native_key="secret",
        kind=InteractionKind.QUESTION,
        title="The agent asks",
        questions=(
            Question(id="token", header="Token", text="The token?", allow_other=True, secret=True),
        ),
    ),
}


@asynccontextmanager
async def flaky(
    fake: FakeTelegram,
    tmp_path: Path,
    make: Callable[[Inbox], FlakyInbox],
    *,
    webhook: bool = False,
) -> AsyncIterator[tuple[OnTelegram, FlakyInbox]]:
    (tmp_path / "work").mkdir()
    options = f'groups = {{ "{GROUP_ID}" = "all" }}'
    with socket.socket() as sock:
        if webhook:
            sock.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{sock.getsockname()[1]}/telegram/hook"
            options += f'\nmode = "webhook"\nwebhook_url = "{url}"\nsecret_token = "{SECRET}"'
        config = telegram_config(
            fake, tmp_path / "data", work_dir=tmp_path / "work", telegram=options
        )
        launcher = ScriptedLauncher(REQUESTS)
        async with on_telegram(
            config, fake, launcher, webhook_socket=sock if webhook else None, inbox=make
        ) as tg:
            assert isinstance(tg.inbox, FlakyInbox)
            yield tg, tg.inbox


def handed_out(fake: FakeTelegram, update_id: int) -> int:
    """How many getUpdates answers carried ``update_id``."""
    return sum(update_id in ids for ids in fake.handed_out)


@pytest.mark.parametrize("webhook", [False, True], ids=["polling", "webhook"])
async def test_a_message_the_busy_ledger_refused_is_given_again_and_answered_once_in_order(
    fake_telegram: FakeTelegram, tmp_path: Path, webhook: bool
) -> None:
    def make(gateway: Inbox) -> FlakyInbox:
        return FlakyInbox(gateway, busy={"hello": 2})

    async with flaky(fake_telegram, tmp_path, make, webhook=webhook) as (tg, inbox):
        hello = (await tg.say(ALICE, "hello"))["update_id"]
        await tg.say(ALICE, "and then this")  # the same chat: it waits for "hello"
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: and then this")
        await tg.say(ALICE, "last")
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: last")
        assert tg.texts(ALICE.id) == ["echo: hello", "echo: and then this", "echo: last"]

    assert inbox.failures["hello"] == 2
    assert inbox.passed == ["hello", "and then this", "last"]
    if webhook:  # answered 500 twice, so Telegram POSTed it again
        assert tg.fake.webhook_deliveries[:3] == [500, 500, 200]
    else:
        assert handed_out(tg.fake, hello) == 3
    assert tg.fake.unconfirmed == []


async def test_a_toggle_taken_while_another_chat_waits_is_not_toggled_again_when_given_again(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    def make(gateway: Inbox) -> FlakyInbox:
        return FlakyInbox(gateway, busy={"hello": 1000})  # busy until the test lets it through

    async with flaky(fake_telegram, tmp_path, make) as (tg, inbox):
        await tg.say(BOB, "ask-multi", chat=GROUP)
        card = await tg.card(GROUP_ID)
        hello = (await tg.say(ALICE, "hello"))["update_id"]
        await tg.fake.wait_for(lambda: inbox.failures["hello"] >= 1)

        # Bob's click comes in a batch with Alice's message, which keeps failing
        query_id, update = callback_update(
            tg.fake, BOB, card, card.button("☐ Red")["callback_data"]
        )
        click = await tg.fake.push(update)
        answer = await tg.fake.wait_for(
            lambda: next((a for a in tg.fake.answers if a["callback_query_id"] == query_id), None)
        )
        assert answer["text"] == "☑ Red"
        await tg.fake.wait_for(lambda: handed_out(tg.fake, click) >= 2)  # given again
        assert handed_out(tg.fake, hello) >= 3
        inbox.busy["hello"] = 0
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: hello")
        await tg.say(BOB, "/pending", chat=GROUP)  # answered after any redraw of the card
        await tg.bot_message(GROUP_ID, lambda m: m.text.startswith("Open requests:"))
        assert [b["text"] for b in card.buttons][:2] == ["☑ Red", "☐ Green"]
        assert tg.texts(ALICE.id) == ["echo: hello"]


async def test_a_typed_secret_given_again_after_the_ledger_failed_is_still_an_answer(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    def make(gateway: Inbox) -> FlakyInbox:
        return FlakyInbox(gateway, busy_forms=1)

    async with flaky(fake_telegram, tmp_path, make) as (tg, inbox):
        await tg.say(ALICE, "ask-secret", chat=GROUP)
        card = await tg.card(GROUP_ID)
        await tg.say(ALICE, "/start")
        await tg.bot_message(ALICE.id, lambda m: m.text.startswith("Commands:"))
        await tg.press(ALICE, card, "private chat")
        prompt = await tg.bot_message(ALICE.id, lambda m: m.force_reply)
        await tg.say(ALICE, "hunter2-secret", reply_to=prompt)
        await tg.fake.wait_for(lambda: card.markup is None and "Answered" in card.text)

    assert inbox.failures["form"] == 1
    assert isinstance(tg.launcher, ScriptedLauncher)
    assert [d.answers for d in tg.launcher.received] == [{"token": Answer(other="hunter2-secret")}]
    assert "hunter2-secret" not in inbox.passed  # never a prompt for the agent
    shown = [m.text for chat in (GROUP_ID, ALICE.id) for m in tg.fake.bot_messages(chat)]
    assert not any("hunter2" in text for text in shown)


@pytest.mark.parametrize("webhook", [False, True], ids=["polling", "webhook"])
async def test_a_message_that_fails_every_time_is_given_up_with_a_reply_and_the_chat_goes_on(
    fake_telegram: FakeTelegram, tmp_path: Path, webhook: bool
) -> None:
    def make(gateway: Inbox) -> FlakyInbox:
        return FlakyInbox(gateway, broken=("poison",))

    async with flaky(fake_telegram, tmp_path, make, webhook=webhook) as (tg, inbox):
        poison = await tg.say(ALICE, "poison")
        await tg.say(ALICE, "after it")
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: after it")
        assert tg.texts(ALICE.id) == [MESSAGE_REFUSED, "echo: after it"]

    assert inbox.failures["poison"] == MAX_ATTEMPTS
    assert inbox.passed == ["after it"]
    refusal = tg.fake.bot_messages(ALICE.id)[0]
    assert refusal.reply_to == poison["message"]["message_id"]
    if webhook:
        assert tg.fake.webhook_deliveries[:MAX_ATTEMPTS] == [500] * (MAX_ATTEMPTS - 1) + [200]
    assert tg.fake.unconfirmed == []


async def test_a_click_that_fails_every_time_is_answered_that_it_was_not_handled(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    def make(gateway: Inbox) -> FlakyInbox:
        return FlakyInbox(gateway, broken_clicks=True)

    async with flaky(fake_telegram, tmp_path, make) as (tg, inbox):
        await tg.say(ALICE, "ask-one")
        card = await tg.card(ALICE.id)
        answer = await tg.press(ALICE, card, "Red")  # one click answers: the core decides
        assert answer["text"] == CLICK_REFUSED
        assert answer["show_alert"] in (True, "true", "True")
        await tg.say(ALICE, "/pending")
        pending = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("Open requests:"))
        assert "The agent asks" in pending.text  # nothing was decided
        assert [b["text"] for b in card.buttons] == ["Red", "Green"]
        assert tg.texts(ALICE.id) == [card.text, pending.text]

    assert inbox.failures["click"] == MAX_ATTEMPTS
    assert tg.fake.unconfirmed == []
