"""The buttons under a message whose files did not come (issue 32): "Send without the
file", "Try again", "Drop it".

When a prompt's turn comes and one of its files cannot be fetched (after the retries of
gateway/sessions/file_fetch.py) or is refused (its size or type, a link in the inbox's
way), the prompt is not sent without it: it waits, interrupted, its files kept in the
ledger (``PromptQueue.wait_for_files_choice``; a restart leaves it waiting), and its author is
offered a card with the reason and three buttons (:func:`files_card`; no "Try again" where
fetching again cannot help: a file refused for its size or type). The offer is the ledger's
(``PromptRecord.files_card``, migration 26): a card its platform failed to show is shown
when the platform answers again or the gateway starts, and the card shown is edited once
chosen by whichever process takes the press.

The buttons are no decision of any request, and typed text is never taken for one: a
token names the prompt, the choice and the offer's round, signed under the gateway's key
like a card's (``f1:<w|a|d>:<prompt id>:<round>:<tag>``; the tag as
gateway/action_tokens.py makes it, over a message no card's token can have, since those
start ``a1:``), as the other buttons that are no request's (steer_button.py,
schedule_buttons.py, model_buttons.py). A click is checked purely first
(:func:`click_refusal`), then acted on by compare-and-set in the ledger
(``PromptQueue.choose_for_files``), so of two clicks exactly one counts:

- a token that does not parse or verify, or clicked in another conversation: "not valid";
- a click by anyone but the message's author: refused, as steering's is; and by its
  author if they may no longer talk to the project (the config in force now);
- a message no longer waiting (chosen already, by this card or an earlier one's) or an
  earlier offer's button (its files failed again since): said plainly, nothing changes;
- a message whose session has ended (/new): said, nothing is queued in a closed session.

"Send without" queues it again at its own place (it runs next), to go as its text alone with
a line naming the files that did not come (gateway.attachments.without_files), and the chat
is told when it goes; "Try again" queues it again, its files fetched again when its turn
comes (failing again, a new card is offered); "Drop it" drops it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import re
from collections.abc import Callable, Mapping

from gateway.cards import ButtonStyle, Card, CardAction
from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError, StoreError
from gateway.platform import Ack, InboundAction, MessageRef, Platform
from gateway.session_record import SessionRecord
from gateway.sessions.card_redraws import redraw_all
from gateway.store.records import FilesChoice, PromptRecord, PromptState
from gateway.store.store import Store

__all__ = [
    "AGAIN_LABEL",
    "DROP_LABEL",
    "FILES_TOKEN_PREFIX",
    "WITHOUT_LABEL",
    "FileChoices",
    "click_refusal",
    "encode_files_token",
    "files_card",
    "is_files_token",
    "verify_files_token",
]

log = logging.getLogger(__name__)

FILES_TOKEN_PREFIX = "f1:"
WITHOUT_LABEL = "Send without the file"
WITHOUT_LABEL_MANY = "Send without the files"
AGAIN_LABEL = "Try again"
DROP_LABEL = "Drop it"
NOT_VALID = "This button is not valid."
_CHOICES = {"w": FilesChoice.WITHOUT, "a": FilesChoice.AGAIN, "d": FilesChoice.DROPPED}
_LETTERS = {choice: letter for letter, choice in _CHOICES.items()}
_TOKEN = re.compile(
    r"^f1:(?P<what>[wad]):(?P<prompt>[0-9]{1,18}):(?P<round>[0-9]{1,9}):(?P<tag>[A-Za-z0-9_-]{12})$"
)


def _tag(key: bytes, message: str) -> str:
    # the tag of gateway/action_tokens.py: truncated HMAC-SHA256, base64url without padding
    digest = hmac.new(key, message.encode("ascii"), hashlib.sha256).digest()[:9]
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def encode_files_token(key: bytes, choice: FilesChoice, prompt_id: int, files_round: int) -> str:
    message = f"f1:{_LETTERS[choice]}:{prompt_id}:{files_round}"
    return f"{message}:{_tag(key, message)}"


def is_files_token(text: str) -> bool:
    return text.startswith(FILES_TOKEN_PREFIX)


def verify_files_token(key: bytes, text: str) -> tuple[FilesChoice, int, int] | None:
    """(the choice, the prompt's id, the offer's round), or None when the token does not
    parse or verify."""
    match = _TOKEN.match(text)
    if match is None:
        return None
    expected = _tag(key, f"f1:{match['what']}:{match['prompt']}:{match['round']}")
    if not hmac.compare_digest(expected.encode("ascii"), match["tag"].encode("ascii")):
        return None
    return _CHOICES[match["what"]], int(match["prompt"]), int(match["round"])


def _is(prompt: PromptRecord) -> str:
    return "are" if len(prompt.attachments) > 1 else "is"


def _what(prompt: PromptRecord) -> str:
    return "its files" if len(prompt.attachments) > 1 else "its file"


def _the(prompt: PromptRecord) -> str:
    return "the files" if len(prompt.attachments) > 1 else "the file"


def _names(prompt: PromptRecord) -> str:
    return ", ".join(" ".join(a.name.split()) for a in prompt.attachments)


def files_card(key: bytes, prompt: PromptRecord, why: str, *, again: bool) -> Card:
    """The card under a message whose files did not come: why, and the author's choices."""
    many = len(prompt.attachments) > 1
    without = CardAction(
        label=WITHOUT_LABEL_MANY if many else WITHOUT_LABEL,
        token=encode_files_token(key, FilesChoice.WITHOUT, prompt.id, prompt.files_round),
        style=ButtonStyle.PRIMARY,
    )
    retry = CardAction(
        label=AGAIN_LABEL,
        token=encode_files_token(key, FilesChoice.AGAIN, prompt.id, prompt.files_round),
    )
    drop = CardAction(
        label=DROP_LABEL,
        token=encode_files_token(key, FilesChoice.DROPPED, prompt.id, prompt.files_round),
        style=ButtonStyle.DANGER,
    )
    return Card(
        title=f"📎 Your message waits: {_what(prompt)} did not come through",
        summary=why,
        actions=(without, retry, drop) if again else (without, drop),
    )


def _chosen_card(prompt: PromptRecord, choice: FilesChoice, by: Actor, why: str) -> Card:
    """The card once chosen: why, what was chosen, by whom, and no buttons."""
    said = {
        FilesChoice.WITHOUT: f"sent without {_names(prompt)}",
        FilesChoice.AGAIN: f"trying {_the(prompt)} again",
        FilesChoice.DROPPED: "dropped, not sent",
    }[choice]
    return Card(
        title=f"📎 Your message's {_what(prompt).removeprefix('its ')} did not come through",
        summary=f"{why}\n{by.display}: {said}.",
    )


def _done_words(prompt: PromptRecord) -> str:
    """Why a message no longer waits, for a click on a button that came too late."""
    if prompt.files_choice is FilesChoice.WITHOUT:
        return f"This message was already sent without {_what(prompt)}."
    if prompt.files_choice is FilesChoice.AGAIN:
        return f"{_the(prompt).capitalize()} of this message {_is(prompt)} already tried again."
    if prompt.files_choice is FilesChoice.DROPPED or prompt.state is PromptState.DROPPED:
        return "This message was already dropped."
    return "This message no longer waits for a choice."


def click_refusal(
    prompt: PromptRecord | None,
    files_round: int,
    *,
    clicker: Actor,
    where: ConversationRef,
    session: SessionRecord | None,
) -> str | None:
    """Why this click changes nothing (None: it may). ``clicker`` is named as the project's
    auth rules name people, as the prompt's author is."""
    if prompt is None or where != prompt.conversation:
        return NOT_VALID
    if (clicker.platform, clicker.user_id) != (prompt.author.platform, prompt.author.user_id):
        return f"Only {prompt.author} can choose what becomes of their message."
    waiting = prompt.files_choice is FilesChoice.WAITING
    if not waiting or prompt.state is not PromptState.INTERRUPTED:
        return _done_words(prompt)
    if files_round != prompt.files_round:
        return "These buttons are from an earlier try: use the newest ones."
    if session is None or session.is_closed:
        return "Its session has ended: send the message again."
    return None


class FileChoices:
    """Offers the card under a message whose files did not come, and takes its clicks."""

    def __init__(
        self,
        store: Store,
        platforms: Mapping[str, Platform],
        key: bytes,
        *,
        auth_platform: Callable[[str], str],
        kick: Callable[[SessionRecord], None],
        may_talk: Callable[[str, Actor], bool],
        host: str | None = None,
    ) -> None:
        self._store = store
        self._host = host  # the sessions whose unshown cards this host shows (None: all)
        self._platforms = platforms
        self._key = key
        self._auth_platform = auth_platform
        self._kick = kick
        self._may_talk = may_talk  # (project, person): the config in force now
        # the prompts whose card is being shown: set once its message is kept in the ledger
        self._offering: dict[int, asyncio.Event] = {}

    async def offer(self, prompt: PromptRecord) -> None:
        """The card of the prompt's offer (its reason and choices as the ledger keeps them,
        ``PromptRecord.files_card``) in the conversation the message came from. A platform
        that fails to show it is logged, and the card is shown once the platform is back or
        the gateway starts again (:meth:`offer_unshown`): the message waits, nothing is lost."""
        offered = prompt.files_card
        platform = self._platforms.get(prompt.conversation.platform)
        if offered is None or platform is None or prompt.id in self._offering:
            return
        showing = self._offering[prompt.id] = asyncio.Event()
        try:
            card = files_card(self._key, prompt, offered.why, again=offered.again)
            try:
                ref = await platform.send_card(prompt.conversation, card)
            except PlatformError as exc:
                log.warning("files' card in %s not shown yet: %s", prompt.conversation.key(), exc)
                return
            # kept in the ledger: the press edits it on any host, after a restart too
            try:
                await self._store.prompts.files_card_shown(
                    prompt.id, files_round=prompt.files_round, message_id=ref.message_id
                )
            except StoreError as exc:  # the card works; only its edit once chosen is lost
                log.warning("files' card in %s not kept: %s", prompt.conversation.key(), exc)
        finally:
            del self._offering[prompt.id]
            showing.set()

    async def offer_unshown(self, platform: str | None = None) -> None:
        """The cards no platform showed yet, of the sessions this host runs: in
        ``platform``'s conversations (it answers again), or everywhere (at start)."""
        try:
            unshown = await self._store.prompts.files_cards_unshown(
                host=self._host, platform=platform
            )
        except StoreError as exc:  # asked again at the platform's next return, or start
            log.warning("the files' cards not shown yet were not read: %s", exc)
            return
        for prompt in unshown:
            await self.offer(prompt)

    async def on_click(self, action: InboundAction) -> Ack:
        verified = verify_files_token(self._key, action.token)
        choice, prompt_id, files_round = verified if verified is not None else (None, None, 0)
        prompt = None if prompt_id is None else await self._store.prompts.get(prompt_id)
        session = None if prompt is None else await self._store.sessions.get(prompt.session_id)
        clicker = Actor(
            platform=self._auth_platform(action.actor.platform),
            user_id=action.actor.user_id,
            display=action.actor.display,
            roles=action.actor.roles,
        )
        why = click_refusal(
            prompt, files_round, clicker=clicker, where=action.conversation, session=session
        )
        if why is None and session is not None and not self._may_talk(session.project, clicker):
            why = "You may not use this project here."  # its author, no longer allowed
        chosen = None
        if why is None and prompt is not None and choice is not None:
            chosen = await self._store.prompts.choose_for_files(
                prompt.id, files_round=files_round, choice=choice, actor=clicker
            )
            if chosen is None:  # another click came first
                now = await self._store.prompts.get(prompt.id)
                why = _done_words(now) if now is not None else NOT_VALID
        if why is not None or chosen is None or choice is None or session is None:
            await self._store.audit.record(
                "prompt.files_click_refused",
                actor=action.actor.key(),
                session_id=prompt.session_id if prompt is not None else None,
                details={"prompt_id": prompt_id, "why": why or NOT_VALID},
            )
            return Ack(text=why or NOT_VALID, accepted=False)
        try:
            # the card says what was chosen before the message goes on: its author sees the
            # choice taken, then the agent's answer, never the other way round
            await self._settle(chosen, choice, clicker)
        finally:
            if choice is not FilesChoice.DROPPED:
                self._kick(session)
        return Ack(text=_accepted_words(chosen, choice), accepted=True)

    async def _settle(self, prompt: PromptRecord, choice: FilesChoice, by: Actor) -> None:
        """The card says what was chosen, its buttons gone (best effort: the ledger holds
        the choice, and a second click is refused by it anyway). A press that came while
        the card was still being shown (its message not yet in the ledger) waits for that."""
        showing = self._offering.get(prompt.id)
        if showing is not None:
            await showing.wait()
            prompt = await self._store.prompts.get(prompt.id) or prompt
        shown = prompt.files_card
        if shown is None or shown.message_id is None:
            return
        ref = MessageRef(conversation=prompt.conversation, message_id=shown.message_id)
        card = _chosen_card(prompt, choice, by, shown.why)
        await redraw_all(self._platforms, (ref,), card, what="files' card")


def _accepted_words(prompt: PromptRecord, choice: FilesChoice) -> str:
    if choice is FilesChoice.WITHOUT:
        return f"📎 Sending your message without {_names(prompt)}."
    if choice is FilesChoice.AGAIN:
        return f"🔁 Trying {_the(prompt)} again."
    return "🗑 Dropped: your message will not be sent."
