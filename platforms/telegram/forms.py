"""Question forms on Telegram: the prompts they sent, by prompt message.

Telegram has no forms, so a card's questions are answered with buttons, one question after
another (render.py draws the acting person's draft), and typed text where a question takes
it ("other", free text, secrets) is the reply to a ForceReply prompt the bot sent for that
person and that question (in a private chat for a secret). Each person's draft, and what a
click or a typed reply does to it, is the shared state machine of platforms/form_drafts.py,
whose ``PendingForms`` keeps the forms by (chat id, message id) of their card and the drafts
(in memory, or in a ledger several hosts share). What is Telegram's is kept here: the
prompts, by (chat id, message id) of the prompt, forgotten with their form (at most
:data:`~platforms.form_drafts.MAX_FORMS` of them, oldest dropped first). A prompt is this
host's: its reply is taken by the host that sent it (the receiver's lease keeps one).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass

from gateway.domain import ConversationRef
from platforms.form_drafts import MAX_FORMS

__all__ = [
    "SECRET_MARK",
    "SECRET_NOT_TAKEN",
    "MessageKey",
    "PromptFor",
    "PromptNote",
    "Prompts",
    "request_in",
    "request_note",
]

MessageKey = tuple[int, int]  # (chat id, message id)

# in every prompt for a secret answer (platform.py ``prompt``): a reply to a message of the
# bot that says it is such a reply, whatever becomes of it, never reaches the agent
SECRET_MARK = "deleted once read"
SECRET_NOT_TAKEN = (
    "🔒 Not taken, and deleted: this prompt is no longer open here (the request was decided, "
    "or another host asked). Press the card's button again if it still waits."
)


_REQUEST = re.compile(r"\(request ([A-Za-z0-9_-]{1,48})\)")


def request_note(form_id: str) -> str:
    """What a prompt says of its request (a form's id is its request's)."""
    return f"(request {form_id})"


def request_in(text: str) -> str | None:
    """The request a prompt of the bot names (:func:`request_note`), if any."""
    found = _REQUEST.search(text)
    return found[1] if found else None


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptNote:
    """A prompt as the person's draft in the ledger notes it (``Draft.prompt``): another
    host that gets the reply checks it is this prompt, and finds the card."""

    prompt: MessageKey
    question: int
    card: MessageKey
    conversation: ConversationRef  # the card's

    def text(self) -> str:
        where = self.conversation
        return json.dumps(
            [*self.prompt, self.question, *self.card, where.channel, where.thread],
            separators=(",", ":"),
        )

    @classmethod
    def read(cls, text: str, platform: str) -> PromptNote | None:
        try:
            chat, message, question, card_chat, card_message, channel, thread = json.loads(text)
            return cls(
                prompt=(int(chat), int(message)),
                question=int(question),
                card=(int(card_chat), int(card_message)),
                conversation=ConversationRef(
                    platform=platform, space=None, channel=str(channel), thread=thread
                ),
            )
        except (ValueError, TypeError):
            return None


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptFor:
    """A ForceReply prompt the bot sent: whose it is, and which question it asks."""

    form_key: MessageKey
    user_id: str
    question: int


class Prompts:
    """The ForceReply prompts this process sent for forms, by prompt message."""

    def __init__(self) -> None:
        self._prompts: OrderedDict[MessageKey, PromptFor] = OrderedDict()

    def add(self, prompt_key: MessageKey, prompt: PromptFor) -> None:
        self._prompts[prompt_key] = prompt
        while len(self._prompts) > MAX_FORMS:
            self._prompts.popitem(last=False)

    def get(self, prompt_key: MessageKey) -> PromptFor | None:
        return self._prompts.get(prompt_key)

    def take(self, prompt_key: MessageKey) -> None:
        self._prompts.pop(prompt_key, None)

    def forget_form(self, form_key: MessageKey) -> None:
        """The form was forgotten: its prompts go with it."""
        for key in [k for k, p in self._prompts.items() if p.form_key == form_key]:
            del self._prompts[key]
