"""What the console holds in memory: the messages the core sent it, and a change counter.

The ledger is the truth for interactions (their cards are drawn from it on every page);
what only exists here is the text the core sent (the agent's streamed text, tool activity,
notices and replies), kept per conversation, bounded: the oldest messages are forgotten
past :data:`MAX_MESSAGES_PER_CONVERSATION`, the oldest conversations past
:data:`MAX_CONVERSATIONS`.

:class:`Changes` is how live pages learn that something changed: a counter that each
outbound call bumps; a server-sent-events stream waits for it to move past what it last
sent. Its memory does not grow with the number of changes or of listeners.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.cards import Card
from gateway.domain import ConversationRef
from gateway.errors import PlatformError
from gateway.platform import FileUpload

__all__ = ["Changes", "Feed", "Shown"]

MAX_MESSAGES_PER_CONVERSATION = 500
MAX_CONVERSATIONS = 1000


@dataclass(kw_only=True, slots=True)
class Shown:
    """One message of a conversation as the console shows it now."""

    id: str
    conversation: ConversationRef
    at: datetime  # when it was first sent: where it sits in the conversation
    text: str | None = None
    card: Card | None = None
    version: int = 1
    author: str | None = None  # the console's own person, for what they typed
    from_gateway: bool = False  # the gateway's own words (a notice, a command's reply)
    file: FileUpload | None = None  # a file the agent sent (send_file): /f/<id> serves it
    # a card that is no request's (a notice with buttons: a message whose files did not
    # come, issue 32): drawn from here with its buttons, which /m/<id>/act takes; a request's
    # card is drawn from the ledger instead
    notice: bool = False


class Feed:
    def __init__(self, id_prefix: str = "m") -> None:
        self._ids = itertools.count(1)
        self._prefix = id_prefix
        self._by_conversation: OrderedDict[ConversationRef, deque[Shown]] = OrderedDict()
        self._by_id: dict[str, Shown] = {}

    def add(
        self,
        conversation: ConversationRef,
        *,
        text: str | None,
        card: Card | None,
        author: str | None = None,
        from_gateway: bool = False,
        file: FileUpload | None = None,
        notice: bool = False,
    ) -> Shown:
        shown = Shown(
            id=f"{self._prefix}{next(self._ids)}",
            conversation=conversation,
            at=datetime.now(UTC),
            text=text,
            card=card,
            author=author,
            from_gateway=from_gateway,
            file=file,
            notice=notice,
        )
        self._append(shown)
        return shown

    def adopt(self, message_id: str, conversation: ConversationRef, card: Card) -> Shown:
        """An edit of a card an earlier console process sent: show it as it is now."""
        shown = Shown(id=message_id, conversation=conversation, at=datetime.now(UTC), card=card)
        self._append(shown)
        return shown

    def get(self, message_id: str) -> Shown | None:
        return self._by_id.get(message_id)

    def require(self, message_id: str) -> Shown:
        shown = self._by_id.get(message_id)
        if shown is None:
            raise PlatformError(f"no console message {message_id}")
        return shown

    def messages(self, conversations: list[ConversationRef]) -> list[Shown]:
        """The messages of these conversations, oldest first."""
        found = [m for c in conversations for m in self._by_conversation.get(c, ())]
        return sorted(found, key=lambda m: m.at)

    def _append(self, shown: Shown) -> None:
        queue = self._by_conversation.get(shown.conversation)
        if queue is None:
            queue = deque()
            self._by_conversation[shown.conversation] = queue
            while len(self._by_conversation) > MAX_CONVERSATIONS:
                _, dropped = self._by_conversation.popitem(last=False)
                for message in dropped:
                    self._by_id.pop(message.id, None)
        else:
            self._by_conversation.move_to_end(shown.conversation)
        queue.append(shown)
        self._by_id[shown.id] = shown
        while len(queue) > MAX_MESSAGES_PER_CONVERSATION:
            self._by_id.pop(queue.popleft().id, None)


class Changes:
    """A counter of changes that live pages wait on. Bumping it is synchronous, so that
    anything the console hears (a platform's problem included) can move it at once."""

    def __init__(self) -> None:
        self.count = 0
        self.closed = False
        self._moved = asyncio.Event()

    def bump(self) -> None:
        self.count += 1
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def wait_past(self, seen: int) -> int:
        """Wait until the count is past ``seen`` (or the console closes); the new count."""
        while self.count <= seen and not self.closed:
            await self._moved.wait()
        return self.count
