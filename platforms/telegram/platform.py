"""The Telegram platform: the gateway's platform contract on python-telegram-bot 22.

    settings = config.platforms.get("telegram", TelegramConfig)
    async with TelegramPlatform(settings) as telegram:
        async with Gateway(config, platforms={"telegram": telegram}, launcher=...):
            ...

Its lifetime follows the gateway's (DESIGN.md, Platforms): entering connects (getMe),
registers the commands (setMyCommands) and starts the outbox (outbox.py), before the
gateway's recovery edits the cards it left here; updates are taken only once the gateway has
attached itself, by long polling (the default; receive.py) or a webhook (webhook.py), and no
more from :meth:`TelegramPlatform.stop_input` (before the gateway's runners stop; the outbox
keeps sending their notices and card edits); leaving closes the outbox, after the gateway's
ledger closed. Outbound calls of the contract go through the outbox: cards and prompts before
notices, notices before stream edits, every chat within Telegram's limits. When Telegram was
unreachable and answers again, the gateway is told (``Inbox.on_platform_back``) so that the
cards that failed are sent again. While a turn runs in a chat, the chat shows "typing…"
(``sendChatAction``, again every :data:`TYPING_SECONDS`, at the priority of stream edits);
it stops when the turn ends. A turn that completed with its last words shown by an edit,
which no phone is told of, ends with one short new message ("✓ Done.", platforms/turn_end.py).

The bot token never appears in logs: httpx, which logs every request URL (token included),
is set to WARNING when the platform starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncGenerator, Coroutine, Iterator
from contextlib import AsyncExitStack
from functools import partial
from types import TracebackType
from typing import Any, Protocol

from telegram import (
    Bot,
    BotCommand,
    ForceReply,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    LinkPreviewOptions,
    Message,
    ReplyParameters,
    User,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, InvalidToken, TelegramError
from telegram.request import HTTPXRequest

from gateway.attachments import InboundAttachment
from gateway.cards import Card
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.errors import ConfigError, PlatformError
from gateway.platform import (
    EditResult,
    FileUpload,
    Inbox,
    KnowsFenced,
    MessageRef,
    NotConnected,
    PlatformLimits,
    ReceiverGate,
)
from gateway.rate_budget import ALONE, RateBudget, SharedRates, bot_key
from gateway.render.commands import COMMANDS, CommandName, slash
from gateway.render.markdown import telegram_html
from gateway.session_record import SessionRecord
from platforms.form_drafts import Form, MemoryForms, PendingForms, forms_for
from platforms.outbox import Priority
from platforms.telegram.config import TelegramConfig
from platforms.telegram.files import download
from platforms.telegram.forms import SECRET_MARK, MessageKey, Prompts, request_note
from platforms.telegram.inbound import PLATFORM, chat_id_of, is_private, link_to
from platforms.telegram.outbox import CHAT_ACTION, Pace, TelegramOutbox, translate
from platforms.telegram.receive import Health, Poller
from platforms.telegram.render import Button, RenderedCard, render_card
from platforms.telegram.topics import MAX_TOPIC_NAME, Forums, refusal_of, thread_id
from platforms.telegram.updates import UpdateHandler
from platforms.telegram.webhook import WebhookReceiver
from platforms.turn_end import TurnEnds

__all__ = ["MENU", "TELEGRAM_LIMITS", "TelegramPlatform"]

log = logging.getLogger(__name__)

MENU = (
    CommandName.NEW,
    CommandName.STOP,
    CommandName.RESUME,
    CommandName.CLEAR,
    CommandName.STATUS,
    CommandName.PENDING,
    CommandName.COMPACT,
    CommandName.HELP,
    CommandName.SESSIONS,  # issue 31: find, continue and name a session
    CommandName.SWITCH,
    CommandName.NAME,
    CommandName.MODEL,  # issue 31
    CommandName.MODE,  # issue 31
    CommandName.EVERY,  # issue 35: scheduled work
    CommandName.AT,
    CommandName.SCHEDULES,
    CommandName.UNSCHEDULE,
    CommandName.TRANSCRIBE,  # issue 34: a voice note again
)
_NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
# Bot API limits of an upload (core.telegram.org/bots/api#sending-files): photos 10 MB,
# other files 50 MB; a caption 1024 characters
PHOTO_MAX_BYTES = 10 * 1024 * 1024
DOCUMENT_MAX_BYTES = 50 * 1024 * 1024
CAPTION_MAX_CHARS = 1024
_SHOWN_TEXTS = 1024  # the last text of each stream message, to skip identical edits
STOP_GRACE_SECONDS = 10.0  # for the updates being handled when input stops
TYPING_SECONDS = 4.5  # Telegram shows "typing…" for 5 s, or until the bot sends a message
MAX_TYPING = 256  # chats showing it at once; more running turns go without
TYPING_MAX_SECONDS = 3600.0
# A message queued while a card waits, once its full notice was given: a reaction on it (one
# of the emoji a bot may react with), which a phone does not ring for, instead of a message
QUEUED_REACTION = "✍"
SEND_BACK_PLACEHOLDER = "What should change?"


class _Receiver(Protocol):
    """The poller or the webhook receiver: takes updates until stopped."""

    async def run(self) -> None: ...

    def stop(self) -> None: ...


TELEGRAM_LIMITS = PlatformLimits(
    callback_max_bytes=64,
    text_max_chars=4096,
    card_max_chars=4096,  # a card is one message
    ack_deadline_seconds=10.0,
    min_edit_interval_seconds=1.0,
    has_private_surface=True,  # a private chat with the bot
)


TOKEN_REFUSED = "platforms.telegram.token: Telegram refused the bot token"


class TelegramPlatform:
    name = PLATFORM

    def __init__(
        self,
        config: TelegramConfig,
        *,
        pace: Pace | None = None,
        webhook_socket: socket.socket | None = None,
        limits: PlatformLimits = TELEGRAM_LIMITS,
    ) -> None:
        self.limits = limits
        # PTB 22 warns on every 429 unless time periods are timedelta (its next default);
        # outbox.retry_seconds reads either form
        os.environ.setdefault("PTB_TIMEDELTA", "1")
        self._config = config
        self._pace = pace
        self._rates: SharedRates | None = None  # a shared ledger's budgets (share_rates)
        self._webhook_socket = webhook_socket
        base = config.base_url.rstrip("/")
        self.bot = Bot(
            config.token.get_secret_value(),
            base_url=f"{base}/bot",
            base_file_url=f"{base}/file/bot",
            request=HTTPXRequest(connection_pool_size=64, read_timeout=20.0),
            get_updates_request=HTTPXRequest(connection_pool_size=2, read_timeout=10.0),
        )
        self.prompts = Prompts()
        # the forms' drafts: in memory until attached to a gateway that shares its ledger
        self.forms: PendingForms[MessageKey] = MemoryForms(on_forget=self.prompts.forget_form)
        self.health = Health(on_back=self._back)
        self._stack = AsyncExitStack()
        self._tasks: asyncio.TaskGroup | None = None
        self._outbox: TelegramOutbox | None = None
        self._long_tasks: list[asyncio.Task[None]] = []
        self._receiving: asyncio.Task[None] | None = None
        self._receiver: _Receiver | None = None
        # several hosts on one ledger: polling only while the gateway's lease says so
        # (gateway/sessions/receivers.py); a webhook is received by every host all the same
        self._leased = False
        self._handler: UpdateHandler | None = None
        self._input_stopped = False
        self._leased_done: asyncio.Event | None = None  # set when a leased receive() ends
        self._inbox: Inbox | None = None
        self._attached = asyncio.Event()
        self._shown: dict[tuple[int, int], str] = {}
        self.typing: dict[tuple[int, int | None], asyncio.Event] = {}  # (chat, topic): ended
        self._typing_tasks: set[asyncio.Task[None]] = set()
        self.turn_ends = TurnEnds()  # whether a turn's end needs a message that notifies
        self.forums = Forums()  # the forum chats seen: /new in General opens a topic
        self.me: User | None = None
        self._token_refused = asyncio.Event()  # Telegram refused the token while running

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> TelegramPlatform:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def share_rates(self, rates: SharedRates) -> None:
        """Pace by the bot's budget that its other hosts spend too (before :meth:`connect`)."""
        self._rates = rates

    def _budget(self) -> RateBudget:
        if self._rates is None:
            return ALONE
        return self._rates.budget("telegram", bot_key(self._config.token.get_secret_value()))

    async def connect(self) -> None:
        """Log in (getMe), register the commands, start the outbox; updates are taken once
        the gateway attaches itself."""
        logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs URLs, token included
        try:
            await self.bot.initialize()
            self.me = self.bot.bot
            commands = [BotCommand(info.name.value, info.description) for info in COMMANDS]
            await self.bot.set_my_commands([c for c in commands if c.command in MENU])
        except InvalidToken as exc:
            raise ConfigError(TOKEN_REFUSED) from exc
        except TelegramError as exc:
            raise translate(exc) from exc
        try:
            self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            self._outbox = TelegramOutbox(
                self._tasks,
                self._pace,
                budget=self._budget(),
                on_network_failure=self.health.failed,
                on_success=self.health.ok,
                on_token_refused=self._token_refused.set,
            )
            self._long_tasks = [self._tasks.create_task(self.health.probe(self.bot))]
            if self._polls_by_lease():
                return  # the gateway's lease runs receive()
            self._receiving = self._tasks.create_task(self._receive())
            self._long_tasks.append(self._receiving)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._outbox is not None:
            self._outbox.close()
        for task in [*self._long_tasks, *self._typing_tasks]:
            task.cancel()
        try:
            await self._stack.aclose()
        finally:
            await self.bot.shutdown()

    def fetch_file(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
        """A file a person sent, streamed from Telegram (platforms/telegram/files.py)."""
        return download(self.bot, attachment)

    def spell_command(self, name: str) -> str:
        return slash(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None  # a session is shown in the chats it is bound to

    def conversation_link(self, conversation: ConversationRef) -> str | None:
        return link_to(conversation)

    def opens_threads(self, conversation: ConversationRef) -> bool:
        """A new session asked for in a forum's General topic gets a topic of its own."""
        return self.forums.general_of(conversation)

    async def threads_beside(self, conversation: ConversationRef) -> bool:
        """Any topic of a forum (General included) may have a topic opened beside it. A
        group no message came from since the start (a config file's schedule in a quiet
        group, or after a restart) is asked of Telegram (getChat), once; unanswered, it is
        taken for no forum this time and asked again the next."""
        chat_id = chat_id_of(conversation)
        known = self.forums.knows(chat_id)
        if known is not None:
            return known

        async def ask() -> bool:
            return bool((await self.bot.get_chat(chat_id)).is_forum)

        try:
            forum = await self._running().run(chat_id, Priority.TEXT, ask)
        except PlatformError as exc:
            log.info("whether chat %s has topics is not known: %s", chat_id, exc)
            return False
        self.forums.saw(chat_id, forum=forum)
        return forum

    async def open_thread(self, conversation: ConversationRef, title: str) -> ConversationRef:
        """A forum topic named ``title`` (createForumTopic); ThreadRefused, in words a person
        can act on, when the bot may not manage the forum's topics (topics.py)."""
        chat_id = chat_id_of(conversation)

        async def create() -> int:
            topic = await self.bot.create_forum_topic(chat_id, title[:MAX_TOPIC_NAME])
            return topic.message_thread_id

        try:
            topic_id = await self._running().run(chat_id, Priority.CARD, create)
        except PlatformError as exc:
            raise refusal_of(exc) from exc.__cause__
        return ConversationRef(
            platform=PLATFORM, space=None, channel=conversation.channel, thread=str(topic_id)
        )

    async def close_thread(self, conversation: ConversationRef) -> None:
        """Close a forum topic (closeForumTopic): a deleted schedule's. PlatformError when
        the bot may not manage the forum's topics (it is left open)."""
        chat_id = chat_id_of(conversation)
        topic = thread_id(conversation)
        if topic is None:
            return  # the General topic, or the chat itself: nothing to close

        async def close() -> bool:
            return await self.bot.close_forum_topic(chat_id, topic)

        await self._running().run(chat_id, Priority.CARD, close)

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        # a private chat's id is the person's user id (Bot API: Chat.id of a private chat)
        return ConversationRef(platform=PLATFORM, space=None, channel=actor.user_id)

    def attach(self, inbox: Inbox) -> None:
        """The gateway is ready: start taking updates."""
        self._inbox = inbox
        self.forms = forms_for(inbox, on_forget=self.prompts.forget_form)
        self._attached.set()

    async def stop_input(self) -> None:
        """The gateway is stopping: take no more updates. Those being handled are finished
        and confirmed (past :data:`STOP_GRACE_SECONDS`, left unconfirmed: Telegram gives
        them again, to the next gateway); nothing more is fetched or accepted. The outbox
        keeps sending."""
        self._input_stopped = True
        await self._stop_leased()
        receiving = self._receiving
        if receiving is None or receiving.done():
            return
        if self._receiver is None:
            receiving.cancel()  # not attached yet: nothing was taken
        else:
            self._receiver.stop()
        done, _ = await asyncio.wait({receiving}, timeout=STOP_GRACE_SECONDS)
        if not done:
            log.warning(
                "updates still being handled after %g s are left for Telegram to give again",
                STOP_GRACE_SECONDS,
            )
            receiving.cancel()
            await asyncio.wait({receiving})

    async def _receive(self) -> None:
        await self._attached.wait()
        handler = self._update_handler()
        receiver: _Receiver
        if self._config.mode == "webhook":
            receiver = WebhookReceiver(
                self._config, self.bot, handler, sock=self._webhook_socket, fenced=self._fenced
            )
        else:
            receiver = Poller(self.bot, handler, self.health, self._config.poll_timeout_seconds)
        self._receiver = receiver
        with self._refusal_noted():
            await receiver.run()

    @contextlib.contextmanager
    def _refusal_noted(self) -> Iterator[None]:
        """A receiver that Telegram refuses the token (revoked, or changed while running)
        ends; the platform stops receiving for good and says so (:meth:`refused`)."""
        try:
            yield
        except InvalidToken:
            self._token_refused.set()

    async def refused(self) -> ConfigError:
        await self._token_refused.wait()
        return ConfigError(f"{TOKEN_REFUSED} while the gateway ran (revoked or changed?)")

    def _update_handler(self) -> UpdateHandler:
        """One handler for the platform's life (its send-back prompts outlive a poller)."""
        assert self._inbox is not None and self.me is not None
        if self._handler is None:
            self._handler = UpdateHandler(
                bot=self.me,
                config=self._config,
                forms=self.forms,
                prompts=self.prompts,
                replies=self,
                inbox=self._inbox,
                limits=self.limits,
                forums=self.forums,
                spawn=self._spawn,
            )
        return self._handler

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task of the platform's own group (an album gathered: updates.py)."""
        if self._tasks is None:
            work.close()
            raise PlatformError("telegram is not connected")
        return self._tasks.create_task(work)

    # --- polling by the gateway's lease (several hosts, gateway/sessions/receivers.py) ------

    def lease_receiving(self) -> None:
        self._leased = True

    def _fenced(self) -> bool:
        """This host takes nothing now (several hosts: it lost its lease or the ledger)."""
        return isinstance(self._inbox, KnowsFenced) and self._inbox.fenced

    def _polls_by_lease(self) -> bool:
        return self._leased and self._config.mode == "polling"

    def receiver_lease(self) -> str | None:
        if not self._polls_by_lease() or self.me is None:
            return None
        return f"telegram:{self.me.id}"

    async def receive(self, gate: ReceiverGate) -> None:
        """Poll while ``gate`` holds, from the offset the ledger keeps (receive.py)."""
        if self._input_stopped:
            return
        await self._attached.wait()
        done = asyncio.Event()
        self._leased_done = done
        poller = Poller(
            self.bot,
            self._update_handler(),
            self.health,
            self._config.poll_timeout_seconds,
            gate=gate,
        )
        self._receiver = poller
        try:
            with self._refusal_noted():
                await poller.run()
        finally:
            self._receiver = None
            done.set()

    def stop_receiving(self) -> None:
        if self._receiver is not None:
            self._receiver.stop()

    async def reachable(self) -> None:
        await self.health.answers()
        if self._token_refused.is_set():
            await asyncio.Future()  # refused: never again, until the gateway stops

    async def _stop_leased(self) -> None:
        """stop_input with a leased poller still running (the gateway normally ended it
        first): stopped, and its batch given the grace to finish."""
        done = self._leased_done
        if done is None or done.is_set():
            return
        self.stop_receiving()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_GRACE_SECONDS):
                await done.wait()

    def _back(self) -> None:
        if self._tasks is not None and self._inbox is not None:
            self._tasks.create_task(self._announce_back(self._inbox))

    async def _announce_back(self, inbox: Inbox) -> None:
        try:
            await inbox.on_platform_back(PLATFORM)
        except Exception:  # the gateway's failure must not end the platform
            log.exception("resending failed cards after Telegram came back")

    # --- the platform contract ------------------------------------------------------------

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        self._check_length(text)
        html = telegram_html(text)  # what a person sees of it is no longer than text
        sent = await self._send(conversation, Priority.TEXT, html, ParseMode.HTML)
        self._remember(sent, text)
        return MessageRef(conversation=conversation, message_id=str(sent.message_id))

    async def send_reply(
        self, conversation: ConversationRef, text: str, reply_to: str
    ) -> MessageRef:
        """A notice about a card, as a reply to it (``RepliesToMessages``): it quotes the
        card and notifies, where the card's edit does not; sent plainly if the card is gone
        (``allow_sending_without_reply``)."""
        if not reply_to.isdigit():  # not a message of this platform's: a plain text
            return await self.send_text(conversation, text)
        self._check_length(text)
        html = telegram_html(text)
        sent = await self._send(
            conversation, Priority.TEXT, html, ParseMode.HTML, reply_to=int(reply_to)
        )
        self._remember(sent, text)
        return MessageRef(conversation=conversation, message_id=str(sent.message_id))

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        self._check_length(text)
        chat_id, message_id = chat_id_of(ref.conversation), int(ref.message_id)
        if self._shown.get((chat_id, message_id)) == text:
            return EditResult.NOT_MODIFIED

        async def edit() -> EditResult:
            html = telegram_html(text)
            result = await _edit(self.bot, chat_id, message_id, html, ParseMode.HTML, None)
            self._remember_key((chat_id, message_id), text)
            return result

        return await self._running().run(chat_id, Priority.STREAM, edit, key=("text", message_id))

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        chat_id = chat_id_of(conversation)
        form = self.forms.new(conversation, card)
        drawn = render_card(card, form, private=is_private(conversation), limit=self._max_chars)
        first_file: int | None = None
        for attachment in drawn.attachments:  # the files first: what is approved is shown whole
            send = partial(
                self.bot.send_document,
                chat_id,
                InputFile(attachment.content.encode(), filename=attachment.name),
                caption=f"{card.title[:200]}: {attachment.name}",
                message_thread_id=_thread(conversation),
            )
            sent_file = await self._running().run(chat_id, Priority.CARD, send)
            first_file = first_file or sent_file.message_id
        sent = await self._send(
            conversation, Priority.CARD, drawn.html, ParseMode.HTML, _markup(drawn), first_file
        )
        if form is not None:
            self.forms.keep((chat_id, sent.message_id), form)
        return MessageRef(conversation=conversation, message_id=str(sent.message_id))

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        """What a bot may upload (``SendsFiles``): 50 MB (a picture over 10 MB goes as a
        document, which keeps it whole)."""
        return DOCUMENT_MAX_BYTES

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        """A picture as a photo (``sendPhoto``, up to 10 MB), anything else, or a larger
        picture, as a document (``sendDocument``); the caption as plain text."""
        chat_id = chat_id_of(conversation)
        file = InputFile(upload.content, filename=upload.name)
        caption = upload.caption[:CAPTION_MAX_CHARS] if upload.caption else None
        if upload.is_picture and len(upload.content) <= PHOTO_MAX_BYTES:
            send = partial(
                self.bot.send_photo,
                chat_id,
                file,
                caption=caption,
                message_thread_id=_thread(conversation),
            )
        else:
            send = partial(
                self.bot.send_document,
                chat_id,
                file,
                caption=caption,
                message_thread_id=_thread(conversation),
            )
        sent: Message = await self._running().run(chat_id, Priority.TEXT, send)
        return MessageRef(conversation=conversation, message_id=str(sent.message_id))

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        chat_id, message_id = chat_id_of(ref.conversation), int(ref.message_id)
        self.forms.update((chat_id, message_id), ref.conversation, card)
        return await self._edit_card(ref.conversation, (chat_id, message_id), card)

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        chat_id = chat_id_of(conversation)

        async def react() -> bool:
            return await self.bot.set_message_reaction(
                chat_id, int(message_id), reaction=QUEUED_REACTION
            )

        await self._running().run(chat_id, Priority.TEXT, react)
        return True

    async def turn_started(self, conversation: ConversationRef) -> None:
        key = (chat_id_of(conversation), _thread(conversation))
        self.turn_ends.started(key)
        if self._tasks is None or key in self.typing or len(self.typing) >= MAX_TYPING:
            return
        ended = self.typing[key] = asyncio.Event()
        task = self._tasks.create_task(self._keep_typing(key, ended))
        self._typing_tasks.add(task)
        task.add_done_callback(self._typing_tasks.discard)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        """Stop "typing…"; and where the turn's last words came by an edit, which no phone
        is told of, send one short line that notifies (platforms/turn_end.py)."""
        key = (chat_id_of(conversation), _thread(conversation))
        ended = self.typing.pop(key, None)
        if ended is not None:
            ended.set()
        line = self.turn_ends.ended(key, status)
        if line is not None:
            await self._send(conversation, Priority.TEXT, line, None)

    async def _keep_typing(self, key: tuple[int, int | None], ended: asyncio.Event) -> None:
        """Show "typing…" in the chat until the turn ends, so the person sees the agent at
        work while it says nothing (a long command, a long think). It goes at the priority
        of stream edits, one waiting at most; one still waiting when the turn ends is
        skipped. Past :data:`TYPING_MAX_SECONDS` it stops (a turn whose end never came).
        Never cancelled while its call waits in the outbox (the call's failure would be
        left unread): the turn's end is an event."""
        chat_id, thread = key

        async def typing() -> None:
            if not ended.is_set():
                await self.bot.send_chat_action(
                    chat_id, ChatAction.TYPING, message_thread_id=thread
                )

        loop = asyncio.get_running_loop()
        until = loop.time() + TYPING_MAX_SECONDS
        try:
            while not ended.is_set() and loop.time() < until:
                try:
                    await self._running().run(
                        chat_id,
                        Priority.STREAM,
                        typing,
                        key=("typing", thread),
                        method=CHAT_ACTION,
                    )
                except PlatformError as exc:  # not worth more than a line
                    log.info("typing in chat %s not shown: %s", chat_id, exc)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TYPING_SECONDS):  # how long Telegram shows it
                        await ended.wait()
        finally:
            if self.typing.get(key) is ended:
                del self.typing[key]

    # --- what the update handler asks (updates.Replies) -----------------------------------

    async def answer(self, callback_id: str, text: str, *, alert: bool) -> bool:
        """Answer a click at once (not paced: it is not a message in the chat); whether
        Telegram took the answer."""
        try:
            await self.bot.answer_callback_query(callback_id, text=text[:200], show_alert=alert)
        except TelegramError as exc:  # a click answered late: nothing more to do
            log.info("callback %s not answered: %s", callback_id, exc)
            return False
        return True

    async def redraw(self, form_key: tuple[int, int]) -> None:
        form = self.forms.peek(form_key)
        if form is None:
            return
        try:
            await self._edit_card(form.conversation, form_key, form.card)
            # With several hosts, the request's owner edits the card when it is decided; a
            # decision made meanwhile through another host may have been drawn before this
            # edit landed, so it is looked for after it: drawn again, the decided card stays.
            settled = await self.forms.settled(form_key)
            if settled is not None:
                await self._edit_card(form.conversation, form_key, settled)
        except PlatformError as exc:
            log.warning("form in chat %s not redrawn: %s", form_key[0], exc)

    async def delete(self, chat_id: int, message_id: int) -> None:
        await self._running().run(
            chat_id, Priority.CARD, lambda: self.bot.delete_message(chat_id, message_id)
        )

    async def notice(
        self, chat_id: int, thread: int | None, text: str, *, reply_to: int | None = None
    ) -> None:
        conversation = ConversationRef(
            platform=PLATFORM, space=None, channel=str(chat_id), thread=_str(thread)
        )
        try:
            html = telegram_html(text[:4096])  # a reply to a click or a typed answer
            await self._send(conversation, Priority.CARD, html, ParseMode.HTML, None, reply_to)
        except PlatformError as exc:
            log.warning("notice to chat %s failed: %s", chat_id, exc)

    async def ask_message(
        self, conversation: ConversationRef, card: tuple[int, int], actor: Actor
    ) -> tuple[int, int]:
        text = f"✎ {actor}: what should change? Reply to this message; the agent reads your reply."
        markup = ForceReply(selective=True, input_field_placeholder=SEND_BACK_PLACEHOLDER)
        sent = await self._send(conversation, Priority.CARD, text, None, markup, card[1])
        return chat_id_of(conversation), sent.message_id

    async def prompt(
        self, form: Form, form_key: tuple[int, int], actor: Actor, question: int, *, private: bool
    ) -> tuple[int, int]:
        asked = form.question(question)
        name = asked.header or asked.text
        in_place = not private or is_private(form.conversation)
        request = request_note(form.form_id)  # any host that gets the reply finds the draft
        if in_place:
            where = form.conversation
            text = f"✎ {actor}: type your answer to “{name}” as a reply to this message."
            if asked.secret:
                text += f" It is {SECRET_MARK} and never shown."
            text += f" {request}"
            reply_to: int | None = form_key[1]
        else:
            where = ConversationRef(platform=PLATFORM, space=None, channel=actor.user_id)
            text = (
                f"🔒 A secret question: “{name}”\n{asked.text}\n\nReply to this message with "
                f"your answer. Your message is {SECRET_MARK} and the answer is never shown. "
                f"{request}"
            )
            reply_to = None
        markup = ForceReply(selective=True, input_field_placeholder=name[:64])
        sent = await self._send(where, Priority.CARD, text, None, markup, reply_to)
        return chat_id_of(where), sent.message_id

    # --- helpers --------------------------------------------------------------------------

    def _running(self) -> TelegramOutbox:
        if self._outbox is None:
            raise NotConnected("telegram: not connected yet")
        return self._outbox

    async def _send(
        self,
        conversation: ConversationRef,
        priority: Priority,
        text: str,
        parse_mode: str | None,
        markup: InlineKeyboardMarkup | ForceReply | None = None,
        reply_to: int | None = None,
    ) -> Message:
        chat_id = chat_id_of(conversation)
        reply = (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )
        sent: Message = await self._running().run(
            chat_id,
            priority,
            lambda: self.bot.send_message(
                chat_id,
                text,
                parse_mode=parse_mode,
                reply_markup=markup,
                message_thread_id=_thread(conversation),
                reply_parameters=reply,
                link_preview_options=_NO_PREVIEW,
            ),
        )
        self.turn_ends.sent((chat_id, _thread(conversation)), (chat_id, sent.message_id))
        return sent

    async def _edit_card(
        self, conversation: ConversationRef, key: tuple[int, int], card: Card
    ) -> EditResult:
        chat_id, message_id = key

        async def edit() -> EditResult:
            # drawn when the lane gets to it: the newest card and form state win
            form = self.forms.peek(key)
            shown = form.card if form is not None else card
            drawn = render_card(
                shown, form, private=is_private(conversation), limit=self._max_chars
            )
            return await _edit(self.bot, chat_id, message_id, drawn.html, "HTML", _markup(drawn))

        return await self._running().run(chat_id, Priority.CARD, edit, key=("card", message_id))

    @property
    def _max_chars(self) -> int:
        return self.limits.card_max_chars

    def _check_length(self, text: str) -> None:
        if not text.strip() or len(text) > self.limits.text_max_chars:
            raise PlatformError(f"text of {len(text)} characters cannot be sent to Telegram")

    def _remember(self, message: Message, text: str) -> None:
        """A new message shows ``text``."""
        self._keep_shown((message.chat.id, message.message_id), text)

    def _remember_key(self, key: tuple[int, int], text: str) -> None:
        """An edit of the message ``key`` shows ``text`` (which no phone is told of)."""
        self._keep_shown(key, text)
        self.turn_ends.edited(key)

    def _keep_shown(self, key: tuple[int, int], text: str) -> None:
        self._shown.pop(key, None)
        self._shown[key] = text
        while len(self._shown) > _SHOWN_TEXTS:
            del self._shown[next(iter(self._shown))]


async def _edit(
    bot: Bot,
    chat_id: int,
    message_id: int,
    text: str,
    parse_mode: str | None,
    markup: InlineKeyboardMarkup | None,
) -> EditResult:
    try:
        await bot.edit_message_text(
            text,
            chat_id=chat_id,
            message_id=message_id,
            parse_mode=parse_mode,
            reply_markup=markup,
            link_preview_options=_NO_PREVIEW,
        )
    except BadRequest as exc:
        if "not modified" in exc.message:
            return EditResult.NOT_MODIFIED
        raise
    return EditResult.EDITED


def _markup(drawn: RenderedCard) -> InlineKeyboardMarkup | None:
    if not drawn.keyboard:
        return None
    return InlineKeyboardMarkup([[_button(b) for b in row] for row in drawn.keyboard])


def _button(button: Button) -> InlineKeyboardButton:
    return InlineKeyboardButton(button.label, callback_data=button.data)


def _thread(conversation: ConversationRef) -> int | None:
    return thread_id(conversation)  # never the General topic's id (topics.py)


def _str(value: int | None) -> str | None:
    return str(value) if value is not None else None
