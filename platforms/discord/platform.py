"""The Discord platform: the gateway's platform contract on discord.py 2.7.

    settings = config.platforms.get("discord", DiscordConfig)
    async with DiscordPlatform(settings) as discord_platform:
        async with Gateway(config, platforms={"discord": discord_platform}, launcher=...):
            ...

Its life follows the contract's four phases (DESIGN.md, Platforms): :meth:`connect` points
discord.py at the configured addresses, starts the client in a task the platform owns and
waits for READY (a 4014 close: a ``ConfigError`` naming ``message_content``; a refused
token: one naming ``token``), syncs the slash commands and starts the outbox, before the
gateway's recovery edits the cards left here; events that come before :meth:`attach` wait
for it; :meth:`stop_input` takes no more; :meth:`close` ends the client and the outbox.

The work is in modules named for it: client.py (discord.py's client, its start, intents and
slash commands), messages.py (what people write), clicks.py (what they press and submit),
sending.py (what the bot posts and edits, in the outbox's lanes), widgets.py (buttons and
modals as discord.py draws them). This module wires them and keeps the platform's state:
attached or not, stopped or not, reachable or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from types import TracebackType

import discord

from gateway.attachments import InboundAttachment
from gateway.cards import Card
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.errors import PlatformError
from gateway.platform import (
    EditResult,
    FileUpload,
    Inbox,
    KnowsApprovers,
    MessageRef,
    NotConnected,
    PlatformLimits,
    ReceiverGate,
)
from gateway.rate_budget import ALONE, RateBudget, SharedRates, bot_key
from gateway.session_record import SessionRecord
from platforms.comeback import Comeback
from platforms.discord.clicks import Clicks
from platforms.discord.client import (
    GatewayClient,
    connect_for_events,
    log_in,
    point_at,
    quiet_sdk_logger,
    start,
    until_ready,
)
from platforms.discord.config import DiscordConfig
from platforms.discord.files import download
from platforms.discord.inbound import PLATFORM, in_thread, link_to
from platforms.discord.messages import Messages
from platforms.discord.outbox import DiscordOutbox, classify
from platforms.discord.render import (
    CONTENT_MAX,
    CUSTOM_ID_MAX,
    CUSTOM_ID_PREFIX,
    clip,
    rendered_length,
)
from platforms.discord.sending import QUEUED_REACTION, Sender, ShownCards, turn_key
from platforms.form_drafts import MemoryForms, PendingForms, forms_for
from platforms.outbox import Pacing
from platforms.turn_end import TurnEnds

__all__ = ["DISCORD_LIMITS", "PROBE_SECONDS", "QUEUED_REACTION", "DiscordPlatform"]

log = logging.getLogger(__name__)

DISCORD_LIMITS = PlatformLimits(
    callback_max_bytes=CUSTOM_ID_MAX - len(CUSTOM_ID_PREFIX),  # "agw:" + token
    # Discord counts the content as sent, escapes included: the core splits a part again
    # where its rendering is longer than that
    text_max_chars=CONTENT_MAX,
    text_length=rendered_length,
    card_max_chars=4096,  # the embed's description
    ack_deadline_seconds=3.0,
    min_edit_interval_seconds=1.0,
    has_private_surface=True,  # modals, ephemerals
)
PROBE_SECONDS = 1.0  # while Discord is unreachable, how often GET /oauth2/applications/@me asks


# Discord's upload limit of a server without boosts (and of a DM)
DEFAULT_FILE_LIMIT = 10 * 1024 * 1024


class DiscordPlatform:
    name = PLATFORM

    def __init__(
        self,
        config: DiscordConfig,
        *,
        limits: PlatformLimits = DISCORD_LIMITS,
        pacing: Pacing[str] | None = None,
    ) -> None:
        quiet_sdk_logger()
        self.limits = limits
        self._config = config
        self._pacing = pacing
        self._rates: SharedRates | None = None  # a shared ledger's budgets (share_rates)
        self._client: GatewayClient | None = None
        self._running_client: asyncio.Task[None] | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._stack = contextlib.AsyncExitStack()
        self._outbox: DiscordOutbox | None = None
        self._sender: Sender | None = None
        self._inbox: Inbox | None = None
        self._attached_event = asyncio.Event()
        self._stopped = False
        # several hosts on one ledger: the gateway connection only while the gateway's
        # lease says so (gateway/sessions/receivers.py); REST (sending) on every host
        self._leased = False
        self._stop_receiving = asyncio.Event()
        self._cards = ShownCards()
        # the cards' forms by submit token: in memory until attached to a gateway that
        # shares its ledger (then the ledger keeps the drafts)
        self.forms: PendingForms[str] = MemoryForms()
        self.turn_ends = TurnEnds()
        self._messages = Messages(config, inbox=self._inbox_when_attached, send_text=self.send_text)
        self._clicks = Clicks(
            inbox_now=lambda: None if self._stopped else self._inbox,
            inbox=self._inbox_when_attached,
            forms=lambda: self.forms,
        )
        self._comeback = Comeback(
            PLATFORM,
            self._ask_discord,
            every=PROBE_SECONDS,
            inbox=lambda: None if self._stopped else self._inbox,
            transient=lambda exc: isinstance(exc, PlatformError) or classify(exc) is not None,
        )

    @property
    def bot_id(self) -> str:
        return self._messages.bot_id

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> DiscordPlatform:
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
        return self._rates.budget("discord", bot_key(self._config.token.get_secret_value()))

    async def connect(self) -> None:
        """Point discord.py at the configured addresses, start the client and wait for
        READY; then the outbox. Events wait for :meth:`attach`."""
        quiet_sdk_logger()
        point_at(self._config)
        client = GatewayClient(self._config, messages=self._messages, clicks=self._clicks)
        self._client = client
        try:
            self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            if self._leased:
                await log_in(client, self._config.token.get_secret_value())
            else:
                self._running_client = start(client, self._config.token.get_secret_value())
                await until_ready(client, self._running_client)
            self._messages.bot_id = str(client.user.id) if client.user is not None else ""
            self._outbox = DiscordOutbox(
                self._tasks,
                self._pacing,
                budget=self._budget(),
                on_unreachable=self._unreachable,
                on_success=self._reached,
            )
            self._sender = Sender(
                client=client,
                outbox=self._outbox,
                limits=self.limits,
                cards=self._cards,
                forms=lambda: self.forms,
                turn_ends=self.turn_ends,
                approvers=self._approvers_of,
            )
        except BaseException:
            await self.close()
            raise

    def attach(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self.forms = forms_for(inbox)
        self._attached_event.set()

    # --- the gateway connection by the gateway's lease (several hosts) --------------------

    def lease_receiving(self) -> None:
        self._leased = True

    def receiver_lease(self) -> str | None:
        client = self._client
        if not self._leased or client is None:
            return None
        return f"discord:{client.application_id or self.bot_id}"

    async def receive(self, gate: ReceiverGate) -> None:
        """The gateway connection (IDENTIFY, READY, events) until :meth:`stop_receiving`
        or :meth:`stop_input`; then closed, so that Discord sends this host nothing more."""
        client = self._client
        if client is None or self._stopped:
            return
        self._stop_receiving.clear()
        await connect_for_events(client, self._stop_receiving)

    def stop_receiving(self) -> None:
        self._stop_receiving.set()

    async def reachable(self) -> None:
        """discord.py reconnects by itself while it holds the lease: nothing to wait for."""

    async def stop_input(self) -> None:
        """Take nothing more; events waiting for :meth:`attach` are let go (not taken)."""
        self._stopped = True
        self._stop_receiving.set()
        self._attached_event.set()

    async def close(self) -> None:
        self._stopped = True
        self._attached_event.set()
        if self._outbox is not None:
            self._outbox.close()
        self._comeback.cancel()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
        running = self._running_client
        if running is not None:
            if not running.done():
                running.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await running
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    async def _inbox_when_attached(self) -> Inbox | None:
        if self._stopped:
            return None
        await self._attached_event.wait()
        return None if self._stopped else self._inbox

    # --- sending (sending.py) -------------------------------------------------------------

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        return await self._sending().send_text(conversation, text)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        return await self._sending().edit_text(ref, text)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        return await self._sending().send_card(conversation, card)

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        """``SendsFiles``: the upload limit the server reports for its guild (its boost
        tier), 10 MiB where it is not known (a DM, not connected)."""
        client, space = self._client, conversation.space
        guild = client.get_guild(int(space)) if client and space and space.isdigit() else None
        return guild.filesize_limit if guild is not None else DEFAULT_FILE_LIMIT

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        return await self._sending().send_file(conversation, upload)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        return await self._sending().edit_card(ref, card)

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return await self._sending().mark_queued(conversation, message_id)

    async def _approvers_of(self, conversation: ConversationRef) -> tuple[str, ...]:
        inbox = self._inbox
        if not isinstance(inbox, KnowsApprovers):
            return ()
        try:
            return await inbox.approvers(conversation)
        except Exception:
            log.exception("discord: the approvers of a card in %s not found", conversation.channel)
            return ()

    def _sending(self) -> Sender:
        if self._sender is None:
            raise NotConnected("discord: not connected yet")
        return self._sender

    # --- back after an outage -------------------------------------------------------------

    def _unreachable(self) -> None:
        if self._tasks is not None and not self._stopped:
            self._comeback.lost(self._tasks)

    def _reached(self) -> None:
        self._comeback.reached(self._tasks)

    async def _ask_discord(self) -> None:
        client = self._client
        if client is None:
            raise PlatformError("the Discord platform is not running")
        await client.application_info()

    # --- the rest of the contract ---------------------------------------------------------

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        if self._client is None:
            raise NotConnected("discord: not connected yet")
        try:
            dm = await self._client.create_dm(discord.Object(id=int(actor.user_id)))
        except (discord.HTTPException, ValueError) as exc:
            log.info("discord: no DM with %s (%s)", actor.user_id, exc)
            return None
        return ConversationRef(platform=PLATFORM, space=None, channel=str(dm.id))

    def fetch_file(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
        """A file a person attached, streamed from Discord's CDN (platforms/discord/files.py)."""
        return download(attachment, self._config.api_base_url)

    def spell_command(self, name: str) -> str:
        return f"/{name}"

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None

    def conversation_link(self, conversation: ConversationRef) -> str | None:
        return link_to(conversation)

    def opens_threads(self, conversation: ConversationRef) -> bool:
        """``/new`` opens no thread here: a mention in a channel starts one."""
        return False

    async def threads_beside(self, conversation: ConversationRef) -> bool:
        """A guild channel, from the channel or any of its threads (a DM has none)."""
        return conversation.space is not None

    async def open_thread(self, conversation: ConversationRef, title: str) -> ConversationRef:
        """A thread made from a new message ``title`` at the top of ``conversation``'s
        channel (a schedule's thread, issue 35), as a session's is made from the message that
        began it; PlatformError when Discord refuses it (the message stays)."""
        client = self._client
        if client is None:
            raise NotConnected("discord: not connected yet")
        top = ConversationRef(
            platform=PLATFORM, space=conversation.space, channel=conversation.channel
        )
        root = await self.send_text(top, title)
        try:
            thread = await client.http.start_thread_with_message(
                int(conversation.channel),
                int(root.message_id),
                name=clip(title, 90),
                auto_archive_duration=10080,  # a week: a daily schedule's thread stays open
            )
        except discord.HTTPException as exc:
            raise PlatformError(f"discord: no thread made ({exc.code}: {exc.text})") from exc
        return in_thread(conversation, str(thread["id"]))

    async def turn_started(self, conversation: ConversationRef) -> None:
        self.turn_ends.started(turn_key(conversation))
        sender = self._sender
        if (
            sender is not None
            and self._tasks is not None
            and not self._comeback.down
            and not self._stopped
        ):
            self._tasks.create_task(sender.typing(conversation))  # never holds the turn up

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        line = self.turn_ends.ended(turn_key(conversation), status)
        if line is not None:
            try:
                await self.send_text(conversation, line)
            except PlatformError as exc:
                log.info("discord turn end in %s not told: %s", conversation.channel, exc)
