"""Discord as the benchmarks drive it: the real Discord platform (discord.py 2.7 over its
gateway websocket and REST, the outbox at Discord's rates) against the tests' fake Discord
on 127.0.0.1.

    python -m bench --platform discord

Each room is a thread of #general a person made before (the bot only hears of it); the
person talks in it by mentioning the bot, as on Discord. A card is stamped when Discord (the
fake) has taken it, so "request line -> card" is what a person waits for, the channel's
pace (5 messages or edits per 5 s) included; a click is an INTERACTION_CREATE over the
gateway and its answer is the ephemeral followup the clicker is shown ("interaction ->
callback" is the defer, read from the fake's records).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from pydantic import SecretStr

from bench.bench_platform import BenchPlatform, CardSeen
from gateway.cards import Card
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.platform import Ack, EditResult, Inbox, MessageRef, Platform, connected
from gateway.session_record import SessionRecord
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from tests.servers.fake_discord import ALICE, APP_ID, BOT, GUILD_ID, TOKEN, Channel, FakeDiscord

__all__ = ["ClockedDiscord", "discord_platform"]


class ClockedDiscord:
    """The Discord platform with a clock at its seam, and a person in the fake Discord."""

    name = "discord"

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.person = Actor(platform="discord", user_id=ALICE.id, display="@alice")
        self.inner: DiscordPlatform | None = None
        self._rooms: dict[int, ConversationRef] = {}
        self._threads: dict[str, Channel] = {}
        self._announced: set[str] = set()
        self._cards: defaultdict[ConversationRef, asyncio.Queue[CardSeen]] = defaultdict(
            asyncio.Queue
        )
        self._texts: defaultdict[ConversationRef, dict[str, str]] = defaultdict(dict)
        self._changed = asyncio.Condition()
        self.callback_ms: list[float] = []  # interaction -> its callback, per click

    def build(self, settings: DiscordConfig) -> None:
        self.inner = DiscordPlatform(settings)
        self.limits = self.inner.limits

    @property
    def platform(self) -> Platform:
        return self

    def _discord(self) -> DiscordPlatform:
        assert self.inner is not None, "built with the config first"
        return self.inner

    def room(self, index: int) -> ConversationRef:
        if index not in self._rooms:
            thread = self.fake.thread_of(ALICE, self.fake.general, f"bench room {index}")
            self._threads[thread.id] = thread
            self._rooms[index] = ConversationRef(
                platform="discord", space=GUILD_ID, channel=self.fake.general.id, thread=thread.id
            )
        return self._rooms[index]

    def config_table(self) -> str:
        return (
            f'token = "{TOKEN}"\napplication_id = "{APP_ID}"\n'
            f'channels = ["{self.fake.general.id}"]\n'
            f'api_base_url = "{self.fake.api_base}"\ngateway_url = "{self.fake.gateway_url}"\n'
        )

    # --- the platform contract, stamped ---------------------------------------------------

    async def connect(self) -> None:
        await self._discord().connect()

    def attach(self, inbox: Inbox) -> None:
        self._discord().attach(inbox)

    async def stop_input(self) -> None:
        await self._discord().stop_input()

    async def close(self) -> None:
        await self._discord().close()

    def spell_command(self, name: str) -> str:
        return self._discord().spell_command(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return await self._discord().direct_conversation(actor)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        ref = await self._discord().send_card(conversation, card)
        at = time.monotonic_ns()  # Discord has it: the person's screen shows it
        self._cards[conversation].put_nowait(
            CardSeen(at_ns=at, conversation=conversation, card=card)
        )
        return ref

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        return await self._discord().edit_card(ref, card)

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        ref = await self._discord().send_text(conversation, text)
        await self._shown(conversation, ref.message_id, text)
        return ref

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        result = await self._discord().edit_text(ref, text)
        await self._shown(ref.conversation, ref.message_id, text)
        return result

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return await self._discord().mark_queued(conversation, message_id)

    async def turn_started(self, conversation: ConversationRef) -> None:
        await self._discord().turn_started(conversation)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        await self._discord().turn_ended(conversation, status)

    # --- what a person does and sees ------------------------------------------------------

    async def say(self, conversation: ConversationRef, actor: Actor, text: str) -> None:
        person = self.fake.people[actor.user_id]
        await self.fake.wait_for(lambda: self.fake.connected)
        assert conversation.thread is not None
        thread = self._threads[conversation.thread]
        if thread.id not in self._announced:
            self._announced.add(thread.id)
            await self.fake.announce(thread)
        await self.fake.say(person, thread, f"<@{BOT.id}> {text}", mentions=(BOT,))

    async def click(self, conversation: ConversationRef, actor: Actor, token: str) -> Ack:
        person = self.fake.people[actor.user_id]
        assert conversation.thread is not None
        thread = self._threads[conversation.thread]
        custom_id = "agw:" + token

        def card() -> object:
            for message in self.fake.bot_messages(thread):
                for row in message.components:
                    for child in row.get("components") or []:
                        if child.get("custom_id") == custom_id:
                            return message
            return None

        shown = await self.fake.wait_for(card)
        clicked = await self.fake.click(person, shown, custom_id)  # type: ignore[arg-type]
        await self.fake.wait_for(lambda: clicked.followups)
        if clicked.callback_at is not None:
            self.callback_ms.append((clicked.callback_at - clicked.created) * 1000)
        text = clicked.followups[0].content
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
async def discord_platform() -> AsyncIterator[BenchPlatform]:
    """The fake Discord, and the Discord platform built from the bench's own config table."""
    async with FakeDiscord() as fake:
        clocked = ClockedDiscord(fake)
        settings = DiscordConfig(
            token=SecretStr(TOKEN),
            application_id=APP_ID,
            channels=(fake.general.id,),
            api_base_url=fake.api_base,
            gateway_url=fake.gateway_url,
        )
        clocked.build(settings)
        async with connected({"discord": clocked}):  # connected before the gateway, as run does
            yield clocked
