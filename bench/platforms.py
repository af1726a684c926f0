"""The chat platforms the benchmarks drive, each behind a stopwatch at its seam.

A benchmark needs three things of a platform: the object the gateway is given, the moment
each card (and each piece of text) was handed to the platform, and a person's message and
click. :class:`BenchPlatform` is that contract; :data:`PLATFORMS` lists the platforms that
can be benchmarked, by the name their ``[platforms.<name>]`` table has in the config.

The memory platform measures the gateway itself; ``slack`` is the real Slack platform
against the tests' fake Slack (bench/slack_bench.py: a card stamped once Slack has it).
Telegram and the web console join the same way, by an entry whose factory starts the
platform against its local fake; the benchmarks then run on it unchanged
(``python -m bench --platform slack``). On
Telegram that mostly measures its pacing (one message a second a chat), which
bench/telegram_pacing.py measures already; ``agent-gateway run`` is measured with every
platform by bench/startup.py.

:data:`PLATFORM_IMPORTS` names, for each platform of the config, the modules that only that
platform may bring in: the start-up benchmark checks that a platform that is not configured
is not imported.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from bench.bench_platform import BenchPlatform, CardSeen
from gateway.cards import Card
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.platform import Ack, EditResult, Inbox, MessageRef, Platform, PlatformLimits
from gateway.session_record import SessionRecord
from platforms.memory.platform import MemoryPlatform

__all__ = [
    "PLATFORMS",
    "PLATFORM_IMPORTS",
    "ClockedMemoryPlatform",
]

Clock = Callable[[], int]

# platform name in the config -> modules that only that platform may import (aiohttp is not
# one: the console serves with it, and Telegram's webhook mode too)
PLATFORM_IMPORTS: Mapping[str, tuple[str, ...]] = {
    "telegram": ("platforms.telegram", "telegram"),  # python-telegram-bot is "telegram"
    "slack": ("platforms.slack", "slack_sdk", "slack_bolt"),
    "discord": ("platforms.discord", "discord"),
    "console": ("platforms.console",),
    "memory": ("platforms.memory",),
}


@dataclass(frozen=True, slots=True)
class _Probe:
    probe: Callable[[str], bool]
    future: asyncio.Future[str]


class ClockedMemoryPlatform:
    """The memory platform with a clock at its seam: each card handed to it is stamped.

    Everything is delegated to a real :class:`MemoryPlatform`; this only watches.
    """

    def __init__(self, inner: MemoryPlatform | None = None, clock: Clock = time.monotonic_ns):
        self.inner = inner or MemoryPlatform()
        self.name: str = self.inner.name
        self.person = Actor(platform=self.inner.name, user_id="alice", display="Alice")
        self.limits: PlatformLimits = self.inner.limits
        self._clock = clock
        self._cards: defaultdict[ConversationRef, asyncio.Queue[CardSeen]] = defaultdict(
            asyncio.Queue
        )
        self._chars: dict[str, int] = {}  # message id -> characters shown now
        self._total: defaultdict[ConversationRef, int] = defaultdict(int)
        self._reached: dict[ConversationRef, tuple[int, asyncio.Future[int]]] = {}
        self._probes: defaultdict[ConversationRef, list[_Probe]] = defaultdict(list)

    @property
    def platform(self) -> Platform:
        return self

    def room(self, index: int) -> ConversationRef:
        return ConversationRef(
            platform=self.name, space="bench", channel="room", thread=f"t{index}"
        )

    def config_table(self) -> str:
        return ""

    async def connect(self) -> None:
        await self.inner.connect()

    def attach(self, inbox: Inbox) -> None:
        self.inner.attach(inbox)

    async def stop_input(self) -> None:
        await self.inner.stop_input()

    async def close(self) -> None:
        await self.inner.close()

    def spell_command(self, name: str) -> str:
        return self.inner.spell_command(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return self.inner.mirror_conversation(session)

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return await self.inner.direct_conversation(actor)

    # --- the platform contract, stamped -------------------------------------------------

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        at = self._clock()
        ref = await self.inner.send_card(conversation, card)
        self._cards[conversation].put_nowait(
            CardSeen(at_ns=at, conversation=conversation, card=card)
        )
        return ref

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        return await self.inner.edit_card(ref, card)

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        ref = await self.inner.send_text(conversation, text)
        self._shown(conversation, ref.message_id, text)
        return ref

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        result = await self.inner.edit_text(ref, text)
        self._shown(ref.conversation, ref.message_id, text)
        return result

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return await self.inner.mark_queued(conversation, message_id)

    async def turn_started(self, conversation: ConversationRef) -> None:
        await self.inner.turn_started(conversation)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        await self.inner.turn_ended(conversation, status)

    # --- what a person does and sees ------------------------------------------------------

    async def say(self, conversation: ConversationRef, actor: Actor, text: str) -> None:
        await self.inner.say(conversation, actor, text)

    async def click(self, conversation: ConversationRef, actor: Actor, token: str) -> Ack:
        return await self.inner.click(conversation, actor, token)

    async def next_card(self, conversation: ConversationRef) -> CardSeen:
        return await self._cards[conversation].get()

    async def text_reaches(self, conversation: ConversationRef, chars: int) -> int:
        if conversation in self._reached:
            raise RuntimeError(f"already waiting for the text of {conversation}")
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._reached[conversation] = (chars, future)
        try:
            self._check(conversation)
            return await future
        finally:
            self._reached.pop(conversation, None)

    async def text_where(self, conversation: ConversationRef, probe: Callable[[str], bool]) -> str:
        for text in self.inner.texts(conversation):
            if probe(text):
                return text
        waiter = _Probe(probe, asyncio.get_running_loop().create_future())
        self._probes[conversation].append(waiter)
        try:
            return await waiter.future
        finally:
            self._probes[conversation].remove(waiter)

    def texts(self, conversation: ConversationRef) -> list[str]:
        return self.inner.texts(conversation)

    def _shown(self, conversation: ConversationRef, message_id: str, text: str) -> None:
        self._total[conversation] += len(text) - self._chars.get(message_id, 0)
        self._chars[message_id] = len(text)
        self._check(conversation)
        for waiter in self._probes.get(conversation, ()):
            if not waiter.future.done() and waiter.probe(text):
                waiter.future.set_result(text)

    def _check(self, conversation: ConversationRef) -> None:
        waiting = self._reached.get(conversation)
        if waiting is not None and self._total[conversation] >= waiting[0]:
            if not waiting[1].done():
                waiting[1].set_result(self._clock())


@asynccontextmanager
async def memory_platform() -> AsyncIterator[BenchPlatform]:
    yield ClockedMemoryPlatform()


@asynccontextmanager
async def slack_platform() -> AsyncIterator[BenchPlatform]:
    """The real Slack platform against the fake Slack (bench/slack_bench.py), imported only
    when asked for."""
    from bench.slack_bench import slack_platform as started

    async with started() as platform:
        yield platform


@asynccontextmanager
async def discord_platform() -> AsyncIterator[BenchPlatform]:
    """The real Discord platform against the fake Discord (bench/discord_bench.py), imported
    only when asked for."""
    from bench.discord_bench import discord_platform as started

    async with started() as platform:
        yield platform


# config name -> a factory of the platform, started for one benchmark run
PLATFORMS: Mapping[str, Callable[[], AbstractAsyncContextManager[BenchPlatform]]] = {
    "memory": memory_platform,
    "slack": slack_platform,
    "discord": discord_platform,
}
