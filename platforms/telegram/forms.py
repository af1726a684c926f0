"""Question forms on Telegram: the pending forms by card message, and the prompts they sent.

Telegram has no forms, so a card's questions are answered with buttons, one question after
another (render.py draws the acting person's draft), and typed text where a question takes
it ("other", free text, secrets) is the reply to a ForceReply prompt the bot sent for that
person and that question (in a private chat for a secret). Each person's draft, and what a
click or a typed reply does to it, is the shared state machine of platforms/form_drafts.py;
what is Telegram's is kept here: forms by (chat id, message id) of their card, and the
prompts, by (chat id, message id) of the prompt, forgotten with their form (at most
:data:`~platforms.form_drafts.MAX_FORMS` of them, oldest dropped first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from platforms.form_drafts import MAX_FORMS, PendingForms

__all__ = ["FormRegistry", "MessageKey", "PromptFor"]

MessageKey = tuple[int, int]  # (chat id, message id)


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptFor:
    """A ForceReply prompt the bot sent: whose it is, and which question it asks."""

    form_key: MessageKey
    user_id: str
    question: int


class FormRegistry(PendingForms[MessageKey]):
    """The pending forms of this process (by card message) and the prompts they sent."""

    def __init__(self) -> None:
        self._prompts: OrderedDict[MessageKey, PromptFor] = OrderedDict()
        super().__init__(on_forget=self._drop_prompts)

    def add_prompt(self, prompt_key: MessageKey, prompt: PromptFor) -> None:
        self._prompts[prompt_key] = prompt
        while len(self._prompts) > MAX_FORMS:
            self._prompts.popitem(last=False)

    def prompt(self, prompt_key: MessageKey) -> PromptFor | None:
        return self._prompts.get(prompt_key)

    def take_prompt(self, prompt_key: MessageKey) -> None:
        self._prompts.pop(prompt_key, None)

    def _drop_prompts(self, form_key: MessageKey) -> None:
        for key in [k for k, p in self._prompts.items() if p.form_key == form_key]:
            del self._prompts[key]
