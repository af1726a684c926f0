"""Telegram updates in: messages become prompts or commands, clicks become decisions.

Decide, then act. A callback is matched against the card it was clicked on: an approval's
action token, or a direct question's option token, goes to the core as it is
(``Inbox.on_action``); a form's option toggles, "other", next, back and skip move the
clicking person's own draft (forms.py); Submit hands the draft to ``Inbox.on_form``. Every
callback is answered (answerCallbackQuery) with what happened, rejections included. A
draft (which the card then shows to the whole chat) is started, and a ForceReply prompt
sent, only for someone the core says may answer (``Inbox.may_answer``).

The ack deadline rule (gateway/deadline.py): a click the core has not answered within the
platform's deadline, less a margin, is answered "Received: the card will show the outcome";
the core's work goes on (this handler awaits it), the card edit shows what it did, and a
refusal that comes late is said under the card.

When the core could not take an update (the ledger busy or closing, a bug), ``handle`` raises
and has answered nothing: the update is not confirmed, Telegram gives it again (taking.py),
and it is answered then, or refused by :meth:`UpdateHandler.refuse` once it has failed too
often. A typed answer keeps its prompt until the core took it, so that the message given
again is still an answer, never a prompt for the agent.

A card's "✎ …, with a message" button (send_back.py) sends that person a ForceReply prompt
asking what should change; their reply to it is the press, with the reply as its message.

A message that replies to a ForceReply prompt of the gateway, from the person it was sent
for, while the form is still pending, is that person's typed answer (a secret one is deleted
once read and never echoed); any other message is a normal prompt, handed to
``Inbox.on_message`` with the Telegram message id, on which the prompt queue is idempotent,
and the id of the message it replies to (a reply to a card: the core offers the card again).
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from telegram import CallbackQuery, Chat, Message, Update, User

from gateway.action_tokens import form_choice, interaction_named
from gateway.deadline import answer_in_time
from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import Ack, InboundAction, InboundForm, InboundMessage, Inbox, PlatformLimits
from gateway.render.commands import NotForUs, parse_chat_text
from platforms.form_drafts import Form, OpenPrompt, PendingForms, Redraw, Refuse, Step, Submit
from platforms.telegram.albums import AlbumPart, Albums, Spawn
from platforms.telegram.config import GroupMode, TelegramConfig
from platforms.telegram.files import attachments_of
from platforms.telegram.forms import (
    SECRET_MARK,
    SECRET_NOT_TAKEN,
    MessageKey,
    PromptFor,
    PromptNote,
    Prompts,
    request_in,
)
from platforms.telegram.inbound import (
    PLATFORM,
    actor_of,
    addressed_text,
    conversation_of,
    is_private,
    replied_id,
    topic_of,
)
from platforms.telegram.render import parse_local_data
from platforms.telegram.send_back import SendBack, SendBacks, message_token
from platforms.telegram.topics import Forums, thread_id

__all__ = ["Replies", "UpdateHandler", "chat_of"]

log = logging.getLogger(__name__)

_MOVES = {"n": "next", "b": "back", "k": "skip"}
GONE = "This form is no longer open here: /pending lists what waits, /answer ID answers it."
MESSAGE_REFUSED = (
    "⚠ Your message could not be handled: the gateway failed on it and logged the error. "
    "It did not reach the agent; send it again."
)
CLICK_REFUSED = (
    "⚠ Your click could not be handled: the gateway failed on it and logged the error. "
    "Look at the card before pressing again."
)


class Replies(Protocol):
    """What the handler needs the platform to do (paced, through its outbox)."""

    async def answer(self, callback_id: str, text: str, *, alert: bool) -> bool:
        """Answer a click; whether Telegram took the answer (a click answers once, in time)."""
        ...

    async def redraw(self, form_key: tuple[int, int]) -> None: ...

    async def delete(self, chat_id: int, message_id: int) -> None: ...

    async def notice(
        self, chat_id: int, thread: int | None, text: str, *, reply_to: int | None = None
    ) -> None: ...

    async def prompt(
        self, form: Form, form_key: tuple[int, int], actor: Actor, question: int, *, private: bool
    ) -> tuple[int, int]:
        """Send a ForceReply prompt; the (chat, message id) it has. PlatformError if the
        person's private chat cannot be written to."""
        ...

    async def ask_message(
        self, conversation: ConversationRef, card: tuple[int, int], actor: Actor
    ) -> tuple[int, int]:
        """Ask ``actor`` (a ForceReply prompt under ``card``) what the press should say;
        the (chat, message id) of the prompt."""
        ...


class UpdateHandler:
    def __init__(
        self,
        *,
        bot: User,
        config: TelegramConfig,
        forms: PendingForms[MessageKey],
        prompts: Prompts,
        replies: Replies,
        inbox: Inbox,
        limits: PlatformLimits,
        forums: Forums | None = None,
        spawn: Spawn,
    ) -> None:
        self._bot = bot
        self._forums = forums if forums is not None else Forums()
        self._config = config
        self._forms = forms
        self._prompts = prompts
        self._out = replies
        self._inbox = inbox
        self._limits = limits
        self._send_backs = SendBacks()
        self._albums = Albums(deliver=inbox.on_message, on_failed=self._album_failed, spawn=spawn)

    async def handle(self, update: Update) -> None:
        """Act on ``update``; raises, having answered nothing, when it could not be taken."""
        if update.callback_query is not None:
            await self._callback(update.callback_query)
        elif update.message is not None:
            chat = update.message.chat
            if chat.type == Chat.SUPERGROUP:  # /new in its General topic may open a topic
                self._forums.saw(chat.id, forum=bool(chat.is_forum))
            await self._message(update.message)
        # edited messages, channel posts and the rest are not for the gateway

    async def refuse(self, update: Update) -> None:
        """``update`` failed every attempt and is given up: tell the person who sent it."""
        query, message = update.callback_query, update.message
        if query is not None:
            if await self._out.answer(query.id, CLICK_REFUSED, alert=True):
                return
            shown = query.message  # too late for an alert: say it under the card
            if isinstance(shown, Message):
                await self._out.notice(
                    shown.chat.id, topic_of(shown), CLICK_REFUSED, reply_to=shown.message_id
                )
        elif message is not None and message.from_user is not None and not message.from_user.is_bot:
            await self._out.notice(
                message.chat.id, topic_of(message), MESSAGE_REFUSED, reply_to=message.message_id
            )

    # --- messages -------------------------------------------------------------------------

    async def _message(self, message: Message) -> None:
        sender, files = message.from_user, attachments_of(message)
        words = message.text if message.text is not None else message.caption
        if sender is None or sender.is_bot or (words is None and not files):
            return
        actor = actor_of(sender)
        replied = message.reply_to_message
        if replied is not None and message.text is not None:  # a typed answer is text
            prompt_key = (message.chat.id, replied.message_id)
            send_back = self._send_backs.get(prompt_key)
            if send_back is not None and send_back.user_id == actor.user_id:
                await self._send_back(message, actor, prompt_key, send_back)
                return
            prompt = self._prompts.get(prompt_key)
            if prompt is not None and prompt.user_id == actor.user_id:
                form = await self._forms.get(prompt.form_key, actor)
                if form is not None:
                    await self._typed(message, actor, prompt_key, prompt, form)
                    return
            if await self._prompted_elsewhere(message, actor, replied):
                return
        if replied is not None and self._asked_a_secret(replied):  # never for the agent
            await self._delete_quietly(message)
            await self._out.notice(message.chat.id, topic_of(message), SECRET_NOT_TAKEN)
            return
        private = message.chat.type == Chat.PRIVATE
        mode = GroupMode.ALL if private else self._config.group_mode_for(str(message.chat.id))
        taken = addressed_text(message, bot=self._bot, mode=mode, with_files=bool(files))
        addressed = taken is not None and not isinstance(
            parse_chat_text(taken, bot_username=self._bot.username), NotForUs
        )
        album = message.media_group_id if files else None
        if not addressed and album is None:
            return
        inbound = InboundMessage(
            conversation=conversation_of(message.chat, topic_of(message)),
            actor=actor,
            text=(taken or "") if addressed else "",
            message_id=str(message.message_id),
            private=private,
            reply_to=replied_id(message),
            attachments=files,
        )
        if album is not None:  # one prompt for the album's parts (albums.py)
            part = AlbumPart(message=inbound, addressed=addressed)
            self._albums.add(str(message.chat.id), album, part)
            return
        await self._inbox.on_message(inbound)

    async def _album_failed(self, message: InboundMessage) -> None:
        chat, thread = message.conversation.channel, message.conversation.thread
        await self._out.notice(int(chat), None if thread is None else int(thread), MESSAGE_REFUSED)

    async def _prompted_elsewhere(self, message: Message, actor: Actor, replied: Message) -> bool:
        """A reply to a prompt this process did not send (another host did, with a shared
        ledger): the person's draft there notes it; taken as here when it is that prompt."""
        author = replied.from_user
        named = request_in(replied.text or "")
        if author is None or author.id != self._bot.id or named is None:
            return False
        noted = await self._forms.noted_prompt(named, actor)
        note = PromptNote.read(noted, PLATFORM) if noted is not None else None
        prompt_key = (message.chat.id, replied.message_id)
        if note is None or note.prompt != prompt_key:
            return False
        form = await self._forms.get(note.card, actor, at=(note.conversation, named))
        if form is None:
            return False
        prompt = PromptFor(form_key=note.card, user_id=actor.user_id, question=note.question)
        self._prompts.add(prompt_key, prompt)
        await self._typed(message, actor, prompt_key, prompt, form)
        return True

    def _asked_a_secret(self, replied: Message) -> bool:
        """Whether ``replied`` is a prompt of this bot for a secret answer (of any host, open
        or not): a reply to it that is no answer taken here is deleted, never handed on."""
        author = replied.from_user
        return (
            author is not None and author.id == self._bot.id and SECRET_MARK in (replied.text or "")
        )

    async def _typed(
        self,
        message: Message,
        actor: Actor,
        prompt_key: tuple[int, int],
        prompt: PromptFor,
        form: Form,
    ) -> None:
        text = message.text or ""
        question = form.question(prompt.question)
        if question.secret:  # read it, then take it out of the chat at once
            await self._delete_quietly(message)
        step = form.typed(
            actor, prompt.question, text, in_private=message.chat.type == Chat.PRIVATE
        )
        draft = form.drafts.get(actor.user_id)
        if draft is not None and not isinstance(step, Refuse):
            draft.prompt = None  # answered: no host takes another reply to it
        ack = await self._act(prompt.form_key, form, actor, step, callback=None)
        if not isinstance(step, Refuse):  # taken: the prompt is answered
            self._prompts.take(prompt_key)
        thread = topic_of(message)
        if question.secret:
            await self._out.notice(
                message.chat.id, thread, f"🔒 Answer received; it is never shown. {ack}".strip()
            )
        elif ack and not isinstance(step, Redraw):
            await self._out.notice(message.chat.id, thread, ack)

    async def _send_back(
        self, message: Message, actor: Actor, prompt_key: tuple[int, int], send_back: SendBack
    ) -> None:
        """The reply to a "what should change?" prompt: the press, with the reply as its
        message (a blank reply sends none)."""
        action = InboundAction(
            conversation=send_back.conversation,
            actor=actor,
            token=send_back.token,
            message=(message.text or "").strip() or None,
        )
        ack = await self._inbox.on_action(action)
        self._send_backs.take(prompt_key)  # answered: a second reply is an ordinary message
        text = ack.text if ack.accepted else f"{actor}: {ack.text}"
        await self._out.notice(
            message.chat.id, topic_of(message), text, reply_to=message.message_id
        )

    async def _ask_message(
        self,
        query_id: str,
        actor: Actor,
        conversation: ConversationRef,
        card: tuple[int, int],
        token: str,
    ) -> None:
        """A "with a message" button: ask the person for the message (only someone the core
        says may answer), and answer the click with where to type it."""
        may = await self._inbox.may_answer(
            InboundAction(conversation=conversation, actor=actor, token=token)
        )
        if not may.accepted:
            await self._out.answer(query_id, may.text, alert=True)
            return
        try:
            prompt_key = await self._out.ask_message(conversation, card, actor)
        except PlatformError as exc:
            log.info("send-back prompt for %s not sent: %s", actor.key(), exc)
            await self._out.answer(
                query_id, "Telegram did not take the prompt; try again.", alert=True
            )
            return
        self._send_backs.add(
            prompt_key,
            SendBack(user_id=actor.user_id, token=token, conversation=conversation, card=card),
        )
        await self._out.answer(
            query_id, "Reply to my message with what should change.", alert=False
        )

    async def _delete_quietly(self, message: Message) -> None:
        try:
            await self._out.delete(message.chat.id, message.message_id)
        except PlatformError as exc:
            log.warning("could not delete a secret answer in chat %s: %s", message.chat.id, exc)

    # --- clicks ---------------------------------------------------------------------------

    async def _callback(self, query: CallbackQuery) -> None:
        actor, data, message = actor_of(query.from_user), query.data or "", query.message
        if message is None or not isinstance(message, Message):
            await self._out.answer(query.id, "This message is no longer available.", alert=True)
            return
        conversation = conversation_of(message.chat, topic_of(message))
        form_key = (message.chat.id, message.message_id)
        local = parse_local_data(data)
        # the request a form's click names: its own buttons' form id, or an option's or the
        # submit's token (an approval's button needs no form)
        named = local[0] if local is not None else interaction_named(data)
        form = (
            await self._forms.get(form_key, actor, at=(conversation, named))
            if named is not None and (local is not None or form_choice(data))
            else None
        )
        if local is not None:
            form_id, op = local
            if form is None or form.form_id != form_id:
                await self._out.answer(query.id, GONE, alert=True)
                return
            if not await self._may_draft(form, actor, query.id):
                return
            if op.startswith("t"):
                step = form.ask_text(actor, int(op[1:]))
            else:
                step = form.move(actor, _MOVES[op])
            await self._act(form_key, form, actor, step, callback=query.id)
            return
        if form is not None and not form.direct:
            option = form.option_at(data)
            if option is not None:
                if not await self._may_draft(form, actor, query.id):
                    return
                await self._act(form_key, form, actor, form.choose(actor, *option), query.id)
                return
            if data == form.submit_token:
                await self._act(form_key, form, actor, form.submit(actor), callback=query.id)
                return
        token = message_token(data)
        if token is not None:
            await self._ask_message(query.id, actor, conversation, form_key, token)
            return
        action = InboundAction(conversation=conversation, actor=actor, token=data)
        await self._in_time(self._inbox.on_action(action), query.id, actor, form_key, conversation)

    async def _may_draft(self, form: Form, actor: Actor, callback: str) -> bool:
        """A person's first press on a form starts their draft, which the card then shows to
        everyone in the chat: only for someone the core says may answer (its checks and
        audit); anyone else is told why and the card does not change."""
        if actor.user_id in form.drafts:
            return True
        may = await self._inbox.may_answer(
            InboundAction(conversation=form.conversation, actor=actor, token=form.submit_token)
        )
        if not may.accepted:
            await self._out.answer(callback, may.text, alert=True)
        return may.accepted

    async def _in_time(
        self,
        work: Coroutine[Any, Any, Ack],
        callback: str,
        actor: Actor,
        card: tuple[int, int],
        conversation: ConversationRef,
    ) -> Ack:
        """The core's Ack for a click, answered by the ack deadline rule; a refusal that
        came after the neutral answer is said under the card (the card does not change)."""
        answered: list[Ack] = []

        async def answer(ack: Ack) -> None:
            answered.append(ack)
            await self._out.answer(callback, ack.text, alert=not ack.accepted)

        ack = await answer_in_time(work, self._limits, answer)
        if answered and answered[0] is not ack and not ack.accepted:
            thread = thread_id(conversation)
            await self._out.notice(card[0], thread, f"{actor}: {ack.text}", reply_to=card[1])
        return ack

    # --- acting on a form step -----------------------------------------------------------

    async def _act(
        self,
        form_key: tuple[int, int],
        form: Form,
        actor: Actor,
        step: Step,
        callback: str | None,
    ) -> str:
        """Do what ``step`` says; answer the click if there is one; the text to show. The
        person's draft moved (but for a submit taken) is kept first, where their next click
        finds it (another host's, with several)."""
        if not isinstance(step, Submit):
            await self._forms.save(form_key, form, actor)
        match step:
            case Redraw(ack=ack):
                if callback is not None:
                    await self._out.answer(callback, ack, alert=False)
                await self._out.redraw(form_key)
                return ack
            case Refuse(ack=ack):
                if callback is not None:
                    await self._out.answer(callback, ack, alert=True)
                await self._out.redraw(form_key)
                return ack
            case OpenPrompt(question=question, private=private):
                # no prompt for someone who may not answer (the core's checks, audited)
                may = await self._inbox.may_answer(
                    InboundAction(
                        conversation=form.conversation, actor=actor, token=form.submit_token
                    )
                )
                if not may.accepted:
                    if callback is not None:
                        await self._out.answer(callback, may.text, alert=True)
                    return may.text
                ack = await self._open_prompt(form_key, form, actor, question, private=private)
                if callback is not None:
                    await self._out.answer(callback, ack, alert=False)
                return ack
            case Submit(answers=answers, private=private):
                inbound = InboundForm(
                    conversation=form.conversation,
                    actor=actor,
                    token=form.submit_token,
                    answers=answers,
                    private=private or is_private(form.conversation),
                )
                if callback is None:  # a typed answer: no click to answer in time
                    result = await self._inbox.on_form(inbound)
                else:
                    result = await self._in_time(
                        self._inbox.on_form(inbound), callback, actor, form_key, form.conversation
                    )
                if result.accepted:
                    await self._forms.drop_draft(form_key, actor, form)
                else:
                    await self._forms.save(form_key, form, actor)
                return result.text

    async def _open_prompt(
        self,
        form_key: tuple[int, int],
        form: Form,
        actor: Actor,
        question: int,
        *,
        private: bool,
    ) -> str:
        try:
            prompt_key = await self._out.prompt(form, form_key, actor, question, private=private)
        except PlatformError as exc:
            log.info("prompt for %s not sent: %s", actor.key(), exc)
            if private and not is_private(form.conversation):
                name = f"@{self._bot.username}" if self._bot.username else "the bot"
                return f"Open a private chat with {name} (press Start), then press again."
            return "Telegram did not take the prompt; try again."
        self._prompts.add(
            prompt_key, PromptFor(form_key=form_key, user_id=actor.user_id, question=question)
        )
        draft = form.drafts.get(actor.user_id)
        if draft is not None:  # noted where another host finds it (a shared ledger)
            note = PromptNote(
                prompt=prompt_key, question=question, card=form_key, conversation=form.conversation
            )
            draft.prompt = note.text()
            await self._forms.save(form_key, form, actor)
        if private and not is_private(form.conversation):
            return "I sent you a private message: reply to it there."
        return "Reply to my message with your answer."


def chat_of(update: Update) -> int | None:
    """The chat an update belongs to (updates of one chat are handled in order)."""
    chat = update.effective_chat
    return chat.id if chat is not None else None
