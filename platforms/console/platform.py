"""The local web console as a platform (platform name ``console``).

Make it, hand it to the gateway with the other platforms, and serve it around the gateway's
block, like every platform (DESIGN.md, Platforms)::

    console = ConsolePlatform(config.platforms.get("console", ConsoleConfig))
    async with console, Gateway(config, platforms={"console": console, ...}, launcher=...):
        ...

``async with console`` serves on ``settings.host:settings.port`` (port 0: a free one;
:attr:`url` says which: the bound address, or ``public_url`` behind a TLS proxy). Once it
serves and the gateway has attached itself (``Gateway.__aenter__`` calls :meth:`attach`),
whichever comes last, it prints the address people open with its access token once to the
terminal (``announce``; never through logging); until the gateway has attached, every page
answers 503. From :meth:`stop_input` (the gateway is stopping) every POST is refused with
503 and nothing reaches the gateway; pages and the events stream are served until the ledger
closes (then 503 too) and the console with it.

- **Conversations.** A console conversation is a page per session:
  ``ConversationRef("console", None, <routing channel>, "s-<session id>")`` for a session
  started elsewhere (the *mirror*, see :meth:`mirror_conversation`), ``"n-<random>"`` for one
  started from the console. The engine binds every session to its mirror
  (``Gateway.show_everywhere``), so the core sends the console the text, notices and card
  copies of every session on every platform, and a click on the console passes the FOREIGN
  check because the card is shown there.
- **Identity.** The console acts as ``settings.identity``: clicks, forms and messages go to
  the gateway's Inbox as that actor, and the same approver rules apply. It is a private
  surface (secret answers are collected in masked inputs, ``InboundForm(private=True)``).
- **Outbound.** Texts are kept in memory (:class:`~platforms.console.feed.Feed`); cards are
  drawn from the ledger on every page, so a card edit only has to tell live pages that
  something changed. The text of turns that began before the console was attached (an
  earlier gateway's) comes from the ledger's turn timelines (:attr:`since`).
- **Turns.** A turn's start and end tell live pages too: a page shows "running" as soon as
  the agent starts, before any text.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sys
from collections.abc import AsyncGenerator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

from aiohttp import web

from gateway.attachments import InboundAttachment
from gateway.cards import Card
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.errors import PlatformError
from gateway.platform import (
    EditResult,
    FileUpload,
    Inbox,
    MessageRef,
    PlatformLimits,
    gateway_speaks,
)
from gateway.render.commands import slash
from gateway.session_record import SessionRecord
from platforms.console.config import ConsoleConfig
from platforms.console.feed import Changes, Feed
from platforms.console.security import Guard, PublicAddress
from platforms.console.server import build_app
from platforms.console.token_file import TokenFile
from platforms.console.uploads import Uploads
from platforms.console.views import PLATFORM, is_notice, route_channel

if TYPE_CHECKING:
    from gateway.sessions.engine import Gateway

__all__ = ["CONSOLE_LIMITS", "FILE_MAX_BYTES", "ConsolePlatform"]

# a file the agent sends is kept in memory while among the latest messages shown (feed.py)
FILE_MAX_BYTES = 20 * 1024 * 1024

log = logging.getLogger(__name__)

CONSOLE_LIMITS = PlatformLimits(
    callback_max_bytes=64,
    text_max_chars=100_000,
    card_max_chars=100_000,  # a page shows a long diff whole; past this it is attached
    ack_deadline_seconds=10.0,
    min_edit_interval_seconds=0.25,
    has_private_surface=True,
    loose_cards=False,  # its pages draw the ledger's requests, never a command's card
)
SHUTDOWN_SECONDS = 2.0


class ConsolePlatform:
    name = PLATFORM

    def __init__(
        self,
        settings: ConsoleConfig,
        *,
        announce: TextIO | None = sys.stderr,
        token: str | None = None,
        limits: PlatformLimits = CONSOLE_LIMITS,
        words: Sequence[tuple[str, str]] = (),
        show_token: bool | None = None,
    ) -> None:
        self.settings = settings
        self.limits = limits
        # words the agent answers to, with what each does: the start page offers them (the
        # demo's scenarios), so a newcomer knows what to type
        self.words = tuple(words)
        identity = settings.actor()
        self.actor = Actor(
            platform=identity.platform, user_id=identity.user_id, display=identity.user_id
        )
        self.guard = Guard(token)
        # behind a TLS proxy: the only address the console answers to (security.py)
        self.public = (
            PublicAddress.parse(settings.public_url) if settings.public_url is not None else None
        )
        self.feed = Feed(id_prefix=f"{secrets.token_hex(3)}-")
        self.uploads = Uploads()  # files picked in the message box (uploads.py)
        self.changes = Changes()
        self._announce = announce
        # the token is printed only to a person's terminal: not to a file, a pipe or the
        # journal (systemd sets INVOCATION_ID), which are logs (None: decided so)
        self._show_token = show_token
        self._token_file: TokenFile | None = None
        self._gateway: Gateway | None = None
        self.since: datetime | None = None  # attached then (the gateway's clock)
        self._taking_input = False
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> ConsolePlatform:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Serve (pages answer 503 until the gateway attaches itself)."""
        runner = web.AppRunner(build_app(self), access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.host, self.settings.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            where = f"{self.settings.host}:{self.settings.port}"
            raise PlatformError(f"console cannot listen on {where}: {exc}") from exc
        self._runner = runner
        address = runner.addresses[0]
        self._port = int(address[1])
        self._announce_once()

    async def close(self) -> None:
        self.changes.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.uploads.close()

    def fetch_file(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
        """A file picked in the console, from its spool (uploads.py)."""
        return self.uploads.fetch(attachment)

    @property
    def port(self) -> int:
        if self._port is None:
            raise PlatformError("the console is not serving")
        return self._port

    @property
    def url(self) -> str:
        """The address people open, without the token: ``public_url`` if there is one, else
        the bound address, ``http://127.0.0.1:PORT/``."""
        if self.public is not None:
            return self.public.url
        host = self.settings.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/"

    @property
    def login_url(self) -> str:
        """The address with the access token: what is printed once at start."""
        return f"{self.url}?token={self.guard.token}"

    @property
    def cookie_name(self) -> str:
        return f"agw_console_{self.port}"  # cookies ignore ports: one name per console

    # --- the gateway ----------------------------------------------------------------------

    def attach(self, inbox: Inbox) -> None:
        from gateway.sessions.engine import Gateway

        if not isinstance(inbox, Gateway):
            # the console is a view of the gateway's ledger, not only a source of input
            raise PlatformError("the web console attaches only to the gateway itself")
        self._gateway = inbox
        self._keep_token_in(inbox.data_dir)
        # a problem a platform reports shows at the top of every open page at once
        inbox.platform_problems.listen(self.changes.bump)
        # the feed holds the text sent from now on; what came before is in the ledger
        self.since = inbox.clock()
        self._taking_input = True
        self._announce_once()

    def _keep_token_in(self, data_dir: Path) -> None:
        """The token in the data dir (token_file.py): kept across restarts with
        ``fixed_token``, else new at this start; `console-url` reads it either way."""
        tokens = TokenFile(data_dir)
        try:
            token = tokens.start(keep=self.settings.fixed_token)
        except OSError as exc:
            log.warning("console: the token is not kept in %s (%s)", data_dir, exc)
            return
        self._token_file = tokens
        self.guard = Guard(token, current=tokens.current)

    def _token_shown(self) -> bool:
        if self._show_token is not None:
            return self._show_token
        on_terminal = self._announce is not None and self._announce.isatty()
        return on_terminal and "INVOCATION_ID" not in os.environ

    def _announce_once(self) -> None:
        """The address with the token, once the console serves the gateway: a page opened
        from it works at once."""
        if self._runner is None or self._gateway is None:
            return
        if self._token_file is not None:
            with contextlib.suppress(OSError):
                self._token_file.served_at(self.url)
        if self._announce is None:
            return
        # printed once, to a terminal only: the token never goes through logging
        if self._token_shown():
            said = self.login_url
        else:
            said = f"{self.url} (`agent-gateway console-url --config …` prints it with its token)"
        print(f"agent-gateway console: {said}", file=self._announce, flush=True)
        self._announce = None

    async def stop_input(self) -> None:
        """The gateway is stopping: refuse every POST from now on (pages are still served)."""
        self._taking_input = False

    @property
    def taking_input(self) -> bool:
        return self._taking_input

    @property
    def gateway(self) -> Gateway | None:
        return self._gateway

    @property
    def auth_platform(self) -> str:
        """Whose auth table the console's identity is checked against (local, telegram...)."""
        return self.actor.platform

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return None  # every console page is the console's own person's

    def spell_command(self, name: str) -> str:
        return slash(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef:
        """The console page of a session started elsewhere (the engine binds it)."""
        channel = self._channel(session.project) or "mirror"
        return ConversationRef(
            platform=PLATFORM, space=None, channel=channel, thread=f"s-{session.id}"
        )

    def new_conversation(self, project: str) -> ConversationRef | None:
        """A fresh console conversation that the gateway routes to ``project``, or None."""
        channel = self._channel(project)
        if channel is None:
            return None
        nonce = secrets.token_hex(5)
        return ConversationRef(platform=PLATFORM, space=None, channel=channel, thread=f"n-{nonce}")

    def projects(self) -> list[str]:
        """Projects a conversation can be started in from the console."""
        if self._gateway is None:
            return []
        config = self._gateway.config
        return [name for name in config.projects if self._channel(name) is not None]

    def _channel(self, project: str) -> str | None:
        if self._gateway is None:
            return None
        return route_channel(self._gateway.config, project, self.auth_platform)

    # --- the platform contract ------------------------------------------------------------

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        self._check(conversation)
        # the gateway's notices and replies are labelled as its own (gateway_speaking)
        shown = self.feed.add(conversation, text=text, card=None, from_gateway=gateway_speaks())
        self.changes.bump()
        return MessageRef(conversation=conversation, message_id=shown.id)

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        """``SendsFiles``: the console keeps a file in memory while it is among the latest
        messages of its conversation (feed.py), so it takes files up to FILE_MAX_BYTES."""
        return FILE_MAX_BYTES

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        """A picture inline, anything else a download link (``/f/<id>``), with its caption."""
        self._check(conversation)
        shown = self.feed.add(conversation, text=upload.caption or "", card=None, file=upload)
        self.changes.bump()
        return MessageRef(conversation=conversation, message_id=shown.id)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        shown = self.feed.require(ref.message_id)
        if shown.text == text:
            return EditResult.NOT_MODIFIED
        shown.text = text
        shown.version += 1
        self.changes.bump()
        return EditResult.EDITED

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        self._check(conversation)
        shown = self.feed.add(conversation, text=None, card=card, notice=is_notice(card))
        self.changes.bump()
        return MessageRef(conversation=conversation, message_id=shown.id)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        shown = self.feed.get(ref.message_id)
        if shown is None:
            # a card an earlier console process showed: the page draws it from the ledger
            self.feed.adopt(ref.message_id, ref.conversation, card)
        elif shown.card == card:
            return EditResult.NOT_MODIFIED
        else:
            shown.card = card
            shown.version += 1
        self.changes.bump()
        return EditResult.EDITED

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return False  # the page has no mark on a message: a short notice says it

    async def turn_started(self, conversation: ConversationRef) -> None:
        self.changes.bump()  # the page shows the turn running before any text

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        self.changes.bump()  # the ledger has the turn's end: the page shows it

    def turn_moved_elsewhere(self, session_id: str) -> None:
        """A turn of a session another host runs moved (``ShowsTurnsElsewhere``): live
        pages draw it again, its text read from the ledger."""
        self.changes.bump()

    def _check(self, conversation: ConversationRef) -> None:
        if conversation.platform != PLATFORM:
            raise PlatformError(f"not a console conversation: {conversation.key()}")
