"""What a Discord message or click means to the gateway: pure functions on plain data.

The platform reads the few fields it needs from discord.py's objects into a :class:`Seen`
(a message) or a :class:`Place` (where an interaction happened), and these functions decide:

- A conversation is ``ConversationRef("discord", guild id or None, parent channel id, thread
  id or None)``: in a thread, its parent channel and the thread; in a channel, the channel;
  in a DM, no guild and the DM channel.
- A person is ``Actor("discord", user id, name, roles)``; the roles are the member's (none in
  a DM: ``role:<id>`` rules fail closed there).
- DMs: every message. A guild channel counts only if it (or a thread's parent) is listed in
  ``channels``. There, a message that mentions the bot starts a session in a thread made
  from it (:attr:`Heard.start_thread`; the platform falls back to the channel without the
  permission); in a thread, a mention always counts, and a bare reply only with
  ``message_content`` where a session lives (:attr:`Heard.needs_session`). Bare top-level
  messages and every bot's message are ignored.
- A message's attachments (issue 32) come with it, its words (if any) the prompt; the
  reference of each is its CDN address (platforms/discord/files.py).
- ``message_id`` is the message's snowflake: a message the gateway replays on RESUME is
  queued once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.attachments import InboundAttachment
from gateway.domain import Actor, ConversationRef

__all__ = [
    "PLATFORM",
    "Heard",
    "Place",
    "Seen",
    "actor_of",
    "conversation_of",
    "heard",
    "in_thread",
    "link_to",
    "strip_mention",
]

PLATFORM = "discord"


@dataclass(frozen=True, kw_only=True, slots=True)
class Place:
    """Where a message or interaction happened: its guild (None: a DM), its channel, and,
    in a thread, the thread's parent channel."""

    guild_id: str | None
    channel_id: str
    parent_id: str | None = None  # set when channel_id is a thread


@dataclass(frozen=True, kw_only=True, slots=True)
class Seen:
    """A message as the platform read it from discord.py."""

    message_id: str
    place: Place
    author_id: str
    author_name: str
    author_is_bot: bool
    content: str
    mentions: tuple[str, ...] = ()  # user ids mentioned (discord.py's Message.mentions)
    roles: tuple[str, ...] = ()  # the author's role ids, where the author is a member
    attachments: tuple[InboundAttachment, ...] = ()  # its files (issue 32), in order


@dataclass(frozen=True, kw_only=True, slots=True)
class Heard:
    """A person's message the bot takes."""

    conversation: ConversationRef
    actor: Actor
    text: str
    message_id: str
    needs_session: bool = False  # only where a session lives (Inbox.has_session)
    start_thread: bool = False  # begins a session: in a thread made from the message
    direct: bool = False  # a DM: only its person and the bot see it
    attachments: tuple[InboundAttachment, ...] = ()


def conversation_of(place: Place) -> ConversationRef:
    if place.guild_id is None:
        return ConversationRef(platform=PLATFORM, space=None, channel=place.channel_id)
    if place.parent_id is not None:
        return ConversationRef(
            platform=PLATFORM,
            space=place.guild_id,
            channel=place.parent_id,
            thread=place.channel_id,
        )
    return ConversationRef(platform=PLATFORM, space=place.guild_id, channel=place.channel_id)


def actor_of(user_id: str, name: str = "", roles: tuple[str, ...] = ()) -> Actor:
    return Actor(
        platform=PLATFORM,
        user_id=user_id,
        display=f"@{name}" if name else user_id,
        roles=tuple(role for role in roles if role),
    )


def strip_mention(text: str, bot_id: str) -> str:
    """The text without the bot's mention(s) (``<@id>``, ``<@!id>``), other text kept."""
    stripped = re.sub(rf"<@!?{re.escape(bot_id)}>", " ", text)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def heard(
    seen: Seen, *, bot_id: str, channels: tuple[str, ...], message_content: bool
) -> Heard | None:
    """What a message says to the gateway; None when it is not for the bot."""
    if seen.author_is_bot or not seen.author_id or seen.author_id == bot_id:
        return None
    text = strip_mention(seen.content, bot_id)
    files = seen.attachments
    if not text and not files:
        return None  # nothing said (or, without the intent, nothing Discord let us read)
    place = seen.place
    where = conversation_of(place)
    if place.guild_id is None:
        actor = actor_of(seen.author_id, seen.author_name)  # no member: no roles
        return Heard(
            conversation=where,
            actor=actor,
            text=text,
            message_id=seen.message_id,
            direct=True,
            attachments=files,
        )
    if where.channel not in channels:
        return None
    actor = actor_of(seen.author_id, seen.author_name, seen.roles)
    mentioned = bot_id in seen.mentions
    if where.thread is not None:
        if not mentioned and not message_content:
            return None
        return Heard(
            conversation=where,
            actor=actor,
            text=text,
            message_id=seen.message_id,
            needs_session=not mentioned,
            attachments=files,
        )
    if not mentioned:
        return None
    return Heard(
        conversation=where,
        actor=actor,
        text=text,
        message_id=seen.message_id,
        start_thread=True,
        attachments=files,
    )


def in_thread(conversation: ConversationRef, thread_id: str) -> ConversationRef:
    """The conversation of a session started from a message: the thread made from it."""
    return ConversationRef(
        platform=PLATFORM, space=conversation.space, channel=conversation.channel, thread=thread_id
    )


def link_to(conversation: ConversationRef) -> str:
    """The address that opens ``conversation`` in Discord (a thread, a channel or a DM)."""
    guild = conversation.space or "@me"
    return f"https://discord.com/channels/{guild}/{conversation.thread or conversation.channel}"
