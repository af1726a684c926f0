"""Pressing an action with a message on Telegram (a plan's Keep planning, "what to change").

Telegram has no modal to ask for the message in, so the card's "✎ …, with a message" button
(``m:<token>``, render.py) makes the bot send a ForceReply prompt to the person who pressed
it; their reply to that prompt is the press, with the reply's text as the message. The
prompts are kept here by (chat id, message id), for the person they were sent to, at most
:data:`~platforms.form_drafts.MAX_FORMS` of them (the oldest forgotten first; a reply to a
forgotten prompt is an ordinary message). Nothing here decides: the token goes to the core
with the message, as a click does, and the core checks it then.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from gateway.domain import ConversationRef
from platforms.form_drafts import MAX_FORMS
from platforms.telegram.forms import MessageKey
from platforms.telegram.render import MESSAGE_PREFIX

__all__ = ["SendBack", "SendBacks", "message_token"]


def message_token(data: str) -> str | None:
    """The action token of a "with a message" button's data, or None for any other."""
    if data.startswith(MESSAGE_PREFIX):
        return data[len(MESSAGE_PREFIX) :]
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class SendBack:
    """A prompt asking for the message of a press: whose it is, and the press."""

    user_id: str
    token: str
    conversation: ConversationRef
    card: MessageKey


class SendBacks:
    """The prompts of this process asking for a press's message, by their message."""

    def __init__(self) -> None:
        self._prompts: OrderedDict[MessageKey, SendBack] = OrderedDict()

    def add(self, prompt_key: MessageKey, send_back: SendBack) -> None:
        self._prompts[prompt_key] = send_back
        while len(self._prompts) > MAX_FORMS:
            self._prompts.popitem(last=False)

    def get(self, prompt_key: MessageKey) -> SendBack | None:
        return self._prompts.get(prompt_key)

    def take(self, prompt_key: MessageKey) -> None:
        self._prompts.pop(prompt_key, None)
