"""The Discord platform: the gateway's platform contract on discord.py 2.7.

    settings = config.platforms.get("discord", DiscordConfig)
    async with DiscordPlatform(settings) as discord_platform:
        async with Gateway(config, platforms={"discord": discord_platform}, launcher=...):
            ...

Its life follows the contract's four phases (DESIGN.md, Platforms): :meth:`connect` points
discord.py at the configured addresses (``Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY``),
starts the client in a task the platform owns and waits for READY (a 4014 close: a
``ConfigError`` naming ``message_content``; a refused token: one naming ``token``), syncs the
slash commands and starts the outbox, before the gateway's recovery edits the cards left
here; events that come before :meth:`attach` wait for it; :meth:`stop_input` takes no more;
:meth:`close` ends the client and the outbox.

discord.py's logger stays at WARNING whatever ``log_level`` says: at DEBUG it writes gateway
events and request bodies (modal answers, tokens).

A click is deferred at once, handed to the core, and its Ack sent as an ephemeral followup;
"Answer…" opens a modal, which must be the first response: ``may_answer`` first, then the
modal. Buttons are DynamicItems registered in ``setup_hook``, so a click on a card sent by an
earlier process reaches the core too (which answers that its agent process has ended); modal
submits are taken by ``custom_id`` in ``on_interaction``, whether or not discord.py still
holds the Modal.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import aiohttp
import discord
import yarl
from discord import app_commands, ui

from gateway.cards import Card, QuestionForm
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.errors import ConfigError, PlatformError
from gateway.markdown import discord_markdown
from gateway.platform import (
    EditResult,
    InboundAction,
    InboundForm,
    InboundMessage,
    Inbox,
    KnowsApprovers,
    MessageRef,
    PlatformLimits,
)
from gateway.store import SessionRecord
from platforms.comeback import Comeback
from platforms.discord.config import DiscordConfig
from platforms.discord.forms import ModalDrafts, Page, answers_of, build_page, pages_of, read_page
from platforms.discord.inbound import (
    COMMANDS,
    PLATFORM,
    Heard,
    actor_of,
    command_text,
    conversation_of,
    heard,
    in_thread,
)
from platforms.discord.outbox import ARCHIVED_THREAD, DiscordOutbox, classify
from platforms.discord.receive import modal_values, place_of, roles_of, seen_of
from platforms.discord.render import (
    CUSTOM_ID_MAX,
    CUSTOM_ID_PREFIX,
    MESSAGE_ID_PREFIX,
    RenderedCard,
    answers_by_buttons,
    clip,
    render_card,
)
from platforms.outbox import Pacing, Priority
from platforms.turn_end import TurnEnds

__all__ = ["DISCORD_LIMITS", "DiscordPlatform"]

log = logging.getLogger(__name__)

CONTENT_MAX = 2000
DISCORD_LIMITS = PlatformLimits(
    callback_max_bytes=CUSTOM_ID_MAX - len(CUSTOM_ID_PREFIX),  # "agw:" + token
    # Discord counts the content as sent, escapes included: the core's parts leave room for
    # them (a part that still grows past 2,000 is cut, and the log says so)
    text_max_chars=1800,
    card_max_chars=4096,  # the embed's description
    ack_deadline_seconds=3.0,
    min_edit_interval_seconds=1.0,
    has_private_surface=True,  # modals, ephemerals
)
READY_SECONDS = 30.0
_CARDS = 512  # the cards (and their forms) remembered by message id
_PAGE_PREFIX = "agwp:"  # "Next" / "Answer again" buttons: agwp:<page>:<token>
_MESSAGE_INPUT = "message"
MESSAGE_MAX = 4000  # a paragraph text input's most
_THREAD_EXISTS = 160004
QUEUED_REACTION = "✍"  # the mark of a message queued behind a card, as on Telegram
PROBE_SECONDS = 1.0  # while Discord is unreachable, how often GET /oauth2/applications/@me asks
TAKE_ATTEMPTS = 5  # a message the gateway failed to take is tried again this often
_BUSY = "The gateway could not take your message; send it again in a moment."


def _quiet_sdk_logger() -> None:
    logger = logging.getLogger("discord")
    logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    # the bot never joins voice: discord.py's warnings that PyNaCl and davey are missing
    # would be the first two lines of every start (and of a refused one's one-line error)
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False


def _choice(token: str) -> str:
    parts = token.split(":")
    return parts[2] if len(parts) == 5 else ""


class CardButton(ui.DynamicItem[ui.Button[Any]], template=r"agw:(?P<token>[A-Za-z0-9:_.-]{1,96})"):
    """A card's button, whatever process sent it: ``agw:<token>``."""

    def __init__(self, token: str, label: str = "…", style: int = 2) -> None:
        super().__init__(
            ui.Button(
                label=label, style=discord.ButtonStyle(style), custom_id=CUSTOM_ID_PREFIX + token
            )
        )
        self.token = token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: ui.Item[Any], match: re.Match[str], /
    ) -> CardButton:
        return cls(match["token"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        platform = getattr(interaction.client, "platform", None)
        if isinstance(platform, DiscordPlatform):
            await platform.on_button(interaction, self.token)


class MessageButton(
    ui.DynamicItem[ui.Button[Any]], template=r"agwm:(?P<token>[A-Za-z0-9:_.-]{1,95})"
):
    """A button that asks for a message first (Keep planning), whatever process sent it:
    ``agwm:<token>``; pressed, it opens the modal for the message."""

    def __init__(self, token: str, label: str = "…", style: int = 2) -> None:
        super().__init__(
            ui.Button(
                label=label, style=discord.ButtonStyle(style), custom_id=MESSAGE_ID_PREFIX + token
            )
        )
        self.token = token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: ui.Item[Any], match: re.Match[str], /
    ) -> MessageButton:
        return cls(match["token"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        platform = getattr(interaction.client, "platform", None)
        if isinstance(platform, DiscordPlatform):
            await platform.ask_message(interaction, self.token)


class PageButton(
    ui.DynamicItem[ui.Button[Any]],
    template=r"agwp:(?P<page>[0-9]{1,2}):(?P<token>[A-Za-z0-9:_.-]{1,90})",
):
    """ "Next" or "Answer again" under a modal's page: opens page ``page`` of the form."""

    def __init__(self, page: int, token: str, label: str = "Next") -> None:
        super().__init__(
            ui.Button(
                label=label,
                style=discord.ButtonStyle.primary,
                custom_id=f"{_PAGE_PREFIX}{page}:{token}",
            )
        )
        self.page, self.token = page, token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: ui.Item[Any], match: re.Match[str], /
    ) -> PageButton:
        return cls(int(match["page"]), match["token"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        platform = getattr(interaction.client, "platform", None)
        if isinstance(platform, DiscordPlatform):
            await platform.open_page(interaction, self.token, self.page)


class _Client(discord.Client):
    def __init__(self, platform: DiscordPlatform, **options: Any) -> None:
        super().__init__(**options)
        self.platform = platform
        self.tree = app_commands.CommandTree(self)

    async def setup_hook(self) -> None:
        self.add_dynamic_items(CardButton, MessageButton, PageButton)
        await self.platform.setup_commands(self.tree)

    async def on_message(self, message: discord.Message) -> None:
        await self.platform.on_discord_message(message)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        if interaction.type is discord.InteractionType.modal_submit:
            await self.platform.on_modal(interaction)
        elif interaction.type is discord.InteractionType.component:
            await self.platform.on_unlisted_click(interaction)


class DiscordPlatform:
    name = PLATFORM

    def __init__(
        self,
        config: DiscordConfig,
        *,
        limits: PlatformLimits = DISCORD_LIMITS,
        pacing: Pacing[str] | None = None,
    ) -> None:
        _quiet_sdk_logger()
        self.limits = limits
        self._config = config
        self._pacing = pacing
        self._client: _Client | None = None
        self._running_client: asyncio.Task[None] | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._stack = contextlib.AsyncExitStack()
        self._outbox: DiscordOutbox | None = None
        self._inbox: Inbox | None = None
        self._attached_event = asyncio.Event()
        self._stopped = False
        self._cards: OrderedDict[str, tuple[ConversationRef, Card]] = OrderedDict()
        self._shown: OrderedDict[str, str] = OrderedDict()
        self.drafts = ModalDrafts()
        self.turn_ends = TurnEnds()
        self._order: dict[str, asyncio.Lock] = {}
        self._comeback = Comeback(
            PLATFORM,
            self._ask_discord,
            every=PROBE_SECONDS,
            inbox=lambda: None if self._stopped else self._inbox,
            transient=lambda exc: isinstance(exc, PlatformError) or classify(exc) is not None,
        )
        self.bot_id = ""

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> DiscordPlatform:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _intents(self) -> discord.Intents:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = self._config.message_content
        return intents

    async def connect(self) -> None:
        """Point discord.py at the configured addresses, start the client and wait for
        READY; then the outbox. Events wait for :meth:`attach`."""
        _quiet_sdk_logger()
        discord.http.Route.BASE = self._config.api_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self._config.gateway_url)
        client = _Client(
            self,
            intents=self._intents(),
            max_ratelimit_timeout=self._config.max_ratelimit_timeout,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self._client = client
        try:
            self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            # its own task (not the group's): a failed start is read below, not a group's end
            running = asyncio.create_task(
                client.start(self._config.token.get_secret_value()), name="discord client"
            )
            self._running_client = running
            ready = asyncio.ensure_future(client.wait_until_ready())
            try:
                done, _ = await asyncio.wait(
                    {running, ready}, timeout=READY_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                ready.cancel()
            if running in done:
                self._raise_start_error(running)
            if ready not in done:
                raise PlatformError(f"discord: not ready after {READY_SECONDS:g} s")
            self.bot_id = str(client.user.id) if client.user is not None else ""
            self._outbox = DiscordOutbox(
                self._tasks,
                self._pacing,
                on_unreachable=self._unreachable,
                on_success=self._reached,
            )
        except BaseException:
            await self.close()
            raise

    def _raise_start_error(self, running: asyncio.Task[None]) -> None:
        error = running.exception()
        if isinstance(error, discord.PrivilegedIntentsRequired):
            raise ConfigError(
                "platforms.discord.message_content = true, but the application does not have "
                "the Message Content intent: turn it on in the Developer Portal (Bot > "
                "Privileged Gateway Intents), or set message_content = false"
            ) from error
        if isinstance(error, discord.LoginFailure):
            raise ConfigError("platforms.discord.token: Discord refused it") from error
        raise PlatformError(f"discord: the client stopped at start ({error!r})") from error

    async def setup_commands(self, tree: app_commands.CommandTree[Any]) -> None:
        """/new /stop /resume /clear /status /pending /help, each with optional text;
        synced in the configured guilds, else globally."""
        for name in COMMANDS:
            tree.add_command(self._command(name))
        if self._config.guild_ids:
            for guild in self._config.guild_ids:
                target = discord.Object(id=int(guild))
                tree.copy_global_to(guild=target)
                await tree.sync(guild=target)
            tree.clear_commands(guild=None)
        else:
            await tree.sync()

    def _command(self, name: str) -> app_commands.Command[Any, Any, None]:
        async def run(interaction: discord.Interaction[Any], text: str = "") -> None:
            await self.on_slash(interaction, name, text)

        return app_commands.Command(
            name=name, description=_COMMAND_HELP.get(name, name), callback=run
        )

    def attach(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._attached_event.set()

    async def stop_input(self) -> None:
        """Take nothing more; events waiting for :meth:`attach` are let go (not taken)."""
        self._stopped = True
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

    # --- messages -------------------------------------------------------------------------

    async def on_discord_message(self, message: discord.Message) -> None:
        found = heard(
            seen_of(message),
            bot_id=self.bot_id,
            channels=self._config.channels,
            message_content=self._config.message_content,
        )
        if found is None:
            return
        # discord.py runs each event in a task of its own: a conversation's messages are
        # taken one after another, in the order they came (the lock is FIFO)
        async with self._order_of(found.conversation.key()):
            inbox = await self._inbox_when_attached()
            if inbox is None:
                return
            if found.needs_session and not await inbox.has_session(found.conversation):
                return
            where = (
                await self._thread_for(message, found) if found.start_thread else found.conversation
            )
            await self._hand_over(
                inbox,
                InboundMessage(
                    conversation=where,
                    actor=found.actor,
                    text=found.text,
                    message_id=found.message_id,
                    private=found.direct,
                ),
            )

    def _order_of(self, key: str) -> asyncio.Lock:
        lock = self._order.get(key)
        if lock is None:
            if len(self._order) >= _CARDS:
                for idle in [k for k, held in self._order.items() if not held.locked()]:
                    del self._order[idle]
            lock = self._order[key] = asyncio.Lock()
        return lock

    async def _hand_over(self, inbox: Inbox, message: InboundMessage) -> None:
        """The message to the gateway, tried again while it fails (a busy ledger); the
        person is told when it could not be taken."""
        delay = 0.25
        for attempt in range(1, TAKE_ATTEMPTS + 1):
            try:
                await inbox.on_message(message)
                return
            except Exception:
                if attempt == TAKE_ATTEMPTS:
                    log.exception("discord message %s not taken", message.message_id)
                    break
                await asyncio.sleep(delay)  # a back-off, not a wait for state
                delay = min(delay * 2, 5.0)
        with contextlib.suppress(PlatformError):
            await self.send_text(message.conversation, _BUSY)

    async def _thread_for(self, message: discord.Message, found: Heard) -> ConversationRef:
        """The thread made from the message that starts a session (the one made before, for
        a message given again); without the permission, the channel itself."""
        try:
            thread = await message.create_thread(name=clip(found.text.splitlines()[0], 90))
            return in_thread(found.conversation, str(thread.id))
        except discord.HTTPException as exc:
            if exc.code == _THREAD_EXISTS:
                return in_thread(found.conversation, str(message.id))
            log.info("discord: no thread made in %s (%s)", found.conversation.channel, exc.code)
            return found.conversation

    async def on_slash(self, interaction: discord.Interaction[Any], name: str, text: str) -> None:
        """Answered at once (only its person sees it); the command goes to the gateway, which
        answers it where it was typed (the help too: said once, there)."""
        await interaction.response.send_message(f"/{name}: sent.", ephemeral=True)
        inbox = await self._inbox_when_attached()
        if inbox is None:
            return
        place = place_of(interaction.channel, interaction.guild_id)
        user = interaction.user
        await self._hand_over(
            inbox,
            InboundMessage(
                conversation=conversation_of(place),
                actor=actor_of(str(user.id), user.name, roles_of(user)),
                text=command_text(name, text),
                message_id=f"command:{interaction.id}",
                private=interaction.guild_id is None,
            ),
        )

    # --- clicks and forms -----------------------------------------------------------------

    def _who_where(self, interaction: discord.Interaction[Any]) -> tuple[Actor, ConversationRef]:
        user = interaction.user
        place = place_of(interaction.channel, interaction.guild_id)
        return actor_of(str(user.id), user.name, roles_of(user)), conversation_of(place)

    async def on_button(self, interaction: discord.Interaction[Any], token: str) -> None:
        actor, where = self._who_where(interaction)
        action = InboundAction(conversation=where, actor=actor, token=token)
        if _choice(token) == "s":  # "Answer…": a modal must be the first response
            await self.open_page(interaction, token, 0)
            return
        answerable = await self._defer(interaction, thinking=False)
        inbox = await self._inbox_when_attached()
        if inbox is None:
            return
        ack = await inbox.on_action(action)  # decided even when it can no longer be answered
        if answerable:
            await self._followup(interaction, ack.text)

    async def on_unlisted_click(self, interaction: discord.Interaction[Any]) -> None:
        """A press of a button the message no longer carries (a screen not yet redrawn, or
        forged data): discord.py's DynamicItems only take buttons that are on the message,
        so it is taken here, and the core says what it means."""
        data: Any = interaction.data or {}
        custom = str(data.get("custom_id") or "")
        message = interaction.message
        listed = message is not None and any(
            getattr(child, "custom_id", None) == custom
            for row in message.components
            for child in getattr(row, "children", [])
        )
        if listed:
            return  # the DynamicItem takes it
        if custom.startswith(_PAGE_PREFIX):
            page, _, token = custom[len(_PAGE_PREFIX) :].partition(":")
            if page.isdigit() and token:
                await self.open_page(interaction, token, int(page))
        elif custom.startswith(MESSAGE_ID_PREFIX) and len(custom) <= CUSTOM_ID_MAX:
            await self.ask_message(interaction, custom[len(MESSAGE_ID_PREFIX) :])
        elif custom.startswith(CUSTOM_ID_PREFIX) and len(custom) <= CUSTOM_ID_MAX:
            await self.on_button(interaction, custom[len(CUSTOM_ID_PREFIX) :])

    async def _defer(self, interaction: discord.Interaction[Any], *, thinking: bool) -> bool:
        """Acknowledge at once; False when Discord no longer takes an answer (given again
        past its 3 s, or answered already): the click is still handed to the core, and the
        card's edit tells everyone what came of it."""
        try:
            await interaction.response.defer(ephemeral=True, thinking=thinking)
        except discord.HTTPException as exc:
            log.info("discord: interaction %s not answerable (%s)", interaction.id, exc.code)
            return False
        return True

    async def ask_message(self, interaction: discord.Interaction[Any], token: str) -> None:
        """A button that takes a message (Keep planning): may they decide? Then a modal for
        the message, which must be the first response; its submit is the press."""
        actor, where = self._who_where(interaction)
        action = InboundAction(conversation=where, actor=actor, token=token)
        inbox = self._inbox
        if inbox is None or self._stopped:
            await interaction.response.send_message(
                "The gateway is starting; try again.", ephemeral=True
            )
            return
        verdict = await inbox.may_answer(action)
        if not verdict.accepted:
            await interaction.response.send_message(verdict.text, ephemeral=True)
            return
        modal = ui.Modal(
            title="What should change?", custom_id=MESSAGE_ID_PREFIX + token, timeout=None
        )
        text: ui.TextInput[Any] = ui.TextInput(
            custom_id=_MESSAGE_INPUT,
            style=discord.TextStyle.paragraph,
            required=False,
            placeholder="What should the agent change?",
            max_length=MESSAGE_MAX,
        )
        modal.add_item(ui.Label(text="Your message (optional)", description=None, component=text))
        await interaction.response.send_modal(modal)

    async def _on_message_modal(self, interaction: discord.Interaction[Any], token: str) -> None:
        actor, where = self._who_where(interaction)
        typed = modal_values(interaction.data or {}).get(_MESSAGE_INPUT)
        message = typed.strip() if isinstance(typed, str) else ""
        answerable = await self._defer(interaction, thinking=True)
        inbox = await self._inbox_when_attached()
        if inbox is None:
            return
        ack = await inbox.on_action(
            InboundAction(conversation=where, actor=actor, token=token, message=message or None)
        )
        if answerable:
            await self._followup(interaction, ack.text)

    def _form_of(self, token: str) -> tuple[ConversationRef, Card, QuestionForm] | None:
        for where, card in reversed(self._cards.values()):
            if card.form is not None and card.form.submit_token == token:
                return where, card, card.form
        return None

    async def open_page(self, interaction: discord.Interaction[Any], token: str, page: int) -> None:
        """May they answer? Then page ``page`` of the form's modal, pre-filled with what they
        gave before."""
        actor, where = self._who_where(interaction)
        inbox = self._inbox
        if inbox is None or self._stopped:
            await interaction.response.send_message(
                "The gateway is starting; try again.", ephemeral=True
            )
            return
        verdict = await inbox.may_answer(
            InboundAction(conversation=where, actor=actor, token=token)
        )
        if not verdict.accepted:
            await interaction.response.send_message(verdict.text, ephemeral=True)
            return
        found = self._form_of(token)
        if found is None:
            await interaction.response.send_message(
                "This form is no longer open here.", ephemeral=True
            )
            return
        _, card, form = found
        drawn = build_page(
            form, page, title=card.title, draft=self.drafts.peek(token, actor.user_id)
        )
        await interaction.response.send_modal(_modal(drawn, token))

    async def on_modal(self, interaction: discord.Interaction[Any]) -> None:
        data: Any = interaction.data or {}
        custom = str(data.get("custom_id") or "")
        if custom.startswith(MESSAGE_ID_PREFIX):
            await self._on_message_modal(interaction, custom[len(MESSAGE_ID_PREFIX) :])
            return
        if not custom.startswith(CUSTOM_ID_PREFIX):
            return
        token = custom[len(CUSTOM_ID_PREFIX) :]
        actor, where = self._who_where(interaction)
        values = modal_values(data)
        found = self._form_of(token)
        if found is None:  # an earlier process's modal: the core says what became of it
            await self._defer(interaction, thinking=True)
            await self._hand_form(
                interaction,
                InboundForm(conversation=where, actor=actor, token=token, answers={}, private=True),
            )
            return
        _, card, form = found
        numbers = {
            int(key[1:].split(".")[0]) for key in values if re.fullmatch(r"q[0-9]+(\.other)?", key)
        }
        pages = pages_of(form)
        page_number = next((n for n, qs in enumerate(pages) if numbers & set(qs)), 0)
        page = build_page(form, page_number, title=card.title)
        draft = self.drafts.draft(token, actor)
        read = read_page(form, page, values, draft)
        if not read.complete:
            lines = [*read.refused]
            lines += [f"“{name}” needs an answer." for name in read.missing]
            view = ui.View(timeout=None)
            view.add_item(PageButton(page_number, token, "Answer again"))
            await interaction.response.send_message("\n".join(lines), view=view, ephemeral=True)
            return
        if page_number + 1 < len(pages):
            view = ui.View(timeout=None)
            view.add_item(PageButton(page_number + 1, token, "Next"))
            await interaction.response.send_message(
                f"Page {page_number + 1} of {len(pages)} taken.", view=view, ephemeral=True
            )
            return
        await self._defer(interaction, thinking=True)
        answers = answers_of(form, draft)
        self.drafts.done(token, actor.user_id)
        await self._hand_form(
            interaction,
            InboundForm(
                conversation=where, actor=actor, token=token, answers=answers, private=True
            ),
        )

    async def _hand_form(self, interaction: discord.Interaction[Any], form: InboundForm) -> None:
        inbox = await self._inbox_when_attached()
        if inbox is None:
            return
        ack = await inbox.on_form(form)
        await self._followup(interaction, ack.text)

    async def _followup(self, interaction: discord.Interaction[Any], text: str) -> None:
        if not text:
            return
        try:
            await interaction.followup.send(clip(text, CONTENT_MAX), ephemeral=True)
        except discord.HTTPException as exc:  # past 15 minutes: the card tells everyone
            log.info("discord: followup not sent (%s)", exc.code)

    # --- sending --------------------------------------------------------------------------

    def _channel(self, conversation: ConversationRef) -> discord.PartialMessageable:
        client = self._running_client_or_fail()
        return client.get_partial_messageable(int(conversation.thread or conversation.channel))

    def _lane(self, conversation: ConversationRef) -> str:
        return conversation.thread or conversation.channel

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        shown = self._shown_text(text)
        channel = self._channel(conversation)

        async def post() -> str:
            sent = await channel.send(shown, allowed_mentions=discord.AllowedMentions.none())
            return str(sent.id)

        message_id = await self._run(conversation, Priority.TEXT, post)
        self._remember(message_id, shown)
        self.turn_ends.sent(_turn_key(conversation), message_id)
        return MessageRef(conversation=conversation, message_id=message_id)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        shown = self._shown_text(text)
        if self._shown.get(ref.message_id) == shown:
            return EditResult.NOT_MODIFIED

        async def edit() -> EditResult:
            message = self._channel(ref.conversation).get_partial_message(int(ref.message_id))
            await message.edit(content=shown, allowed_mentions=discord.AllowedMentions.none())
            self._remember(ref.message_id, shown)
            self.turn_ends.edited(ref.message_id)
            return EditResult.EDITED

        return await self._edit(ref, Priority.STREAM, edit, "text")

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        drawn = render_card(card, approvers=await self._approvers_of(conversation))
        channel = self._channel(conversation)

        async def post() -> str:
            files = [
                discord.File(io.BytesIO(f.content.encode()), filename=f.name) for f in drawn.files
            ]
            view = _view(drawn)
            extra: dict[str, Any] = {"view": view} if view is not None else {}
            sent = await channel.send(
                drawn.content or None,
                embed=discord.Embed.from_dict(drawn.embed),
                files=files,
                allowed_mentions=_mentions(drawn),
                **extra,
            )
            return str(sent.id)

        message_id = await self._run(conversation, Priority.CARD, post)
        self._keep_card(message_id, conversation, card)
        self._remember(message_id, _drawn_key(drawn))
        self.turn_ends.sent(_turn_key(conversation), message_id)
        return MessageRef(conversation=conversation, message_id=message_id)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        before = self._cards.get(ref.message_id)
        if before is not None and before[1].form is not None and card.form is None:
            self.drafts.forget(before[1].form.submit_token)  # decided: drafts (secrets) go
        self._keep_card(ref.message_id, ref.conversation, card)

        async def edit() -> EditResult:
            newest = self._cards.get(ref.message_id, (ref.conversation, card))[1]
            drawn = render_card(newest)
            key = _drawn_key(drawn)
            if self._shown.get(ref.message_id) == key:
                return EditResult.NOT_MODIFIED
            message = self._channel(ref.conversation).get_partial_message(int(ref.message_id))
            await message.edit(
                content=None,
                embed=discord.Embed.from_dict(drawn.embed),
                view=_view(drawn),
                allowed_mentions=discord.AllowedMentions.none(),
            )
            self._remember(ref.message_id, key)
            return EditResult.EDITED

        return await self._edit(ref, Priority.CARD, edit, "card")

    async def _edit(
        self,
        ref: MessageRef,
        priority: Priority,
        edit: Callable[[], Awaitable[EditResult]],
        kind: str,
    ) -> EditResult:
        """An edit in its channel's lane; a thread archived since refuses it (50083): it is
        unarchived, then edited."""

        async def unarchive_then(edit_again: Callable[[], Awaitable[EditResult]]) -> EditResult:
            thread = ref.conversation.thread
            try:
                return await edit_again()
            except discord.HTTPException as exc:
                if exc.code != ARCHIVED_THREAD or thread is None:
                    raise
                client = self._running_client_or_fail()
                await client.http.edit_channel(int(thread), archived=False)
                return await edit_again()

        result: EditResult = await self._run(
            ref.conversation, priority, lambda: unarchive_then(edit), key=(kind, ref.message_id)
        )
        return result

    async def _approvers_of(self, conversation: ConversationRef) -> tuple[str, ...]:
        inbox = self._inbox
        if not isinstance(inbox, KnowsApprovers):
            return ()
        try:
            return await inbox.approvers(conversation)
        except Exception:
            log.exception("discord: the approvers of a card in %s not found", conversation.channel)
            return ()

    async def _run(
        self,
        conversation: ConversationRef,
        priority: Priority,
        call: Callable[[], Awaitable[Any]],
        *,
        key: Any = None,
    ) -> Any:
        if self._outbox is None:
            raise PlatformError("the Discord platform is not running")
        return await self._outbox.run(self._lane(conversation), priority, call, key=key)

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
        client = self._running_client_or_fail()
        try:
            dm = await client.create_dm(discord.Object(id=int(actor.user_id)))
        except (discord.HTTPException, ValueError) as exc:
            log.info("discord: no DM with %s (%s)", actor.user_id, exc)
            return None
        return ConversationRef(platform=PLATFORM, space=None, channel=str(dm.id))

    def spell_command(self, name: str) -> str:
        return f"/{name}"

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        """A reaction (:data:`QUEUED_REACTION`, ✍ as on Telegram and Slack) on the person's
        message, which notifies nobody and stays true once the message runs. A mention that
        made the thread is in the parent channel (the thread takes the message's id). No
        permission to react (50013): False, and the core says it in a short text."""
        client = self._running_client_or_fail()
        in_parent = conversation.thread is None or conversation.thread == message_id
        where = conversation.channel if in_parent else conversation.thread
        try:
            target = client.get_partial_messageable(int(where or conversation.channel))
            message = target.get_partial_message(int(message_id))
        except ValueError:
            return False

        async def react() -> bool:
            await message.add_reaction(QUEUED_REACTION)
            return True

        try:
            return bool(await self._run(conversation, Priority.TEXT, react))
        except PlatformError as exc:
            log.info("discord: queued mark not shown in %s: %s", conversation.channel, exc)
            return False

    async def turn_started(self, conversation: ConversationRef) -> None:
        self.turn_ends.started(_turn_key(conversation))
        if self._tasks is not None and not self._comeback.down and not self._stopped:
            self._tasks.create_task(self._typing(conversation))  # never holds the turn up

    async def _typing(self, conversation: ConversationRef) -> None:
        """ "typing…" for up to 10 s or until the bot's next message: a hint, best effort."""
        try:
            await self._channel(conversation).typing()
        except (discord.HTTPException, aiohttp.ClientError, PlatformError, ValueError) as exc:
            log.info("discord: no typing indicator in %s (%s)", conversation.channel, exc)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        line = self.turn_ends.ended(_turn_key(conversation), status)
        if line is not None:
            try:
                await self.send_text(conversation, line)
            except PlatformError as exc:
                log.info("discord turn end in %s not told: %s", conversation.channel, exc)

    # --- helpers --------------------------------------------------------------------------

    def _running_client_or_fail(self) -> _Client:
        if self._client is None:
            raise PlatformError("the Discord platform is not connected")
        return self._client

    def _shown_text(self, text: str) -> str:
        if not text.strip() or len(text) > self.limits.text_max_chars:
            raise PlatformError(f"text of {len(text)} characters cannot be sent to Discord")
        shown = discord_markdown(text)
        if len(shown) > CONTENT_MAX:
            log.warning("discord: a text of %d characters once escaped was cut", len(shown))
        return clip(shown, CONTENT_MAX)

    def _keep_card(self, message_id: str, conversation: ConversationRef, card: Card) -> None:
        self._cards.pop(message_id, None)
        self._cards[message_id] = (conversation, card)
        while len(self._cards) > _CARDS:
            self._cards.popitem(last=False)

    def _remember(self, message_id: str, shown: str) -> None:
        self._shown.pop(message_id, None)
        self._shown[message_id] = shown
        while len(self._shown) > _CARDS * 2:
            self._shown.popitem(last=False)


_COMMAND_HELP = {
    "new": "Start a new session here",
    "stop": "Stop the agent's turn",
    "resume": "Resume a session",
    "clear": "Forget this conversation's session",
    "status": "What the session is doing",
    "pending": "The requests waiting for a decision",
    "help": "What the gateway understands",
}


def _turn_key(conversation: ConversationRef) -> tuple[str, str | None]:
    return conversation.channel, conversation.thread


def _drawn_key(drawn: RenderedCard) -> str:
    return repr((drawn.embed, drawn.components))


def _mentions(drawn: RenderedCard) -> discord.AllowedMentions:
    allowed = drawn.allowed_mentions
    users = [discord.Object(id=int(u)) for u in allowed.get("users", [])]
    roles = [discord.Object(id=int(r)) for r in allowed.get("roles", [])]
    return discord.AllowedMentions(
        everyone=False, users=users or False, roles=roles or False, replied_user=False
    )


def _view(drawn: RenderedCard) -> ui.View | None:
    if not drawn.components:
        return None
    view = ui.View(timeout=None)
    for row_number, row in enumerate(drawn.components):
        for button in row["components"]:
            custom: str = button["custom_id"]
            item: ui.DynamicItem[ui.Button[Any]]
            if custom.startswith(MESSAGE_ID_PREFIX):
                token = custom[len(MESSAGE_ID_PREFIX) :]
                item = MessageButton(token, button["label"], button["style"])
            else:
                item = CardButton(custom[len(CUSTOM_ID_PREFIX) :], button["label"], button["style"])
            item.row = row_number
            view.add_item(item)
    return view


def _modal(page: Page, token: str) -> ui.Modal:
    modal = ui.Modal(title=page.title, custom_id=CUSTOM_ID_PREFIX + token, timeout=None)
    for item in page.inputs:
        if item.kind == "display":
            modal.add_item(ui.TextDisplay(item.text))
            continue
        component: ui.Item[Any]
        if item.kind == "text":
            component = ui.TextInput(
                custom_id=item.custom_id,
                style=discord.TextStyle.paragraph if item.paragraph else discord.TextStyle.short,
                required=item.required,
                default=item.value or None,
                placeholder=item.placeholder or None,
                max_length=item.max_length,
            )
        elif item.kind == "radio":
            component = ui.RadioGroup(
                custom_id=item.custom_id,
                required=item.required,
                options=[
                    discord.RadioGroupOption(
                        label=label,
                        value=value,
                        description=about or None,
                        default=value in item.defaults,
                    )
                    for label, value, about in item.options
                ],
            )
        elif item.kind == "checkbox":
            component = ui.CheckboxGroup(
                custom_id=item.custom_id,
                required=item.required,
                min_values=item.min_values,
                max_values=item.max_values,
                options=[
                    discord.CheckboxGroupOption(
                        label=label,
                        value=value,
                        description=about or None,
                        default=value in item.defaults,
                    )
                    for label, value, about in item.options
                ],
            )
        else:
            component = ui.Select(
                custom_id=item.custom_id,
                required=item.required,
                min_values=item.min_values,
                max_values=item.max_values,
                options=[
                    discord.SelectOption(
                        label=label,
                        value=value,
                        description=about or None,
                        default=value in item.defaults,
                    )
                    for label, value, about in item.options
                ],
            )
        modal.add_item(
            ui.Label(text=item.label, description=item.description or None, component=component)
        )
    return modal


_ = answers_by_buttons  # render decides which forms are buttons; kept for readers
