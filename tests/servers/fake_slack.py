"""A fake Slack on 127.0.0.1 (aiohttp) that the real slack-sdk and slack-bolt talk to.

``async with FakeSlack() as fake:`` serves the Web API under ``fake.base_url`` (what
``AsyncWebClient(base_url=...)`` takes), Socket Mode websockets at the URL
``apps.connections.open`` hands out, file uploads at the URL
``files.getUploadURLExternal`` hands out, and ``response_url`` targets. It is strict where
Slack is (docs.slack.dev):

- tokens: the bot token (``xoxb-``) for the Web API, the app token (``xapp-``) for
  ``apps.connections.open`` only (``not_allowed_token_type`` the other way round),
  ``not_authed`` without one, ``invalid_auth`` for an unknown one, ``token_revoked`` once
  :meth:`FakeSlack.revoke` was called;
- blocks and views as :mod:`tests.servers.slack_wire` checks them (``invalid_blocks``,
  ``invalid_arguments``, ``msg_too_long``, ``no_text``);
- a ``trigger_id`` opens one view (``exchanged_trigger_id`` after), within
  ``Pacing.trigger_ttl`` (3 s) of the interaction (``expired_trigger_id`` after; the fake's
  clock moves on with :meth:`FakeSlack.advance`, no sleeping);
- rates: ``chat.postMessage`` about one a second per channel, ``chat.update`` Tier 3 (50 a
  minute for the workspace), answered HTTP 429 + ``Retry-After`` (whole seconds), both
  windows in :class:`Pacing`; :meth:`FakeSlack.storm` answers every write 429 for a while,
  :meth:`FakeSlack.hold` every write in one channel until :meth:`FakeSlack.release`;
- permanent errors on demand: :meth:`archive` (``is_archived``), :meth:`forget_channel`
  (``channel_not_found``), :meth:`lock` (``cant_update_message``), :meth:`revoke`;
- Socket Mode: up to :data:`MAX_CONNECTIONS` (10) connections per app, ``hello`` on connect
  (an 11th is told ``disconnect`` ``too_many_websockets`` and closed); each envelope goes to
  ONE open connection chosen at random (``seed``; ``to=`` on :meth:`say`, :meth:`click`...
  chooses it for the first attempt) and must be acked within ``Pacing.ack_timeout`` (3 s);
  an unacked ``events_api`` envelope comes again with ``retry_attempt``/``retry_reason``
  after ``Pacing.event_retry_delays`` (Slack: at once, 1 min, 5 min), to another connection
  where there is one; an unacked interaction is not retried (the person sees it failed);
  :meth:`disconnect` sends ``disconnect`` (nothing more is sent on those connections);
  :meth:`go_down` drops every connection;
- HTTP mode (:meth:`use_request_url`): the same payloads POSTed to the app's URL, signed
  (``X-Slack-Signature`` v0, ``X-Slack-Request-Timestamp``), retried with
  ``X-Slack-Retry-Num``/``X-Slack-Retry-Reason``.

A test acts as people (:meth:`say`, :meth:`click`, :meth:`submit`, :meth:`dismiss`,
:meth:`slash`) and reads
what they see: :meth:`messages`/:meth:`replies` (each :class:`Posted` with its text, blocks
and earlier versions), :meth:`ephemerals`, :meth:`modals`, :attr:`files`; it waits with
:meth:`wait_for`. The bot's own posts and edits come back as ``message`` events, as on Slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import math
import random
import re
import secrets
import time
import urllib.parse
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from aiohttp import WSMsgType, web

from tests.servers.slack_people import (
    APP_ID,
    BOT_ID,
    BOT_USER_ID,
    TEAM_DOMAIN,
    TEAM_ID,
    VERIFICATION_TOKEN,
    Answer,
    Person,
    block_actions_payload,
    event_callback,
    message_event,
    required_missing,
    slash_command_payload,
    state_values,
    view_submission_payload,
)
from tests.servers.slack_records import (
    SLACKBOT,
    Attempt,
    Channel,
    Delivery,
    DeliveryKind,
    Ephemeral,
    Modal,
    Pacing,
    Posted,
    UploadedFile,
    Version,
)
from tests.servers.slack_wire import (
    SlackError,
    check_message,
    check_view,
    sign,
)

__all__ = [
    "ALICE",
    "APP_TOKEN",
    "BOB",
    "BOT_TOKEN",
    "BOT_USER_ID",
    "MAX_CONNECTIONS",
    "SCOPES",
    "TEAM_ID",
    "Channel",
    "Connection",
    "Delivery",
    "Ephemeral",
    "FakeSlack",
    "Hold",
    "Modal",
    "Pacing",
    "Person",
    "Posted",
    "UploadedFile",
    "Version",
]

T = TypeVar("T")
BOT_TOKEN = "xoxb-1-fake-bot-token"
APP_TOKEN = "xapp-1-A0FAKE-1-fake-app-token"
ALICE = Person("U0ALICE", "alice")
BOB = Person("U0BOB", "bob")
# the bot scopes an app has unless a test says otherwise (what the manifest asks for)
SCOPES = frozenset(
    "app_mentions:read channels:history groups:history im:history im:write chat:write"
    " commands files:write files:read users:read reactions:write".split()
)
# the scope each method needs (Slack answers missing_scope without it)
_NEEDS = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.delete": "chat:write",
    "conversations.open": "im:write",
    "users.info": "users:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "files.info": "files:read",
    "reactions.add": "reactions:write",
    "reactions.remove": "reactions:write",
}
# the emoji every workspace has that the gateway may use (Slack: invalid_name for others)
EMOJI = frozenset({"writing_hand", "hourglass_flowing_sand", "white_check_mark", "eyes"})
_PING = re.compile(r"<(?:@([UW][A-Z0-9]+)|!(channel|here|everyone))(?:\|[^>]*)?>")
_WRITES = frozenset(
    "chat.postMessage chat.update chat.postEphemeral chat.delete views.open views.update"
    " views.push files.getUploadURLExternal files.completeUploadExternal".split()
)


MAX_CONNECTIONS = 10  # Socket Mode connections of one app at once


@dataclass
class Connection:
    """A Socket Mode connection: its number (1, 2... in the order they opened) and the
    app's end of it (``peer``: address and port, to tell which process holds it)."""

    n: int
    ws: web.WebSocketResponse
    peer: tuple[str, int]
    caller: str | None = None  # who holds it (``FakeSlack.identify``), found when it opened
    leaving: bool = False  # told to disconnect: nothing more is sent on it


@dataclass
class Hold:
    """A Web API call held unanswered (:meth:`FakeSlack.hold_next`) until released."""

    method: str
    reached: asyncio.Event
    released: asyncio.Event
    caller: str | None = None  # who made the call (``FakeSlack.identify``)

    def release(self) -> None:
        self.released.set()


@dataclass
class _ResponseUrl:
    channel: str
    user: str
    message_ts: str | None
    thread_ts: str | None


class FakeSlack:
    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        pacing: Pacing | None = None,
        commands: tuple[str, ...] = ("/agent",),
        events: frozenset[str] = frozenset(
            {"message.channels", "message.groups", "message.im", "app_mention"}
        ),
        scopes: frozenset[str] = SCOPES,
        socket_mode: bool = True,
        seed: int = 0,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.pacing = pacing or Pacing()
        self.commands = commands
        self.events = events  # the app's event subscriptions
        self.scopes = scopes  # the bot token's scopes (x-oauth-scopes on every answer)
        self.socket_mode = socket_mode  # off: apps.connections.open is refused
        self.shared: dict[str, tuple[str, bytes]] = {}  # files people shared, by file id
        self.file_downloads: list[str] = []  # the file id of each url_private asked
        self.sign_in_instead = False  # url_private redirects to the sign-in page all the same
        self.port = 0
        self.people: dict[str, Person] = {}
        self.channels: dict[str, Channel] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.callers: list[str | None] = []  # who made each call of ``calls``
        # names the process at a peer (address, port) while its socket is open; else a
        # caller is its "address:port"
        self.identify: Callable[[tuple[str, int]], str | None] | None = None
        self.too_many_websockets = 0  # connections refused past MAX_CONNECTIONS
        self.random = random.Random(seed)  # which connection an envelope goes to
        self.pings: list[tuple[str, str]] = []  # (ts, user id or "!channel") a post notified
        self.too_many: list[tuple[str, str | None, int]] = []  # (method, channel, Retry-After)
        self.refused: list[tuple[str, str]] = []  # (method, error) of every refusal but 429s
        self.deliveries: list[Delivery] = []
        self.late_acks: list[str] = []  # envelope ids acked after their window
        self.ephemeral: list[Ephemeral] = []
        self.files: list[UploadedFile] = []
        self.connections_opened = 0
        self.down_at_next_card = False  # go down at the next card (a post with blocks), unposted
        self.cut = 0  # Web API calls cut while down
        self.request_url: str | None = None
        self.signing_secret = ""
        self._messages: dict[tuple[str, str], Posted] = {}
        self._modals: dict[str, Modal] = {}
        self._stacks: dict[str, list[Modal]] = defaultdict(list)
        self._triggers: dict[str, tuple[str, float, bool]] = {}  # id: (user, issued, used)
        self._tickets: set[str] = set()
        self._connections: list[Connection] = []
        self._holds: dict[str, Hold] = {}
        self._acks: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._post_times: dict[str, deque[float]] = defaultdict(deque)
        self._update_times: deque[float] = deque()
        self._storm_until = 0.0
        self._storm_retry_after = 1
        self._held: dict[str, int] = {}  # channel id: the Retry-After its writes are answered
        self._revoked: set[str] = set()
        self._down = False
        self._offset = 0.0
        self._ids = itertools.count(1)
        self._ts_base = int(time.time())
        self._ts_counter = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        for person in (ALICE, BOB):
            self.add_person(person)
        self.add_channel("C0GENERAL", "general", members={ALICE.id, BOB.id})

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._link)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        app.router.add_get("/files-pri/{file_id}/{name}", self._private_file)
        app.router.add_get("/signin", self._signin)
        app.router.add_post("/respond/{rid}", self._respond)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._http = aiohttp.ClientSession()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        for connection in list(self._connections):
            await connection.ws.close()
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``AsyncWebClient(base_url=...)`` takes (slack-sdk joins method names to it)."""
        return f"{self.origin}/api/"

    # --- the workspace --------------------------------------------------------------------

    def add_person(self, person: Person) -> Person:
        self.people[person.id] = person
        return person

    def add_channel(
        self,
        channel_id: str,
        name: str,
        *,
        members: set[str] | None = None,
        private: bool = False,
        bot_member: bool = True,
        shared: bool = False,
    ) -> Channel:
        """A channel the people in ``members`` (and the app, unless told) are in."""
        everyone = set(members or ())
        if bot_member:
            everyone.add(BOT_USER_ID)
        channel = Channel(
            channel_id, name, "group" if private else "channel", everyone, shared=shared
        )
        self.channels[channel_id] = channel
        return channel

    def dm(self, person: Person) -> Channel:
        """The direct-message channel between ``person`` and the app."""
        for channel in self.channels.values():
            if channel.kind == "im" and channel.peer == person.id:
                return channel
        channel = Channel(f"D0{person.id[2:]}", "", "im", {person.id, BOT_USER_ID}, person.id)
        self.channels[channel.id] = channel
        return channel

    def archive(self, channel_id: str) -> None:
        self.channels[channel_id].archived = True

    def forget_channel(self, channel_id: str) -> None:
        """The channel is deleted: every call about it is ``channel_not_found``."""
        self.channels[channel_id].gone = True

    def lock(self, message: Posted) -> None:
        """``chat.update`` of this message answers ``cant_update_message`` from now on."""
        message.locked = True

    def revoke(self, token: str | None = None) -> None:
        """The token (the bot's by default) answers ``token_revoked`` from now on."""
        self._revoked.add(token or self.bot_token)

    def storm(self, seconds: float, retry_after: int = 1) -> None:
        """Every write (posts, edits, views, uploads) is answered 429 for ``seconds``."""
        self._storm_until = self._now() + seconds
        self._storm_retry_after = retry_after

    def hold(self, channel_id: str, retry_after: int = 5) -> None:
        """Every write in the channel is answered 429 with ``retry_after`` until
        :meth:`release` (other channels as ever)."""
        self._held[channel_id] = retry_after

    def release(self, channel_id: str) -> None:
        self._held.pop(channel_id, None)

    def advance(self, seconds: float) -> None:
        """Move the fake's clock (trigger ages, rate windows) on without waiting."""
        self._offset += seconds

    async def go_down(self) -> None:
        """Slack unreachable: connections dropped, every request cut without an answer."""
        self._down = True
        for connection in list(self._connections):
            await connection.ws.close(code=1011)
        await self._notify()

    @property
    def down(self) -> bool:
        return self._down

    async def come_back(self) -> None:
        self._down = False
        await self._notify()

    async def use_request_url(self, url: str, signing_secret: str) -> bool:
        """Switch to HTTP mode, as the app's settings page does: Slack sends the URL a
        ``url_verification`` challenge first; True when it was answered (then deliveries go
        to ``url``, signed with ``signing_secret``)."""
        challenge = secrets.token_hex(16)
        body = json.dumps({"token": "fake", "challenge": challenge, "type": "url_verification"})
        status, text = await self._post_signed(url, body, "application/json", signing_secret, {})
        if status == 200 and challenge in text:
            self.request_url, self.signing_secret = url, signing_secret
            return True
        return False

    # --- what people do -------------------------------------------------------------------

    async def say(
        self,
        person: Person,
        channel_id: str,
        text: str,
        *,
        thread_ts: str | None = None,
        to: int | None = None,
        files: list[tuple[str, bytes]] | None = None,
    ) -> Posted:
        """``person`` writes ``text`` in a channel or DM (in a thread if ``thread_ts``);
        the app hears it as Slack would tell it (``message.*``, ``app_mention``), on the
        connection numbered ``to`` if given. With ``files`` (name, content) the message is
        a ``file_share``, each file served at its ``url_private`` (bot token and
        ``files:read`` required; without the scope a redirect to an HTML sign-in page)."""
        channel = self.channels[channel_id]
        if person.id not in channel.members:
            raise AssertionError(f"{person.name} is not in {channel.name or channel.id}")
        if thread_ts is not None:
            thread_ts = self._root(channel_id, thread_ts)
        posted = Posted(channel_id, self._ts(), text, [], person.id, thread_ts)
        self._messages[(channel_id, posted.ts)] = posted
        shared = [self._share(name, content) for name, content in files or []]
        if BOT_USER_ID in channel.members:
            subscription = {"channel": "message.channels", "group": "message.groups"}.get(
                channel.kind, "message.im"
            )
            parent = self._messages.get((channel_id, thread_ts)) if thread_ts else None
            kinds = ["message"] if subscription in self.events else []
            if f"<@{BOT_USER_ID}>" in text and channel.kind != "im":
                if "app_mention" in self.events:
                    kinds.append("app_mention")
            for kind in kinds:
                event = message_event(
                    person,
                    kind=kind,
                    channel=channel_id,
                    channel_type=channel.kind,
                    text=text,
                    ts=posted.ts,
                    thread_ts=thread_ts,
                    parent_user_id=parent.user if parent else None,
                )
                if shared:
                    event["subtype"] = "file_share"
                    event["files"] = shared
                self._deliver("events_api", event_callback(event, shared=channel.shared), to=to)
        await self._notify()
        return posted

    def seed(self, person: Person, channel_id: str, text: str) -> Posted:
        """A message ``person`` wrote in the channel before now: the app was never told of
        it (a thread to start talking in)."""
        posted = Posted(channel_id, self._ts(), text, [], person.id, None)
        self._messages[(channel_id, posted.ts)] = posted
        return posted

    async def click(
        self,
        person: Person,
        message: Posted,
        label: str,
        *,
        value: str | None = None,
        shown: dict[str, Any] | None = None,
        to: int | None = None,
    ) -> Delivery:
        """``person`` clicks the button ``label`` on ``message`` (confirming its dialog);
        with ``value``, a click forged to carry that value instead of the button's; with
        ``shown``, a button the person's screen still shows although the message no longer
        has it (a copy not yet redrawn); ``to``: the connection it goes to."""
        current = self._messages[(message.channel, message.ts)]
        if current.deleted:
            raise AssertionError("the message was deleted: there is nothing to click")
        if shown is not None:
            block, button = {"block_id": "shown-earlier"}, shown
        else:
            block, button = current.button(label)
        if value is not None:
            button = {**button, "value": value}
        channel = self.channels[current.channel]
        payload = block_actions_payload(
            person,
            channel=channel.json(),
            message=current.json(),
            block=block,
            element=button,
            trigger_id=self._trigger(person),
            response_url=self._response_url(current.channel, person, current.ts, current.thread_ts),
            action_ts=self._ts(),
        )
        return self._deliver("interactive", payload, to=to)

    async def submit(
        self,
        person: Person,
        answers: Mapping[str, Answer],
        *,
        modal: Modal | None = None,
        to: int | None = None,
    ) -> Delivery | None:
        """``person`` fills in their open modal (``answers`` by block_id or label) and
        submits it (``to``: the connection it goes to). A required input left empty stops it
        in Slack's client: the modal shows "Please complete this required field." and
        nothing is sent (None)."""
        modal = modal or self.modal(person)
        values = state_values(modal.blocks, answers)
        missing = required_missing(modal.blocks, values)
        if missing:
            modal.errors = dict.fromkeys(missing, "Please complete this required field.")
            await self._notify()
            return None
        modal.errors, modal.failed = {}, False
        payload = view_submission_payload(
            person, view=modal.view, values=values, trigger_id=self._trigger(person)
        )
        return self._deliver("interactive", payload, to=to)

    async def dismiss(self, person: Person) -> Delivery | None:
        """``person`` closes the modal in front of them (its X); the app hears
        ``view_closed`` only if the view asked (``notify_on_close``)."""
        modal = self.modal(person)
        modal.closed = True
        await self._notify()
        if not modal.view.get("notify_on_close"):
            return None
        payload = {
            "type": "view_closed",
            "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
            "user": person.payload_user(),
            "api_app_id": APP_ID,
            "token": VERIFICATION_TOKEN,
            "view": modal.view,
            "is_cleared": False,
            "is_enterprise_install": False,
        }
        return self._deliver("interactive", payload)

    async def slash(
        self,
        person: Person,
        channel_id: str,
        command: str,
        text: str = "",
        *,
        to: int | None = None,
    ) -> Delivery | None:
        """``person`` runs ``/command text`` in a channel or DM (Slack has none in threads).
        A command the app does not have gets Slackbot's "not a valid command" (None);
        ``to``: the connection it goes to."""
        channel = self.channels[channel_id]
        if command not in self.commands:
            self._slackbot(channel_id, person, f"{command} is not a valid command.")
            await self._notify()
            return None
        payload = slash_command_payload(
            person,
            channel=channel.json(),
            command=command,
            text=text,
            trigger_id=self._trigger(person),
            response_url=self._response_url(channel_id, person, None, None),
        )
        return self._deliver("slash_commands", payload, to=to)

    async def deliver_again(self, delivery: Delivery, *, to: int | None = None) -> Delivery:
        """Slack delivers the same thing again (as it does when it missed the ack)."""
        again = self._deliver(delivery.kind, delivery.payload, to=to)
        await self._notify()
        return again

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Tell every connection to go (``disconnect``): the SDK opens a new one first."""
        for connection in list(self._connections):
            connection.leaving = True
            with contextlib.suppress(ConnectionError):
                await connection.ws.send_json(
                    {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}}
                )

    # --- what people see ------------------------------------------------------------------

    def messages(self, channel_id: str) -> list[Posted]:
        """The channel's top-level messages, oldest first (deleted ones gone)."""
        return sorted(
            (
                m
                for (c, _), m in self._messages.items()
                if c == channel_id and m.thread_ts is None and not m.deleted
            ),
            key=lambda m: float(m.ts),
        )

    def replies(self, channel_id: str, thread_ts: str) -> list[Posted]:
        """The replies in a thread, oldest first."""
        return sorted(
            (
                m
                for (c, _), m in self._messages.items()
                if c == channel_id and m.thread_ts == thread_ts and not m.deleted
            ),
            key=lambda m: float(m.ts),
        )

    def message(self, channel_id: str, ts: str) -> Posted:
        return self._messages[(channel_id, ts)]

    def ephemerals(
        self, person: Person, channel_id: str | None = None, thread_ts: str | None = None
    ) -> list[Ephemeral]:
        """What only ``person`` was shown (in one channel, one thread), oldest first."""
        return [
            e
            for e in self.ephemeral
            if e.user == person.id
            and (channel_id is None or e.channel == channel_id)
            and (thread_ts is None or e.thread_ts == thread_ts)
        ]

    def files_in(self, channel_id: str, thread_ts: str | None = None) -> list[UploadedFile]:
        """The files shared in a channel (top level) or one of its threads, in order."""
        return [f for f in self.files if f.channel == channel_id and f.thread_ts == thread_ts]

    def modals(self, person: Person) -> list[Modal]:
        """``person``'s open modals, the one in front last."""
        return [m for m in self._stacks[person.id] if not m.closed]

    def modal(self, person: Person) -> Modal:
        open_ = self.modals(person)
        if not open_:
            raise AssertionError(f"{person.name} has no modal open")
        return open_[-1]

    @property
    def connected(self) -> int:
        """Socket Mode connections open now."""
        return len(self._connections)

    @property
    def connections(self) -> list[Connection]:
        """The Socket Mode connections open now, oldest first."""
        return list(self._connections)

    def hold_next(self, method: str) -> Hold:
        """The next call of ``method`` waits unanswered until :meth:`Hold.release` (Slack
        slow to answer); ``reached`` is set once it came."""
        hold = Hold(method, asyncio.Event(), asyncio.Event())
        self._holds[method] = hold
        return hold

    def calls_with_callers(self, method: str) -> list[tuple[dict[str, Any], str | None]]:
        """Each call of ``method`` with who made it (see ``identify``)."""
        return [
            (params, caller)
            for (name, params), caller in zip(self.calls, self.callers, strict=True)
            if name == method
        ]

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    def delivered(self, kind: str | None = None) -> list[Delivery]:
        """Deliveries (of one type: ``message``, ``block_actions``, ``/agent``...)."""
        return [d for d in self.deliveries if kind is None or d.type == kind]

    async def wait_for(self, probe: Callable[[], T | None], deadline: float = 30.0) -> T:
        """Wait until ``probe()`` returns something true (not None, 0, False, empty)."""
        async with asyncio.timeout(deadline), self._changed:
            while True:
                value = probe()
                if value:
                    return value
                await self._changed.wait()

    # --- the Web API ----------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        if self.down_at_next_card and method == "chat.postMessage":
            if (await _params_of(request)).get("blocks"):
                self._down, self.down_at_next_card = True, False
                for connection in list(self._connections):
                    await connection.ws.close(code=1011)
        if self._down:
            self.cut += 1
            assert request.transport is not None
            request.transport.close()
            await self._notify()  # a test waiting for a call cut is told
            return web.Response(status=503)
        params = await _params_of(request)
        token = _bearer(request) or str(params.pop("token", "") or "")
        self.calls.append((method, params))
        caller = self._caller(request)
        self.callers.append(caller)
        hold = self._holds.pop(method, None)
        if hold is not None:  # a slow answer, on purpose
            hold.caller = caller
            hold.reached.set()
            await self._notify()
            await hold.released.wait()
        # Slack names the token's scopes on every answer to a bot token
        scopes = (
            {"x-oauth-scopes": ",".join(sorted(self.scopes))} if token == self.bot_token else {}
        )
        try:
            self._authenticate(method, token)
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                raise SlackError("unknown_method")
            needed = _NEEDS.get(method)
            if needed is not None and needed not in self.scopes:
                raise SlackError(
                    "missing_scope",
                    extra={"needed": needed, "provided": ",".join(sorted(self.scopes))},
                )
            self._check_rate(method, params)
            result = handler(params)
        except SlackError as refusal:
            if refusal.status != 429:
                self.refused.append((method, refusal.error))
            return web.json_response(
                refusal.body(), status=refusal.status, headers={**refusal.headers, **scopes}
            )
        finally:
            await self._notify()
        return web.json_response({"ok": True, **result}, headers=scopes)

    def _authenticate(self, method: str, token: str) -> None:
        if not token:
            raise SlackError("not_authed")
        if token in self._revoked:
            raise SlackError("token_revoked")
        if token not in (self.bot_token, self.app_token):
            raise SlackError("invalid_auth")
        if (method == "apps.connections.open") != (token == self.app_token):
            raise SlackError("not_allowed_token_type")

    def _caller(self, request: web.Request) -> str | None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if not peer:
            return None
        address = (str(peer[0]), int(peer[1]))
        named = self.identify(address) if self.identify is not None else None
        return named or f"{address[0]}:{address[1]}"

    def _check_rate(self, method: str, params: dict[str, Any]) -> None:
        if method not in _WRITES:
            return
        now = self._now()
        channel = str(params.get("channel") or params.get("channel_id") or "") or None
        pacing = self.pacing
        wait = float(self._storm_retry_after) if now < self._storm_until else 0.0
        if channel is not None:
            wait = max(wait, float(self._held.get(self._resolve(channel), 0)))
        times: deque[float] | None = None
        limit, window = 0, 0.0
        if method == "chat.postMessage" and channel is not None:
            times = self._post_times[self._resolve(channel)]
            limit, window = pacing.post_limit, pacing.post_window
        elif method == "chat.update":
            times = self._update_times
            limit, window = pacing.update_limit, pacing.update_window
        if times is not None:
            while times and times[0] <= now - window:
                times.popleft()
            if len(times) >= limit:
                wait = max(wait, times[-limit] + window - now)
        if wait > 0:
            seconds = max(pacing.retry_after_floor, math.ceil(wait))
            self.too_many.append((method, channel, seconds))
            raise SlackError("ratelimited", status=429, headers={"Retry-After": str(seconds)})
        if method == "chat.update":  # a Tier counts calls; the post pace counts messages
            self._update_times.append(now)

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": "Fake Team",
            "user": "gateway",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        if not self.socket_mode:
            raise SlackError("socket_mode_disabled")  # on the app's page, Socket Mode is off
        ticket = secrets.token_hex(8)
        self._tickets.add(ticket)
        host = f"127.0.0.1:{self.port}"
        return {"url": f"ws://{host}/link/?ticket={ticket}&app_id={APP_ID}"}

    def _m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        person = self.people.get(str(p.get("user") or ""))
        if person is None:
            raise SlackError("user_not_found")
        return {"user": person.user_json()}

    def _m_conversations_open(self, p: dict[str, Any]) -> dict[str, Any]:
        """The DM with one person (``users``); a DM's id is not the person's id."""
        if p.get("channel"):
            return {"channel": {"id": self._channel(str(p["channel"])).id}}
        users = [u for u in str(p.get("users") or "").split(",") if u]
        if not users:
            raise SlackError("users_list_not_supplied")
        if len(users) > 1:
            raise SlackError("not_supported")  # group DMs: the gateway opens none
        person = self.people.get(users[0])
        if person is None:
            raise SlackError("user_not_found")
        known = any(c.kind == "im" and c.peer == person.id for c in self.channels.values())
        channel = self.dm(person)
        return {"channel": {"id": channel.id}, "already_open": known, "no_op": known}

    def _m_conversations_info(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"channel": self._channel(str(p.get("channel") or "")).json()}

    def _m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._writable(str(p.get("channel") or ""))
        text = str(p.get("text") or "")
        check_message(p.get("blocks"), text)
        thread_ts = p.get("thread_ts")
        if thread_ts:
            thread_ts = self._root(channel.id, str(thread_ts))
        posted = Posted(
            channel.id, self._ts(), text, _with_ids(p.get("blocks")), BOT_USER_ID, thread_ts
        )
        self._messages[(channel.id, posted.ts)] = posted
        self._post_times[channel.id].append(self._now())
        self._ping(posted, [text, *_mrkdwn_texts(p.get("blocks"))])
        self._echo(channel, posted.json())
        return {"channel": channel.id, "ts": posted.ts, "message": posted.json()}

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._writable(str(p.get("channel") or ""), member=False)
        posted = self._messages.get((channel.id, str(p.get("ts") or "")))
        if posted is None or posted.deleted:
            raise SlackError("message_not_found")
        if not posted.from_bot or posted.locked:
            raise SlackError("cant_update_message")
        text = str(p["text"]) if p.get("text") is not None else posted.text
        blocks = p["blocks"] if p.get("blocks") is not None else posted.blocks
        check_message(blocks, text)
        before = posted.json()
        posted.edits.append(Version(posted.text, posted.blocks))
        posted.text, posted.blocks = text, _with_ids(blocks)
        after = posted.json()
        self._echo(channel, after, subtype="message_changed", previous=before)
        return {"channel": channel.id, "ts": posted.ts, "text": text, "message": after}

    def _m_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._writable(str(p.get("channel") or ""))
        user = str(p.get("user") or "")
        if user not in self.people:
            raise SlackError("user_not_found")
        if user not in channel.members:
            raise SlackError("user_not_in_channel")
        text = str(p.get("text") or "")
        check_message(p.get("blocks"), text)
        thread_ts = str(p["thread_ts"]) if p.get("thread_ts") else None
        ts = self._ts()
        blocks = _with_ids(p.get("blocks"))
        self.ephemeral.append(Ephemeral(channel.id, user, text, blocks, thread_ts, ts))
        return {"message_ts": ts}

    def _m_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._writable(str(p.get("channel") or ""), member=False)
        posted = self._messages.get((channel.id, str(p.get("ts") or "")))
        if posted is None or posted.deleted:
            raise SlackError("message_not_found")
        if not posted.from_bot:
            raise SlackError("cant_delete_message")
        posted.deleted = True
        self._echo(channel, None, subtype="message_deleted", previous=posted.json())
        return {"channel": channel.id, "ts": posted.ts}

    def _m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        posted, name = self._reactable(p)
        users = posted.reactions.setdefault(name, [])
        if BOT_USER_ID in users:
            raise SlackError("already_reacted")
        if len(posted.reactions) > 23 and not users:
            raise SlackError("too_many_reactions")
        users.append(BOT_USER_ID)
        return {}

    def _m_reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        posted, name = self._reactable(p)
        users = posted.reactions.get(name, [])
        if BOT_USER_ID not in users:
            raise SlackError("no_reaction")
        users.remove(BOT_USER_ID)
        if not users:
            del posted.reactions[name]
        return {}

    def _reactable(self, p: dict[str, Any]) -> tuple[Posted, str]:
        """The message ``channel``/``timestamp`` and the emoji ``name`` (without colons)."""
        if not p.get("channel") or not p.get("timestamp"):
            raise SlackError("no_item_specified")
        channel = self._writable(str(p["channel"]))
        posted = self._messages.get((channel.id, str(p["timestamp"])))
        if posted is None or posted.deleted:
            raise SlackError("message_not_found")
        name = str(p.get("name") or "")
        if name not in EMOJI:
            raise SlackError("invalid_name")
        return posted, name

    def _m_views_open(self, p: dict[str, Any]) -> dict[str, Any]:
        view = p.get("view")
        check_view(view)
        assert isinstance(view, dict)
        user = self._exchange(p.get("trigger_id"))
        for earlier in self._stacks[user]:
            earlier.closed = True  # a new root view replaces what was open
        modal = self._new_modal(user, view)
        self._stacks[user] = [modal]
        return {"view": modal.view}

    def _m_views_push(self, p: dict[str, Any]) -> dict[str, Any]:
        view = p.get("view")
        check_view(view)
        assert isinstance(view, dict)
        user = self._exchange(p.get("trigger_id"))
        stack = self.modals(self.people[user])
        if not stack:
            raise SlackError("not_found")
        if len(stack) >= 3:
            raise SlackError("push_limit_reached")
        modal = self._new_modal(user, view, previous=stack[-1].id, root=stack[0].id)
        self._stacks[user].append(modal)
        return {"view": modal.view}

    def _m_views_update(self, p: dict[str, Any]) -> dict[str, Any]:
        view = p.get("view")
        check_view(view)
        assert isinstance(view, dict)
        modal = self._modals.get(str(p.get("view_id") or ""))
        if modal is None and p.get("external_id"):
            found = [m for m in self._modals.values() if m.external_id == p["external_id"]]
            modal = found[0] if found else None
        if modal is None or modal.closed:
            raise SlackError("not_found")
        if p.get("hash") and p["hash"] != modal.hash:
            raise SlackError("hash_conflict")
        self._replace_view(modal, view)
        return {"view": modal.view}

    def _share(self, name: str, content: bytes) -> dict[str, Any]:
        """A file a person shares: kept, and described as a ``file_share`` event does."""
        file_id = f"F0SHARE{len(self.shared) + 1:04d}"
        self.shared[file_id] = (name, content)
        url = f"{self.origin}/files-pri/{file_id}/{urllib.parse.quote(name, safe='')}"
        shared: dict[str, Any] = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": "application/octet-stream",
            "size": len(content),
            "url_private": url,
            "url_private_download": f"{url}?download=1",
        }
        if name.startswith("audio_message"):  # a clip recorded in Slack, as Slack shares it
            shared.update(mimetype="audio/mp4", subtype="slack_audio", duration_ms=3200)
        return shared

    def _m_files_info(self, p: dict[str, Any]) -> dict[str, Any]:
        file_id = str(p.get("file") or "")
        if file_id not in self.shared:
            raise SlackError("file_not_found")
        name, content = self.shared[file_id]
        url = f"{self.origin}/files-pri/{file_id}/{urllib.parse.quote(name, safe='')}"
        return {
            "file": {
                "id": file_id,
                "name": name,
                "size": len(content),
                "url_private": url,
                "url_private_download": f"{url}?download=1",
            }
        }

    async def _private_file(self, request: web.Request) -> web.StreamResponse:
        """``url_private``: the file for the bot token with ``files:read``; for anyone else
        Slack's redirect to its sign-in page (an HTML page, not the file)."""
        file_id = request.match_info["file_id"]
        self.file_downloads.append(file_id)
        await self._notify()
        allowed = _bearer(request) == self.bot_token and "files:read" in self.scopes
        if self.sign_in_instead or not allowed:
            raise web.HTTPFound(f"{self.origin}/signin?redir={urllib.parse.quote(request.path)}")
        if file_id not in self.shared:
            return web.Response(status=404)
        return web.Response(body=self.shared[file_id][1], content_type="application/octet-stream")

    async def _signin(self, request: web.Request) -> web.Response:
        return web.Response(
            text="<html><body>Sign in to Slack</body></html>", content_type="text/html"
        )

    def _m_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        try:
            length = int(p.get("length") or 0)
        except ValueError:
            raise SlackError("invalid_arguments") from None
        name = str(p.get("filename") or "")
        if not name or length <= 0:
            raise SlackError("invalid_arguments")
        upload = UploadedFile(f"F{next(self._ids):08d}", name, length)
        self.files.append(upload)
        return {"upload_url": f"{self.origin}/upload/v1/{upload.id}", "file_id": upload.id}

    def _m_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        wanted = p.get("files")
        if isinstance(wanted, str):
            wanted = json.loads(wanted)
        if not isinstance(wanted, list) or not wanted:
            raise SlackError("invalid_arguments")
        by_id = {f.id: f for f in self.files}
        done: list[UploadedFile] = []
        for item in wanted:
            upload = by_id.get(str(item.get("id")))
            if upload is None or upload.content is None:
                raise SlackError("file_not_found")
            upload.title = str(item.get("title") or upload.name)
            done.append(upload)
        channel_id = p.get("channel_id") or p.get("channels")
        if channel_id:
            channel = self._writable(str(channel_id).split(",")[0])
            thread_ts = str(p["thread_ts"]) if p.get("thread_ts") else None
            if thread_ts:
                thread_ts = self._root(channel.id, thread_ts)
            comment = str(p.get("initial_comment") or "")
            for upload in done:
                upload.channel, upload.thread_ts, upload.comment = channel.id, thread_ts, comment
            posted = Posted(channel.id, self._ts(), comment, [], BOT_USER_ID, thread_ts)
            posted.files = done
            self._messages[(channel.id, posted.ts)] = posted
            self._echo(channel, posted.json(), subtype="file_share")
        return {"files": [f.json() for f in done]}

    # --- checks and state -----------------------------------------------------------------

    def _ping(self, posted: Posted, texts: list[str]) -> None:
        """A new message notifies the people its mrkdwn mentions (``<@U…>``) and, for
        ``<!channel>``, ``<!here>`` or ``<!everyone>``, everyone there (plain_text is never
        parsed), each once however often it names them (in the ``text`` and the blocks
        alike); an edit notifies nobody."""
        for text in texts:
            for match in _PING.finditer(text):
                ping = (posted.ts, match.group(1) or f"!{match.group(2)}")
                if ping not in self.pings:
                    self.pings.append(ping)

    def _resolve(self, channel_id: str) -> str:
        """A user id names the DM with them (chat.postMessage allows it)."""
        if channel_id in self.people:
            return self.dm(self.people[channel_id]).id
        return channel_id

    def _channel(self, channel_id: str) -> Channel:
        channel = self.channels.get(self._resolve(channel_id))
        if channel is None or channel.gone:
            raise SlackError("channel_not_found")
        return channel

    def _writable(self, channel_id: str, *, member: bool = True) -> Channel:
        channel = self._channel(channel_id)
        if channel.archived:
            raise SlackError("is_archived")
        if member and BOT_USER_ID not in channel.members:
            raise SlackError("not_in_channel")
        return channel

    def _root(self, channel_id: str, ts: str) -> str:
        """Replying to a reply replies in its thread, as Slack does."""
        parent = self._messages.get((channel_id, ts))
        return parent.thread_ts if parent is not None and parent.thread_ts else ts

    def _now(self) -> float:
        return time.monotonic() + self._offset

    def _ts(self) -> str:
        return f"{self._ts_base}.{next(self._ts_counter):06d}"

    def _trigger(self, person: Person) -> str:
        trigger = f"{next(self._ids)}.{int(time.time())}.{secrets.token_hex(16)}"
        self._triggers[trigger] = (person.id, self._now(), False)
        return trigger

    def _exchange(self, trigger_id: Any) -> str:
        """The person a trigger opens a view for; it cannot be used again."""
        found = self._triggers.get(str(trigger_id or ""))
        if found is None:
            raise SlackError("invalid_trigger_id")
        user, issued, used = found
        if used:
            raise SlackError("exchanged_trigger_id")
        if self._now() - issued > self.pacing.trigger_ttl:
            raise SlackError("expired_trigger_id")
        self._triggers[str(trigger_id)] = (user, issued, True)
        return user

    def _new_modal(
        self, user: str, view: dict[str, Any], *, previous: str | None = None, root: str = ""
    ) -> Modal:
        view_id = f"V{next(self._ids):08d}"
        modal = Modal(view_id, user, {}, "", external_id=view.get("external_id"))
        self._modals[view_id] = modal
        self._replace_view(modal, view, previous=previous, root=root or view_id)
        return modal

    def _replace_view(
        self,
        modal: Modal,
        view: dict[str, Any],
        *,
        previous: str | None = None,
        root: str | None = None,
    ) -> None:
        if modal.view:
            modal.versions.append(modal.view)
        modal.hash = f"{int(time.time())}.{secrets.token_hex(4)}"
        old = modal.view
        modal.view = {
            "id": modal.id,
            "team_id": TEAM_ID,
            "type": "modal",
            "private_metadata": "",
            "callback_id": "",
            "external_id": "",
            "clear_on_close": False,
            "notify_on_close": False,
            "close": None,
            "submit": None,
            **copy.deepcopy(view),
            "blocks": _with_ids(view.get("blocks")),
            "state": {"values": {}},
            "hash": modal.hash,
            "previous_view_id": previous if previous is not None else old.get("previous_view_id"),
            "root_view_id": root if root is not None else old.get("root_view_id"),
            "app_id": APP_ID,
            "app_installed_team_id": TEAM_ID,
            "bot_id": BOT_ID,
        }
        modal.errors = {}

    def _response_url(
        self, channel_id: str, person: Person, message_ts: str | None, thread_ts: str | None
    ) -> str:
        rid = secrets.token_hex(8)
        self._response_urls[rid] = _ResponseUrl(channel_id, person.id, message_ts, thread_ts)
        return f"{self.origin}/respond/{rid}"

    def _slackbot(self, channel_id: str, person: Person, text: str) -> None:
        self.ephemeral.append(
            Ephemeral(channel_id, person.id, text, [], None, self._ts(), sender=SLACKBOT)
        )

    def _echo(
        self,
        channel: Channel,
        message: dict[str, Any] | None,
        *,
        subtype: str | None = None,
        previous: dict[str, Any] | None = None,
    ) -> None:
        """Tell the app about its own post, edit or deletion, as Slack does."""
        subscription = {"channel": "message.channels", "group": "message.groups"}.get(
            channel.kind, "message.im"
        )
        if subscription not in self.events:
            return
        ts = self._ts()
        event: dict[str, Any]
        if subtype in ("message_changed", "message_deleted"):
            event = {"type": "message", "subtype": subtype, "hidden": True, "ts": ts}
            if message is not None:
                event["message"] = message
            if previous is not None:
                event["previous_message"] = previous
                if subtype == "message_deleted":
                    event["deleted_ts"] = previous["ts"]
        else:
            assert message is not None
            event = dict(message)
            if subtype:
                event["subtype"] = subtype
        event.update(channel=channel.id, event_ts=ts, channel_type=channel.kind)
        self._deliver("events_api", event_callback(event, shared=channel.shared))

    # --- delivering to the app ------------------------------------------------------------

    def _deliver(
        self, kind: DeliveryKind, payload: dict[str, Any], *, to: int | None = None
    ) -> Delivery:
        delivery = Delivery(kind, payload, to=to)
        self.deliveries.append(delivery)
        task = asyncio.create_task(self._run_delivery(delivery))  # ended in __aexit__
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return delivery

    async def _run_delivery(self, delivery: Delivery) -> None:
        delays = self.pacing.event_retry_delays if delivery.kind == "events_api" else ()
        for number in range(len(delays) + 1):
            if number:
                await asyncio.sleep(delays[number - 1])
            response = await self._attempt(delivery, number)
            if delivery.attempts[-1].acked:
                delivery.state, delivery.response = "acked", response
                self._on_ack(delivery, response)
                break
        else:
            delivery.state = "failed"
            self._on_unacked(delivery)
        delivery._done.set()
        await self._notify()

    async def _attempt(self, delivery: Delivery, number: int) -> dict[str, Any] | None:
        envelope_id = secrets.token_hex(16)
        timeout = self.pacing.ack_timeout
        if self.request_url is not None:
            attempt = Attempt(number, envelope_id, "http")
            delivery.attempts.append(attempt)
            await self._notify()
            return await self._attempt_http(delivery, attempt)
        attempt = Attempt(number, envelope_id, "socket")
        tried = {a.connection for a in delivery.attempts}
        delivery.attempts.append(attempt)
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id,
            "type": delivery.kind,
            "payload": delivery.payload,
            "accepts_response_payload": delivery.kind != "events_api",
        }
        if delivery.kind == "events_api":
            envelope["retry_attempt"] = number
            envelope["retry_reason"] = "timeout" if number else ""
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = future
        try:
            async with asyncio.timeout(timeout):
                connection = await self.wait_for(
                    lambda: self._choose(delivery.to if not number else None, tried), timeout
                )
                attempt.connection = connection.n
                await connection.ws.send_json(envelope)
                await self._notify()
                response = await future
            attempt.acked = True
            return response
        except (TimeoutError, ConnectionError):
            if not future.done():
                future.cancel()  # an ack after this is late (late_acks)
            return None

    def _choose(self, to: int | None, tried: set[int | None]) -> Connection | None:
        """The connection an envelope goes to: ``to`` if given, else one at random, one
        not tried for it yet where there is one (None: none open now)."""
        live = [c for c in self._connections if not c.leaving and not self._down]
        if to is not None:
            return next((c for c in live if c.n == to), None)
        fresh = [c for c in live if c.n not in tried] or live
        return self.random.choice(fresh) if fresh else None

    async def _attempt_http(self, delivery: Delivery, attempt: Attempt) -> dict[str, Any] | None:
        assert self.request_url is not None
        if delivery.kind == "events_api":
            body, content_type = json.dumps(delivery.payload), "application/json"
        elif delivery.kind == "interactive":
            body = urllib.parse.urlencode({"payload": json.dumps(delivery.payload)})
            content_type = "application/x-www-form-urlencoded"
        else:
            body = urllib.parse.urlencode(delivery.payload)
            content_type = "application/x-www-form-urlencoded"
        headers: dict[str, str] = {}
        if attempt.number:
            previous = delivery.attempts[-2].status
            headers["X-Slack-Retry-Num"] = str(attempt.number)
            headers["X-Slack-Retry-Reason"] = "http_timeout" if previous is None else "http_error"
        try:
            async with asyncio.timeout(self.pacing.ack_timeout):
                status, text = await self._post_signed(
                    self.request_url, body, content_type, self.signing_secret, headers
                )
        except TimeoutError:
            return None
        attempt.status = status
        if status != 200:
            return None
        attempt.acked = True
        if not text:
            return None
        try:
            decoded = json.loads(text)
        except ValueError:
            return {"text": text}
        return decoded if isinstance(decoded, dict) else None

    async def _post_signed(
        self, url: str, body: str, content_type: str, secret: str, headers: dict[str, str]
    ) -> tuple[int, str]:
        assert self._http is not None
        stamp = str(int(time.time()))
        signed = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": sign(secret, stamp, body),
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **headers,
        }
        try:
            async with self._http.post(url, data=body.encode(), headers=signed) as reply:
                return reply.status, await reply.text()
        except aiohttp.ClientError:
            return 0, ""

    def _on_ack(self, delivery: Delivery, response: dict[str, Any] | None) -> None:
        payload = delivery.payload
        if delivery.kind == "slash_commands":
            if response and (response.get("text") or response.get("blocks")):
                channel = payload["channel_id"]
                text = str(response.get("text") or "")
                blocks = _with_ids(response.get("blocks"))
                if response.get("response_type") == "in_channel":
                    posted = Posted(channel, self._ts(), text, blocks, BOT_USER_ID)
                    self._messages[(channel, posted.ts)] = posted
                else:
                    self.ephemeral.append(
                        Ephemeral(channel, payload["user_id"], text, blocks, None, self._ts())
                    )
        elif delivery.kind == "interactive" and payload["type"] == "view_submission":
            modal = self._modals[payload["view"]["id"]]
            action = (response or {}).get("response_action")
            if action == "errors":
                modal.errors = dict((response or {}).get("errors") or {})
            elif action in ("update", "push"):
                view = (response or {}).get("view")
                try:
                    check_view(view)
                except SlackError as refusal:
                    self.refused.append((f"response_action {action}", refusal.error))
                    modal.failed = True
                    return
                assert isinstance(view, dict)
                if action == "update":
                    self._replace_view(modal, view)
                else:
                    stack = self._stacks[modal.user]
                    stack.append(self._new_modal(modal.user, view, previous=modal.id))
            elif action == "clear":
                for open_modal in self._stacks[modal.user]:
                    open_modal.closed = True
            else:
                modal.closed = True

    def _on_unacked(self, delivery: Delivery) -> None:
        """What a person sees when the app did not answer in time."""
        payload = delivery.payload
        if delivery.kind == "slash_commands":
            person = self.people[payload["user_id"]]
            self._slackbot(
                payload["channel_id"],
                person,
                f'{payload["command"]} failed with the error "operation_timeout"',
            )
        elif delivery.kind == "interactive" and payload["type"] == "view_submission":
            self._modals[payload["view"]["id"]].failed = True

    # --- Socket Mode ----------------------------------------------------------------------

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if self._down or ticket not in self._tickets:
            return web.Response(status=401 if not self._down else 503)
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        if len(self._connections) >= MAX_CONNECTIONS:
            self.too_many_websockets += 1
            with contextlib.suppress(ConnectionError):
                await ws.send_json(
                    {
                        "type": "disconnect",
                        "reason": "too_many_websockets",
                        "debug_info": {"host": "fake"},
                    }
                )
            await ws.close()
            await self._notify()
            return ws
        self.connections_opened += 1
        peer = request.transport.get_extra_info("peername") if request.transport else None
        address = (str(peer[0]), int(peer[1])) if peer else ("", 0)
        connection = Connection(self.connections_opened, ws, address, self._caller(request))
        self._connections.append(connection)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._connections),
                "debug_info": {"host": "fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
        )
        await self._notify()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._received(message.data)
        finally:
            self._connections.remove(connection)
            await self._notify()
        return ws

    def _received(self, data: str) -> None:
        try:
            ack = json.loads(data)
        except ValueError:
            return
        if not isinstance(ack, dict) or "envelope_id" not in ack:
            return
        envelope_id = str(ack["envelope_id"])
        future = self._acks.pop(envelope_id, None)
        if future is None or future.done():
            self.late_acks.append(envelope_id)
            return
        payload = ack.get("payload")
        future.set_result(payload if isinstance(payload, dict) else None)

    # --- uploads and response_url ---------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        by_id = {f.id: f for f in self.files}
        upload = by_id.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="file not found")
        data = await request.read()
        upload.content = data
        await self._notify()
        return web.Response(text=f"OK - {len(data)}")

    async def _respond(self, request: web.Request) -> web.Response:
        target = self._response_urls.get(request.match_info["rid"])
        if target is None:
            return web.Response(status=404, text="no_response_url")
        body = await request.json()
        text = str(body.get("text") or "")
        blocks = _with_ids(body.get("blocks"))
        message = (
            self._messages.get((target.channel, target.message_ts)) if target.message_ts else None
        )
        try:
            if body.get("delete_original") and message is not None:
                message.deleted = True
            elif body.get("replace_original") and message is not None:
                check_message(blocks, text)
                message.edits.append(Version(message.text, message.blocks))
                message.text, message.blocks = text, blocks
            elif body.get("response_type") == "in_channel":
                check_message(blocks, text)
                posted = Posted(
                    target.channel, self._ts(), text, blocks, BOT_USER_ID, target.thread_ts
                )
                self._messages[(target.channel, posted.ts)] = posted
            else:
                check_message(blocks, text)
                self.ephemeral.append(
                    Ephemeral(
                        target.channel, target.user, text, blocks, target.thread_ts, self._ts()
                    )
                )
        except SlackError as refusal:
            return web.json_response(refusal.body(), status=400)
        finally:
            await self._notify()
        return web.Response(text="ok")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def _with_ids(blocks: Any) -> list[dict[str, Any]]:
    """The blocks as Slack stores them: a block_id on every block, an action_id on every
    interactive element (Slack makes them up where the app gave none)."""
    out: list[dict[str, Any]] = copy.deepcopy(blocks) if isinstance(blocks, list) else []
    for block in out:
        block.setdefault("block_id", secrets.token_urlsafe(4))
        elements = [block.get("accessory"), block.get("element")]
        if block.get("type") == "actions":
            elements.extend(block.get("elements") or [])
        for element in elements:
            if isinstance(element, dict) and element.get("type") not in (
                None,
                "image",
                "plain_text",
                "mrkdwn",
            ):
                element.setdefault("action_id", secrets.token_urlsafe(4))
    return out


def _mrkdwn_texts(found: Any) -> list[str]:
    """Every mrkdwn text object's text in blocks (what Slack parses for mentions)."""
    if isinstance(found, list):
        return [text for item in found for text in _mrkdwn_texts(item)]
    if not isinstance(found, dict):
        return []
    own = [str(found.get("text"))] if found.get("type") == "mrkdwn" else []
    return own + [text for value in found.values() for text in _mrkdwn_texts(value)]


def _bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    return header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""


_JSON_FIELDS = ("blocks", "view", "attachments", "files", "metadata")


async def _params_of(request: web.Request) -> dict[str, Any]:
    """A call's arguments, from the query, a form body or a JSON body (slack-sdk sends all
    three); JSON-valued form fields (``blocks``, ``view``...) decoded."""
    params: dict[str, Any] = dict(request.query)
    if request.method == "POST":
        if request.content_type == "application/json":
            body = await request.json()
            if isinstance(body, dict):
                params.update(body)
        else:
            for key, value in (await request.post()).items():
                if isinstance(value, str):
                    params[key] = value
    for key in _JSON_FIELDS:
        if isinstance(params.get(key), str):
            with contextlib.suppress(ValueError):
                params[key] = json.loads(params[key])
    return params
