"""What people write to the bot: a message (a DM, a mention, a reply in a session's thread;
a thread made from the mention that starts a session) and a slash command, handed to the
gateway one at a time per conversation, in the order they came, and tried again while the
gateway cannot take them (a busy ledger); the person is told when it gave up.

What is heard is decided purely (platforms/discord/inbound.py ``heard``); here is only IO.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import discord

from gateway.domain import ConversationRef
from gateway.errors import GatewayError, PlatformError
from gateway.platform import InboundMessage, Inbox, KnowsWaiting, MessageRef
from platforms.discord.commands import command_text, request_choices
from platforms.discord.config import DiscordConfig
from platforms.discord.inbound import (
    Heard,
    actor_of,
    conversation_of,
    heard,
    in_thread,
)
from platforms.discord.receive import place_of, roles_of, seen_of
from platforms.discord.render import clip
from platforms.discord.sending import CARDS_KEPT
from platforms.hand_over import BUSY, hand_over

__all__ = ["Messages"]

log = logging.getLogger(__name__)

_THREAD_EXISTS = 160004
AUTOCOMPLETE_SECONDS = 2.0  # of Discord's 3 s for the choices


class Messages:
    """Messages and slash commands to the gateway's inbox."""

    def __init__(
        self,
        config: DiscordConfig,
        *,
        inbox: Callable[[], Awaitable[Inbox | None]],
        send_text: Callable[[ConversationRef, str], Awaitable[MessageRef]],
    ) -> None:
        self._config = config
        self._inbox = inbox  # the attached inbox, waited for; None once input stopped
        self._send_text = send_text
        self._order: dict[str, asyncio.Lock] = {}
        self.bot_id = ""  # known once the client is ready

    async def on_discord_message(self, message: discord.Message) -> None:
        found = heard(
            seen_of(message),
            bot_id=self.bot_id,
            channels=self._config.channels,
            message_content=self._config.message_content,
        )
        if found is None:
            return
        # discord.py runs each event in a task of its own: a conversation's messages are
        # taken one after another, in the order they came (the lock is FIFO)
        async with self._order_of(found.conversation.key()):
            inbox = await self._inbox()
            if inbox is None:
                return
            if found.needs_session and not await inbox.has_session(found.conversation):
                return
            where = (
                await self._thread_for(message, found) if found.start_thread else found.conversation
            )
            await self._hand_over(
                inbox,
                InboundMessage(
                    conversation=where,
                    actor=found.actor,
                    text=found.text,
                    message_id=found.message_id,
                    private=found.direct,
                    attachments=found.attachments,
                ),
            )

    async def on_slash(
        self, interaction: discord.Interaction[Any], name: str, *arguments: str
    ) -> None:
        """Answered at once (only its person sees it); the command goes to the gateway, which
        answers it where it was typed (the help too: said once, there)."""
        await interaction.response.send_message(f"/{name}: sent.", ephemeral=True)
        inbox = await self._inbox()
        if inbox is None:
            return
        place = place_of(interaction.channel, interaction.guild_id)
        user = interaction.user
        await self._hand_over(
            inbox,
            InboundMessage(
                conversation=conversation_of(place),
                actor=actor_of(str(user.id), user.name, roles_of(user)),
                text=command_text(name, *arguments),
                message_id=f"command:{interaction.id}",
                private=interaction.guild_id is None,
            ),
        )

    async def request_choices(
        self, interaction: discord.Interaction[Any], name: str, typed: str
    ) -> list[tuple[str, str]]:
        """What ``/name``'s request id is completed with as it is typed: the requests
        waiting in the conversation (nothing where the gateway cannot say in time: Discord
        waits 3 s for the choices)."""
        try:
            async with asyncio.timeout(AUTOCOMPLETE_SECONDS):
                inbox = await self._inbox()
                if not isinstance(inbox, KnowsWaiting):
                    return []
                where = conversation_of(place_of(interaction.channel, interaction.guild_id))
                user = interaction.user
                waiting = await inbox.waiting(
                    where, actor_of(str(user.id), user.name, roles_of(user))
                )
        except (TimeoutError, GatewayError) as exc:
            log.info("discord: no choices for /%s (%s)", name, type(exc).__name__)
            return []
        return request_choices(name, waiting, typed)

    def _order_of(self, key: str) -> asyncio.Lock:
        lock = self._order.get(key)
        if lock is None:
            if len(self._order) >= CARDS_KEPT:
                for idle in [k for k, held in self._order.items() if not held.locked()]:
                    del self._order[idle]
            lock = self._order[key] = asyncio.Lock()
        return lock

    async def _hand_over(self, inbox: Inbox, message: InboundMessage) -> None:
        """The message to the gateway (platforms/hand_over.py); the person is told when it
        could not be taken."""
        if not await hand_over(inbox, message):
            with contextlib.suppress(PlatformError):
                await self._send_text(message.conversation, BUSY)

    async def _thread_for(self, message: discord.Message, found: Heard) -> ConversationRef:
        """The thread made from the message that starts a session (the one made before, for
        a message given again); without the permission, the channel itself."""
        try:
            thread = await message.create_thread(name=clip(found.text.splitlines()[0], 90))
            return in_thread(found.conversation, str(thread.id))
        except discord.HTTPException as exc:
            if exc.code == _THREAD_EXISTS:
                return in_thread(found.conversation, str(message.id))
            log.info("discord: no thread made in %s (%s)", found.conversation.channel, exc.code)
            return found.conversation
