"""Whether a turn's end is worth a new message, so that the person's phone is told.

Chat platforms notify a phone of a new message, never of an edit (Telegram, Slack and
Discord alike). A turn's text streams into messages edited in place, so a turn whose last
words came by an edit ends in silence: the person, who looked away, is never told. A
platform that streams by editing keeps one :class:`TurnEnds` and tells it what it sent and
edited; at the turn's end (``Platform.turn_ended``) it asks :meth:`TurnEnds.ended` for the
one line to send as a new message, if any (docs/decisions.md, "A turn's end notifies"):

- the turn completed and the last thing it showed in the conversation came by an edit:
  :data:`DONE`, one short new message;
- the last thing shown was a new message (a short answer sent whole, a card, a notice): it
  notified already, nothing more;
- the turn did not complete (interrupted, failed): nothing, for the core always follows such
  an end with a notice of its own that says why (a new message, which notifies);
- nothing was shown during the turn: nothing.

Never one per edit: the answer is asked once, at the turn's end. Sans-IO: conversations and
messages are whatever hashable keys the platform uses (Telegram: ``(chat, topic)`` and
``(chat, message id)``); only messages sent while a turn runs in a conversation are
followed, at most :data:`MAX_FOLLOWED` at once.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import StrEnum

from gateway.domain import TurnStatus

__all__ = ["DONE", "MAX_FOLLOWED", "TurnEnds"]

DONE = "✓ Done."
MAX_FOLLOWED = 4096  # messages of running turns whose edits are followed


class _Last(StrEnum):
    NOTHING = "nothing"
    NEW = "new"  # a new message: the phone was told
    EDIT = "edit"  # an edit: the phone was not


class TurnEnds:
    """What each running turn showed last, per conversation."""

    def __init__(self) -> None:
        self._turns: dict[Hashable, _Last] = {}  # conversation: what its turn showed last
        self._messages: dict[Hashable, Hashable] = {}  # message: its conversation

    def started(self, conversation: Hashable) -> None:
        self._forget(conversation)
        self._turns[conversation] = _Last.NOTHING

    def sent(self, conversation: Hashable, message: Hashable) -> None:
        """A new message was sent in ``conversation`` (text, card, notice, prompt)."""
        if conversation not in self._turns:
            return
        self._turns[conversation] = _Last.NEW
        self._messages[message] = conversation
        while len(self._messages) > MAX_FOLLOWED:
            del self._messages[next(iter(self._messages))]

    def edited(self, message: Hashable) -> None:
        """``message`` was edited to show more of a turn's text."""
        conversation = self._messages.get(message)
        if conversation is not None and conversation in self._turns:
            self._turns[conversation] = _Last.EDIT

    def ended(self, conversation: Hashable, status: TurnStatus) -> str | None:
        """The turn in ``conversation`` ended: the line to send as a new message, or None."""
        last = self._turns.pop(conversation, _Last.NOTHING)
        self._forget(conversation)
        if status is TurnStatus.COMPLETED and last is _Last.EDIT:
            return DONE
        return None

    def _forget(self, conversation: Hashable) -> None:
        self._turns.pop(conversation, None)
        for message in [m for m, c in self._messages.items() if c == conversation]:
            del self._messages[message]
