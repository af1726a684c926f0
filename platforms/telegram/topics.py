"""Forum topics: which chats are forums, and a topic opened for a new session (issue 31).

In a forum supergroup each topic is its own conversation (``thread`` = the topic's
``message_thread_id``); the General topic is the chat itself. Its id is 1, and Telegram
refuses ``message_thread_id = 1`` ("message thread not found"): nothing is ever sent with it
(:func:`thread_id`).

The gateway learns that a chat is a forum from the updates it takes (``Chat.is_forum``),
kept in :class:`Forums`, bounded. ``/new`` typed in a forum's General topic opens a topic
(``createForumTopic``) when the bot may manage the forum's topics; when Telegram refuses
for want of that right, the person is told how to give it (:data:`NO_TOPIC_RIGHTS`).
"""

from __future__ import annotations

from collections import OrderedDict

from telegram.error import BadRequest

from gateway.domain import ConversationRef
from gateway.errors import PlatformError
from gateway.platform import ThreadRefused

__all__ = [
    "GENERAL_TOPIC",
    "MAX_FORUMS",
    "MAX_TOPIC_NAME",
    "NO_TOPIC_RIGHTS",
    "Forums",
    "refusal_of",
    "thread_id",
]

GENERAL_TOPIC = 1  # the General topic's id: Telegram refuses it as message_thread_id
MAX_FORUMS = 4096  # forum chats remembered; the oldest seen is forgotten past it
MAX_TOPIC_NAME = 128  # Bot API createForumTopic: name of 1-128 characters
NO_TOPIC_RIGHTS = (
    "I may not open topics in this group, so no session was started and nothing was changed. "
    "To allow it, make the bot an admin of the group with “Manage topics”; until then, open "
    "a topic yourself and write there: each topic is a session of its own."
)
NOT_A_FORUM = (
    "This group has no topics (it is not a forum), so no topic was opened. Nothing was changed."
)
# Bot API answers to createForumTopic without the right to (400 Bad Request)
_NO_RIGHTS = ("not enough rights", "chat_admin_required", "need administrator rights")


class Forums:
    """The chat ids of the forums the bot has seen a message from (or asked Telegram of), at
    most ``limit``; and as many of the groups seen to be no forum."""

    def __init__(self, limit: int = MAX_FORUMS) -> None:
        self._limit = limit
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._plain: OrderedDict[int, None] = OrderedDict()

    def saw(self, chat_id: int, *, forum: bool) -> None:
        # a forum whose topics were turned off is plain from then on, and back again
        kept, dropped = (self._seen, self._plain) if forum else (self._plain, self._seen)
        dropped.pop(chat_id, None)
        kept.pop(chat_id, None)
        kept[chat_id] = None
        while len(kept) > self._limit:
            kept.popitem(last=False)

    def knows(self, chat_id: int) -> bool | None:
        """Whether ``chat_id`` is a forum; None when no message of it was seen (a group the
        bot is in where no one spoke since the start) and it is no private chat."""
        if chat_id in self._seen:
            return True
        if chat_id in self._plain or chat_id > 0:
            return False
        return None

    def __contains__(self, chat_id: object) -> bool:
        return chat_id in self._seen

    def general_of(self, conversation: ConversationRef) -> bool:
        """Whether ``conversation`` is a known forum's General topic."""
        return conversation.thread is None and int(conversation.channel) in self


def thread_id(conversation: ConversationRef) -> int | None:
    """The ``message_thread_id`` to send into ``conversation`` with: its topic's id, never the
    General topic's (a message there is sent to the chat itself)."""
    if not conversation.thread:
        return None
    topic = int(conversation.thread)
    return None if topic == GENERAL_TOPIC else topic


def refusal_of(exc: PlatformError) -> PlatformError:
    """createForumTopic's refusal said as a person can act on it: the right to ask for, or
    the chat that is no forum; any other error as it came."""
    cause = exc.__cause__
    message = (cause.message if isinstance(cause, BadRequest) else str(exc)).lower()
    if any(words in message for words in _NO_RIGHTS):
        refused = ThreadRefused(NO_TOPIC_RIGHTS)
    elif "not a forum" in message:
        refused = ThreadRefused(NOT_A_FORUM)
    else:
        return exc
    refused.__cause__ = exc
    return refused
