"""The Slack platform: the gateway's platform contract on slack-bolt 1.30 and slack-sdk 3.48.

    settings = config.platforms.get("slack", SlackConfig)
    async with SlackPlatform(settings) as slack:
        async with Gateway(config, platforms={"slack": slack}, launcher=...):
            ...

Its life follows the contract's four phases (DESIGN.md, Platforms): :meth:`connect` checks the
bot token (``auth.test``: the team must be the configured ``team_id``) and starts the
outbox, before the gateway's recovery edits the cards left here; :meth:`attach` starts
taking events, over Socket Mode or HTTP (connection.py); :meth:`stop_input` takes no more
(the socket closes, HTTP answers 503, so Slack gives what was not taken again) and waits for
the work being done; :meth:`close` closes the outbox after the gateway's ledger closed.

The platform owns its tasks, its outbox and its lanes, and finds its way back after an outage
(platforms/comeback.py); the rest is in its parts: connection.py (the token, Socket Mode or
HTTP), events.py (what people do, handed to the gateway), posting.py (what is shown: texts,
cards, edits, ephemeral answers, the queued mark). Secrets are passed explicitly (bolt
otherwise reads ``SLACK_BOT_TOKEN`` and ``SLACK_SIGNING_SECRET`` from the environment) and
never logged.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import OrderedDict
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack
from types import TracebackType

from slack_bolt.app.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from gateway.attachments import InboundAttachment
from gateway.cards import Card
from gateway.deadline import ack_wait_seconds
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.platform import (
    EditResult,
    FileUpload,
    HearsProblems,
    Inbox,
    MessageRef,
    NotConnected,
    PlatformLimits,
)
from gateway.rate_budget import ALONE, RateBudget, SharedRates, bot_key
from gateway.session_record import SessionRecord
from platforms.comeback import Comeback
from platforms.form_drafts import MemoryForms, PendingForms, forms_for
from platforms.outbox import Pacing
from platforms.slack.config import SlackConfig
from platforms.slack.connection import SDK_LOGGERS, Receiver, check_token, quiet_sdk_loggers
from platforms.slack.events import SlackEvents
from platforms.slack.files import download
from platforms.slack.inbound import PLATFORM, conversation, link_to
from platforms.slack.outbox import SlackOutbox, classify
from platforms.slack.posting import QUEUED_REACTION, SlackPosting
from platforms.slack.receive import Lanes

__all__ = ["QUEUED_REACTION", "SDK_LOGGERS", "SLACK_LIMITS", "SlackPlatform"]

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10.0
_ZONES = 4096  # the people whose zone is remembered (users.info), the oldest forgotten past it
PROBE_SECONDS = 1.0  # while Slack is unreachable, how often auth.test asks

SLACK_LIMITS = PlatformLimits(
    callback_max_bytes=2000,  # a button's value
    text_max_chars=3000,  # one section's text; a message's text takes more
    card_max_chars=12_000,  # a card's body; its blocks are cut within 50 (render.py)
    ack_deadline_seconds=3.0,
    min_edit_interval_seconds=1.0,
    has_private_surface=True,  # modals
)


class SlackPlatform:
    name = PLATFORM

    def __init__(
        self,
        config: SlackConfig,
        *,
        limits: PlatformLimits = SLACK_LIMITS,
        pacing: Pacing[str] | None = None,
        http_socket: socket.socket | None = None,
    ) -> None:
        quiet_sdk_loggers()
        self.limits = limits
        self._config = config
        self._pacing = pacing
        self._rates: SharedRates | None = None  # a shared ledger's budgets (share_rates)
        self.team_id = config.team_id
        # no retry handler for 429s: the outbox waits them out with its priorities
        self.client = AsyncWebClient(
            token=config.bot_token.get_secret_value(), base_url=config.api_url, timeout=20
        )
        # the cards' forms: this process's until attached to a gateway sharing its ledger
        self.forms: PendingForms[tuple[str, str]] = MemoryForms()
        self.bot_user_id = ""
        self.bot_name = ""  # the bot user's name: commands are spelled "@name /stop"
        self._stack = AsyncExitStack()
        self._zones: OrderedDict[str, str | None] = OrderedDict()  # user id: Slack's tz
        self._tasks: asyncio.TaskGroup | None = None
        self._outbox: SlackOutbox | None = None
        self._lanes: Lanes | None = None
        self._inbox: Inbox | None = None
        self._app: AsyncApp | None = None  # the listeners (events.py), once connected
        self._events: SlackEvents | None = None
        self._receiver = Receiver(config, self.client, http_socket=http_socket)
        self._receiving: asyncio.Task[None] | None = None
        self._stopped = False
        self._comeback = Comeback(
            PLATFORM,
            lambda: self.client.auth_test(),
            every=PROBE_SECONDS,
            inbox=lambda: self._inbox,
        )
        self._posting = SlackPosting(
            self.client, limits, self.forms, outbox=self._running, inbox=lambda: self._inbox
        )
        self.turn_ends = self._posting.turn_ends  # whether a turn's end needs a new message

    @property
    def http_port(self) -> int | None:
        """The port events are taken on, in HTTP mode once attached."""
        return self._receiver.http_port

    async def receiving(self) -> None:
        """Until events are taken (attached and connected; in HTTP mode, the port bound)."""
        await self._receiver.listening.wait()

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> SlackPlatform:
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
        return self._rates.budget("slack", bot_key(self._config.bot_token.get_secret_value()))

    async def connect(self) -> None:
        """Check the bot token and its team, start the outbox; events are taken once the
        gateway attaches itself."""
        quiet_sdk_loggers()
        me = await check_token(self.client, self.team_id)
        self.bot_user_id, self.bot_name = me.id, me.name
        self._posting.app = me
        try:
            self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            self._outbox = SlackOutbox(
                self._tasks,
                self._pacing,
                budget=self._budget(),
                on_unreachable=self._unreachable,
                on_success=self._reached,
                on_refused_for_good=self._tell_problem,
            )
            self._lanes = Lanes(self._tasks)
            self._events = SlackEvents(
                self._config,
                self.client,
                bot_user_id=self.bot_user_id,
                forms=self.forms,
                posting=self._posting,
                lanes=self._lanes,
                inbox=lambda: self._inbox,
                stopped=lambda: self._stopped,
                ack_wait=ack_wait_seconds(self.limits),
            )
            self._app = self._events.bolt_app()
        except BaseException:
            await self.close()
            raise
        self._start_receiving()  # attached before it could connect: it receives now

    def attach(self, inbox: Inbox) -> None:
        """The gateway is ready: start taking events (once connected, if it is not yet)."""
        self._inbox = inbox
        # any host may take a click (Socket Mode picks one at random): with a shared ledger
        # a form is found by its card there (platforms/form_drafts.py LedgerForms)
        self.forms = self._posting.forms = forms_for(inbox)
        self._start_receiving()

    def _start_receiving(self) -> None:
        """Attached and connected (in either order): events are taken from now on."""
        if self._inbox is None or self._tasks is None or self._app is None:
            return
        if self._events is None or self._receiving is not None:
            return
        self._events.forms = self.forms
        self._receiving = self._tasks.create_task(
            self._receiver.start(self._app, stopped=lambda: self._stopped)
        )

    async def stop_input(self) -> None:
        """Take nothing more (answered 503: Slack gives it again, to another host or the next
        gateway); the work being done is finished (past :data:`STOP_GRACE_SECONDS`,
        cancelled) and acked on the connection, which closes then. The outbox keeps
        sending."""
        self._stopped = True
        if self._receiving is not None and not self._receiving.done():
            await asyncio.wait({self._receiving})
        if self._lanes is not None and not await self._lanes.drain(STOP_GRACE_SECONDS):
            log.warning(
                "slack events still being handled after %g s were cancelled", STOP_GRACE_SECONDS
            )
        await self._receiver.close_socket()  # after the acks of the work just finished

    async def close(self) -> None:
        self._stopped = True
        await self._receiver.close()
        if self._outbox is not None:
            self._outbox.close()
        self._comeback.cancel()
        if self._receiving is not None:
            self._receiving.cancel()
        if self._lanes is not None:
            await self._lanes.drain(0)
        await self._stack.aclose()

    # --- back after an outage -------------------------------------------------------------

    def _unreachable(self) -> None:
        if self._tasks is not None and not self._stopped:
            self._comeback.lost(self._tasks)

    def _reached(self) -> None:
        self._comeback.reached(self._tasks)

    # --- the platform contract ------------------------------------------------------------

    def fetch_file(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
        """A file a person sent, streamed from Slack (platforms/slack/files.py)."""
        return download(self.client, self._config.bot_token.get_secret_value(), attachment)

    def spell_command(self, name: str) -> str:
        """ "@gateway /stop": a mention, then the command, works wherever the gateway writes
        (a session's thread takes no slash command: Slack sends a command without its
        thread; a mention counts in a channel and a DM too). A text's ``@gateway`` is made
        a real mention when it is posted (:meth:`SlackPosting.send_text`)."""
        if not self.bot_name:  # not connected: the slash command, for a channel or a DM
            return f"{self._config.command} {name}"
        return f"@{self.bot_name} /{name}"

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None

    def conversation_link(self, conversation: ConversationRef) -> str | None:
        return link_to(conversation)

    def opens_threads(self, conversation: ConversationRef) -> bool:
        """``/new`` opens no thread here: a message at the top of a channel starts one."""
        return False

    async def threads_beside(self, conversation: ConversationRef) -> bool:
        """Any conversation: a message at the top of its channel starts a thread."""
        return True

    async def open_thread(self, conversation: ConversationRef, title: str) -> ConversationRef:
        """The thread of a new message ``title`` at the top of ``conversation``'s channel (a
        schedule's thread, issue 35)."""
        top = ConversationRef(
            platform=conversation.platform, space=conversation.space, channel=conversation.channel
        )
        root = await self._posting.send_text(top, title)
        return ConversationRef(
            platform=conversation.platform,
            space=conversation.space,
            channel=conversation.channel,
            thread=root.message_id,
        )

    async def time_zone(self, actor: Actor) -> str | None:
        """The person's zone as Slack keeps it (``users.info``'s ``tz``), remembered; None
        when Slack does not answer it."""
        if actor.user_id in self._zones:
            return self._zones[actor.user_id]
        try:
            found = await self.client.users_info(user=actor.user_id)
        except Exception as exc:
            if classify(exc) is None:
                raise
            log.info("slack: the zone of %s not read: %s", actor.user_id, exc)
            return None
        zone = str((found.get("user") or {}).get("tz") or "") or None
        self._zones[actor.user_id] = zone
        while len(self._zones) > _ZONES:
            self._zones.popitem(last=False)
        return zone

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        """The DM with the person (``conversations.open``: a DM's id is not the user id)."""
        try:
            opened = await self.client.conversations_open(users=actor.user_id)
        except Exception as exc:
            if classify(exc) is None:
                raise
            log.info("slack DM with %s not opened: %s", actor.user_id, exc)
            return None
        channel = str((opened.get("channel") or {}).get("id") or "")
        return conversation(self.team_id, channel) if channel else None

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        return await self._posting.send_text(conversation, text)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        return await self._posting.edit_text(ref, text)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        return await self._posting.send_card(conversation, card)

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        return self._posting.file_limit(conversation, upload)

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        return await self._posting.send_file(conversation, upload)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        return await self._posting.edit_card(ref, card)

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return await self._posting.mark_queued(conversation, message_id)

    async def turn_started(self, conversation: ConversationRef) -> None:
        await self._posting.turn_started(conversation)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        await self._posting.turn_ended(conversation, status)

    # --- helpers --------------------------------------------------------------------------

    def _running(self) -> SlackOutbox:
        if self._outbox is None:
            raise NotConnected("slack: not connected yet")
        return self._outbox

    def _tell_problem(self, text: str) -> None:
        """A refusal for good, already in the log, to the gateway (its console shows it)."""
        if isinstance(self._inbox, HearsProblems):
            self._inbox.platform_problem("slack", text)
