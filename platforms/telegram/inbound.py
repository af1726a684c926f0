"""What a Telegram update means to the gateway: pure functions on python-telegram-bot objects.

- A conversation is a chat, or one forum topic of a chat (``thread`` = ``message_thread_id``
  of a topic message; the General topic and ordinary groups have none). ``channel`` is the
  chat id, which is what a project's ``channels`` list names; Telegram has no workspace
  above a chat, so ``space`` is None.
- A person is ``Actor("telegram", <numeric user id>)``, shown as @username or their name.
- In a private chat every message is for the bot. In a group, with ``group_mode = "all"``
  every message is; with ``"mentions"`` only one that mentions the bot, replies to one of
  its messages, or starts with a command. The bot's own @mention is taken out of the text.
"""

from __future__ import annotations

import re

from telegram import Chat, Message, MessageEntity, User

from gateway.domain import Actor, ConversationRef
from platforms.telegram.config import GroupMode
from platforms.telegram.topics import GENERAL_TOPIC

__all__ = [
    "PLATFORM",
    "actor_of",
    "addressed_text",
    "chat_id_of",
    "conversation_of",
    "is_private",
    "link_to",
    "replied_id",
    "topic_of",
]

PLATFORM = "telegram"


def topic_of(message: Message) -> int | None:
    """The forum topic a message belongs to (None outside topics, and in the General topic,
    which is the chat itself)."""
    topic = message.message_thread_id
    if message.is_topic_message and topic is not None and topic != GENERAL_TOPIC:
        return topic
    return None


def conversation_of(chat: Chat, topic: int | None) -> ConversationRef:
    return ConversationRef(
        platform=PLATFORM,
        space=None,
        channel=str(chat.id),
        thread=str(topic) if topic is not None else None,
    )


def link_to(conversation: ConversationRef) -> str | None:
    """The address of a forum topic (or a supergroup) for its members: ``t.me/c/<id>/<topic>``,
    the chat id without its ``-100``; None for another chat (a private chat or a basic group
    has no such address)."""
    if not conversation.channel.startswith("-100"):
        return None
    chat = conversation.channel.removeprefix("-100")
    return f"https://t.me/c/{chat}/{conversation.thread}" if conversation.thread else None


def chat_id_of(conversation: ConversationRef) -> int:
    return int(conversation.channel)


def is_private(conversation: ConversationRef) -> bool:
    """Private chats have the person's (positive) id; groups and channels are negative."""
    return chat_id_of(conversation) > 0


def actor_of(user: User) -> Actor:
    display = f"@{user.username}" if user.username else user.full_name
    return Actor(platform=PLATFORM, user_id=str(user.id), display=display)


def _mentions_bot(message: Message, bot: User) -> bool:
    wanted = f"@{bot.username}".casefold() if bot.username else None
    kinds: list[str | None] = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
    # a photo or a document says its words in a caption, with entities of its own
    found = (
        message.parse_entities(kinds)
        if message.text is not None
        else message.parse_caption_entities(kinds)
    )
    for entity, text in found.items():
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot.id:
            return True
        if wanted is not None and text.casefold() == wanted:
            return True
    return False


def _replies_to_bot(message: Message, bot: User) -> bool:
    replied = message.reply_to_message
    if replied is None or replied.from_user is None:
        return False
    # in a forum topic every message "replies" to the topic's creation notice
    return replied.from_user.id == bot.id and replied.forum_topic_created is None


def replied_id(message: Message) -> str | None:
    """The id of the message ``message`` replies to (a card, for instance); None when it
    replies to none, or only to its forum topic's creation notice."""
    replied = message.reply_to_message
    if replied is None or replied.forum_topic_created is not None:
        return None
    return str(replied.message_id)


def _starts_with_command(message: Message) -> bool:
    entities = message.entities if message.text is not None else message.caption_entities
    return any(
        entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0 for entity in entities
    )


def addressed_text(
    message: Message, *, bot: User, mode: GroupMode, with_files: bool = False
) -> str | None:
    """The text the bot takes from ``message``, or None when it is not for the bot. A message
    ``with_files`` says its words in its caption, and is for the bot without any ("")."""
    text = message.text if message.text is not None else message.caption
    if with_files and text is None:
        text = ""
    if text is None or message.from_user is None or message.from_user.is_bot:
        return None
    if message.chat.type != Chat.PRIVATE and mode is GroupMode.MENTIONS:
        addressed = (
            _mentions_bot(message, bot)
            or _replies_to_bot(message, bot)
            or _starts_with_command(message)
        )
        if not addressed:
            return None
    if bot.username and not text.lstrip().startswith("/"):
        text = re.sub(rf"(?i)@{re.escape(bot.username)}\b", "", text).strip()
    return text if text or with_files else None
