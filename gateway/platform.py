"""The platform contract: what a chat platform offers the core, and what the core offers it.

Shaped by the strictest real platform (DESIGN.md, Platforms): callback payloads are limited in
size (Telegram ``callback_data``: 64 bytes), acknowledgements are due within a deadline (Slack
and Discord: 3 s), messages are referenced for later edits, an identical edit is "not
modified" rather than an error, and secret answers need a private surface.

A platform turns its SDK's events into :class:`InboundMessage`, :class:`InboundAction` and
:class:`InboundForm` and hands them to the core's :class:`Inbox`; the core performs outbound
work through the :class:`Platform` methods. A platform never sees a native request key: a
button carries an action token (gateway/action_tokens.py), nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from gateway.attachments import InboundAttachment
from gateway.cards import Card
from gateway.domain import Actor, Answer, ConversationRef, TurnStatus
from gateway.errors import ConfigError, PlatformError
from gateway.rate_budget import SharedRates
from gateway.session_record import SessionRecord

__all__ = [
    "Ack",
    "ClosesThreads",
    "EditResult",
    "FetchesFiles",
    "FileUpload",
    "FormLedger",
    "HearsProblems",
    "InboundAction",
    "InboundForm",
    "InboundMessage",
    "Inbox",
    "KnowsApprovers",
    "KnowsFenced",
    "KnowsTimeZones",
    "KnowsWaiting",
    "LeasedReceiving",
    "LinksConversations",
    "MessageGone",
    "MessageRef",
    "NotConnected",
    "OpensThreads",
    "Platform",
    "PlatformLimits",
    "PlatformUnreachable",
    "RateLimited",
    "ReceiverGate",
    "RefusedForGood",
    "RefusedWhileRunning",
    "RepliesToMessages",
    "SendsFiles",
    "SharesForms",
    "SharesRates",
    "ShowsTurnsElsewhere",
    "TextSealer",
    "ThreadRefused",
    "WaitingRequest",
    "connected",
    "gateway_speaking",
    "gateway_speaks",
]

# True while the core sends words of its own (see gateway_speaking)
_GATEWAY_SPEAKS: ContextVar[bool] = ContextVar("gateway_speaks", default=False)


@contextmanager
def gateway_speaking() -> Iterator[None]:
    """Around the core's ``send_text`` of its own words (a notice, a command's reply), as
    opposed to the agent's text. A platform that shows the two apart (the console labels the
    gateway's messages) asks :func:`gateway_speaks` in ``send_text``; the others need not
    know. A context variable rather than an argument: the ``send_text`` of every platform
    stays as it is."""
    token = _GATEWAY_SPEAKS.set(True)
    try:
        yield
    finally:
        _GATEWAY_SPEAKS.reset(token)


def gateway_speaks() -> bool:
    """Whether the text being sent now is the gateway's own (see :func:`gateway_speaking`)."""
    return _GATEWAY_SPEAKS.get()


@dataclass(frozen=True, kw_only=True, slots=True)
class PlatformLimits:
    """What a platform takes; the core reads every field (docs/decisions.md).

    - ``callback_max_bytes``: a button's payload; a platform whose payload cannot hold an
      action token is refused at start (gateway.action_tokens ``require_callback_room``).
    - ``text_max_chars``: a message's text (split past it), counted by ``text_length``.
    - ``text_length``: a text's length as the platform counts it once rendered (Discord
      counts the escapes its Markdown adds); a part longer by it is split again.
    - ``card_max_chars``: a card's body (Discord: 4,096 in an embed, 2,000 in a message);
      a command or diff that would not fit is attached.
    - ``ack_deadline_seconds``: how soon a click must be answered. The platform waits for
      the core's Ack until :func:`gateway.deadline.ack_wait_seconds`, then answers
      neutrally and lets the card edit carry the outcome; the core is never cancelled.
    - ``has_private_surface``: whether it can take an answer nobody else sees (a modal, a
      DM). Without one, a card with a secret question offers no field for it and says where
      to answer.
    - ``loose_cards``: whether a card that is no request's (a command's buttons: ``/model``'s
      list) is shown. The web console draws cards from the ledger's requests only: where
      False, the core says the same in text.
    """

    callback_max_bytes: int = 64
    text_max_chars: int = 4096
    text_length: Callable[[str], int] = len
    ack_deadline_seconds: float = 3.0
    min_edit_interval_seconds: float = 1.0  # stream edits per conversation
    has_private_surface: bool = True
    card_max_chars: int = 4096
    loose_cards: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageRef:
    conversation: ConversationRef
    message_id: str


class EditResult(StrEnum):
    EDITED = "edited"
    NOT_MODIFIED = "not_modified"


class RateLimited(PlatformError):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited, retry after {retry_after:g} s")
        self.retry_after = retry_after


class RefusedForGood(PlatformError):
    """The platform refused and will refuse again however often it is asked (a revoked token,
    a channel archived or gone, a message it will no longer edit): the core does not ask
    again for that card copy while it runs (``Broker.resend_failed`` leaves it out)."""


class MessageGone(RefusedForGood):
    """The message to edit is gone: deleted, or one the platform will no longer edit
    (Slack's ``message_not_found``, Telegram's "message to edit not found", Discord's 10008).
    Asking again changes nothing: a card copy is failed for good; a turn's text goes on in a
    new message."""


class ThreadRefused(PlatformError):
    """The platform refused to open a thread (a Telegram bot without the right to manage a
    forum's topics); its message says, in a person's words, what would allow it."""


class PlatformUnreachable(PlatformError):
    """The platform could not be reached (an outage, as opposed to a refusal): the platform
    calls ``Inbox.on_platform_back`` once it reaches its servers again."""


class NotConnected(PlatformUnreachable):
    """The platform has not connected yet (its servers were out when the gateway started:
    gateway/platform_links.py tries again, and tells the gateway once it is connected)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InboundMessage:
    conversation: ConversationRef
    actor: Actor
    text: str
    message_id: str  # the platform's own id: the prompt queue is idempotent on it
    private: bool = False
    reply_to: str | None = None  # the platform's id of the message this one replies to
    # the files sent with it, in the order sent (issue 32); ``text`` is their caption, "" if
    # none: the files alone are a prompt
    attachments: tuple[InboundAttachment, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class InboundAction:
    """A button click: the token is all the core trusts. ``message`` is what the person
    typed with it where the card asks for one (:attr:`gateway.cards.CardAction.takes_message`:
    Keep planning's "what to change"); it reaches the agent only with a refusal, as with
    ``/deny ID message``."""

    conversation: ConversationRef
    actor: Actor
    token: str
    message: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class InboundForm:
    """A submitted question form (answers keyed by question id)."""

    conversation: ConversationRef
    actor: Actor
    token: str
    answers: dict[str, Answer] = field(default_factory=dict)
    private: bool = False  # collected on a private surface (secret answers need one)


@dataclass(frozen=True, kw_only=True, slots=True)
class Ack:
    """The answer to a click or form, shown to the person who acted (answerCallbackQuery)."""

    text: str
    accepted: bool


class Inbox(Protocol):
    """What the core offers a platform."""

    async def on_message(self, message: InboundMessage) -> None: ...

    async def on_action(self, action: InboundAction) -> Ack: ...

    async def on_form(self, form: InboundForm) -> Ack: ...

    async def may_answer(self, action: InboundAction) -> Ack:
        """Before opening a form or a prompt for ``action.token``: the checks and audit of a
        click, no decision. Accepted: open it; refused: show ``text`` and open nothing (a
        ledger too busy to answer within 2 s is a refusal asking to try again)."""
        ...

    async def has_session(self, conversation: ConversationRef) -> bool:
        """Whether ``conversation`` is bound to an open session (a platform may then take
        bare replies in it without a mention). Never waits behind the ledger's writer."""
        ...

    async def on_platform_back(self, platform: str) -> None:
        """``platform`` reaches its servers again after failing: show what failed to send."""
        ...


@runtime_checkable
class FetchesFiles(Protocol):
    """A platform whose messages carry files (issue 32): the host that runs the session
    fetches each :class:`~gateway.attachments.InboundAttachment` through it when the prompt's
    turn comes, and saves it in the session's inbox (gateway/sessions/upload_inbox.py).

    ``fetch_file`` yields the file's bytes in chunks as they come (never the whole file in
    memory: the SDKs' own download helpers read it whole). A connection cut or a 5xx midway
    raises :class:`PlatformUnreachable` (the file is fetched again from its start, a few
    times); a refusal (too big for the platform, no permission, a sign-in page instead of the
    file) raises :class:`PlatformError` and is told. A platform never logs or raises a URL
    that holds its bot token."""

    def fetch_file(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]: ...


@runtime_checkable
class LinksConversations(Protocol):
    """A platform that can link to one of its conversations (a thread, a topic), what
    ``/switch`` answers with where sessions follow threads; a platform without it is named
    by its thread's id instead."""

    def conversation_link(self, conversation: ConversationRef) -> str | None:
        """An address that opens ``conversation`` for the people in it; None where the
        platform has none for it."""
        ...


@runtime_checkable
class OpensThreads(Protocol):
    """A platform where a new session may get a thread of its own: ``/new`` typed in a
    Telegram forum's General topic opens a topic for it (where sessions follow threads); and
    where a schedule gets a thread of its own (issue 35: a forum topic, a Slack or Discord
    thread under a message at the top of the channel)."""

    def opens_threads(self, conversation: ConversationRef) -> bool:
        """Whether a new session asked for in ``conversation`` gets a new thread beside it
        (a forum's General topic), rather than replacing the session there."""
        ...

    async def threads_beside(self, conversation: ConversationRef) -> bool:
        """Whether a thread may be opened in ``conversation``'s channel, from any of its
        threads (a forum from any of its topics, a Slack conversation, a Discord server's
        channel): a schedule made there gets one. False where that cannot be known now."""
        ...

    async def open_thread(self, conversation: ConversationRef, title: str) -> ConversationRef:
        """A new thread named ``title`` in ``conversation``'s channel; :class:`ThreadRefused`
        when the platform does not let the bot open one there (nothing was made)."""
        ...


@runtime_checkable
class ClosesThreads(Protocol):
    """A platform whose threads may be closed (a Telegram forum topic: ``closeForumTopic``):
    a deleted schedule's topic is closed, so that no one writes there for its runs."""

    async def close_thread(self, conversation: ConversationRef) -> None:
        """Close ``conversation``'s thread; PlatformError when the bot may not."""
        ...


@runtime_checkable
class KnowsTimeZones(Protocol):
    """A platform that knows a person's time zone (Slack's user ``tz``): a schedule a person
    makes there reads its times in it (issue 35)."""

    async def time_zone(self, actor: Actor) -> str | None:
        """The person's IANA zone; None where the platform does not say (or cannot now)."""
        ...


@runtime_checkable
class KnowsApprovers(Protocol):
    """What the gateway's inbox also tells a platform that mentions people on a new card
    (Slack: ``<@U…>``, so that their phones are told); a platform checks for it, an inbox
    without it is still an :class:`Inbox`."""

    async def approvers(self, conversation: ConversationRef) -> tuple[str, ...]:
        """The ids, on ``conversation``'s platform, of who may decide the requests of the
        session bound there (none for a conversation without one, or where anyone may)."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitingRequest:
    """A request waiting for a decision, as a command that names it offers it: its id (what
    is typed), its title, and whether it is a question (``/answer``) or not (``/approve``)."""

    id: str
    title: str
    question: bool


@runtime_checkable
class KnowsWaiting(Protocol):
    """What the gateway's inbox also tells a platform that completes a command's request id
    as it is typed (Discord's autocomplete); a platform checks for it, an inbox without it
    is still an :class:`Inbox`."""

    async def waiting(
        self, conversation: ConversationRef, actor: Actor
    ) -> tuple[WaitingRequest, ...]:
        """The requests of the session bound to ``conversation`` that wait for a decision,
        oldest first (none for a conversation without one, or for an ``actor`` who may not
        talk to its project)."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class FileUpload:
    """A file the agent sent (``send_file``), as a platform uploads it: the bytes a person
    may have approved, read once by the core."""

    name: str
    content: bytes
    media_type: str
    caption: str | None = None

    @property
    def is_picture(self) -> bool:
        return self.media_type in ("image/png", "image/jpeg", "image/gif", "image/webp")


@runtime_checkable
class SendsFiles(Protocol):
    """A platform that uploads a file natively into a conversation (issue 33): a picture
    as a picture where it has those, anything else as a document. A platform without it
    is sent a line saying what was not shown there."""

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        """The largest upload (bytes) this conversation takes for a file of this kind."""
        ...

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        """Upload it; PlatformError (RateLimited for a 429) when it is not sent."""
        ...


@runtime_checkable
class RepliesToMessages(Protocol):
    """A platform whose new message can be shown as a reply to an earlier one (Telegram's
    ``reply_parameters``): a notice about a card replies to it, which points at the card
    and notifies. Where a conversation is a thread (Slack, Discord), a notice is in the
    card's thread already; a platform without it sends the notice as a plain text."""

    async def send_reply(
        self, conversation: ConversationRef, text: str, reply_to: str
    ) -> MessageRef:
        """``send_text``, shown as a reply to the message ``reply_to`` (a ``MessageRef``'s
        id); a message gone meanwhile is not an error (the text is sent without it)."""
        ...


@runtime_checkable
class KnowsFenced(Protocol):
    """What the gateway's inbox also tells a platform that several hosts receive for (Slack:
    every host's Socket Mode connection): whether this host takes nothing now (it lost its
    host lease or the ledger, and has not started over), so that the platform may leave what
    Slack would give another host to that host; a platform checks for it, an inbox without it
    is never fenced."""

    @property
    def fenced(self) -> bool: ...

    def fenced_text(self) -> str:
        """What a person is told of what was not taken while fenced."""
        ...


@runtime_checkable
class HearsProblems(Protocol):
    """What the gateway's inbox also takes from a platform: a problem no retry will mend (a
    revoked token, an archived channel), said once, for the people at the web console; a
    platform checks for it, an inbox without it is still an :class:`Inbox`."""

    def platform_problem(self, platform: str, text: str) -> None:
        """Keep ``text`` (a person's words, with what to do; never a secret) to show."""
        ...


@runtime_checkable
class ShowsTurnsElsewhere(Protocol):
    """A platform that shows the turns of sessions another host runs (the web console: every
    host's console shows every session), told when such a turn moved: its timeline was saved
    (about once a second while it streams), it started or it ended. What changed is in the
    ledger; the platform reads it from there (no text comes with this)."""

    def turn_moved_elsewhere(self, session_id: str) -> None: ...


class ReceiverGate(Protocol):
    """What a receiver that one host at a time may run asks while it runs (several hosts,
    design point 6; gateway/sessions/receivers.py): whether this host still holds its lease, and the
    position it keeps in the ledger (Telegram's offset), written with the lease's fence."""

    def holds(self) -> bool:
        """Whether receiving may go on now: False from the moment the lease cannot be
        renewed, or this host lost its own lease (it is fenced)."""
        ...

    async def saved_offset(self) -> int | None:
        """Where the last holder left off (None: nobody saved one)."""
        ...

    async def save_offset(self, offset: int) -> bool:
        """Record that everything before ``offset`` is taken; False (nothing written) once
        the lease is no longer this host's: the receiver stops."""
        ...


@runtime_checkable
class LeasedReceiving(Protocol):
    """A platform whose receiving only one host at a time may run (Telegram's getUpdates,
    Discord's gateway connection), when several hosts share the bot.

    :meth:`lease_receiving` is called before :meth:`Platform.connect`; from then on neither
    connect nor attach starts receiving, and the gateway runs :meth:`receive` while this
    host holds the lease :meth:`receiver_lease` names. Sending is not leased."""

    def lease_receiving(self) -> None: ...

    def receiver_lease(self) -> str | None:
        """After connect: the lease's name ("telegram:<bot id>"); None when every host
        receives (a Telegram webhook) or :meth:`lease_receiving` was not called."""
        ...

    async def receive(self, gate: ReceiverGate) -> None:
        """Receive until :meth:`stop_receiving`, :meth:`Platform.stop_input`, or the gate
        refuses; returns then (what was taken is finished first)."""
        ...

    def stop_receiving(self) -> None: ...

    async def reachable(self) -> None:
        """Returns once the platform answers this host (at once unless it was found
        unreachable): a host that cannot reach the platform does not ask for the lease."""
        ...


@runtime_checkable
class RefusedWhileRunning(Protocol):
    """A platform whose servers may refuse its configuration while it runs (a token revoked
    or changed): it stops taking and sending, and :meth:`refused` returns why."""

    async def refused(self) -> ConfigError:
        """Returns (the refusal, naming the key) once it happened; never returns otherwise."""
        ...


@runtime_checkable
class SharesRates(Protocol):
    """A platform that paces its calls by a budget its bot's other hosts spend too (design
    point 7, gateway/rate_budget.py): told before it connects, when the ledger is shared;
    never told, it paces by its own windows alone."""

    def share_rates(self, rates: SharedRates) -> None: ...


class TextSealer(Protocol):
    """Seals a text for one context (what it belongs to), so that it opens for that context
    only: what a form draft's secret answers are kept under in a shared ledger
    (:class:`gateway.store.sealing.Sealer`)."""

    def seal_text(self, context: str, plain: str) -> str: ...

    def open_text(self, context: str, text: str) -> str:
        """What :meth:`seal_text` sealed for ``context``; SealBroken when it does not open."""
        ...


class FormLedger(Protocol):
    """Form drafts in a ledger shared by several hosts (issue 19, design point 8): the next
    click of a form may reach a host that did not send its card, so each person's answers in
    progress are kept in the ledger (platforms/form_drafts.py ``LedgerForms``), their secret
    answers sealed with :attr:`sealer`. The payloads are the platform's; a draft is found only
    while its request is pending."""

    @property
    def sealer(self) -> TextSealer: ...

    def interaction_of(self, submit_token: str) -> str | None:
        """The request a form's submit token names, if the token is this gateway's (its
        HMAC checked); None for any other text."""
        ...

    async def card_at(self, conversation: ConversationRef, interaction_id: str) -> Card | None:
        """The card of request ``interaction_id`` shown in ``conversation`` (a copy of it
        there in the ledger, sent or still being sent), as this platform draws it now, while
        the request is pending with questions; None otherwise."""
        ...

    async def card_now(self, conversation: ConversationRef, interaction_id: str) -> Card | None:
        """The card of request ``interaction_id`` as this platform draws it now, whatever
        its state (decided: no questions), if it has a copy in ``conversation``."""
        ...

    async def load_draft(self, interaction_id: str, person: str) -> str | None: ...

    async def save_draft(self, interaction_id: str, person: str, payload: str) -> None: ...

    async def drop_draft(self, interaction_id: str, person: str) -> None: ...


@runtime_checkable
class SharesForms(Protocol):
    """What the gateway's inbox also offers a platform with question forms: the ledger its
    drafts go to when several hosts share it, None on one host (drafts stay in memory). A
    platform asks once, when it is attached; an inbox without it is still an :class:`Inbox`."""

    def form_ledger(self) -> FormLedger | None: ...


class Platform(Protocol):
    """What a platform offers the core. Errors are PlatformError (RateLimited for 429s).

    Its life has four phases, in this order (DESIGN.md, Platforms), the same for every
    platform: :func:`connected` runs the first and the last around the gateway, the gateway
    the two in between.

    1. :meth:`connect` before the gateway's recovery, which edits the cards a previous
       process left on screen and sends its notices;
    2. :meth:`attach` once recovery is over: from then on the platform hands what people do
       to the inbox;
    3. :meth:`stop_input` when the gateway stops, before its runners do: nothing more is
       taken (what was not taken is left for the platform to give again), while notices and
       card edits still go out;
    4. :meth:`close` after the ledger closed.
    """

    name: str
    limits: PlatformLimits

    async def connect(self) -> None: ...

    def attach(self, inbox: Inbox) -> None: ...

    async def stop_input(self) -> None: ...

    async def close(self) -> None: ...

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        """The person's own conversation with the bot (asked of the platform: a Slack or
        Discord DM channel id is not the user id), or None where there is none."""
        ...

    def spell_command(self, name: str) -> str:
        """How a person types the gateway's command ``name`` here (``commands.slash``:
        "/stop"); the gateway's help and replies name commands this way."""
        ...

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        """Where this platform shows ``session`` although nobody started it there (the web
        console shows every session on a page of its own); None: only where it is bound."""
        ...

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef: ...

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult: ...

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef: ...

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        """Mark the person's message ``message_id`` as queued for the agent without a new
        message (Telegram: a reaction), where the platform has such a mark: after the first
        full notice, each message typed while a card waits gets this mark instead. False
        where it has none: the core then says it in a short text."""
        ...

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult: ...

    async def turn_started(self, conversation: ConversationRef) -> None:
        """The agent started a turn of the session shown in ``conversation`` (before any of
        its text): a typing indicator may start, a native stream may open. The turn's text
        then comes as whole snapshots (``send_text``, ``edit_text``), one message per
        section: what follows a card is a new message after it."""
        ...

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        """The turn ended (``completed``, ``interrupted``, ``failed``). Called after the last
        send or edit of its text in ``conversation``: what was sent last is final (a stream
        may be finalized, a typing indicator stopped). Notices about the turn's end follow:
        a turn that did not complete is always followed by one that says why. A platform
        whose edits notify nobody sends a short new message here when the turn completed
        with its last words shown by an edit (platforms/turn_end.py), never one per edit.

        For both calls a PlatformError (RateLimited too) is logged, never retried."""
        ...


@asynccontextmanager
async def connected(platforms: Mapping[str, Platform]) -> AsyncIterator[None]:
    """Connect every platform for the block (phase 1), and close each one after it (phase 4),
    also when a later one fails to connect. The gateway's block goes inside::

        async with connected(platforms), Gateway(config, platforms=platforms, ...):
            ...
    """
    async with AsyncExitStack() as stack:
        for platform in platforms.values():
            await platform.connect()
            stack.push_async_callback(platform.close)
        yield
