"""What a benchmark needs of a platform (:class:`BenchPlatform`): the object the gateway is
given, the moment each card and piece of text reached the platform, and a person's message
and click. The platforms that meet it are listed in :mod:`bench.platforms`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.cards import Card
from gateway.domain import Actor, ConversationRef
from gateway.platform import Ack, Platform

__all__ = ["BenchPlatform", "CardSeen"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CardSeen:
    """A card as the platform received it, and when (CLOCK_MONOTONIC, ns)."""

    at_ns: int
    conversation: ConversationRef
    card: Card


class BenchPlatform(Protocol):
    """A platform as the benchmarks drive it."""

    name: str  # its [platforms.<name>] table
    person: Actor  # who talks and clicks: allowed to, and an approver

    def room(self, index: int) -> ConversationRef:
        """The ``index``-th conversation (each one its own session)."""
        ...

    def config_table(self) -> str:
        """The body of its ``[platforms.<name>]`` table (base URLs of local fakes, ...)."""
        ...

    @property
    def platform(self) -> Platform:
        """What the gateway is given."""
        ...

    async def say(self, conversation: ConversationRef, actor: Actor, text: str) -> None: ...

    async def click(self, conversation: ConversationRef, actor: Actor, token: str) -> Ack: ...

    async def next_card(self, conversation: ConversationRef) -> CardSeen:
        """The next new card shown in ``conversation``, in order."""
        ...

    async def text_reaches(self, conversation: ConversationRef, chars: int) -> int:
        """Wait until the text messages of ``conversation`` hold ``chars`` characters in all;
        the time (ns) of the text operation that got there."""
        ...

    async def text_where(self, conversation: ConversationRef, probe: Callable[[str], bool]) -> str:
        """Wait until a text message of ``conversation`` is sent or edited to one that
        ``probe`` accepts (or already shows one); that text."""
        ...

    def texts(self, conversation: ConversationRef) -> list[str]:
        """The text messages of ``conversation`` as shown now, in the order they were sent."""
        ...
