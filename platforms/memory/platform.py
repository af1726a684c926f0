"""An in-process platform that implements the platform contract with configurable limits.

Tests (and anyone embedding the gateway) use it to send messages, clicks and form answers,
and to read what was rendered. It enforces the same limits as the strictest real platform:
callback payloads (action tokens) limited in size, text limited in length, acknowledgements
due within a deadline, "not modified" for identical edits, an outage switch under which
every send fails (to prove that failed card copies are sent again), and a rate-limit switch
under which every outbound call is answered 429 with a retry-after (``rate_limited``). It
records when it is told that a turn started or ended, with what the conversation showed then
(:attr:`MemoryPlatform.turns`).

A gateway restarted in a new process starts with a new, empty platform, yet its recovery edits
the cards the earlier process sent. ``MemoryPlatform(adopt_unknown=True, id_prefix="b-")``
records an edit of a message it never sent as that message, now showing the edit (what a real
platform, which keeps its messages, would show), and names its own messages ``b-1``, ``b-2``...
so that they never collide with the earlier process's ids.

Like every platform it stops taking input when the gateway stops (``stop_input``, before the
gateway's runners stop): from then on what a person does is refused with PlatformError,
while the gateway may still send and edit. Attaching it to a gateway again takes input again.

A click or a form is answered by the ack deadline rule (gateway/deadline.py): the core's Ack
if it comes within ``ack_wait_seconds(limits)``, else the neutral ``RECEIVED``; the core's
work then goes on in a task this platform owns, awaited by ``stop_input`` (its late Ack is
kept in :attr:`MemoryPlatform.late`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import AsyncGenerator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gateway.attachments import InboundAttachment
from gateway.cards import Card, card_text_length
from gateway.deadline import RECEIVED, ack_wait_seconds
from gateway.domain import Actor, Answer, ConversationRef, TurnStatus
from gateway.errors import PlatformError
from gateway.platform import (
    Ack,
    EditResult,
    FileUpload,
    InboundAction,
    InboundForm,
    InboundMessage,
    Inbox,
    MessageGone,
    MessageRef,
    PlatformLimits,
    PlatformUnreachable,
    RateLimited,
)
from gateway.render.commands import slash
from gateway.session_record import SessionRecord

__all__ = ["MemoryPlatform", "Rendered", "TurnSignal"]

T = TypeVar("T")
log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 10.0  # for the core's work on clicks answered "received"


@dataclass(kw_only=True, slots=True)
class Rendered:
    """One message as the platform shows it now, with its history of versions."""

    ref: MessageRef
    text: str | None = None
    card: Card | None = None
    file: FileUpload | None = None  # a file the agent sent (send_file)
    versions: list[Card | str] = field(default_factory=list)

    @property
    def edits(self) -> int:
        return len(self.versions) - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnSignal:
    """The platform was told that a turn started (``status`` None) or ended."""

    conversation: ConversationRef
    status: TurnStatus | None
    texts: tuple[str, ...]  # the conversation's text messages at that moment

    @property
    def name(self) -> str:
        return "started" if self.status is None else f"ended {self.status.value}"


class MemoryPlatform:
    def __init__(
        self,
        name: str = "memory",
        limits: PlatformLimits | None = None,
        *,
        adopt_unknown: bool = False,
        id_prefix: str = "",
    ) -> None:
        self.name = name
        self.limits = limits or PlatformLimits()
        self.down = False  # an outage: every outbound call fails
        self.file_max_bytes = 50 * 1024 * 1024  # what send_file takes (SendsFiles)
        self.refused: list[str] = []  # the outbound calls refused in an outage ("send_card"...)
        self.rate_limited: float | None = None  # a 429 storm: every call, this retry-after
        self.too_many: list[str] = []  # the outbound calls answered 429
        self.turns: list[TurnSignal] = []
        self.marks: list[tuple[ConversationRef, str]] = []  # messages marked "queued"
        self.adopt_unknown = adopt_unknown
        self.files: dict[str, bytes] = {}  # files sent with messages, by reference
        self.fetched: list[str] = []  # the references fetched, once per try
        self.fetch_cuts = 0  # how many fetches to come are cut after their first chunk
        self.chunk_bytes = 64 * 1024
        self._inbox: Inbox | None = None
        self._taking_input = False
        self._ids = itertools.count(1)
        self._id_prefix = id_prefix
        self._messages: dict[str, Rendered] = {}
        self._deleted: set[str] = set()  # ids of messages someone deleted (delete)
        self._changed = asyncio.Condition()
        self._acting: set[asyncio.Task[Ack]] = set()  # the core's work on clicks, until done
        self._waiting: set[asyncio.Task[Ack]] = set()  # ... whose click still waits for it
        self.late: list[Ack] = []  # the core's Acks that came after the neutral answer

    # --- lifetime (nothing to connect to) --------------------------------------------------

    async def connect(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def spell_command(self, name: str) -> str:
        return slash(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None  # a session is shown where it is bound

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return ConversationRef(platform=self.name, space=None, channel=actor.user_id)

    def attach(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._taking_input = True

    async def stop_input(self) -> None:
        """The gateway is stopping: refuse what people do from now on, and let the core
        finish the clicks already answered (at most :data:`STOP_GRACE_SECONDS`)."""
        self._taking_input = False
        if self._acting:
            _, left = await asyncio.wait(set(self._acting), timeout=STOP_GRACE_SECONDS)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left)

    # --- the platform contract ----------------------------------------------------------

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        await self._check_up("send_text")
        self._check_text(text)
        ref = MessageRef(conversation=conversation, message_id=self._new_id())
        await self._store(Rendered(ref=ref, text=text, versions=[text]))
        return ref

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        return self.file_max_bytes

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        """``SendsFiles``: kept as a message with the file and its caption as its text."""
        await self._check_up("send_file")
        ref = MessageRef(conversation=conversation, message_id=self._new_id())
        caption = upload.caption or ""
        await self._store(Rendered(ref=ref, text=caption, file=upload, versions=[caption]))
        return ref

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        await self._check_up("edit_text")
        self._check_text(text)
        if await self._adopted(ref, Rendered(ref=ref, text=text, versions=[text])):
            return EditResult.EDITED
        shown = self._get(ref)
        if shown.text == text:
            return EditResult.NOT_MODIFIED
        shown.text = text
        shown.versions.append(text)
        await self._notify()
        return EditResult.EDITED

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        await self._check_up("send_card")
        self._check_card(card)
        ref = MessageRef(conversation=conversation, message_id=self._new_id())
        await self._store(Rendered(ref=ref, card=card, versions=[card]))
        return ref

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        await self._check_up("mark_queued")
        self.marks.append((conversation, message_id))
        await self._notify()
        return True

    async def turn_started(self, conversation: ConversationRef) -> None:
        await self._signal(conversation, None)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        await self._signal(conversation, status)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        await self._check_up("edit_card")
        self._check_card(card)
        if await self._adopted(ref, Rendered(ref=ref, card=card, versions=[card])):
            return EditResult.EDITED
        shown = self._get(ref)
        if shown.card == card:
            return EditResult.NOT_MODIFIED
        shown.card = card
        shown.versions.append(card)
        await self._notify()
        return EditResult.EDITED

    # --- files ------------------------------------------------------------------------------

    def offer_file(self, name: str, content: bytes) -> InboundAttachment:
        """Keep ``content`` as a file a message carries; its attachment, as sent."""
        reference = f"file-{uuid.uuid4().hex[:16]}"
        self.files[reference] = content
        return InboundAttachment(name=name, reference=reference, size=len(content))

    async def fetch_file(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
        """The file in chunks of :attr:`chunk_bytes`; while :attr:`fetch_cuts` is above zero a
        fetch is cut after its first chunk (one cut less each time), as a connection is."""
        self.fetched.append(attachment.reference)
        await self._check_up("fetch_file")
        content = self.files.get(attachment.reference)
        if content is None:
            raise PlatformError(f"no file {attachment.reference}")
        for start in range(0, max(len(content), 1), self.chunk_bytes):
            yield content[start : start + self.chunk_bytes]
            if self.fetch_cuts > 0:
                self.fetch_cuts -= 1
                raise PlatformUnreachable("the connection was cut")

    # --- what a person does ---------------------------------------------------------------

    async def say(
        self,
        conversation: ConversationRef,
        actor: Actor,
        text: str,
        *,
        message_id: str | None = None,
        private: bool = False,
        reply_to: str | None = None,
        files: Sequence[tuple[str, bytes]] = (),
    ) -> str:
        """``actor`` writes ``text`` in ``conversation`` (as a reply to the message
        ``reply_to``): a shared one, or with ``private`` their own conversation with the bot
        (where a stranger is told their id), with ``files`` (name, content) attached: the
        platform keeps them until fetched (:meth:`fetch_file`). Returns the message's id."""
        message = InboundMessage(
            conversation=conversation,
            actor=actor,
            text=text,
            # unique across instances: a platform never reuses a message id after a restart
            message_id=message_id or f"in-{uuid.uuid4().hex[:16]}",
            private=private,
            reply_to=reply_to,
            attachments=tuple(self.offer_file(name, content) for name, content in files),
        )
        await self._inbox_or_fail().on_message(message)
        return message.message_id

    async def click(
        self, conversation: ConversationRef, actor: Actor, token: str, message: str | None = None
    ) -> Ack:
        """What the person sees: the core's Ack, or past the deadline ``RECEIVED``.
        ``message``: typed with the button, where its card takes one (``takes_message``)."""
        self._check_callback(token)
        action = InboundAction(conversation=conversation, actor=actor, token=token, message=message)
        return await self._answer(self._inbox_or_fail().on_action(action))

    async def open_form(self, conversation: ConversationRef, actor: Actor, token: str) -> Ack:
        """Press a button that opens a form: the core's pre-check (``Inbox.may_answer``);
        accepted, the form would open."""
        self._check_callback(token)
        action = InboundAction(conversation=conversation, actor=actor, token=token)
        return await self._inbox_or_fail().may_answer(action)

    async def submit(
        self,
        conversation: ConversationRef,
        actor: Actor,
        token: str,
        answers: dict[str, Answer],
        *,
        private: bool = False,
    ) -> Ack:
        self._check_callback(token)
        form = InboundForm(
            conversation=conversation, actor=actor, token=token, answers=answers, private=private
        )
        return await self._answer(self._inbox_or_fail().on_form(form))

    async def delete(self, message_id: str) -> None:
        """Someone deleted the bot's message: it is no longer seen, and an edit of it is
        refused as gone (MessageGone), as a real platform refuses it."""
        self._messages.pop(message_id, None)
        self._deleted.add(message_id)
        await self._notify()

    # --- what a test reads ----------------------------------------------------------------

    def messages(self, conversation: ConversationRef | None = None) -> list[Rendered]:
        return [
            m
            for m in self._messages.values()
            if conversation is None or m.ref.conversation == conversation
        ]

    def cards(self, conversation: ConversationRef | None = None) -> list[Rendered]:
        return [m for m in self.messages(conversation) if m.card is not None]

    def texts(self, conversation: ConversationRef | None = None) -> list[str]:
        return [m.text for m in self.messages(conversation) if m.text is not None]

    def turn_signals(self, conversation: ConversationRef) -> list[str]:
        """What the platform was told of turns in ``conversation``: "started", "ended
        completed"..."""
        return [t.name for t in self.turns if t.conversation == conversation]

    async def wait_for(self, probe: Callable[[], T | None], deadline: float = 30.0) -> T:
        """Wait until ``probe()`` returns something other than None (or False)."""
        async with asyncio.timeout(deadline), self._changed:
            while True:
                value = probe()
                if value is not None and value is not False:
                    return value
                await self._changed.wait()

    # --- internals ------------------------------------------------------------------------

    async def _answer(self, work: Coroutine[Any, Any, Ack]) -> Ack:
        """The ack deadline rule: the core's Ack within the wait, else RECEIVED; the core's
        work is never cancelled by the deadline (nor by a caller that gives up: it is ours)."""
        task = asyncio.create_task(work)
        self._acting.add(task)
        self._waiting.add(task)
        task.add_done_callback(self._settled)
        try:
            done, _ = await asyncio.wait({task}, timeout=ack_wait_seconds(self.limits))
        finally:
            self._waiting.discard(task)
        if not done:
            return RECEIVED
        return task.result()

    def _settled(self, task: asyncio.Task[Ack]) -> None:
        """A click's work ended: if nobody waits for it any more, keep its late Ack."""
        self._acting.discard(task)
        if task in self._waiting or task.cancelled():
            return  # the click returns its Ack (or raises its error) itself
        error = task.exception()
        if error is not None:
            log.error("a click answered %r failed in the core", RECEIVED.text, exc_info=error)
        else:
            self.late.append(task.result())

    def _inbox_or_fail(self) -> Inbox:
        if self._inbox is None:
            raise PlatformError("memory platform is not attached to a gateway")
        if not self._taking_input:
            raise PlatformError("memory platform takes no more input: the gateway is stopping")
        return self._inbox

    async def _check_up(self, call: str) -> None:
        if self.down:
            self.refused.append(call)
            await self._notify()  # a test may wait for the refusal
            raise PlatformUnreachable("memory platform is down")
        if self.rate_limited is not None:
            self.too_many.append(call)
            await self._notify()
            raise RateLimited(self.rate_limited)

    async def _signal(self, conversation: ConversationRef, status: TurnStatus | None) -> None:
        texts = tuple(self.texts(conversation))
        self.turns.append(TurnSignal(conversation=conversation, status=status, texts=texts))
        await self._notify()

    def _check_text(self, text: str) -> None:
        if len(text) > self.limits.text_max_chars:
            raise PlatformError(f"text of {len(text)} chars exceeds {self.limits.text_max_chars}")

    def _check_callback(self, token: str) -> None:
        if len(token.encode()) > self.limits.callback_max_bytes:
            raise PlatformError(f"callback payload exceeds {self.limits.callback_max_bytes} bytes")

    def _check_card(self, card: Card) -> None:
        for action in card.actions:
            self._check_callback(action.token)
        length = card_text_length(card)
        if length > self.limits.card_max_chars:
            raise PlatformError(f"card of {length} chars exceeds {self.limits.card_max_chars}")

    def _new_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids)}"

    async def _adopted(self, ref: MessageRef, edited: Rendered) -> bool:
        """Record an edit of a message an earlier instance sent, if adopting; True if done."""
        if not self.adopt_unknown or ref.message_id in self._messages:
            return False
        if ref.message_id in self._deleted:
            return False
        await self._store(edited)
        return True

    def _get(self, ref: MessageRef) -> Rendered:
        if ref.message_id in self._deleted:
            raise MessageGone(f"message {ref.message_id} was deleted")
        try:
            return self._messages[ref.message_id]
        except KeyError:
            raise PlatformError(f"no message {ref.message_id}") from None

    async def _store(self, rendered: Rendered) -> None:
        self._messages[rendered.ref.message_id] = rendered
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
