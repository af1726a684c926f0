"""A fake Telegram Bot API on 127.0.0.1 (aiohttp), strict where the real one is strict.

``async with FakeTelegram() as fake:`` serves ``/bot<token>/<method>`` on a port the kernel
picks (``fake.base_url`` is what a gateway's ``base_url`` takes). It answers with the Bot
API's envelope and reproduces the limits a bot meets (TESTING.md):

- ``callback_data`` of 1-64 bytes (``BUTTON_DATA_INVALID``); text of 1-4096 characters
  after entity parsing, HTML checked as the Bot API parses it ("can't parse entities");
- "message is not modified" for an edit that changes neither text nor buttons; an edit
  without ``reply_markup`` removes the buttons;
- HTTP 429 with ``parameters.retry_after`` (1-5 s) when a chat gets more than one message or
  edit in a second, a group more than 20 in a minute, or the bot more than 30 in a second;
- honest long polling: ``getUpdates`` waits up to ``timeout`` for news, an ``offset``
  confirms every older update, a second poller ends the first with 409 Conflict, and
  ``getUpdates`` is refused while a webhook is set. With a webhook set, pushed updates are
  POSTed to it with the ``X-Telegram-Bot-Api-Secret-Token`` header instead, one at a time
  and in order; one answered other than 2xx (or not answered) is POSTed again, after a
  growing pause, before any later one, as Telegram does;
- a private chat exists only once the person wrote to the bot (403 otherwise);
- forum topics: ``createForumTopic`` only in a forum (``is_forum``) where the bot is an admin
  with ``can_manage_topics`` (``make_admin``; 400 "not enough rights to create a topic"
  otherwise), a topic's id being its creation notice's message id; ``message_thread_id`` only
  for a topic that exists (made so, or where a person wrote), and never 1, the General
  topic's id ("message thread not found"), as the real Bot API refuses it;
  ``closeForumTopic`` likewise only with ``can_manage_topics`` (``closed_topics``).
- files a person sent (``add_file``): ``getFile`` answers a ``file_path`` (or "Bad Request:
  file is too big" past :data:`FILE_MAX_BYTES`, the cloud Bot API's 20 MB), and the file is
  served at ``/file/bot<token>/<file_path>``, streamed; ``file_cuts`` downloads to come are
  cut after their first bytes, ``file_fails`` answered 502; ``downloads`` counts each.

A test pushes updates (``push``; builders in ``tests/servers/telegram_people.py``), sees
which are not confirmed yet (``unconfirmed``) and which each ``getUpdates`` handed out
(``handed_out``; ``conflicts`` counts the long polls another poller ended), reads what the
bot sent (``messages``, ``answers``, ``documents``) and what it refused (``rejected``: every
call but getUpdates refused other than by a 429, which ``too_many`` counts), waits for a
change under a deadline (``wait_for``), and can make Telegram unreachable (``down``) or
rate-limit everything for a while (``storm``), the next call (``refuse_next``) or one chat's
messages and edits until told (``hold``, ``release``: a chat paced as hard as Telegram may).
``too_many`` counts the 429s it gave; ``paced`` has when each rate-limited call came.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from tests.servers.telegram_wire import (
    Refused,
    chat_id_of,
    check_entities,
    check_markup,
    error,
    params_of,
    visible_text,
)

__all__ = ["BOT", "FILE_MAX_BYTES", "TOKEN", "FakeTelegram", "Sent"]

T = TypeVar("T")
TOKEN = "123456:TEST-fake-token"
BOT: dict[str, Any] = {
    "id": 999000,
    "is_bot": True,
    "first_name": "Gateway",
    "username": "gateway_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}
FILE_MAX_BYTES = 20 * 1024 * 1024  # what getFile serves a bot from the cloud Bot API
WEBHOOK_RETRY_SECONDS = (0.05, 1.0)  # the first pause before a POST again, and the longest
_PER_CHAT = frozenset(
    {"sendMessage", "sendDocument", "sendPhoto", "editMessageText", "editMessageReplyMarkup"}
)
_LIMITED = _PER_CHAT | {"deleteMessage", "setMessageReaction"}
# the emoji a bot may react with (Bot API, ReactionTypeEmoji); anything else is refused
REACTION_EMOJI = frozenset(
    "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡"
    " 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪"
    " 🗿 🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡".split()
)
_CHAT_ACTIONS = frozenset(
    "typing upload_photo record_video upload_video record_voice upload_voice upload_document"
    " choose_sticker find_location record_video_note upload_video_note".split()
)


@dataclass
class Sent:
    """A message in a chat as Telegram shows it now (bot's or person's)."""

    chat_id: int
    message_id: int
    text: str  # the visible text
    thread: int | None = None
    markup: dict[str, Any] | None = None
    from_bot: bool = True
    reply_to: int | None = None
    document: tuple[str, bytes] | None = None  # (file name, content)
    photo: tuple[str, bytes] | None = None  # (file name, content): sent with sendPhoto
    deleted: bool = False
    html: str = ""
    versions: list[str] = field(default_factory=list)
    reactions: list[str] = field(default_factory=list)  # the bot's reaction on it (emoji)
    parse_mode: str | None = None
    entities: list[dict[str, Any]] = field(default_factory=list)  # as the Bot API parsed them

    def entities_of(self, kind: str) -> list[str]:
        """The text of each entity of ``kind`` (code, pre, bold, text_link, ...)."""
        units = self.text.encode("utf-16-le")
        return [
            units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
            for e in self.entities
            if e["type"] == kind
        ]

    @property
    def buttons(self) -> list[dict[str, Any]]:
        rows = (self.markup or {}).get("inline_keyboard") or []
        return [button for row in rows for button in row]

    def button(self, label_part: str) -> dict[str, Any]:
        found = [b for b in self.buttons if label_part == b["text"]] or [
            b for b in self.buttons if label_part in b["text"]
        ]
        if len(found) != 1:
            raise AssertionError(f"{len(found)} buttons with {label_part!r}: {self.buttons}")
        return found[0]

    @property
    def force_reply(self) -> bool:
        return bool((self.markup or {}).get("force_reply"))


class FakeTelegram:
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.port = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.too_many: list[tuple[str, int | None, int]] = []  # (method, chat, retry_after)
        # (monotonic time, method, chat, retry_after: 0 if taken) of each rate-limited call
        self.paced: list[tuple[float, str, int, int]] = []
        self.rejected: list[tuple[str, str]] = []  # (method, why): the bot's calls refused

        self.answers: list[dict[str, Any]] = []  # answerCallbackQuery, in order
        self.commands: list[dict[str, Any]] = []
        self.webhook: dict[str, Any] | None = None
        self.webhook_deliveries: list[int] = []  # HTTP status of each webhook POST (0: none)
        self.handed_out: list[list[int]] = []  # the update ids of each getUpdates answer
        self.conflicts = 0  # long polls ended by another poller's getUpdates (409)
        self.down = False  # Telegram unreachable: every method answers 502
        # the names of the routes cut off (via_url): those callers alone get 502, as a host
        # whose network cannot reach Telegram while the others can
        self.cut_off: set[str] = set()
        self.refused: list[str] = []  # the methods (but getUpdates) answered 502 while down
        self.down_at_next_card = False  # go down when the next message with buttons comes
        self.chats: dict[int, dict[str, Any]] = {}
        self.private_open: set[int] = set()
        self.topics: dict[int, dict[int, str]] = defaultdict(dict)  # chat: {topic id: name}
        self.closed_topics: dict[int, set[int]] = defaultdict(set)  # closeForumTopic's
        self.admin_rights: dict[int, dict[str, bool]] = {}  # chat: the bot's rights there
        self._sent: dict[tuple[int, int], Sent] = {}
        self._next_id: dict[int, itertools.count[int]] = {}
        self._updates: list[dict[str, Any]] = []
        self._outgoing: deque[dict[str, Any]] = deque()  # for the webhook, oldest first
        self._deliverer: asyncio.Task[None] | None = None
        self._update_ids = itertools.count(1)
        self._answered: set[str] = set()
        self._chat_times: dict[int, deque[float]] = defaultdict(deque)
        self._bot_times: deque[float] = deque()
        self._storm_until = 0.0
        self._storm_retry_after = 1
        self._refuse_next = 0  # the next rate-limited call is answered 429 with this
        self._held: dict[int, int] = {}  # chat id: the retry_after its messages are answered
        self._poller: asyncio.Future[None] | None = None
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._closing = False
        self.files: dict[str, bytes] = {}  # by file_id
        self._file_paths: dict[str, str] = {}  # file_path -> file_id
        self._file_ids = itertools.count(1)
        self.file_cuts = 0  # downloads to come cut after their first bytes
        self.file_fails = 0  # downloads to come answered 502
        self.downloads: list[str] = []  # the file_path of every download asked

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_route("*", "/via/{via}/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._http = aiohttp.ClientSession()
        self._deliverer = asyncio.create_task(self._deliver_webhooks())  # ended in __aexit__
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing = True  # long polls return at once
        await self._notify()
        if self._deliverer is not None:
            self._deliverer.cancel()
            await asyncio.wait({self._deliverer})
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def via_url(self, name: str) -> str:
        """A base URL of its own for one caller (a host), that :attr:`cut_off` can cut."""
        return f"{self.base_url}/via/{name}"

    # --- what a test does -----------------------------------------------------------------

    async def push(self, update: dict[str, Any]) -> int:
        """Deliver an update (getUpdates, or the webhook if one is set); its update_id."""
        update_id = next(self._update_ids)
        full = {"update_id": update_id, **update}
        message = update.get("message")
        if message is not None:
            self._remember_person_message(message)
        if self.webhook is not None:
            self._outgoing.append(full)
        else:
            self._updates.append(full)
        await self._notify()
        return update_id

    @property
    def unconfirmed(self) -> list[int]:
        """The ids of the updates not confirmed yet (by an offset, or a webhook's 2xx)."""
        return [u["update_id"] for u in (*self._updates, *self._outgoing)]

    def storm(self, seconds: float, retry_after: int = 1) -> None:
        """Every message, edit and deletion is answered 429 for ``seconds`` from now."""
        self._storm_until = time.monotonic() + seconds
        self._storm_retry_after = retry_after

    def refuse_next(self, retry_after: int) -> None:
        """The next message, edit or deletion is answered 429 with ``retry_after``."""
        self._refuse_next = retry_after

    def hold(self, chat_id: int, retry_after: int = 5) -> None:
        """Every message and edit in the chat is answered 429 with ``retry_after`` until
        :meth:`release` (other chats as ever)."""
        self._held[chat_id] = retry_after

    def release(self, chat_id: int) -> None:
        self._held.pop(chat_id, None)

    def add_file(self, content: bytes) -> tuple[str, str]:
        """Keep ``content`` as a file a person sent; its ``file_id`` and ``file_unique_id``."""
        n = next(self._file_ids)
        file_id = f"BQACAgQAAxkBAAI{n:04d}"
        self.files[file_id] = content
        return file_id, f"AgAD{n:04d}"

    def register_chat(self, chat: dict[str, Any]) -> None:
        self.chats[int(chat["id"])] = chat

    def make_admin(self, chat_id: int, *, can_manage_topics: bool = True) -> None:
        """The bot is an admin of ``chat_id``, with or without the right to manage topics."""
        self.admin_rights[chat_id] = {"can_manage_topics": can_manage_topics}

    def new_message_id(self, chat_id: int) -> int:
        if chat_id not in self._next_id:
            # a group's message 1 is its creation, whose id the General topic's is
            self._next_id[chat_id] = itertools.count(1 if chat_id > 0 else 2)
        return next(self._next_id[chat_id])

    def messages(self, chat_id: int, thread: int | None = None) -> list[Sent]:
        """The messages of a chat (of one topic, if given), oldest first, deletions left out."""
        return [
            m
            for (chat, _), m in sorted(self._sent.items())
            if chat == chat_id and not m.deleted and (thread is None or m.thread == thread)
        ]

    def bot_messages(self, chat_id: int, thread: int | None = None) -> list[Sent]:
        return [m for m in self.messages(chat_id, thread) if m.from_bot]

    def message(self, chat_id: int, message_id: int) -> Sent:
        return self._sent[(chat_id, message_id)]

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    async def wait_for(self, probe: Callable[[], T | None], deadline: float = 30.0) -> T:
        """Wait until ``probe()`` returns something other than None or False."""
        async with asyncio.timeout(deadline), self._changed:
            while True:
                value = probe()
                if value is not None and value is not False:
                    return value
                await self._changed.wait()

    # --- the API --------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await params_of(request)
        if method == "sendMessage" and self.down_at_next_card and params.get("reply_markup"):
            self.down_at_next_card, self.down = False, True
        if request.match_info.get("via") in self.cut_off:
            await self._notify()
            return error(502, "Bad Gateway")
        if self.down:
            if method != "getUpdates":
                self.refused.append(method)
            await self._notify()
            return error(502, "Bad Gateway")
        if method != "getUpdates":
            self.calls.append((method, params))
            if os.environ.get("FAKE_TELEGRAM_TRACE"):
                print(f"{time.monotonic():.3f} {method} {str(params)[:100]}")
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return error(404, "Not Found: method not found")
        try:
            if method in _LIMITED:
                self._check_rate(method, chat_id_of(params))
            result = await handler(params)
        except Refused as refused:
            if refused.status != 429 and method != "getUpdates":
                self.rejected.append((method, refused.description))
            return error(refused.status, refused.description, refused.retry_after)
        finally:
            await self._notify()
        return web.json_response({"ok": True, "result": result})

    async def _m_getFile(self, p: dict[str, Any]) -> dict[str, Any]:
        file_id = str(p.get("file_id") or "")
        content = self.files.get(file_id)
        if content is None:
            raise Refused(400, "Bad Request: invalid file_id")
        if len(content) > FILE_MAX_BYTES:
            raise Refused(400, "Bad Request: file is too big")
        path = f"documents/file_{file_id[-4:]}"
        self._file_paths[path] = file_id
        return {
            "file_id": file_id,
            "file_unique_id": f"AgAD{file_id[-4:]}",
            "file_size": len(content),
            "file_path": path,
        }

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return error(401, "Unauthorized")
        path = request.match_info["path"]
        self.downloads.append(path)
        await self._notify()
        file_id = self._file_paths.get(path)
        if file_id is None:
            return error(404, "Not Found")
        if self.down or self.file_fails > 0:
            self.file_fails = max(0, self.file_fails - 1)
            return error(502, "Bad Gateway")
        content = self.files[file_id]
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(content)
        await response.prepare(request)
        if self.file_cuts > 0:
            self.file_cuts -= 1
            await response.write(content[: max(1, len(content) // 3)])
            assert request.transport is not None
            request.transport.close()  # cut midway, as a dropped connection is
            return response
        for start in range(0, len(content), 256 * 1024):
            await response.write(content[start : start + 256 * 1024])
        await response.write_eof()
        return response

    def _check_rate(self, method: str, chat_id: int) -> None:
        now = time.monotonic()
        retry = 0.0
        if now < self._storm_until:
            retry = float(self._storm_retry_after)
        chat = self._chat_times[chat_id]
        while chat and chat[0] <= now - 60:
            chat.popleft()
        bot = self._bot_times
        while bot and bot[0] <= now - 1:
            bot.popleft()
        if method in _PER_CHAT:
            retry = max(retry, self._held.get(chat_id, 0))
            if chat and chat[-1] > now - 1:
                retry = max(retry, chat[-1] + 1 - now)
            if chat_id < 0 and len(chat) >= 20:
                retry = max(retry, chat[-20] + 60 - now)
        if len(bot) >= 30:
            retry = max(retry, bot[-30] + 1 - now)
        if self._refuse_next:
            retry, self._refuse_next = max(retry, self._refuse_next), 0
        if retry > 0:
            seconds = min(5, max(1, math.ceil(retry)))
            self.too_many.append((method, chat_id, seconds))
            self.paced.append((now, method, chat_id, seconds))
            raise Refused(429, f"Too Many Requests: retry after {seconds}", seconds)
        self.paced.append((now, method, chat_id, 0))
        if method in _PER_CHAT:
            chat.append(now)
        bot.append(now)

    async def _m_getMe(self, p: dict[str, Any]) -> dict[str, Any]:
        return BOT

    async def _m_getChat(self, p: dict[str, Any]) -> dict[str, Any]:
        """A chat the bot is in, as a ChatFullInfo (its required fields, and the chat's own)."""
        chat_id = chat_id_of(p)
        if chat_id not in self.chats:
            raise Refused(400, "Bad Request: chat not found")
        gifts = (
            "unlimited_gifts",
            "limited_gifts",
            "unique_gifts",
            "premium_subscription",
            "gifts_from_channels",
        )
        return {
            **self.chats[chat_id],
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": dict.fromkeys(gifts, False),
        }

    async def _m_setMyCommands(self, p: dict[str, Any]) -> bool:
        self.commands = list(p.get("commands") or [])
        return True

    async def _m_deleteWebhook(self, p: dict[str, Any]) -> bool:
        self.webhook = None
        self._updates.extend(self._outgoing)  # still pending: getUpdates hands them out
        self._outgoing.clear()
        return True

    async def _m_setWebhook(self, p: dict[str, Any]) -> bool:
        self.webhook = {"url": p["url"], "secret_token": p.get("secret_token")}
        self._outgoing.extend(self._updates)
        self._updates = []
        return True

    async def _m_getUpdates(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook is not None:
            raise Refused(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(p.get("offset") or 0)
        timeout = float(p.get("timeout") or 0)
        if offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        if self._poller is not None and not self._poller.done():
            self.conflicts += 1
            self._poller.set_exception(Refused(409, "Conflict: terminated by other getUpdates"))
        poller: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._poller = poller
        deadline = time.monotonic() + timeout
        async with self._changed:
            while not self._updates and time.monotonic() < deadline and not self._closing:
                if poller.done():
                    poller.result()  # raises the Conflict
                try:
                    async with asyncio.timeout(deadline - time.monotonic()):
                        await self._changed.wait()
                except TimeoutError:
                    break
        if poller.done():
            poller.result()
        poller.set_result(None)
        limit = int(p.get("limit") or 100)
        handed = self._updates[:limit]
        if handed:
            self.handed_out.append([u["update_id"] for u in handed])
        return handed

    async def _m_sendMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(p)
        markup = p.get("reply_markup")
        check_markup(markup)
        visible, entities = check_entities(p.get("text", ""), p.get("parse_mode"))
        sent = self._store_new(chat_id, p, visible, markup)
        stored = self._sent[(chat_id, sent["message_id"])]
        stored.parse_mode, stored.entities = p.get("parse_mode"), entities
        return sent

    async def _m_sendDocument(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(p)
        document = p.get("document")
        if not isinstance(document, tuple):
            raise Refused(400, "Bad Request: there is no document in the request")
        caption = p.get("caption") or ""
        visible = visible_text(caption) if p.get("parse_mode") == "HTML" and caption else caption
        if len(visible) > 1024:
            raise Refused(400, "Bad Request: message caption is too long")
        sent = self._store_new(chat_id, p, visible, p.get("reply_markup"))
        message = self._sent[(chat_id, sent["message_id"])]
        message.document = document
        sent["document"] = {
            "file_id": f"file-{sent['message_id']}",
            "file_unique_id": f"u{sent['message_id']}",
            "file_name": document[0],
        }
        return sent

    async def _m_sendPhoto(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(p)
        photo = p.get("photo")
        if not isinstance(photo, tuple):
            raise Refused(400, "Bad Request: there is no photo in the request")
        if len(photo[1]) > 10 * 1024 * 1024:
            raise Refused(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
        caption = p.get("caption") or ""
        if len(caption) > 1024:
            raise Refused(400, "Bad Request: message caption is too long")
        sent = self._store_new(chat_id, p, caption, p.get("reply_markup"))
        self._sent[(chat_id, sent["message_id"])].photo = photo
        sent["photo"] = [
            {
                "file_id": f"photo-{sent['message_id']}",
                "file_unique_id": f"p{sent['message_id']}",
                "width": 1,
                "height": 1,
            }
        ]
        return sent

    async def _m_editMessageText(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._existing(p, "message to edit not found")
        markup = p.get("reply_markup")
        check_markup(markup)
        visible, entities = check_entities(p.get("text", ""), p.get("parse_mode"))
        if message.html == p.get("text", "") and message.markup == markup:
            raise Refused(
                400,
                "Bad Request: message is not modified: specified new message content and reply"
                " markup are exactly the same as a current content and reply markup of the"
                " message",
            )
        message.text, message.html, message.markup = visible, p.get("text", ""), markup
        message.parse_mode, message.entities = p.get("parse_mode"), entities
        message.versions.append(visible)
        return self._json(message)

    async def _m_editMessageReplyMarkup(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._existing(p, "message to edit not found")
        markup = p.get("reply_markup")
        check_markup(markup)
        if message.markup == markup:
            raise Refused(400, "Bad Request: message is not modified")
        message.markup = markup
        return self._json(message)

    async def _m_createForumTopic(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._writable_chat(p)
        if not self.chats[chat_id].get("is_forum"):
            raise Refused(400, "Bad Request: the chat is not a forum")
        if not self.admin_rights.get(chat_id, {}).get("can_manage_topics"):
            raise Refused(400, "Bad Request: not enough rights to create a topic")
        name = str(p.get("name") or "")
        if not name:
            raise Refused(400, "Bad Request: TOPIC_TITLE_EMPTY")
        if len(name) > 128:
            raise Refused(400, "Bad Request: TOPIC_TITLE_TOO_LONG")
        # its id is its creation notice's (a service message, not kept among the messages)
        topic_id = self.new_message_id(chat_id)
        self.topics[chat_id][topic_id] = name
        return {"message_thread_id": topic_id, "name": name, "icon_color": 7322096}

    async def _m_closeForumTopic(self, p: dict[str, Any]) -> bool:
        chat_id = self._writable_chat(p)
        if not self.admin_rights.get(chat_id, {}).get("can_manage_topics"):
            raise Refused(400, "Bad Request: not enough rights to manage topics")
        topic_id = int(p.get("message_thread_id") or 0)
        if topic_id not in self.topics[chat_id]:
            raise Refused(400, "Bad Request: TOPIC_ID_INVALID")
        if topic_id in self.closed_topics[chat_id]:
            raise Refused(400, "Bad Request: TOPIC_NOT_MODIFIED")
        self.closed_topics[chat_id].add(topic_id)
        return True

    async def _m_sendChatAction(self, p: dict[str, Any]) -> bool:
        self._writable_chat(p)
        if p.get("action") not in _CHAT_ACTIONS:
            raise Refused(400, "Bad Request: wrong parameter action in request")
        return True

    async def _m_setMessageReaction(self, p: dict[str, Any]) -> bool:
        message = self._existing(p, "message to react not found")
        reaction = p.get("reaction") or []
        if isinstance(reaction, str):
            reaction = json.loads(reaction)
        emoji = []
        for item in reaction:
            if item.get("type") != "emoji" or item.get("emoji") not in REACTION_EMOJI:
                raise Refused(400, "Bad Request: REACTION_INVALID")
            emoji.append(item["emoji"])
        if len(emoji) > 1:
            raise Refused(400, "Bad Request: REACTIONS_TOO_MANY")
        message.reactions = emoji
        return True

    async def _m_deleteMessage(self, p: dict[str, Any]) -> bool:
        message = self._existing(p, "message to delete not found")
        message.deleted = True
        return True

    async def _m_answerCallbackQuery(self, p: dict[str, Any]) -> bool:
        query_id = str(p["callback_query_id"])
        if query_id in self._answered:
            raise Refused(400, "Bad Request: query is too old and response timeout expired")
        if len(p.get("text") or "") > 200:
            raise Refused(400, "Bad Request: text is too long")
        self._answered.add(query_id)
        self.answers.append(p)
        return True

    # --- state ----------------------------------------------------------------------------

    def _writable_chat(self, p: dict[str, Any]) -> int:
        chat_id = chat_id_of(p)
        if chat_id not in self.chats:
            raise Refused(400, "Bad Request: chat not found")
        if chat_id > 0 and chat_id not in self.private_open:
            raise Refused(403, "Forbidden: bot can't initiate conversation with a user")
        thread = p.get("message_thread_id")
        if thread is not None and int(thread) not in self.topics[chat_id]:
            # the General topic (1) included: a message there is sent without a thread
            raise Refused(400, "Bad Request: message thread not found")
        return chat_id

    def _existing(self, p: dict[str, Any], missing: str) -> Sent:
        key = (chat_id_of(p), int(p.get("message_id") or 0))
        message = self._sent.get(key)
        if message is None or message.deleted:
            raise Refused(400, f"Bad Request: {missing}")
        return message

    def _store_new(
        self, chat_id: int, p: dict[str, Any], visible: str, markup: dict[str, Any] | None
    ) -> dict[str, Any]:
        thread = int(p["message_thread_id"]) if p.get("message_thread_id") else None
        reply = p.get("reply_parameters") or {}
        message = Sent(
            chat_id=chat_id,
            message_id=self.new_message_id(chat_id),
            text=visible,
            html=p.get("text", ""),
            thread=thread,
            markup=markup,
            reply_to=int(reply["message_id"]) if reply.get("message_id") else None,
            versions=[visible],
        )
        self._sent[(chat_id, message.message_id)] = message
        return self._json(message)

    def _remember_person_message(self, message: dict[str, Any]) -> None:
        chat = message["chat"]
        self.register_chat(chat)
        if chat["type"] == "private":
            self.private_open.add(int(chat["id"]))
        key = (int(chat["id"]), int(message["message_id"]))
        topic = message.get("message_thread_id")
        if topic is not None and message.get("is_topic_message") and topic != 1:
            self.topics[key[0]].setdefault(int(topic), f"topic {topic}")
        reply = message.get("reply_to_message")
        self._sent[key] = Sent(
            chat_id=key[0],
            message_id=key[1],
            text=message.get("text", ""),
            thread=message.get("message_thread_id"),
            from_bot=False,
            reply_to=reply["message_id"] if reply else None,
        )

    def _json(self, message: Sent) -> dict[str, Any]:
        body: dict[str, Any] = {
            "message_id": message.message_id,
            "date": int(time.time()),
            "chat": self.chats[message.chat_id],
            "from": BOT,
            "text": message.text,
        }
        if message.thread is not None:
            body["message_thread_id"] = message.thread
            body["is_topic_message"] = True
        if message.markup and "inline_keyboard" in message.markup:
            body["reply_markup"] = message.markup
        return body

    async def _deliver_webhooks(self) -> None:
        """POST the oldest pending update to the webhook until it answers 2xx, then the next."""
        first, longest = WEBHOOK_RETRY_SECONDS
        pause = first
        while True:
            async with self._changed:
                while self.webhook is None or not self._outgoing:
                    await self._changed.wait()
            update = self._outgoing[0]
            status = await self._post_webhook(self.webhook, update)
            self.webhook_deliveries.append(status)
            if 200 <= status < 300:
                if self._outgoing and self._outgoing[0] is update:
                    self._outgoing.popleft()
                pause = first
            else:
                await asyncio.sleep(pause)  # Telegram's own pause before it tries again
                pause = min(pause * 2, longest)
            await self._notify()

    async def _post_webhook(self, webhook: dict[str, Any], update: dict[str, Any]) -> int:
        """The HTTP status the webhook answered (0: no answer)."""
        assert self._http is not None
        headers = {}
        if webhook["secret_token"]:
            headers["X-Telegram-Bot-Api-Secret-Token"] = webhook["secret_token"]
        try:
            async with self._http.post(webhook["url"], json=update, headers=headers) as reply:
                return reply.status
        except aiohttp.ClientError:
            return 0

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
