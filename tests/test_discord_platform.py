"""The Discord platform on real discord.py against the fake Discord (first round): it
connects, takes a mention into a thread of its own, sends a card whose buttons reach the
core, answers the click ephemerally, edits the card, opens and reads a modal, and refuses a
config asking for an intent the application lacks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from gateway.cards import ButtonStyle, Card, CardAction, FormQuestion, QuestionForm
from gateway.domain import Actor, Answer, ConversationRef, Option, Question
from gateway.errors import ConfigError
from gateway.platform import Ack, InboundAction, InboundForm, InboundMessage, RefusedForGood
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from platforms.outbox import MessageGone
from tests.servers.fake_discord import ALICE, APP_ID, BOT, TOKEN, FakeDiscord

pytestmark = pytest.mark.timeout(60)

TOKEN_A = "a1:Xk3f9Qa2:0:7:Hc2mB0q1n8Zk"
TOKEN_S = "a1:Xk3f9Qa2:s:7:Zc2mB0q1n8Zk"


class Inbox:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.actions: list[InboundAction] = []
        self.forms: list[InboundForm] = []
        self.changed = asyncio.Event()

    async def on_message(self, message: InboundMessage) -> None:
        self.messages.append(message)
        self.changed.set()

    async def on_action(self, action: InboundAction) -> Ack:
        self.actions.append(action)
        self.changed.set()
        return Ack(text="Allowed once.", accepted=True)

    async def on_form(self, form: InboundForm) -> Ack:
        self.forms.append(form)
        self.changed.set()
        return Ack(text="Answers sent.", accepted=True)

    async def may_answer(self, action: InboundAction) -> Ack:
        return Ack(text="", accepted=True)

    async def has_session(self, conversation: ConversationRef) -> bool:
        return True

    async def on_platform_back(self, platform: str) -> None:
        pass

    async def wait(self, probe: Any) -> Any:
        async with asyncio.timeout(20):
            while not probe():
                self.changed.clear()
                await self.changed.wait()
        return probe()


def settings(fake: FakeDiscord, **changes: Any) -> DiscordConfig:
    values: dict[str, Any] = {
        "token": SecretStr(TOKEN),
        "application_id": APP_ID,
        "channels": (fake.general.id,),
        "api_base_url": fake.api_base,
        "gateway_url": fake.gateway_url,
        **changes,
    }
    return DiscordConfig(**values)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_mention_a_card_a_click_and_a_modal(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with DiscordPlatform(settings(fake)) as platform:
        platform.attach(inbox)
        assert {c["name"] for c in fake.commands.get(None, [])} >= {"stop", "new", "help"}
        names = {c["name"] for c in fake.commands.get(None, [])}
        assert names >= {"sessions", "switch", "name", "every", "at", "schedules", "unschedule"}
        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> fix the tests", mentions=(BOT,))
        (message,) = await inbox.wait(lambda: inbox.messages)
        assert message.text == "fix the tests"
        assert message.conversation.thread == said.id  # a thread made from the message
        assert message.actor.roles == ALICE.roles

        card = Card(
            title="Run a command?",
            summary="ls @everyone",
            actions=(CardAction(label="Allow once", token=TOKEN_A, style=ButtonStyle.PRIMARY),),
            status=("Waiting for a decision",),
        )
        ref = await platform.send_card(message.conversation, card)
        sent = fake.message(ref.message_id)
        assert sent.embeds[0]["title"] == "Run a command?"
        assert sent.components[0]["components"][0]["custom_id"] == "agw:" + TOKEN_A
        assert sent.allowed_mentions is not None and sent.allowed_mentions.get("parse") == []

        click = await fake.click(ALICE, sent, "Allow once")
        (action,) = await inbox.wait(lambda: inbox.actions)
        assert action.token == TOKEN_A and action.conversation == message.conversation
        await fake.wait_for(lambda: click.followups)
        assert click.followups[0].content == "Allowed once." and click.followups[0].ephemeral

        await platform.edit_card(ref, Card(title="Run a command?", status=("Allowed by @alice",)))
        assert fake.message(ref.message_id).components == []

        question = Question(
            id="q",
            header="Colour",
            text="Which?",
            options=tuple(Option(id=f"o{j}", label=f"C{j}") for j in range(3)),
            multi=True,
        )
        form_card = Card(
            title="A question",
            form=QuestionForm(questions=(FormQuestion(question=question),), submit_token=TOKEN_S),
        )
        ref = await platform.send_card(message.conversation, form_card)
        opened = await fake.click(ALICE, fake.message(ref.message_id), "Answer…")
        await fake.wait_for(lambda: opened.modal)
        await fake.submit(ALICE, opened, {"q0": ["0", "2"]})
        (form,) = await inbox.wait(lambda: inbox.forms)
        assert form.answers == {"q": Answer(option_ids=("o0", "o2"))} and form.private


async def test_message_content_without_the_intent_is_a_config_error(fake: FakeDiscord) -> None:
    with pytest.raises(ConfigError, match="message_content"):
        async with DiscordPlatform(settings(fake, message_content=True)):
            pass


def test_actor_of_a_member_keeps_its_roles() -> None:
    assert Actor(platform="discord", user_id="1", roles=("2",)).roles == ("2",)


async def test_commands_in_a_thread_dms_and_an_archived_threads_card(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with DiscordPlatform(settings(fake)) as platform:
        platform.attach(inbox)
        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> hello", mentions=(BOT,))
        (first,) = await inbox.wait(lambda: inbox.messages)
        thread = await fake.wait_for(lambda: fake.channels.get(said.id))

        command = await fake.slash(ALICE, thread, "stop")
        await inbox.wait(lambda: len(inbox.messages) == 2)
        stop = inbox.messages[1]
        assert stop.text == "/stop" and stop.conversation == first.conversation
        assert command.callback is not None and command.callback["type"] == 4  # at once
        assert command.original is not None and command.original.ephemeral

        card = Card(
            title="Run?",
            actions=(CardAction(label="Allow once", token=TOKEN_A, style=ButtonStyle.PRIMARY),),
        )
        ref = await platform.send_card(first.conversation, card)
        await fake.archive(thread)
        await platform.edit_card(ref, Card(title="Run?", status=("Allowed by @alice",)))
        assert fake.message(ref.message_id).components == []  # unarchived, then edited
        assert not thread.archived

        dm = await platform.direct_conversation(message_actor(first))
        assert dm is not None and dm.space is None
        await platform.send_text(dm, "Only for you @everyone")
        (sent,) = fake.bot_messages(fake.channels[dm.channel])
        assert "@everyone" not in sent.content  # defused
        assert (sent.allowed_mentions or {}).get("parse") == []


def message_actor(message: InboundMessage) -> Actor:
    return message.actor


async def test_a_click_given_again_is_handed_on_and_answered_once(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with DiscordPlatform(settings(fake)) as platform:
        platform.attach(inbox)
        await fake.say(ALICE, fake.general, f"<@{BOT.id}> go", mentions=(BOT,))
        (message,) = await inbox.wait(lambda: inbox.messages)
        card = Card(
            title="Run?",
            actions=(CardAction(label="Allow once", token=TOKEN_A, style=ButtonStyle.PRIMARY),),
        )
        ref = await platform.send_card(message.conversation, card)
        click = await fake.click(ALICE, fake.message(ref.message_id), "Allow once")
        await fake.wait_for(lambda: click.followups)
        await fake.deliver_again(click)
        await inbox.wait(lambda: len(inbox.actions) == 2)  # the core decides it once
        assert click.refused == [40060]  # Discord took one answer
        assert len(click.followups) == 1


async def test_an_edit_of_a_deleted_card_is_message_gone(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with DiscordPlatform(settings(fake)) as platform:
        platform.attach(inbox)
        await fake.say(ALICE, fake.general, f"<@{BOT.id}> go", mentions=(BOT,))
        (message,) = await inbox.wait(lambda: inbox.messages)
        card = Card(
            title="Run?",
            actions=(CardAction(label="Allow once", token=TOKEN_A, style=ButtonStyle.PRIMARY),),
        )
        ref = await platform.send_card(message.conversation, card)
        fake.message(ref.message_id).deleted = True  # someone deleted the card
        with pytest.raises(MessageGone) as gone:
            await platform.edit_card(ref, Card(title="Run?", status=("Allowed by @alice",)))
        assert isinstance(gone.value, RefusedForGood)  # the core does not ask again
        assert "10008" in str(gone.value)
        text = await platform.send_text(message.conversation, "Working…")
        fake.message(text.message_id).deleted = True
        with pytest.raises(MessageGone):
            await platform.edit_text(text, "Done.")


async def test_model_and_mode_are_application_commands(fake: FakeDiscord) -> None:
    async with DiscordPlatform(settings(fake)):
        assert {"model", "mode"} <= {c["name"] for c in fake.commands.get(None, [])}
