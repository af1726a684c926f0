"""What the bot posts and edits, each call in its channel's lane of the outbox: texts (as
Discord shows them, pinging no one), cards (an embed, its buttons, its files, its approvers
pinged once), their edits (a thread archived since is unarchived first), the ✍ mark on a
message queued behind a card, and "typing…".

:class:`ShownCards` remembers the cards sent by message id (bounded): their newest version
is what an edit draws, and their forms are what a modal submit is read against.
"""

from __future__ import annotations

import io
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import discord

from gateway.cards import Card
from gateway.domain import ConversationRef
from gateway.errors import PlatformError
from gateway.platform import EditResult, FileUpload, MessageRef, PlatformLimits
from gateway.render.markdown import discord_markdown
from platforms.discord.outbox import ARCHIVED_THREAD, DiscordOutbox
from platforms.discord.render import RenderedCard, clip, render_card
from platforms.discord.widgets import allowed_mentions, card_view
from platforms.form_drafts import PendingForms
from platforms.outbox import Priority
from platforms.turn_end import TurnEnds

__all__ = ["CARDS_KEPT", "CONTENT_MAX", "QUEUED_REACTION", "Sender", "ShownCards", "turn_key"]

log = logging.getLogger(__name__)

CONTENT_MAX = 2000
CARDS_KEPT = 512  # the cards (and their forms) remembered by message id
QUEUED_REACTION = "✍"  # the mark of a message queued behind a card, as on Telegram

Approvers = Callable[[ConversationRef], Awaitable[tuple[str, ...]]]


def turn_key(conversation: ConversationRef) -> tuple[str, str | None]:
    return conversation.channel, conversation.thread


def _drawn_key(drawn: RenderedCard) -> str:
    return repr((drawn.embed, drawn.components))


class ShownCards:
    """The cards sent, by message id, the oldest forgotten past :data:`CARDS_KEPT`."""

    def __init__(self) -> None:
        self._cards: OrderedDict[str, tuple[ConversationRef, Card]] = OrderedDict()

    def keep(self, message_id: str, conversation: ConversationRef, card: Card) -> None:
        self._cards.pop(message_id, None)
        self._cards[message_id] = (conversation, card)
        while len(self._cards) > CARDS_KEPT:
            self._cards.popitem(last=False)

    def get(self, message_id: str) -> tuple[ConversationRef, Card] | None:
        return self._cards.get(message_id)


class Sender:
    """Every post and edit of a connected client, through the outbox."""

    def __init__(
        self,
        *,
        client: discord.Client,
        outbox: DiscordOutbox,
        limits: PlatformLimits,
        cards: ShownCards,
        forms: Callable[[], PendingForms[str]],
        turn_ends: TurnEnds,
        approvers: Approvers,
    ) -> None:
        self._client = client
        self._outbox = outbox
        self._limits = limits
        self._cards = cards
        self._forms = forms  # the cards' forms by submit token, and their drafts
        self._turn_ends = turn_ends
        self._approvers = approvers
        self._shown: OrderedDict[str, str] = OrderedDict()

    def channel(self, conversation: ConversationRef) -> discord.PartialMessageable:
        return self._client.get_partial_messageable(
            int(conversation.thread or conversation.channel)
        )

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        shown = self._shown_text(text)
        channel = self.channel(conversation)

        async def post() -> str:
            sent = await channel.send(shown, allowed_mentions=discord.AllowedMentions.none())
            return str(sent.id)

        message_id = await self.run(conversation, Priority.TEXT, post)
        self._remember(message_id, shown)
        self._turn_ends.sent(turn_key(conversation), message_id)
        return MessageRef(conversation=conversation, message_id=message_id)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        shown = self._shown_text(text)
        if self._shown.get(ref.message_id) == shown:
            return EditResult.NOT_MODIFIED

        async def edit() -> EditResult:
            message = self.channel(ref.conversation).get_partial_message(int(ref.message_id))
            await message.edit(content=shown, allowed_mentions=discord.AllowedMentions.none())
            self._remember(ref.message_id, shown)
            self._turn_ends.edited(ref.message_id)
            return EditResult.EDITED

        return await self._edit(ref, Priority.STREAM, edit, "text")

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        """A multipart attachment (a picture is shown as one by Discord), the caption as
        the message's text, mentions defused."""
        channel = self.channel(conversation)

        async def post() -> str:
            sent = await channel.send(
                self._shown_text(upload.caption) if upload.caption else None,
                file=discord.File(io.BytesIO(upload.content), filename=upload.name),
                allowed_mentions=discord.AllowedMentions.none(),
            )
            return str(sent.id)

        message_id = await self.run(conversation, Priority.TEXT, post)
        return MessageRef(conversation=conversation, message_id=message_id)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        drawn = render_card(card, approvers=await self._approvers(conversation))
        channel = self.channel(conversation)

        async def post() -> str:
            files = [
                discord.File(io.BytesIO(f.content.encode()), filename=f.name) for f in drawn.files
            ]
            view = card_view(drawn)
            extra: dict[str, Any] = {"view": view} if view is not None else {}
            sent = await channel.send(
                drawn.content or None,
                embed=discord.Embed.from_dict(drawn.embed),
                files=files,
                allowed_mentions=allowed_mentions(drawn),
                **extra,
            )
            return str(sent.id)

        message_id = await self.run(conversation, Priority.CARD, post)
        self._cards.keep(message_id, conversation, card)
        form = self._forms().new(conversation, card)
        if form is not None:
            self._forms().keep(form.submit_token, form)
        self._remember(message_id, _drawn_key(drawn))
        self._turn_ends.sent(turn_key(conversation), message_id)
        return MessageRef(conversation=conversation, message_id=message_id)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        before = self._cards.get(ref.message_id)
        asked = card.form or (before[1].form if before is not None else None)
        if asked is not None:  # decided (no questions left): its drafts, secrets too, go
            self._forms().update(asked.submit_token, ref.conversation, card)
        self._cards.keep(ref.message_id, ref.conversation, card)

        async def edit() -> EditResult:
            newest = (self._cards.get(ref.message_id) or (ref.conversation, card))[1]
            drawn = render_card(newest)
            key = _drawn_key(drawn)
            if self._shown.get(ref.message_id) == key:
                return EditResult.NOT_MODIFIED
            message = self.channel(ref.conversation).get_partial_message(int(ref.message_id))
            await message.edit(
                content=None,
                embed=discord.Embed.from_dict(drawn.embed),
                view=card_view(drawn),
                allowed_mentions=discord.AllowedMentions.none(),
            )
            self._remember(ref.message_id, key)
            return EditResult.EDITED

        return await self._edit(ref, Priority.CARD, edit, "card")

    async def _edit(
        self,
        ref: MessageRef,
        priority: Priority,
        edit: Callable[[], Awaitable[EditResult]],
        kind: str,
    ) -> EditResult:
        """An edit in its channel's lane; a thread archived since refuses it (50083): it is
        unarchived, then edited."""

        async def unarchive_then(edit_again: Callable[[], Awaitable[EditResult]]) -> EditResult:
            thread = ref.conversation.thread
            try:
                return await edit_again()
            except discord.HTTPException as exc:
                if exc.code != ARCHIVED_THREAD or thread is None:
                    raise
                await self._client.http.edit_channel(int(thread), archived=False)
                return await edit_again()

        result: EditResult = await self.run(
            ref.conversation, priority, lambda: unarchive_then(edit), key=(kind, ref.message_id)
        )
        return result

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        """A reaction (:data:`QUEUED_REACTION`, ✍ as on Telegram and Slack) on the person's
        message, which notifies nobody and stays true once the message runs. A mention that
        made the thread is in the parent channel (the thread takes the message's id). No
        permission to react (50013): False, and the core says it in a short text."""
        in_parent = conversation.thread is None or conversation.thread == message_id
        where = conversation.channel if in_parent else conversation.thread
        try:
            target = self._client.get_partial_messageable(int(where or conversation.channel))
            message = target.get_partial_message(int(message_id))
        except ValueError:
            return False

        async def react() -> bool:
            await message.add_reaction(QUEUED_REACTION)
            return True

        try:
            return bool(await self.run(conversation, Priority.TEXT, react))
        except PlatformError as exc:
            log.info("discord: queued mark not shown in %s: %s", conversation.channel, exc)
            return False

    async def typing(self, conversation: ConversationRef) -> None:
        """ "typing…" for up to 10 s or until the bot's next message: a hint, best effort."""
        try:
            await self.channel(conversation).typing()
        except (discord.HTTPException, aiohttp.ClientError, PlatformError, ValueError) as exc:
            log.info("discord: no typing indicator in %s (%s)", conversation.channel, exc)

    async def run(
        self,
        conversation: ConversationRef,
        priority: Priority,
        call: Callable[[], Awaitable[Any]],
        *,
        key: Any = None,
    ) -> Any:
        """``call`` in the lane of the channel it goes to (a thread's own id: Discord counts
        a thread as a channel)."""
        lane = conversation.thread or conversation.channel
        return await self._outbox.run(lane, priority, call, key=key)

    def _shown_text(self, text: str) -> str:
        if not text.strip() or len(text) > self._limits.text_max_chars:
            raise PlatformError(f"text of {len(text)} characters cannot be sent to Discord")
        shown = discord_markdown(text)
        if len(shown) > CONTENT_MAX:
            log.warning("discord: a text of %d characters once escaped was cut", len(shown))
        return clip(shown, CONTENT_MAX)

    def _remember(self, message_id: str, shown: str) -> None:
        self._shown.pop(message_id, None)
        self._shown[message_id] = shown
        while len(self._shown) > CARDS_KEPT * 2:
            self._shown.popitem(last=False)
