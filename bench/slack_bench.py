"""Slack as the benchmarks drive it: the real Slack platform (slack-bolt in Socket Mode,
slack-sdk, the outbox at Slack's real rates) against the tests' fake Slack on 127.0.0.1.

    python -m bench.interactions --platform slack --count 30 --warmup 3

Each room is a thread of #general that a person started before (the app was never told of
it); the person talks in it by mentioning the app, as in Slack. A card is stamped when Slack
(the fake) has taken it, so "request line -> card" is what a person waits for, the channel's
pace (about one post a second) and the workspace's ``chat.update`` budget (50 a minute)
included; a click is made in the fake (a real ``block_actions`` envelope over the socket)
and its answer is the ephemeral the clicker is shown.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from bench.bench_platform import BenchPlatform, CardSeen
from gateway.cards import Card
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.platform import Ack, EditResult, Inbox, MessageRef, Platform, connected
from gateway.session_record import SessionRecord
from platforms.slack.config import SlackConfig
from platforms.slack.platform import SlackPlatform
from tests.servers.fake_slack import (
    ALICE,
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    FakeSlack,
    Posted,
)

__all__ = ["ClockedSlack", "slack_platform"]

GENERAL = "C0GENERAL"


class ClockedSlack:
    """The Slack platform with a clock at its seam, and a person in the fake Slack."""

    name = "slack"

    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake
        self.person = Actor(platform="slack", user_id=ALICE.id, display="@alice")
        self.inner: SlackPlatform | None = None
        self._rooms: dict[int, ConversationRef] = {}
        self._cards: defaultdict[ConversationRef, asyncio.Queue[CardSeen]] = defaultdict(
            asyncio.Queue
        )
        self._texts: defaultdict[ConversationRef, dict[str, str]] = defaultdict(dict)
        self._changed = asyncio.Condition()

    def build(self, settings: SlackConfig) -> None:
        self.inner = SlackPlatform(settings)
        self.limits = self.inner.limits

    @property
    def platform(self) -> Platform:
        return self

    def _slack(self) -> SlackPlatform:
        assert self.inner is not None, "built with the config first"
        return self.inner

    def room(self, index: int) -> ConversationRef:
        if index not in self._rooms:
            parent = self.fake.seed(ALICE, GENERAL, f"bench room {index}")
            self._rooms[index] = ConversationRef(
                platform="slack", space=TEAM_ID, channel=GENERAL, thread=parent.ts
            )
        return self._rooms[index]

    def config_table(self) -> str:
        return (
            f'bot_token = "{BOT_TOKEN}"\napp_token = "{APP_TOKEN}"\n'
            f'base_url = "{self.fake.base_url}"\nteam_id = "{TEAM_ID}"\n'
        )

    # --- the platform contract, stamped ---------------------------------------------------

    async def connect(self) -> None:
        await self._slack().connect()

    def attach(self, inbox: Inbox) -> None:
        self._slack().attach(inbox)

    async def stop_input(self) -> None:
        await self._slack().stop_input()

    async def close(self) -> None:
        await self._slack().close()

    def spell_command(self, name: str) -> str:
        return self._slack().spell_command(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return await self._slack().direct_conversation(actor)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        ref = await self._slack().send_card(conversation, card)
        at = time.monotonic_ns()  # Slack has it: the person's screen shows it
        self._cards[conversation].put_nowait(
            CardSeen(at_ns=at, conversation=conversation, card=card)
        )
        return ref

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        return await self._slack().edit_card(ref, card)

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        ref = await self._slack().send_text(conversation, text)
        await self._shown(conversation, ref.message_id, text)
        return ref

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        result = await self._slack().edit_text(ref, text)
        await self._shown(ref.conversation, ref.message_id, text)
        return result

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return await self._slack().mark_queued(conversation, message_id)

    async def turn_started(self, conversation: ConversationRef) -> None:
        await self._slack().turn_started(conversation)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        await self._slack().turn_ended(conversation, status)

    # --- what a person does and sees ------------------------------------------------------

    async def say(self, conversation: ConversationRef, actor: Actor, text: str) -> None:
        person = self.fake.people[actor.user_id]
        await self.fake.wait_for(lambda: self.fake.connected)  # the socket is open
        await self.fake.say(
            person, conversation.channel, f"<@{BOT_USER_ID}> {text}", thread_ts=conversation.thread
        )

    async def click(self, conversation: ConversationRef, actor: Actor, token: str) -> Ack:
        person = self.fake.people[actor.user_id]

        def card() -> Posted | None:
            assert conversation.thread is not None
            for message in self.fake.replies(conversation.channel, conversation.thread):
                for label in message.labels:
                    if message.button(label)[1].get("value") == token:
                        return message
            return None

        shown = await self.fake.wait_for(card)
        label = next(lb for lb in shown.labels if shown.button(lb)[1].get("value") == token)
        before = len(self.fake.ephemerals(person, conversation.channel))
        await self.fake.click(person, shown, label)
        answer = (
            await self.fake.wait_for(
                lambda: self.fake.ephemerals(person, conversation.channel)[before:]
            )
        )[0]
        text = html.unescape(answer.text)
        return Ack(text=text, accepted=text.startswith("Approved"))

    async def next_card(self, conversation: ConversationRef) -> CardSeen:
        return await self._cards[conversation].get()

    async def text_reaches(self, conversation: ConversationRef, chars: int) -> int:
        async with self._changed:
            await self._changed.wait_for(
                lambda: sum(len(t) for t in self._texts[conversation].values()) >= chars
            )
        return time.monotonic_ns()

    async def text_where(self, conversation: ConversationRef, probe: Callable[[str], bool]) -> str:
        async with self._changed:
            await self._changed.wait_for(
                lambda: any(probe(t) for t in self._texts[conversation].values())
            )
        return next(t for t in self._texts[conversation].values() if probe(t))

    def texts(self, conversation: ConversationRef) -> list[str]:
        return list(self._texts[conversation].values())

    async def _shown(self, conversation: ConversationRef, message_id: str, text: str) -> None:
        async with self._changed:
            self._texts[conversation][message_id] = text
            self._changed.notify_all()


@asynccontextmanager
async def slack_platform() -> AsyncIterator[BenchPlatform]:
    """The fake Slack, and the Slack platform built from the bench's own config table."""
    async with FakeSlack() as fake:
        clocked = ClockedSlack(fake)
        settings = SlackConfig.model_validate(
            {
                "bot_token": BOT_TOKEN,
                "app_token": APP_TOKEN,
                "base_url": fake.base_url,
                "team_id": TEAM_ID,
            }
        )
        clocked.build(settings)
        async with connected({"slack": clocked}):  # connected before the gateway, as run does
            yield clocked
