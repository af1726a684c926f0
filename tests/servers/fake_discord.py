"""A fake Discord on 127.0.0.1 (aiohttp) that the real discord.py 2.7 talks to.

``async with FakeDiscord() as fake:`` serves REST v10 under ``fake.api_base`` and the gateway
websocket at ``fake.gateway_url``; :meth:`FakeDiscord.redirect` points discord.py at them
(``discord.http.Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY`` are class attributes;
a plain ``Client`` connects to ``DEFAULT_GATEWAY`` with ``?v=10&encoding=json&compress=...``
and never calls ``GET /gateway/bot``, which is served anyway). Frames go out as uncompressed
JSON text, which discord.py reads whatever ``compress`` it asked for. It is strict where
Discord is:

- ``Authorization: Bot <token>`` on every route but interaction callbacks and webhooks (401);
  IDENTIFY with another token closes 4004; bodies are JSON or multipart with ``payload_json``;
- the limits of :mod:`tests.servers.discord_wire` answer 400 + 50035;
- an interaction has one callback (40060 after), within ``Pacing.ack_deadline`` (10062
  after; the fake's clock moves on with :meth:`advance`), a modal only as that callback and
  never for a modal submit; followups and ``@original`` edits only after a callback, for
  ``Pacing.followup_ttl`` (15 minutes; 50027 after);
- ``X-RateLimit-*`` on every answer; message edits 5 per 5 s per channel, past it 429 with
  ``Via`` and ``retry_after`` (what discord.py retries); :meth:`storm` answers writes 429,
  :meth:`hold` every write in one channel (a thread is one) until :meth:`release`;
- intents: IDENTIFY asking ``message_content`` when :attr:`message_content_enabled` is off
  closes 4014; guild and DM message events only with their intents; a message's content
  is empty unless a DM, a mention of the bot, or the intent;
- HELLO, HEARTBEAT → ACK, READY (guilds unavailable) then GUILD_CREATE; :meth:`reconnect`
  sends op 7, events while the client is away are kept, RESUME replays those past its seq;
- uploads (multipart) past ``attachment_size_limit`` answer 40005; threads from a message
  (a thread's id is its message's); an archived thread refuses edits (50083) until a
  PATCH of the channel unarchives it; permissions by channel overwrite (50013);
- application commands: PUT/GET global and per guild (validated, options too: a description
  of 1 to 100 characters, required options first; recorded); a slash command is run only
  with options it was synced with, its required ones given; an autocomplete (interaction
  type 4) is answered only with callback type 8, at most 25 choices;
- what ``agent-gateway check`` and ``discord-invite`` ask: ``GET /applications/@me`` (the
  application's id and flags: the Message Content toggle), a channel with the bot's
  overwrite, the guild's roles and owner, the bot's member;
- ``allowed_mentions`` applied to what a new message pings (``Sent.pinged``: user ids,
  ``role:<id>``, ``@everyone``); edits ping no one, as on Discord.

A test acts as people (:meth:`say`, :meth:`click`, :meth:`submit`, :meth:`slash`,
:meth:`autocomplete`) and reads
what they see (:meth:`messages`, :attr:`interactions`, :attr:`commands`), waiting with
:meth:`wait_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import secrets
import time
import urllib.parse
from collections import defaultdict, deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import unquote

import yarl
from aiohttp import WSMsgType, web

from tests.servers.discord_records import (
    ADD_REACTIONS,
    ALL_PERMISSIONS,
    APP_ID,
    BOT,
    BOT_ID,
    CREATE_PUBLIC_THREADS,
    GUILD_ID,
    SEND_MESSAGES,
    SEND_MESSAGES_IN_THREADS,
    VIEW_CHANNEL,
    Channel,
    Interaction,
    Pacing,
    Person,
    Sent,
    Version,
)
from tests.servers.discord_wire import (
    LABEL,
    ROW,
    TEXT_DISPLAY,
    DiscordError,
    check_choices,
    check_commands,
    check_message,
    check_modal,
    pings,
)

__all__ = [
    "ALICE",
    "APP_ID",
    "BOB",
    "BOT",
    "BOT_ID",
    "GUILD_ID",
    "TOKEN",
    "Channel",
    "FakeDiscord",
    "Intents",
    "Interaction",
    "Pacing",
    "Person",
    "Sent",
    "Version",
]

T = TypeVar("T")
TOKEN = "fake-discord-bot-token"
ALICE = Person("1300000000000000001", "alice", roles=("1400000000000000001",))
BOB = Person("1300000000000000002", "bob")
ADMINS_ROLE = "1400000000000000001"
_EDITABLE = ("content", "embeds", "components", "allowed_mentions", "flags")


class Intents:
    GUILDS = 1 << 0
    GUILD_MEMBERS = 1 << 1
    GUILD_PRESENCES = 1 << 8
    GUILD_MESSAGES = 1 << 9
    DIRECT_MESSAGES = 1 << 12
    MESSAGE_CONTENT = 1 << 15
    PRIVILEGED = GUILD_MEMBERS | GUILD_PRESENCES | MESSAGE_CONTENT


class _Session:
    """One gateway session: what was dispatched (for RESUME) and its live socket, if any."""

    def __init__(self, sid: str, intents: int) -> None:
        self.id = sid
        self.intents = intents
        self.seq = 0
        self.log: list[dict[str, Any]] = []
        self.ws: web.WebSocketResponse | None = None


class FakeDiscord:
    def __init__(
        self,
        *,
        token: str = TOKEN,
        pacing: Pacing | None = None,
        message_content_enabled: bool = False,
        attachment_size_limit: int = 10 * 1024 * 1024,
    ) -> None:
        self.token = token
        self.pacing = pacing or Pacing()
        self.message_content_enabled = message_content_enabled  # the portal's toggle
        self.attachment_size_limit = attachment_size_limit
        self.port = 0
        self.people: dict[str, Person] = {}
        self.channels: dict[str, Channel] = {}
        self.sent: list[Sent] = []  # every message in order, people's and the bot's
        self.interactions: list[Interaction] = []
        self.commands: dict[str | None, list[dict[str, Any]]] = {}  # guild id (None: global)
        self.calls: list[tuple[str, str, Any]] = []  # (method, path, body) of every REST call
        self.refused: list[tuple[str, str, int]] = []  # (method, path, code) but 429s
        self.too_many: list[tuple[str, str, float]] = []  # (method, path, retry_after)
        self.gateway_frames: list[dict[str, Any]] = []  # every frame the client sent
        self.gateway_query: dict[str, str] = {}
        self.closes: list[int] = []  # close codes the fake sent
        self.down = False  # unreachable: the gateway socket dropped, every request cut
        self.down_at_next_card = False  # go down when the bot posts its next embed
        self.cut = 0  # requests cut while down
        self.typing: list[str] = []  # channel ids the bot showed "typing…" in
        self.identified = 0
        self.resumed = 0
        self.session: _Session | None = None  # the newest
        # older sessions whose connection is still open: Discord sends every event to every
        # connection of the bot (two gateways on one token would both answer)
        self.others: list[_Session] = []
        self._messages: dict[str, Sent] = {}
        self.cdn: dict[str, tuple[bytes, str]] = {}  # attachment id -> (bytes, its signature)
        self.cdn_downloads: list[str] = []  # the attachment id of each CDN request
        self.cdn_expired = False  # every signed address has expired: 404
        self._edit_times: dict[str, deque[float]] = defaultdict(deque)
        self._route_times: dict[str, deque[float]] = defaultdict(deque)
        self._storm_until = 0.0
        self._storm_requests = 0
        self._storm_retry_after = 1.0
        self._held: dict[str, float] = {}  # channel id: the retry_after its writes are answered
        self._offset = 0.0
        self._ids = itertools.count(1500000000000000001)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        for person in (ALICE, BOB):
            self.add_person(person)
        self.general = self.add_channel("1600000000000000001", "general")

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        app.router.add_get("/attachments/{cid}/{aid}/{name}", self._cdn_file)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for session in [*self.others, self.session]:
            if session is not None and session.ws is not None:
                await session.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        """What ``discord.http.Route.BASE`` takes."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        """What ``DiscordWebSocket.DEFAULT_GATEWAY`` takes (as a ``yarl.URL``)."""
        return f"ws://127.0.0.1:{self.port}/gateway"

    def redirect(self) -> Callable[[], None]:
        """Point discord.py's class attributes at this fake; call the result to undo it."""
        import discord

        route, gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        discord.http.Route.BASE = self.api_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)

        def undo() -> None:
            discord.http.Route.BASE = route
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway

        return undo

    # --- the world ------------------------------------------------------------------------

    def add_person(self, person: Person) -> Person:
        self.people[person.id] = person
        return person

    def add_channel(self, channel_id: str, name: str, *, bot_denied: int = 0) -> Channel:
        channel = Channel(channel_id, name, bot_denied=bot_denied)
        self.channels[channel_id] = channel
        return channel

    def dm(self, person: Person) -> Channel:
        for channel in self.channels.values():
            if channel.kind == 1 and channel.peer == person:
                return channel
        channel = Channel(self._id(), "", kind=1, guild_id=None, peer=person)
        self.channels[channel.id] = channel
        return channel

    def thread_of(self, person: Person, channel: Channel, name: str) -> Channel:
        """A thread ``person`` made in ``channel`` (from a message of theirs), not yet told
        to the bot: :meth:`announce` dispatches its THREAD_CREATE."""
        message = self._store(Sent(self._id(), channel.id, person, name, guild_id=channel.guild_id))
        thread = Channel(message.id, name, kind=11, parent_id=channel.id)
        self.channels[thread.id] = thread
        return thread

    async def announce(self, thread: Channel) -> None:
        await self.dispatch("THREAD_CREATE", {**thread.json(), "newly_created": True})

    async def archive(self, thread: Channel) -> None:
        """Discord archives an idle thread (and tells the bot)."""
        thread.archived = True
        await self.dispatch("THREAD_UPDATE", thread.json())

    def storm(
        self, seconds: float | None = None, *, requests: int | None = None, retry_after: float = 1.0
    ) -> None:
        """Answer every write 429 (with ``Via``) for ``seconds`` or the next ``requests``."""
        if seconds is not None:
            self._storm_until = self._now() + seconds
        if requests is not None:
            self._storm_requests = requests
        self._storm_retry_after = retry_after

    def hold(self, channel_id: str, retry_after: float = 5.0) -> None:
        """Every write in the channel is answered 429 with ``retry_after`` until
        :meth:`release` (other channels as ever)."""
        self._held[channel_id] = retry_after

    def release(self, channel_id: str) -> None:
        self._held.pop(channel_id, None)

    async def go_down(self) -> None:
        """Discord unreachable: the gateway socket dropped, every request and connection cut
        without an answer until :meth:`come_back`."""
        self.down = True
        session = self.session
        if session is not None and session.ws is not None:
            ws, session.ws = session.ws, None
            await ws.close(code=1011, message=b"gone")
        await self._notify()

    async def come_back(self) -> None:
        self.down = False
        await self._notify()

    def advance(self, seconds: float) -> None:
        """Move the fake's clock (interaction deadlines, followup lifetimes) on."""
        self._offset += seconds

    # --- people act -----------------------------------------------------------------------

    async def say(
        self,
        person: Person,
        channel: Channel,
        content: str,
        *,
        mentions: tuple[Person, ...] = (),
        files: list[tuple[str, bytes]] | None = None,
    ) -> Sent:
        """``person`` posts in a channel, thread or DM: a MESSAGE_CREATE, as the intents let it;
        ``files`` (name, content) are attachments on the fake's CDN path, at a signed address
        (``ex``, ``is``, ``hm``: a request without the right ``hm`` is answered 404)."""
        message = self._store(
            Sent(
                self._id(),
                channel.id,
                person,
                content,
                mentions=list(mentions),
                guild_id=channel.guild_id,
                attachments=[self._attach(channel, name, data) for name, data in files or []],
            )
        )
        await self.dispatch("MESSAGE_CREATE", message)
        return message

    def _attach(self, channel: Channel, name: str, data: bytes) -> dict[str, Any]:
        attachment_id = self._id()
        signature = secrets.token_hex(16)
        self.cdn[attachment_id] = (data, signature)
        quoted = urllib.parse.quote(name, safe="")
        url = (
            f"http://127.0.0.1:{self.port}/attachments/{channel.id}/{attachment_id}/{quoted}"
            f"?ex=6a000000&is=69f00000&hm={signature}&"
        )
        attached: dict[str, Any] = {
            "id": attachment_id,
            "filename": name,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": "application/octet-stream",
        }
        if name == "voice-message.ogg":  # recorded in Discord: a voice message's attachment
            attached.update(content_type="audio/ogg", duration_secs=2.5, waveform="AAAA")
        return attached

    async def _cdn_file(self, request: web.Request) -> web.StreamResponse:
        attachment_id = request.match_info["aid"]
        self.cdn_downloads.append(attachment_id)
        await self._notify()
        found = self.cdn.get(attachment_id)
        if found is None or self.cdn_expired or request.query.get("hm") != found[1]:
            return web.Response(status=404, text="This content is no longer available.")
        return web.Response(body=found[0], content_type="application/octet-stream")

    async def click(self, person: Person, message: Sent, label_or_custom_id: str) -> Interaction:
        """``person`` presses a button (by label, or by custom_id) on a message."""
        buttons = [
            child
            for row in message.components
            for child in row.get("components") or []
            if child.get("type") == 2
        ]
        by_id = [b for b in buttons if b.get("custom_id") == label_or_custom_id]
        button = by_id[0] if by_id else message.button(label_or_custom_id)
        data = {"custom_id": button["custom_id"], "component_type": 2}
        return await self._interact(3, person, self.channels[message.channel_id], data, message)

    async def pick(
        self, person: Person, message: Sent, custom_id: str, values: list[str]
    ) -> Interaction:
        """``person`` chooses ``values`` in a message's select menu."""
        data = {"custom_id": custom_id, "component_type": 3, "values": values}
        return await self._interact(3, person, self.channels[message.channel_id], data, message)

    async def forge(
        self,
        person: Person,
        channel: Channel,
        data: dict[str, Any],
        kind: int = 3,
        *,
        message: Sent | None = None,
    ) -> Interaction:
        """An interaction with any data (a custom_id no message carries, say), on
        ``message`` if given (a component click always comes from one)."""
        return await self._interact(kind, person, channel, data, message)

    async def submit(
        self, person: Person, opened_by: Interaction, answers: dict[str, Any]
    ) -> Interaction:
        """``person`` submits the modal ``opened_by`` opened: ``answers`` by custom_id (a
        string for text inputs and radio groups, a list for selects and checkbox groups;
        left out: unanswered)."""
        modal = opened_by.modal
        if modal is None:
            raise AssertionError("no modal was opened in reply to that interaction")
        components: list[dict[str, Any]] = []
        for number, top in enumerate(modal.get("components") or [], start=1):
            if top.get("type") == ROW:
                child = top["components"][0]
                value = answers.get(child["custom_id"], "")
                row = {"type": 4, "custom_id": child["custom_id"], "value": value}
                components.append({"type": 1, "components": [row]})
            elif top.get("type") == LABEL:
                child = top["component"]
                item: dict[str, Any] = {
                    "type": child["type"],
                    "custom_id": child["custom_id"],
                    "id": number,
                }
                answer = answers.get(child["custom_id"])
                if child["type"] == 4:
                    item["value"] = answer or ""
                elif child["type"] == 21:
                    item["value"] = answer
                else:
                    item["values"] = list(answer or [])
                components.append({"type": LABEL, "id": number, "component": item})
            elif top.get("type") == TEXT_DISPLAY:
                components.append({"type": TEXT_DISPLAY, "id": number, "content": top["content"]})
        data = {"custom_id": modal["custom_id"], "components": components}
        return await self._interact(5, person, opened_by.channel, data, opened_by.message)

    async def slash(
        self,
        person: Person,
        channel: Channel,
        name: str,
        options: dict[str, Any] | None = None,
    ) -> Interaction:
        """``person`` runs ``/name`` with string ``options`` (it must have been synced, with
        those options and every required one, as Discord's client insists)."""
        command = self._synced(channel, name)
        given = options or {}
        self._check_options(command, given)
        data: dict[str, Any] = {"id": command["id"], "name": name, "type": 1}
        if given:
            data["options"] = [{"name": k, "type": 3, "value": v} for k, v in given.items()]
        if channel.guild_id is not None:
            data["guild_id"] = channel.guild_id
        return await self._interact(2, person, channel, data, None)

    async def autocomplete(
        self,
        person: Person,
        channel: Channel,
        name: str,
        focused: str,
        typed: str = "",
        options: dict[str, Any] | None = None,
    ) -> Interaction:
        """``person`` types ``typed`` in ``/name``'s option ``focused`` (one the app said it
        completes): Discord asks the app for choices (an interaction of type 4, answered
        with callback type 8; :meth:`choices` reads them)."""
        command = self._synced(channel, name)
        option = next((o for o in command.get("options") or [] if o["name"] == focused), None)
        if option is None or not option.get("autocomplete"):
            raise AssertionError(f"/{name} {focused}: not an option that is completed")
        given = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        given.append({"name": focused, "type": 3, "value": typed, "focused": True})
        data: dict[str, Any] = {"id": command["id"], "name": name, "type": 1, "options": given}
        if channel.guild_id is not None:
            data["guild_id"] = channel.guild_id
        return await self._interact(4, person, channel, data, None)

    async def choices(self, asked: Interaction) -> list[dict[str, Any]]:
        """The choices the app answered an autocomplete with, once it answered."""
        await self.wait_for(lambda: asked.callback is not None)
        assert asked.callback is not None and asked.callback["type"] == 8, asked.callback
        return list(asked.callback["data"]["choices"])

    def command(self, name: str, guild_id: str | None = None) -> dict[str, Any]:
        """The synced command ``name`` (global, or ``guild_id``'s), as Discord keeps it."""
        found = next((c for c in self.commands.get(guild_id, []) if c["name"] == name), None)
        if found is None:
            raise AssertionError(f"/{name} was not synced")
        return found

    def _synced(self, channel: Channel, name: str) -> dict[str, Any]:
        synced = [*self.commands.get(None, []), *self.commands.get(channel.guild_id, [])]
        command = next((c for c in synced if c["name"] == name), None)
        if command is None:
            raise AssertionError(f"/{name} was not synced: {[c['name'] for c in synced]}")
        return command

    @staticmethod
    def _check_options(command: dict[str, Any], given: dict[str, Any]) -> None:
        known = {o["name"]: o for o in command.get("options") or []}
        unknown = set(given) - set(known)
        if unknown:
            raise AssertionError(f"/{command['name']} has no option {sorted(unknown)}")
        missing = [n for n, o in known.items() if o.get("required") and n not in given]
        if missing:
            raise AssertionError(f"/{command['name']} needs {missing}: Discord's client asks")

    @property
    def application_flags(self) -> int:
        """The app's flags: GATEWAY_MESSAGE_CONTENT_LIMITED (1 << 19) when the portal's
        message content toggle is on (what ``check`` can read before connecting)."""
        return 1 << 19 if self.message_content_enabled else 0

    async def deliver_again(self, interaction: Interaction) -> None:
        """Dispatch the same INTERACTION_CREATE again (a duplicate delivery)."""
        await self.dispatch("INTERACTION_CREATE", interaction.json())

    async def reconnect(self) -> None:
        """Send RECONNECT (op 7): the client comes back with RESUME; what is dispatched
        meanwhile waits in the session and is replayed."""
        session = self.session
        assert session is not None and session.ws is not None, "no client connected"
        ws, session.ws = session.ws, None
        await ws.send_str(json.dumps({"op": 7, "d": None, "s": None, "t": None}))

    async def drop(self) -> None:
        """Lose the connection (close 4000) without a RECONNECT first: the client RESUMEs."""
        session = self.session
        assert session is not None and session.ws is not None, "no client connected"
        ws, session.ws = session.ws, None
        await ws.close(code=4000, message=b"unknown error")

    # --- what people see ------------------------------------------------------------------

    def messages(self, channel: Channel, *, include_ephemeral: bool = False) -> list[Sent]:
        return [
            m
            for m in self.sent
            if m.channel_id == channel.id
            and not m.deleted
            and (include_ephemeral or not m.ephemeral)
        ]

    def bot_messages(self, channel: Channel) -> list[Sent]:
        return [m for m in self.messages(channel) if m.author == BOT]

    def message(self, message_id: str) -> Sent:
        return self._messages[message_id]

    def calls_to(self, method: str, fragment: str) -> list[Any]:
        return [body for m, path, body in self.calls if m == method and fragment in path]

    @property
    def connected(self) -> bool:
        return self.session is not None and self.session.ws is not None

    async def wait_for(self, probe: Callable[[], T | None], deadline: float = 30.0) -> T:
        """Wait until ``probe()`` returns something true (not None, 0, False, empty)."""
        async with asyncio.timeout(deadline), self._changed:
            while True:
                value = probe()
                if value:
                    return value
                await self._changed.wait()

    # --- the gateway ----------------------------------------------------------------------

    @property
    def live_connections(self) -> int:
        """How many gateway connections of the bot are open now."""
        sessions = [*self.others, *([self.session] if self.session is not None else [])]
        return sum(s.ws is not None and not s.ws.closed for s in sessions)

    async def dispatch(
        self, event: str, payload: dict[str, Any] | Sent, *, newest_only: bool = False
    ) -> None:
        """Send a DISPATCH to the session (kept for RESUME when the client is away), and to
        every other connection still open."""
        if not newest_only:
            for other in self.others:
                if other.ws is not None and not other.ws.closed:
                    await self._dispatch_to(other, event, payload)
        if self.session is not None:
            await self._dispatch_to(self.session, event, payload)

    async def _dispatch_to(
        self, session: _Session, event: str, payload: dict[str, Any] | Sent
    ) -> None:
        if isinstance(payload, Sent):
            data = self._message_event(session, payload)
            if data is None:
                return
        else:
            data = payload
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(frame)
        if session.ws is not None and not session.ws.closed:
            with contextlib.suppress(ConnectionError):
                await session.ws.send_str(json.dumps(frame))

    def _message_event(self, session: _Session, message: Sent) -> dict[str, Any] | None:
        channel = self.channels[message.channel_id]
        is_dm = channel.kind == 1
        needed = Intents.DIRECT_MESSAGES if is_dm else Intents.GUILD_MESSAGES
        if not session.intents & needed:
            return None
        visible = (
            is_dm
            or message.author == BOT
            or BOT in message.mentions
            or bool(session.intents & Intents.MESSAGE_CONTENT)
        )
        return message.json(content_visible=visible)

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if self.down:
            return await self._cut(request)
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        self.gateway_query = dict(request.query)
        hello = {"heartbeat_interval": self.pacing.heartbeat_interval_ms}
        await ws.send_str(json.dumps({"op": 10, "d": hello, "s": None, "t": None}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            frame = json.loads(msg.data)
            self.gateway_frames.append(frame)
            op, data = frame.get("op"), frame.get("d") or {}
            if op == 1:
                await ws.send_str(json.dumps({"op": 11, "d": None, "s": None, "t": None}))
            elif op == 2:
                await self._identify(ws, data)
            elif op == 6:
                await self._resume(ws, data)
            await self._notify()
        return ws

    async def _close(self, ws: web.WebSocketResponse, code: int, reason: str) -> None:
        self.closes.append(code)
        await ws.close(code=code, message=reason.encode())
        await self._notify()

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        if data.get("token") != self.token:
            await self._close(ws, 4004, "Authentication failed.")
            return
        intents = int(data.get("intents") or 0)
        if intents & Intents.MESSAGE_CONTENT and not self.message_content_enabled:
            await self._close(ws, 4014, "Disallowed intent(s).")
            return
        self.identified += 1
        previous = self.session
        if previous is not None and previous.ws is not None and not previous.ws.closed:
            self.others.append(previous)
        self.session = _Session(f"session-{self.identified}", intents)
        self.session.ws = ws
        guild_ids = sorted({c.guild_id for c in self.channels.values() if c.guild_id})
        await self.dispatch(
            "READY",
            {
                "v": 10,
                "user": {**BOT.json(), "verified": True, "mfa_enabled": False, "flags": 0},
                "guilds": [{"id": gid, "unavailable": True} for gid in guild_ids],
                "session_id": self.session.id,
                "resume_gateway_url": self.gateway_url,
                "shard": [0, 1],
                "application": {"id": APP_ID, "flags": self.application_flags},
                "private_channels": [],
                "relationships": [],
            },
            newest_only=True,
        )
        if intents & Intents.GUILDS:
            for gid in guild_ids:
                await self.dispatch("GUILD_CREATE", self._guild(gid), newest_only=True)

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        session = self.session
        if data.get("token") != self.token:
            await self._close(ws, 4004, "Authentication failed.")
            return
        if session is None or data.get("session_id") != session.id:
            await ws.send_str(json.dumps({"op": 9, "d": False, "s": None, "t": None}))
            return
        self.resumed += 1
        session.ws = ws
        after = int(data.get("seq") or 0)
        for frame in session.log:
            if frame["s"] > after:
                await ws.send_str(json.dumps(frame))
        session.seq += 1
        resumed = {"op": 0, "t": "RESUMED", "s": session.seq, "d": {}}
        session.log.append(resumed)
        await ws.send_str(json.dumps(resumed))

    def _guild(self, guild_id: str) -> dict[str, Any]:
        channels = [c for c in self.channels.values() if c.guild_id == guild_id]
        members = [p for p in self.people.values() if not p.bot]
        return {
            "id": guild_id,
            "name": "Fake Guild",
            "icon": None,
            "owner_id": ALICE.id,
            "unavailable": False,
            "member_count": len(members) + 1,
            "large": False,
            "features": [],
            "emojis": [],
            "stickers": [],
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "roles": [
                _role(guild_id, "@everyone", ALL_PERMISSIONS, 0),
                _role(ADMINS_ROLE, "admins", ALL_PERMISSIONS, 1),
            ],
            "channels": [c.json() for c in channels if not c.is_thread],
            "threads": [c.json() for c in channels if c.is_thread and not c.archived],
            "members": [BOT.member_json(), *(p.member_json() for p in members)],
            "voice_states": [],
            "presences": [],
        }

    # --- REST -----------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        parts = path.strip("/").split("/")
        open_route = parts[0] in ("interactions", "webhooks")
        headers: dict[str, str] = {}
        if self.down:
            return await self._cut(request)
        try:
            body, files = await _body_of(request)
            if self.down_at_next_card and request.method == "POST" and isinstance(body, dict):
                if body.get("embeds") and parts[-1] == "messages":
                    self.down_at_next_card = False
                    await self.go_down()
                    return await self._cut(request)
            self.calls.append((request.method, path, body))
            if not open_route and request.headers.get("Authorization") != f"Bot {self.token}":
                raise DiscordError(401, 0, "401: Unauthorized")
            headers = self._pace(request.method, parts)
            status, answer = await self._route(request.method, parts, body, files, request.query)
        except DiscordError as refusal:
            if refusal.status == 429:
                self.too_many.append((request.method, path, refusal.retry_after))
                limited = {"Via": "1.1 google", "Retry-After": str(math.ceil(refusal.retry_after))}
                return _json(refusal.body(), 429, {**headers, **limited})
            self.refused.append((request.method, path, refusal.code))
            return _json(refusal.body(), refusal.status, headers)
        finally:
            await self._notify()
        if status == 204:
            return web.Response(status=204, headers=headers)
        return _json(answer, status, headers)

    def _pace(self, method: str, parts: list[str]) -> dict[str, str]:
        """The bucket's ``X-RateLimit-*`` headers, or a 429 past its window or in a storm."""
        now = self._now()
        write = method in ("POST", "PATCH", "PUT", "DELETE") and parts[0] != "interactions"
        if write and (now < self._storm_until or self._storm_requests > 0):
            self._storm_requests = max(0, self._storm_requests - 1)
            raise _rate_limited(self._storm_retry_after)
        if write and parts[0] == "channels" and len(parts) > 1 and parts[1] in self._held:
            raise _rate_limited(self._held[parts[1]])
        is_edit = method == "PATCH" and parts[0] == "channels" and parts[2:3] == ["messages"]
        if is_edit:
            key, limit, window = f"edit:{parts[1]}", self.pacing.edit_limit, self.pacing.edit_window
        else:
            key = f"{method}:{parts[0]}:{parts[1] if len(parts) > 1 else ''}"
            limit, window = self.pacing.route_limit, self.pacing.route_window
        times = self._edit_times[key] if is_edit else self._route_times[key]
        while times and times[0] <= now - window:
            times.popleft()
        if len(times) >= limit:
            raise _rate_limited(times[0] + window - now)
        times.append(now)
        reset_after = (times[0] + window - now) if times else window
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(limit - len(times)),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": f"fake-{key}",
        }

    async def _route(
        self,
        method: str,
        parts: list[str],
        body: Any,
        files: list[dict[str, Any]],
        query: Any,
    ) -> tuple[int, Any]:
        route = (method, *parts)
        match route:
            case ("GET", "users", "@me"):
                return 200, {**BOT.json(), "verified": True, "mfa_enabled": False, "flags": 0}
            case ("GET", "oauth2", "applications", "@me") | ("GET", "applications", "@me"):
                return 200, _application(self.application_flags)
            case ("GET", "gateway") | ("GET", "gateway", "bot"):
                return 200, {
                    "url": self.gateway_url,
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 14_400_000,
                        "max_concurrency": 1,
                    },
                }
            case ("GET", "users", uid):
                return 200, self._person(uid).json()
            case ("GET", "guilds", gid):
                return 200, self._guild(self._guild_id(gid))
            case ("GET", "guilds", gid, "roles"):
                return 200, self._guild(self._guild_id(gid))["roles"]
            case ("GET", "guilds", gid, "channels"):
                return 200, self._guild(self._guild_id(gid))["channels"]
            case ("GET", "guilds", gid, "members", uid):
                self._guild_id(gid)
                return 200, self._person(uid).member_json()
            case ("POST", "users", "@me", "channels"):
                person = self.people.get(str(body.get("recipient_id")))
                if person is None:
                    raise DiscordError(404, 10013, "Unknown User")
                return 200, self.dm(person).json()
            case ("GET", "channels", cid):
                return 200, self._channel(cid).json()
            case ("PATCH", "channels", cid):
                return 200, await self._edit_channel(self._channel(cid), body)
            case ("POST", "channels", cid, "messages"):
                return 200, await self._post(self._channel(cid), body, files)
            case ("GET", "channels", cid, "messages", mid):
                return 200, self._message(cid, mid).json()
            case ("PATCH", "channels", cid, "messages", mid):
                channel = self._channel(cid)
                if channel.is_thread and channel.archived:
                    raise DiscordError(400, 50083, "Thread is archived")
                return 200, await self._edit(self._message(cid, mid), body, files)
            case ("DELETE", "channels", cid, "messages", mid):
                self._message(cid, mid).deleted = True
                return 204, None
            case ("PUT", "channels", cid, "messages", mid, "reactions", emoji, "@me"):
                self._allowed(self._channel(cid), ADD_REACTIONS)
                users = self._message(cid, mid).reactions.setdefault(unquote(emoji), [])
                if BOT.id not in users:
                    users.append(BOT.id)
                return 204, None
            case ("POST", "channels", cid, "typing"):
                self.typing.append(self._channel(cid).id)
                return 204, None
            case ("POST", "channels", cid, "messages", mid, "threads"):
                return 200, await self._thread_from(self._message(cid, mid), body)
            case ("GET", "applications", _, "commands"):
                return 200, self.commands.get(None, [])
            case ("PUT", "applications", _, "commands"):
                return 200, self._sync(None, body)
            case ("GET", "applications", _, "guilds", gid, "commands"):
                return 200, self.commands.get(gid, [])
            case ("PUT", "applications", _, "guilds", gid, "commands"):
                return 200, self._sync(gid, body)
            case ("POST", "interactions", iid, token, "callback"):
                return await self._callback(iid, token, body, bool(query.get("with_response")))
            case ("POST", "webhooks", _, token):
                return 200, await self._followup(token, body, files)
            case ("PATCH", "webhooks", _, token, "messages", mid):
                return 200, await self._webhook_edit(token, mid, body, files)
            case ("GET", "webhooks", _, token, "messages", mid):
                return 200, self._webhook_message(token, mid).json()
            case ("DELETE", "webhooks", _, token, "messages", mid):
                self._webhook_message(token, mid).deleted = True
                return 204, None
        raise DiscordError(404, 0, "404: Not Found")

    # --- channels and messages ------------------------------------------------------------

    async def _cut(self, request: web.Request) -> web.StreamResponse:
        """A request while down: the connection closed without an answer."""
        self.cut += 1
        if request.transport is not None:
            request.transport.close()
        await self._notify()
        return web.Response(status=503)

    def _person(self, uid: str) -> Person:
        if uid == BOT_ID:
            return BOT
        person = self.people.get(uid)
        if person is None:
            raise DiscordError(404, 10013, "Unknown User")
        return person

    def _guild_id(self, gid: str) -> str:
        if not any(c.guild_id == gid for c in self.channels.values()):
            raise DiscordError(404, 10004, "Unknown Guild")
        return gid

    def _channel(self, cid: str) -> Channel:
        channel = self.channels.get(cid)
        if channel is None:
            raise DiscordError(404, 10003, "Unknown Channel")
        return channel

    def _message(self, cid: str, mid: str) -> Sent:
        message = self._messages.get(mid)
        if message is None or message.channel_id != cid or message.deleted:
            raise DiscordError(404, 10008, "Unknown Message")
        return message

    def _allowed(self, channel: Channel, permission: int) -> None:
        denied = channel.bot_denied
        if channel.parent_id is not None:
            denied |= self.channels[channel.parent_id].bot_denied
        if denied & (permission | VIEW_CHANNEL):
            raise DiscordError(403, 50013, "Missing Permissions")

    async def _post(self, channel: Channel, body: Any, files: list[dict[str, Any]]) -> Any:
        _check_body(body, check_message)
        if not (body.get("content") or body.get("embeds") or body.get("components") or files):
            raise DiscordError(400, 50006, "Cannot send an empty message")
        self._check_files(files)
        if channel.kind != 1:
            self._allowed(channel, SEND_MESSAGES_IN_THREADS if channel.is_thread else SEND_MESSAGES)
        if channel.is_thread and channel.archived:
            if channel.locked:
                raise DiscordError(400, 50083, "Thread is archived")
            channel.archived = False  # a post unarchives an unlocked thread
        message = self._store(self._bot_message(channel.id, body, files))
        await self.dispatch("MESSAGE_CREATE", message)
        return message.json()

    def _bot_message(
        self,
        channel_id: str,
        body: dict[str, Any],
        files: list[dict[str, Any]],
        interaction: Interaction | None = None,
    ) -> Sent:
        channel = self.channels[channel_id]
        content = body.get("content") or ""
        pinged = pings(content, body.get("allowed_mentions"))
        return Sent(
            self._id(),
            channel_id,
            BOT,
            content,
            embeds=list(body.get("embeds") or []),
            components=list(body.get("components") or []),
            allowed_mentions=body.get("allowed_mentions"),
            flags=int(body.get("flags") or 0),
            attachments=self._attachments(files),
            guild_id=channel.guild_id,
            interaction_id=None if interaction is None else interaction.id,
            pinged=pinged,
            mentions=[self.people[p] for p in pinged if p in self.people],
        )

    async def _edit(self, message: Sent, body: Any, files: list[dict[str, Any]]) -> Any:
        _check_body(body, check_message)
        self._check_files(files)
        message.edits.append(Version(message.content, message.embeds, message.components))
        for key in _EDITABLE:
            if key in body:
                value = body[key]
                if key == "content":
                    message.content = value or ""
                elif key == "flags":
                    message.flags = int(value or 0)
                else:
                    setattr(message, key, value if key == "allowed_mentions" else list(value or []))
        if files:
            message.attachments = [*message.attachments, *self._attachments(files)]
        if message.interaction_id is None or not message.ephemeral:
            await self.dispatch("MESSAGE_UPDATE", message)
        return message.json()

    async def _edit_channel(self, channel: Channel, body: Any) -> Any:
        if not isinstance(body, dict):
            raise DiscordError.invalid({"_": "Expected an object."})
        if "archived" in body:
            channel.archived = bool(body["archived"])
        if "locked" in body:
            channel.locked = bool(body["locked"])
        if "name" in body:
            channel.name = str(body["name"])
        await self.dispatch(
            "THREAD_UPDATE" if channel.is_thread else "CHANNEL_UPDATE", channel.json()
        )
        return channel.json()

    async def _thread_from(self, message: Sent, body: Any) -> Any:
        parent = self.channels[message.channel_id]
        if parent.kind != 0:
            raise DiscordError(400, 50024, "Cannot execute action on this channel type")
        self._allowed(parent, CREATE_PUBLIC_THREADS)
        if message.id in self.channels:
            raise DiscordError(400, 160004, "A thread has already been created for this message")
        name = (body or {}).get("name") or ""
        if not 1 <= len(name) <= 100:
            raise DiscordError.invalid({"name": "Must be between 1 and 100 in length."})
        thread = Channel(message.id, name, kind=11, parent_id=parent.id)
        self.channels[thread.id] = thread
        await self.dispatch("THREAD_CREATE", {**thread.json(), "newly_created": True})
        return thread.json()

    def _sync(self, guild_id: str | None, body: Any) -> Any:
        _check_body(body, lambda b: check_commands(b), allow_list=True)
        stored = []
        for command in body:
            known = next(
                (c for c in self.commands.get(guild_id, []) if c["name"] == command["name"]), None
            )
            stored.append(
                {
                    "type": 1,
                    "options": [],
                    "default_member_permissions": None,
                    "dm_permission": True,
                    "nsfw": False,
                    **command,
                    "id": known["id"] if known else self._id(),
                    "application_id": APP_ID,
                    "version": self._id(),
                    **({"guild_id": guild_id} if guild_id else {}),
                }
            )
        self.commands[guild_id] = stored
        return stored

    def _check_files(self, files: list[dict[str, Any]]) -> None:
        for number, file in enumerate(files):
            if file["size"] > self.attachment_size_limit:
                raise DiscordError(
                    413, 40005, "Request entity too large", {f"files[{number}]": "too large"}
                )

    def _attachments(self, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                "id": self._id(),
                "filename": f["filename"],
                "size": f["size"],
                "url": f"https://cdn.fake.discord/{f['filename']}",
                "proxy_url": f"https://media.fake.discord/{f['filename']}",
                "content": f["content"],
            }
            for f in files
        ]

    # --- interactions ---------------------------------------------------------------------

    async def _interact(
        self,
        kind: int,
        person: Person,
        channel: Channel,
        data: dict[str, Any],
        message: Sent | None,
    ) -> Interaction:
        interaction = Interaction(
            self._id(),
            f"interaction-token-{self._id()}",
            kind,  # type: ignore[arg-type]
            person,
            channel,
            data,
            self._now(),
            message=message,
            attachment_size_limit=self.attachment_size_limit,
        )
        self.interactions.append(interaction)
        await self.dispatch("INTERACTION_CREATE", interaction.json())
        return interaction

    def _interaction(self, iid: str, token: str) -> Interaction:
        found = next((i for i in self.interactions if i.id == iid and i.token == token), None)
        if found is None:
            raise DiscordError(404, 10062, "Unknown interaction")
        return found

    async def _callback(
        self, iid: str, token: str, body: Any, with_response: bool
    ) -> tuple[int, Any]:
        interaction = self._interaction(iid, token)
        try:
            if interaction.callback is not None:
                raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
            if self._now() - interaction.created > self.pacing.ack_deadline:
                raise DiscordError(404, 10062, "Unknown interaction")
            if not isinstance(body, dict) or not isinstance(body.get("type"), int):
                raise DiscordError.invalid({"type": "This field is required"})
            kind, data = body["type"], body.get("data") or {}
            if (kind == 8) != (interaction.type == 4):
                raise DiscordError.invalid({"type": "Only an autocomplete is answered with 8."})
            if kind == 8:
                _check_body(data, check_choices)
            if kind in (6, 7) and interaction.message is None:
                raise DiscordError.invalid({"type": "This interaction has no message to update."})
            if kind == 9:
                if interaction.type == 5:
                    raise DiscordError.invalid({"type": "A modal cannot answer a modal submit."})
                _check_body(data, check_modal)
            elif kind in (4, 7):
                _check_body(data, check_message)
        except DiscordError as refusal:
            interaction.refused.append(refusal.code)
            raise
        interaction.callback, interaction.callback_at = body, self._now()
        if kind in (4, 5):
            interaction.original = self._store(
                self._bot_message(interaction.channel.id, data, [], interaction)
            )
            if not interaction.original.ephemeral:
                await self.dispatch("MESSAGE_CREATE", interaction.original)
        elif kind == 7:
            assert interaction.message is not None
            message = interaction.message
            message.edits.append(Version(message.content, message.embeds, message.components))
            for key in ("content", "embeds", "components"):
                if key in data:
                    setattr(message, key, data[key] or ([] if key != "content" else ""))
            interaction.original = message
            if not message.ephemeral:
                await self.dispatch("MESSAGE_UPDATE", message)
        elif kind == 9:
            interaction.modal = data
        if not with_response:
            return 204, None
        response: dict[str, Any] = {
            "interaction": {
                "id": interaction.id,
                "type": interaction.type,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
            },
            "resource": {"type": kind},
        }
        if interaction.original is not None:
            response["interaction"]["response_message_id"] = interaction.original.id
            response["resource"]["message"] = interaction.original.json()
        return 200, response

    def _by_token(self, token: str) -> Interaction:
        interaction = next((i for i in self.interactions if i.token == token), None)
        if interaction is None or interaction.callback is None:
            raise DiscordError(404, 10015, "Unknown Webhook")
        if self._now() - interaction.created > self.pacing.followup_ttl:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        return interaction

    async def _followup(self, token: str, body: Any, files: list[dict[str, Any]]) -> Any:
        interaction = self._by_token(token)
        _check_body(body, check_message)
        self._check_files(files)
        message = self._store(self._bot_message(interaction.channel.id, body, files, interaction))
        interaction.followups.append(message)
        if not message.ephemeral:
            await self.dispatch("MESSAGE_CREATE", message)
        return message.json()

    def _webhook_message(self, token: str, mid: str) -> Sent:
        interaction = self._by_token(token)
        if mid == "@original":
            if interaction.original is None:
                raise DiscordError(404, 10008, "Unknown Message")
            return interaction.original
        found = next((m for m in interaction.followups if m.id == mid), None)
        if found is None:
            raise DiscordError(404, 10008, "Unknown Message")
        return found

    async def _webhook_edit(
        self, token: str, mid: str, body: Any, files: list[dict[str, Any]]
    ) -> Any:
        interaction = self._by_token(token)
        if mid == "@original" and interaction.original is None and interaction.message is not None:
            interaction.original = interaction.message  # after a deferred update (type 6)
        message = self._webhook_message(token, mid)
        channel = self.channels[message.channel_id]
        if channel.is_thread and channel.archived and not message.ephemeral:
            raise DiscordError(400, 50083, "Thread is archived")
        return await self._edit(message, body, files)

    # --- helpers --------------------------------------------------------------------------

    def _store(self, message: Sent) -> Sent:
        self._messages[message.id] = message
        self.sent.append(message)
        return message

    def _id(self) -> str:
        return str(next(self._ids))

    def _now(self) -> float:
        return time.monotonic() + self._offset

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def _rate_limited(retry_after: float) -> DiscordError:
    return DiscordError(429, 0, "You are being rate limited.", retry_after=retry_after)


def _check_body(
    body: Any, check: Callable[[Any], dict[str, str]], *, allow_list: bool = False
) -> None:
    if not isinstance(body, dict) and not (allow_list and isinstance(body, list)):
        raise DiscordError(400, 50109, "The request body contains invalid JSON.")
    errors = check(body)
    if errors:
        raise DiscordError.invalid(errors)


def _json(obj: Any, status: int, headers: dict[str, str]) -> web.Response:
    """discord.py parses a body as JSON only when Content-Type is exactly application/json."""
    return web.Response(
        body=json.dumps(obj).encode(),
        status=status,
        headers={"Content-Type": "application/json", **headers},
    )


async def _body_of(request: web.Request) -> tuple[Any, list[dict[str, Any]]]:
    """(JSON body, files) of a request: JSON, or multipart with payload_json and files[n]."""
    if not request.can_read_body:
        return None, []
    if request.content_type == "application/json":
        try:
            return await request.json(), []
        except ValueError:
            raise DiscordError(400, 50109, "The request body contains invalid JSON.") from None
    if request.content_type.startswith("multipart/"):
        body: Any = None
        files: list[dict[str, Any]] = []
        reader = await request.multipart()
        async for part in reader:
            name = getattr(part, "name", None)
            if name == "payload_json":
                body = json.loads(await part.text())  # type: ignore[union-attr]
            else:
                content = await part.read()  # type: ignore[union-attr]
                filename = getattr(part, "filename", None) or "file"
                files.append({"filename": filename, "size": len(content), "content": content})
        for file in files:  # bytes stay out of the JSON answers
            file["content"] = file["content"].decode("utf-8", "replace")[:100_000]
        return body, files
    raise DiscordError(400, 50109, "The request body contains invalid JSON.")


def _application(flags: int) -> dict[str, Any]:
    return {
        "id": APP_ID,
        "name": "Fake Gateway App",
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": ALICE.json(),
        "verify_key": "00" * 32,
        "flags": flags,
        "team": None,
        "summary": "",
    }


def _role(role_id: str, name: str, permissions: int, position: int) -> dict[str, Any]:
    return {
        "id": role_id,
        "name": name,
        "permissions": str(permissions),
        "position": position,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
