"""The console's HTTP side (aiohttp): the guard middleware, the pages, the posts, the events.

    GET  /              sessions and their run state; start a conversation
    GET  /pending       every open interaction of every session, decidable here
    GET  /s/{id}        one session: its text, tool activity and cards; a message box
    GET  /events        server-sent events: "changed" whenever the core told the console
    POST /new           start a conversation (project, text)
    POST /s/{id}/say    a message for the agent (never a decision)
    POST /i/{id}/act    a button (token)
    POST /i/{id}/form   a question form (token, q.<question>, o.<question>)

Every request passes :func:`_guard` first (Host, token or cookie, and for a POST the
Origin and the CSRF token; see ``security.py``). A POST answers JSON to the page's script
(``Accept: application/json``) and otherwise redirects back with a notice, so that the
console also works without JavaScript. A click or form the core has not answered within the
console's ack deadline (less a margin) is answered "Received" at once, and the card on the
page shows the outcome (gateway/deadline.py).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDictProxy

from gateway.attachments import InboundAttachment
from gateway.deadline import RECEIVED, answer_in_time
from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError
from gateway.interactions.machine import Interaction
from gateway.platform import (
    Ack,
    InboundAction,
    InboundForm,
    InboundMessage,
    Platform,
)
from gateway.session_record import SessionRecord
from platforms.console.answers import answers_from_form
from platforms.console.assets import CSP
from platforms.console.cards_html import MESSAGE_MAX_CHARS, PostContext
from platforms.console.config import ConsoleConfig
from platforms.console.feed import Changes, Feed
from platforms.console.grants_page import grants_page
from platforms.console.pages import (
    Frame,
    conversation_page,
    pending_page,
    refused_page,
    sessions_page,
)
from platforms.console.receipts import message_receipt
from platforms.console.security import (
    BrowserSession,
    Guard,
    PublicAddress,
    host_allowed,
    origin_allowed,
)
from platforms.console.uploads import MAX_UPLOAD_BYTES, Uploads
from platforms.console.views import (
    AGENT_DID_NOT_START,
    IDLE_WORDS,
    YOU,
    NoticeItem,
    TextItem,
    console_conversations,
    conversation_items,
    pending_views,
    remembered_texts,
    run_state,
    session_rows,
    session_title,
    typing_refusal,
)

if TYPE_CHECKING:
    from gateway.sessions.engine import Gateway

__all__ = ["ServedConsole", "build_app"]

log = logging.getLogger(__name__)


class ServedConsole(Platform, Protocol):
    """What the pages use of the console that serves them
    (:class:`platforms.console.platform.ConsolePlatform`, which builds this app)."""

    @property
    def settings(self) -> ConsoleConfig: ...
    @property
    def uploads(self) -> Uploads: ...
    @property
    def words(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def actor(self) -> Actor: ...
    @property
    def guard(self) -> Guard: ...
    @property
    def public(self) -> PublicAddress | None: ...
    @property
    def feed(self) -> Feed: ...
    @property
    def changes(self) -> Changes: ...
    @property
    def since(self) -> datetime | None: ...
    @property
    def port(self) -> int: ...
    @property
    def cookie_name(self) -> str: ...
    @property
    def taking_input(self) -> bool: ...
    @property
    def gateway(self) -> Gateway | None: ...
    @property
    def auth_platform(self) -> str: ...
    def new_conversation(self, project: str) -> ConversationRef | None: ...
    def mirror_conversation(self, session: SessionRecord) -> ConversationRef: ...
    def projects(self) -> list[str]: ...


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CONSOLE = web.AppKey("console", ServedConsole)
SESSION = web.RequestKey("browser_session", BrowserSession)
FORM: web.RequestKey[MultiDictProxy[str | bytes | bytearray | web.FileField]] = web.RequestKey(
    "form"
)
KEEPALIVE_SECONDS = 15.0
_HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def build_app(console: ServedConsole) -> web.Application:
    # a message may carry files picked in its box (uploads.py): aiohttp spools them to disk
    app = web.Application(middlewares=[_guard], client_max_size=MAX_UPLOAD_BYTES)
    app[CONSOLE] = console
    app.router.add_get("/", _sessions)
    app.router.add_get("/pending", _pending)
    app.router.add_get("/s/{session}", _conversation)
    app.router.add_get("/events", _events)
    app.router.add_get("/f/{message}", _file)
    app.router.add_post("/new", _new)
    app.router.add_post("/s/{session}/say", _say)
    app.router.add_get("/s/{session}/grants", _grants)
    app.router.add_post("/s/{session}/revoke", _revoke)
    app.router.add_post("/i/{interaction}/act", _act)
    app.router.add_post("/i/{interaction}/form", _form)
    app.router.add_post("/m/{message}/act", _notice_act)
    return app


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={**_HEADERS, "Location": location})


def _stopping(request: web.Request) -> web.Response:
    """A POST while the gateway stops: nothing of it reached the gateway."""
    text = "The gateway is stopping: this was not sent. Send it again once it is back."
    if "application/json" in request.headers.get("Accept", ""):
        body = {"accepted": False, "text": text, "location": None}
        return web.json_response(body, status=503, headers=_HEADERS)
    return _refuse(503, text)


def _refuse(status: int, text: str) -> web.Response:
    return web.Response(
        status=status, text=refused_page(status, text), content_type="text/html", headers=_HEADERS
    )


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = request.app[CONSOLE]
    guard: Guard = console.guard
    if not host_allowed(request.headers.get("Host"), console.port, console.public):
        return _refuse(421, "this address does not name the console")
    token = request.query.get("token")
    if token is not None:
        opened = guard.open_session(token) if request.method == "GET" else None
        if opened is None:
            return _refuse(401, "the access token is not valid")
        rest = [(k, v) for k, v in request.query.items() if k != "token"]
        location = request.path + (f"?{urlencode(rest)}" if rest else "")
        entered = _see_other(location)
        entered.set_cookie(
            console.cookie_name,
            opened.id,
            httponly=True,
            samesite="Strict",
            path="/",
            secure=console.public is not None,  # https in front: never sent in clear
        )
        return entered
    session = guard.session(request.cookies.get(console.cookie_name))
    if session is None:
        return _refuse(401, "this console needs its access token")
    request[SESSION] = session
    if request.method == "POST":
        headers = request.headers
        if not origin_allowed(
            headers.get("Origin"), headers.get("Referer"), headers.get("Host"), console.public
        ):
            return _refuse(403, "this form was not sent from the console's own page")
        form = await request.post()
        csrf = form.get("csrf")
        if not guard.csrf_ok(session, csrf if isinstance(csrf, str) else None):
            return _refuse(403, "this form's CSRF token is missing or wrong: reload the page")
        request[FORM] = form
    if console.gateway is None:
        return _refuse(503, "the gateway is still starting")
    if request.method == "POST" and not console.taking_input:
        return _stopping(request)
    try:
        response = await handler(request)
    except StoreError:  # the ledger closed under the page: the gateway is stopping
        return _refuse(503, "the gateway is stopping")
    if not response.prepared:
        response.headers.update(_HEADERS)
    return response


# --- helpers --------------------------------------------------------------------------------


def _parts(request: web.Request) -> tuple[ServedConsole, Gateway, BrowserSession]:
    console = request.app[CONSOLE]
    gateway = console.gateway
    assert gateway is not None  # the guard answered 503 before attach
    return console, gateway, request[SESSION]


def _field(request: web.Request, name: str) -> str:
    value = request[FORM].get(name)
    return value if isinstance(value, str) else ""


def _context(request: web.Request, session: BrowserSession) -> PostContext:
    back = request.path_qs
    return PostContext(csrf=session.csrf, back=back)


async def _frame(request: web.Request) -> Frame:
    console, gateway, session = _parts(request)
    pending = await gateway.store.interactions.list_open()
    sessions = await gateway.store.sessions.list_sessions()
    return Frame(
        identity=console.settings.identity,
        pending=len(pending),
        sessions=len(sessions),
        notices=session.take_notices(),
        problems=gateway.platform_problems.listed(),
    )


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


def _about(request: web.Request) -> str:
    """Which form of the page a POST came from: a card's (``i-<id>``), a notice's
    (``m-<id>``) or the message box."""
    interaction = request.match_info.get("interaction")
    if interaction is not None:
        return f"i-{interaction}"
    message = request.match_info.get("message")
    return f"m-{message}" if message is not None else "say"


def _answer(request: web.Request, ack: Ack, *, location: str | None = None) -> web.Response:
    """JSON for the page's script; otherwise a redirect back, with the ack as a notice (a
    refusal is shown next to the form it concerns, see pages.Notices)."""
    if "application/json" in request.headers.get("Accept", ""):
        body = {"accepted": ack.accepted, "text": ack.text, "location": location}
        return web.json_response(body)
    about = _about(request)
    request[SESSION].notify(ack.text, refused=not ack.accepted, about=about)
    back = location or _field(request, "back")
    if not back.startswith("/") or back.startswith("//"):
        back = "/"
    elif location is None:
        # back to the form it came from (a card's, or the message box), where its refusal
        # is: a page without script would open at its top, the refusal below the fold
        back = f"{back.partition('#')[0]}#{about}"
    return _see_other(back)


# --- pages ----------------------------------------------------------------------------------


async def _sessions(request: web.Request) -> web.Response:
    console, gateway, session = _parts(request)
    rows = await session_rows(gateway)
    page = sessions_page(
        await _frame(request),
        rows,
        console.projects(),
        _context(request, session),
        words=console.words,
    )
    return _html(page)


async def _pending(request: web.Request) -> web.Response:
    console, gateway, session = _parts(request)
    views, closed = await pending_views(gateway, console)
    page = pending_page(await _frame(request), views, closed, _context(request, session))
    return _html(page)


async def _conversation(request: web.Request) -> web.Response:
    console, gateway, browser = _parts(request)
    record = await gateway.store.sessions.get(request.match_info["session"])
    if record is None:
        raise web.HTTPNotFound(text="no such session")
    conversations = await console_conversations(gateway, record.id)
    typed_here = [
        m.text for m in console.feed.messages(conversations) if m.author == YOU and m.text
    ]
    texts = await remembered_texts(
        gateway, record, conversations, console.since, typed_here=typed_here
    )
    texts += [
        TextItem(
            id=m.id,
            at=m.at,
            text=m.text,
            version=m.version,
            author=m.author,
            from_gateway=m.from_gateway,
            file=(
                None if m.file is None else (m.file.name, m.file.media_type, len(m.file.content))
            ),
        )
        for m in console.feed.messages(conversations)
        if m.text is not None
    ]
    notices = [
        NoticeItem(id=m.id, at=m.at, card=m.card, version=m.version)
        for m in console.feed.messages(conversations)
        if m.notice and m.card is not None
    ]
    items = await conversation_items(gateway, console, record, [*texts, *notices])
    open_ = await gateway.store.interactions.list_open(record.id)
    state = run_state(open_, await gateway.store.turns.latest(record.id), closed=record.is_closed)
    refused = (
        typing_refusal(
            gateway.config, conversations[0], record, console.actor, console.auth_platform
        )
        if conversations
        else "This session is not shown on the console."
    )
    first = await gateway.store.prompts.first_texts([record.id])
    runner = gateway.existing_runner(record.id)
    usage = runner.usage.describe() if runner is not None and runner.usage.reported else None
    failure = None
    if runner is not None and runner.start_failure is not None and state == IDLE_WORDS:
        state = AGENT_DID_NOT_START  # idle, as far as the ledger knows: say why
        failure = f"{runner.start_failure}. {runner.start_failure_help}"
    page = conversation_page(
        await _frame(request),
        record,
        session_title(record, first.get(record.id)),
        state,
        items,
        _context(request, browser),
        typing_refused=refused,
        usage=usage,
        start_failure=failure,
    )
    return _html(page)


async def _file(request: web.Request) -> web.Response:
    """A file the agent sent (send_file): a picture shown inline (its type was sniffed from
    its bytes, and only PNG, JPEG, GIF and WebP count), anything else downloaded, never
    drawn by the browser."""
    console, _gateway, _browser = _parts(request)
    shown = console.feed.get(request.match_info["message"])
    if shown is None or shown.file is None:
        raise web.HTTPNotFound(text="no such file (the console keeps the latest ones only)")
    upload = shown.file
    inline = upload.is_picture and request.query.get("download") is None
    disposition = "inline" if inline else "attachment"
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in upload.name) or "file"
    return web.Response(
        body=upload.content,
        content_type=upload.media_type if inline else "application/octet-stream",
        headers={
            "Content-Disposition": f'{disposition}; filename="{name}"',
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "private, no-store",
        },
    )


async def _events(request: web.Request) -> web.StreamResponse:
    console = request.app[CONSOLE]
    response = web.StreamResponse(
        headers={**_HEADERS, "Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    seen = console.changes.count
    await response.write(b"retry: 1000\n\n")
    try:
        while not console.changes.closed:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    seen = await console.changes.wait_past(seen)
            except TimeoutError:
                await response.write(b": keepalive\n\n")  # a connection still there
                continue
            await response.write(f"event: changed\ndata: {seen}\n\n".encode())
    except ConnectionResetError:
        pass  # the page was closed
    return response


# --- posts ----------------------------------------------------------------------------------


async def _new(request: web.Request) -> web.Response:
    console, gateway, _ = _parts(request)
    # one of the words the start page offers (the submit button pressed), else the text
    project = _field(request, "project")
    text = _field(request, "word").strip() or _field(request, "text").strip()
    conversation = console.new_conversation(project) if project in console.projects() else None
    if conversation is None:
        return _answer(request, Ack(text=f"No project {project!r} here.", accepted=False))
    picked = _picked(request)
    if not text and not picked:
        return _answer(request, Ack(text="Type a first message.", accepted=False))
    await gateway.on_message(_message(console, conversation, text, picked))
    started = await gateway.store.sessions.lookup(conversation)
    if started is None:
        replies = [m.text for m in console.feed.messages([conversation]) if m.text]
        said = " ".join(replies) or "The gateway did not start a session."
        return _answer(request, Ack(text=said, accepted=False))
    return _answer(
        request, Ack(text="Conversation started.", accepted=True), location=f"/s/{started.id}"
    )


async def _grants(request: web.Request) -> web.Response:
    _, gateway, browser = _parts(request)
    record = await gateway.store.sessions.get(request.match_info["session"])
    if record is None:
        raise web.HTTPNotFound(text="no such session")
    first = await gateway.store.prompts.first_texts([record.id])
    lines = await gateway.control.grants.listing(record)
    title = session_title(record, first.get(record.id))
    page = grants_page(await _frame(request), record.id, title, lines, _context(request, browser))
    return _html(page)


async def _revoke(request: web.Request) -> web.Response:
    console, gateway, _ = _parts(request)
    record = await gateway.store.sessions.get(request.match_info["session"])
    if record is None:
        return _answer(request, Ack(text="No such session.", accepted=False))
    grant, then = _field(request, "grant"), _field(request, "then")
    actor = Actor(
        platform=console.auth_platform,
        user_id=console.actor.user_id,
        display=console.actor.display,
    )
    where = console.mirror_conversation(record)
    said = await gateway.control.revoke(record, f"{grant} {then}", actor, where)
    done = said.startswith((f"Grant {grant} revoked", "Sent to host"))
    return _answer(request, Ack(text=said, accepted=done))


def _message(
    console: ServedConsole,
    conversation: ConversationRef,
    text: str,
    attachments: tuple[InboundAttachment, ...] = (),
) -> InboundMessage:
    """What the person typed (and picked): shown in the conversation, then handed on."""
    picked = "".join(f"\n📎 {a.name}" for a in attachments)
    console.feed.add(conversation, text=f"{text}{picked}".strip(), card=None, author=YOU)
    return InboundMessage(
        conversation=conversation,
        actor=console.actor,
        text=text,
        message_id=f"console-{secrets.token_hex(8)}",
        private=True,  # the console is a private surface
        attachments=attachments,
    )


def _picked(request: web.Request) -> tuple[InboundAttachment, ...]:
    """The files picked in the message box, kept in the console's spool, in order."""
    console = request.app[CONSOLE]
    return tuple(
        console.uploads.keep(field.filename, field.file)
        for field in request[FORM].getall("files", [])
        if isinstance(field, web.FileField) and field.filename
    )


async def _say(request: web.Request) -> web.Response:
    console, gateway, _ = _parts(request)
    record = await gateway.store.sessions.get(request.match_info["session"])
    text = _field(request, "text").strip()
    if record is None:
        return _answer(request, Ack(text="No such session.", accepted=False))
    conversations = await console_conversations(gateway, record.id)
    if not conversations:
        return _answer(request, Ack(text="This session is not shown here.", accepted=False))
    conversation = conversations[0]
    refused = typing_refusal(
        gateway.config, conversation, record, console.actor, console.auth_platform
    )
    if refused is not None:
        return _answer(request, Ack(text=refused, accepted=False))
    picked = _picked(request)
    if not text and not picked:
        return _answer(request, Ack(text="Type a message first.", accepted=False))
    # what the session was doing when the message came: the receipt says where it went
    latest = await gateway.store.turns.latest(record.id)
    card_waiting = bool(await gateway.store.interactions.list_open(record.id))
    message = _message(console, conversation, text, picked)
    await gateway.control.route_page(conversation, record)  # the page's session takes it
    await gateway.on_message(message)
    queued = await gateway.store.prompts.list_queued(record.id)
    held = any(p.platform_message_id == message.message_id and p.held for p in queued)
    receipt = message_receipt(
        text,
        held=held,
        turn_running=latest is not None and latest.is_running,
        card_waiting=card_waiting,
    )
    now = await gateway.store.sessions.lookup(conversation)
    location = f"/s/{now.id}" if now is not None and now.id != record.id else None
    return _answer(request, Ack(text=receipt, accepted=True), location=location)


async def _where_shown(gateway: Gateway, interaction: Interaction) -> ConversationRef | None:
    """The console conversation that shows the interaction: where a click comes from."""
    conversations = await console_conversations(gateway, interaction.session_id)
    if not conversations:  # a session the engine has not mirrored yet
        await gateway.show_everywhere(interaction.session_id)
        conversations = await console_conversations(gateway, interaction.session_id)
    return conversations[0] if conversations else None


async def _target(request: web.Request) -> tuple[Interaction, ConversationRef] | Ack:
    _, gateway, _ = _parts(request)
    interaction = await gateway.store.interactions.get(request.match_info["interaction"])
    if interaction is None:
        return Ack(text="No such request.", accepted=False)
    conversation = await _where_shown(gateway, interaction)
    if conversation is None:
        return Ack(text="This request's session is closed.", accepted=False)
    return interaction, conversation


async def _act(request: web.Request) -> web.StreamResponse:
    console, gateway, _ = _parts(request)
    target = await _target(request)
    if isinstance(target, Ack):
        return _answer(request, target)
    _, conversation = target
    token = _field(request, "token")
    message = _field(request, "message")[:MESSAGE_MAX_CHARS] or None
    action = InboundAction(
        conversation=conversation, actor=console.actor, token=token, message=message
    )
    return await _in_time(request, gateway.on_action(action))


async def _notice_act(request: web.Request) -> web.StreamResponse:
    """A button of a notice that is no request's (a message whose files did not come):
    its token goes to the gateway as a click in the conversation the notice was sent to,
    checked there as on every platform."""
    console, gateway, _ = _parts(request)
    shown = console.feed.get(request.match_info["message"])
    if shown is None or not shown.notice:
        return _answer(request, Ack(text="This notice is no longer shown.", accepted=False))
    action = InboundAction(
        conversation=shown.conversation, actor=console.actor, token=_field(request, "token")
    )
    return await _in_time(request, gateway.on_action(action))


async def _form(request: web.Request) -> web.StreamResponse:
    console, gateway, _ = _parts(request)
    target = await _target(request)
    if isinstance(target, Ack):
        return _answer(request, target)
    interaction, conversation = target
    form = request[FORM]

    def values(name: str) -> list[str]:
        return [value for value in form.getall(name, []) if isinstance(value, str)]

    submitted = InboundForm(
        conversation=conversation,
        actor=console.actor,
        token=_field(request, "token"),
        answers=answers_from_form(interaction.questions, values),
        private=True,  # the console is a private surface: secret answers are taken here
    )
    return await _in_time(request, gateway.on_form(submitted))


async def _in_time(request: web.Request, work: Coroutine[Any, Any, Ack]) -> web.StreamResponse:
    """The ack deadline rule (gateway/deadline.py): the core's Ack within the console's
    wait, else RECEIVED, sent at once; the core's work goes on in this handler (the card on
    the page shows what it did), and a refusal that comes late is a notice on the next page."""
    console, _, browser = _parts(request)
    sent: list[web.StreamResponse] = []

    async def answer(ack: Ack) -> None:
        response = _answer(request, ack)
        sent.append(response)
        if ack is RECEIVED:  # the handler returns later: the response goes now
            response.headers.update(_HEADERS)
            try:
                await response.prepare(request)
                await response.write_eof()
            except ConnectionResetError:
                pass  # the page is gone; the decision is not

    try:
        ack = await answer_in_time(work, console.limits, answer)
    except Exception:
        if not sent or not sent[0].prepared:
            raise  # nothing answered yet: the guard answers the error
        log.exception("a click answered %r failed in the core", RECEIVED.text)
        return sent[0]
    if sent[0].prepared and not ack.accepted:
        browser.notify(ack.text, refused=True, about=_about(request))
    return sent[0]
