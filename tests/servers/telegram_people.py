"""People, chats and the updates they cause, shaped as the Bot API sends them.

A message in a forum topic carries ``message_thread_id``, ``is_topic_message`` and, as on
the real Bot API, a ``reply_to_message`` that is the topic's creation notice (here created
by the bot, so that "replies to the bot" must be told apart from "is in a topic").
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

from tests.servers.fake_telegram import BOT, FakeTelegram, Sent

__all__ = [
    "Person",
    "callback_update",
    "document_update",
    "group_chat",
    "message_update",
    "photo_update",
    "private_chat",
    "video_update",
    "voice_update",
]

_callback_ids = itertools.count(1)


@dataclass(frozen=True)
class Person:
    id: int
    first_name: str
    username: str | None = None

    def user(self) -> dict[str, Any]:
        user: dict[str, Any] = {"id": self.id, "is_bot": False, "first_name": self.first_name}
        if self.username:
            user["username"] = self.username
        return user

    @property
    def handle(self) -> str:
        return f"@{self.username}" if self.username else self.first_name


def private_chat(person: Person) -> dict[str, Any]:
    chat: dict[str, Any] = {"id": person.id, "type": "private", "first_name": person.first_name}
    if person.username:
        chat["username"] = person.username
    return chat


def group_chat(chat_id: int, title: str, *, forum: bool = False) -> dict[str, Any]:
    return {"id": chat_id, "type": "supergroup", "title": title, "is_forum": forum}


def _entities(text: str) -> list[dict[str, Any]]:
    found = []
    if text.startswith("/"):
        length = len(text.split()[0])
        found.append({"type": "bot_command", "offset": 0, "length": length})
    mention = f"@{BOT['username']}"
    at = text.find(mention)
    if at >= 0 and not text.startswith("/"):
        found.append({"type": "mention", "offset": at, "length": len(mention)})
    return found


def _replied(fake: FakeTelegram, chat: dict[str, Any], message: Sent) -> dict[str, Any]:
    author = BOT if message.from_bot else {"id": 1, "is_bot": False, "first_name": "Someone"}
    return {
        "message_id": message.message_id,
        "date": int(time.time()),
        "chat": chat,
        "from": author,
        "text": message.text or "…",
    }


def message_update(
    fake: FakeTelegram,
    chat: dict[str, Any],
    person: Person,
    text: str,
    *,
    thread: int | None = None,
    reply_to: Sent | None = None,
    message_id: int | None = None,
) -> dict[str, Any]:
    """An update with a new message of ``person`` in ``chat`` (registered with the fake)."""
    fake.register_chat(chat)
    message: dict[str, Any] = {
        "message_id": message_id or fake.new_message_id(int(chat["id"])),
        "date": int(time.time()),
        "chat": chat,
        "from": person.user(),
        "text": text,
    }
    entities = _entities(text)
    if entities:
        message["entities"] = entities
    if thread is not None:
        message["message_thread_id"] = thread
        message["is_topic_message"] = True
        message["reply_to_message"] = {
            "message_id": thread,
            "date": int(time.time()),
            "chat": chat,
            "from": BOT,
            "message_thread_id": thread,
            "forum_topic_created": {"name": f"topic {thread}", "icon_color": 7322096},
        }
    if reply_to is not None:
        message["reply_to_message"] = _replied(fake, chat, reply_to)
    return {"message": message}


def callback_update(
    fake: FakeTelegram, person: Person, message: Sent, data: str
) -> tuple[str, dict[str, Any]]:
    """A click of ``person`` on a button of ``message``: (the query id, the update)."""
    query_id = f"cq-{next(_callback_ids)}"
    chat = fake.chats[message.chat_id]
    shown: dict[str, Any] = {
        "message_id": message.message_id,
        "date": int(time.time()),
        "chat": chat,
        "from": BOT,
        "text": message.text,
    }
    if message.thread is not None:
        shown["message_thread_id"] = message.thread
        shown["is_topic_message"] = True
    if message.markup:
        shown["reply_markup"] = message.markup
    query = {
        "id": query_id,
        "from": person.user(),
        "chat_instance": f"ci{message.chat_id}",
        "data": data,
        "message": shown,
    }
    return query_id, {"callback_query": query}


def _with_media(
    fake: FakeTelegram,
    chat: dict[str, Any],
    person: Person,
    caption: str | None,
    media: dict[str, Any],
    media_group_id: str | None,
) -> dict[str, Any]:
    fake.register_chat(chat)
    message: dict[str, Any] = {
        "message_id": fake.new_message_id(int(chat["id"])),
        "date": int(time.time()),
        "chat": chat,
        "from": person.user(),
        **media,
    }
    if caption is not None:  # a captioned photo has ``caption``, not ``text`` (FACTS)
        message["caption"] = caption
        entities = _entities(caption)
        if entities:
            message["caption_entities"] = entities
    if media_group_id is not None:
        message["media_group_id"] = media_group_id
    return {"message": message}


def photo_update(
    fake: FakeTelegram,
    chat: dict[str, Any],
    person: Person,
    content: bytes,
    *,
    caption: str | None = None,
    media_group_id: str | None = None,
) -> dict[str, Any]:
    """A photo as Telegram sends it: several sizes, the largest last (the fake serves
    ``content`` for the largest, a few bytes of nothing for the thumbnails)."""
    thumb_id, thumb_unique = fake.add_file(b"thumbnail")
    file_id, unique = fake.add_file(content)
    sizes = [
        {
            "file_id": thumb_id,
            "file_unique_id": thumb_unique,
            "width": 90,
            "height": 90,
            "file_size": 9,
        },
        {
            "file_id": file_id,
            "file_unique_id": unique,
            "width": 1280,
            "height": 720,
            "file_size": len(content),
        },
    ]
    return _with_media(fake, chat, person, caption, {"photo": sizes}, media_group_id)


def document_update(
    fake: FakeTelegram,
    chat: dict[str, Any],
    person: Person,
    content: bytes,
    file_name: str,
    *,
    mime_type: str = "application/octet-stream",
    caption: str | None = None,
    media_group_id: str | None = None,
    declared_size: int | None = None,
) -> dict[str, Any]:
    """A file sent as a document (its name as sent, the type the client claims)."""
    file_id, unique = fake.add_file(content)
    document = {
        "file_id": file_id,
        "file_unique_id": unique,
        "file_name": file_name,
        "mime_type": mime_type,
        "file_size": len(content) if declared_size is None else declared_size,
    }
    return _with_media(fake, chat, person, caption, {"document": document}, media_group_id)


def video_update(
    fake: FakeTelegram,
    chat: dict[str, Any],
    person: Person,
    content: bytes,
    *,
    caption: str | None = None,
) -> dict[str, Any]:
    """A video sent as one (no name of its own, as a phone's camera sends it)."""
    file_id, unique = fake.add_file(content)
    video = {
        "file_id": file_id,
        "file_unique_id": unique,
        "width": 640,
        "height": 360,
        "duration": 1,
        "mime_type": "video/mp4",
        "file_size": len(content),
    }
    return _with_media(fake, chat, person, caption, {"video": video}, None)


def voice_update(
    fake: FakeTelegram,
    chat: dict[str, Any],
    person: Person,
    content: bytes,
    *,
    duration: int = 3,
) -> dict[str, Any]:
    """A voice note as Telegram sends it (Opus in Ogg, its length in seconds)."""
    file_id, unique = fake.add_file(content)
    update = message_update(fake, chat, person, "")
    message = update["message"]
    del message["text"]
    message["voice"] = {
        "file_id": file_id,
        "file_unique_id": unique,
        "duration": duration,
        "mime_type": "audio/ogg",
        "file_size": len(content),
    }
    return update
