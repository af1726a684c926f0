"""The Slack platform: the gateway's platform contract on slack-bolt 1.30 and slack-sdk 3.48.

    settings = config.platforms.get("slack", SlackConfig)
    async with SlackPlatform(settings) as slack:
        async with Gateway(config, platforms={"slack": slack}, launcher=...):
            ...

Its life follows the contract's four phases (DESIGN.md, Platforms): :meth:`connect` checks the
bot token (``auth.test``: the team must be the configured ``team_id``) and starts the
outbox, before the gateway's recovery edits the cards left here; :meth:`attach` starts
taking events, over Socket Mode (``AsyncSocketModeHandler``, the default) or HTTP (bolt's
``web_app`` on our own aiohttp runner; bolt checks every request's signature and its
5-minute window); :meth:`stop_input` takes no more (the socket closes, HTTP answers 503, so
Slack gives what was not taken again) and waits for the work being done; :meth:`close`
closes the outbox after the gateway's ledger closed.

Secrets are passed explicitly (bolt otherwise reads ``SLACK_BOT_TOKEN`` and
``SLACK_SIGNING_SECRET`` from the environment) and never logged; the ``slack_sdk`` and
``slack_bolt`` loggers stay at WARNING whatever ``log_level`` says: at DEBUG they write every
Socket Mode envelope, modal answers (secrets) included.

Every call into a conversation goes through the outbox (outbox.py); a click is answered
from a task the platform owns, and the person who clicked is told the outcome with an
ephemeral message (only they see it, it is gone on reload), while the card's edit tells
everyone. A turn's text is sent as whole snapshots edited with ``chat.update``; Slack's
streaming API (``chat.startStream``/``appendStream``/``stopStream``) appends only and the
core's snapshots may change earlier text (docs/decisions.md, Slack platform).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.cards import Card
from gateway.commands import HELP_TEXT
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.errors import ConfigError, PlatformError
from gateway.platform import (
    Ack,
    EditResult,
    HearsProblems,
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
from platforms.form_drafts import PendingForms
from platforms.outbox import Pacing, Priority
from platforms.slack.config import SlackConfig
from platforms.slack.forms import (
    CALLBACK_ID,
    MESSAGE_CALLBACK_ID,
    Errors,
    FormPlace,
    build_message_modal,
    build_modal,
    message_of,
    place_of,
    read_submission,
)
from platforms.slack.inbound import (
    PLATFORM,
    Click,
    Foreign,
    Heard,
    actor_of,
    click_of,
    command_text,
    conversation,
    heard,
)
from platforms.slack.outbox import (
    SlackMessageGone,
    SlackOutbox,
    classify,
    error_of,
    permanent_refusal,
)
from platforms.slack.receive import Lanes
from platforms.slack.render import ANSWER_ACTION, MESSAGE_PREFIX, mrkdwn, render_card
from platforms.turn_end import TurnEnds

__all__ = ["QUEUED_REACTION", "SDK_LOGGERS", "SLACK_LIMITS", "SlackPlatform"]

log = logging.getLogger(__name__)

SDK_LOGGERS = ("slack_sdk", "slack_bolt")
STOP_GRACE_SECONDS = 10.0
PROBE_SECONDS = 1.0  # while Slack is unreachable, how often auth.test asks
TAKE_ATTEMPTS = 5  # a message the gateway failed to take is tried again this often
_SHOWN = 1024  # the last text of each message, to skip identical edits
_NAMES = 1024

SLACK_LIMITS = PlatformLimits(
    callback_max_bytes=2000,  # a button's value
    text_max_chars=3000,  # one section's text; a message's text takes more
    card_max_chars=12_000,  # a card's body; its blocks are cut within 50 (render.py)
    ack_deadline_seconds=3.0,
    min_edit_interval_seconds=1.0,
    has_private_surface=True,  # modals
)
_BUSY = "The gateway could not take your message; send it again in a moment."


def _quiet_sdk_loggers() -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))


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
        _quiet_sdk_loggers()
        self.limits = limits
        self._config = config
        self._pacing = pacing
        self._http_socket = http_socket
        self.team_id = config.team_id
        # no retry handler for 429s: the outbox waits them out with its priorities
        self.client = AsyncWebClient(
            token=config.bot_token.get_secret_value(), base_url=config.api_url, timeout=20
        )
        self.forms: PendingForms[tuple[str, str]] = PendingForms()
        self.bot_user_id = ""
        self._stack = AsyncExitStack()
        self._tasks: asyncio.TaskGroup | None = None
        self._outbox: SlackOutbox | None = None
        self._lanes: Lanes | None = None
        self._inbox: Inbox | None = None
        self._app: AsyncApp | None = None
        self._handler: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._receiving: asyncio.Task[None] | None = None
        self._stopped = False
        self._comeback = Comeback(
            PLATFORM,
            lambda: self.client.auth_test(),
            every=PROBE_SECONDS,
            inbox=lambda: self._inbox,
        )
        self._shown: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._uneditable: OrderedDict[tuple[str, str], str] = OrderedDict()  # message: error
        self._no_reactions = False  # no reactions:write scope: no mark, said in the log once
        self._names: OrderedDict[str, str] = OrderedDict()
        self._foreign_said: set[str] = set()
        self.turn_ends = TurnEnds()  # whether a turn's end needs a message that notifies
        self.http_port: int | None = None

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> SlackPlatform:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Check the bot token and its team, start the outbox; events are taken once the
        gateway attaches itself."""
        _quiet_sdk_loggers()
        try:
            me = await self.client.auth_test()
        except SlackApiError as exc:
            error = error_of(exc)
            if error in ("invalid_auth", "not_authed", "token_revoked", "account_inactive"):
                raise ConfigError(f"platforms.slack.bot_token: Slack refused it ({error})") from exc
            raise PlatformError(f"slack auth.test failed: {error}") from exc
        except Exception as exc:
            raise PlatformError(f"slack: {type(exc).__name__} on auth.test") from exc
        team = str(me.get("team_id") or "")
        if team != self.team_id:
            raise ConfigError(
                f"platforms.slack.team_id: the bot token is of team {team}, not {self.team_id}"
            )
        self.bot_user_id = str(me.get("user_id") or "")
        try:
            self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            self._outbox = SlackOutbox(
                self._tasks,
                self._pacing,
                on_unreachable=self._unreachable,
                on_success=self._reached,
                on_refused_for_good=self._tell_problem,
            )
            self._lanes = Lanes(self._tasks)
            self._app = self._bolt_app()
        except BaseException:
            await self.close()
            raise

    def attach(self, inbox: Inbox) -> None:
        """The gateway is ready: start taking events."""
        self._inbox = inbox
        if self._tasks is None:
            raise PlatformError("the Slack platform is not connected")
        self._receiving = self._tasks.create_task(self._receive())

    async def stop_input(self) -> None:
        """Take nothing more (Slack gives it again, to the next gateway); the work being done
        is finished (past :data:`STOP_GRACE_SECONDS`, cancelled). The outbox keeps sending."""
        self._stopped = True
        if self._receiving is not None and not self._receiving.done():
            await asyncio.wait({self._receiving})
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]
            self._handler = None
        if self._lanes is not None and not await self._lanes.drain(STOP_GRACE_SECONDS):
            log.warning(
                "slack events still being handled after %g s were cancelled", STOP_GRACE_SECONDS
            )

    async def close(self) -> None:
        self._stopped = True
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]
            self._handler = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._outbox is not None:
            self._outbox.close()
        self._comeback.cancel()
        if self._receiving is not None:
            self._receiving.cancel()
        if self._lanes is not None:
            await self._lanes.drain(0)
        await self._stack.aclose()

    async def _receive(self) -> None:
        assert self._app is not None
        if self._config.mode == "http":
            self._runner = web.AppRunner(self._app.web_app(path=self._config.path))
            await self._runner.setup()
            site: web.BaseSite
            if self._http_socket is not None:
                site = web.SockSite(self._runner, self._http_socket)
            else:
                site = web.TCPSite(self._runner, self._config.listen, self._config.port)
            await site.start()
            server = getattr(site, "_server", None)
            sockets = getattr(server, "sockets", None) or []
            self.http_port = sockets[0].getsockname()[1] if sockets else None
            return
        assert self._config.app_token is not None
        handler = AsyncSocketModeHandler(
            self._app, app_token=self._config.app_token.get_secret_value(), web_client=self.client
        )
        await handler.connect_async()  # type: ignore[no-untyped-call]
        if self._stopped:
            await handler.close_async()  # type: ignore[no-untyped-call]
            return
        self._handler = handler

    # --- bolt -----------------------------------------------------------------------------

    def _bolt_app(self) -> AsyncApp:
        secret = self._config.signing_secret
        app = AsyncApp(
            client=self.client,
            # given explicitly: bolt would read SLACK_SIGNING_SECRET otherwise
            signing_secret=secret.get_secret_value() if secret is not None else "",
            request_verification_enabled=self._config.mode == "http",
            name="agent-gateway",
        )
        app.middleware(self._refuse_when_stopped)
        app.event("message")(self._on_message)
        app.event("app_mention")(self._on_mention)
        app.action({"type": "block_actions", "action_id": _OURS})(self._on_click)
        app.view(CALLBACK_ID)(self._on_submission)
        app.view(MESSAGE_CALLBACK_ID)(self._on_message_submission)
        app.command(self._config.command)(self._on_command)
        return app

    async def _refuse_when_stopped(
        self, req: AsyncBoltRequest, resp: BoltResponse, next: Any
    ) -> BoltResponse | None:
        if self._stopped or self._inbox is None:
            return BoltResponse(status=503, body="stopping")  # Slack gives it again
        result: BoltResponse | None = await next()
        return result

    async def _on_mention(self, body: dict[str, Any]) -> None:
        """A mention comes as a ``message`` event too, which is what is taken."""

    async def _on_message(self, body: dict[str, Any]) -> None:
        found = heard(
            body, team_id=self.team_id, bot_user_id=self.bot_user_id, mode=self._config.channel_mode
        )
        if isinstance(found, Foreign):
            self._foreign(found)
        elif isinstance(found, Heard):
            lanes = self._running_lanes()
            lanes.put(found.conversation.key(), lambda: self._take(found))

    async def _take(self, found: Heard) -> None:
        inbox = self._attached()
        if found.needs_session and not await inbox.has_session(found.conversation):
            return
        actor = await self._named(found.actor)
        message = InboundMessage(
            conversation=found.conversation,
            actor=actor,
            text=found.text,
            message_id=found.message_id,
            private=found.direct,
        )
        await self._hand_over(message)

    async def _hand_over(self, message: InboundMessage) -> None:
        """The message to the gateway, tried again while it fails (a busy ledger); the
        person is told when it could not be taken."""
        inbox = self._attached()
        delay = 0.25
        for attempt in range(1, TAKE_ATTEMPTS + 1):
            try:
                await inbox.on_message(message)
                return
            except Exception:
                if attempt == TAKE_ATTEMPTS:
                    log.exception("slack message %s not taken", message.message_id)
                    break
                await asyncio.sleep(delay)  # a back-off, not a wait for state
                delay = min(delay * 2, 5.0)
        await self._ephemeral(message.conversation, message.actor.user_id, _BUSY)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        if str(command.get("team_id") or "") != self.team_id:
            self._foreign(Foreign(team=str(command.get("team_id")), user=""))
            return
        channel = str(command.get("channel_id") or "")
        where = conversation(self.team_id, channel)
        actor = actor_of(str(command.get("user_id") or ""), str(command.get("user_name") or ""))
        message = InboundMessage(
            conversation=where,
            actor=actor,
            text=command_text(str(command.get("text") or "")),
            message_id=f"command:{command.get('trigger_id')}",
            private=channel.startswith("D"),
        )
        if message.private:
            self._running_lanes().put(where.key(), lambda: self._hand_over(message))
        else:
            self._running_lanes().put(where.key(), lambda: self._command_in_channel(message))

    async def _command_in_channel(self, message: InboundMessage) -> None:
        """``/agent stop`` in a channel: Slack sends a slash command without the thread it
        was typed in (it has none in threads), and a channel's sessions live in threads. So
        a command is the channel's own only where a session is bound to the channel itself;
        else the person alone is told to write ``@app /stop`` in the session's thread
        (docs/decisions.md, Slack: commands in threads)."""
        if await self._attached().has_session(message.conversation):
            await self._hand_over(message)
            return
        me = f"<@{self.bot_user_id}>"
        word = message.text.split()[0] if message.text.split() else "/help"
        hint = (
            f"{mrkdwn('Slack does not tell the app which thread a command comes from. In the')}"
            f" {mrkdwn('thread of the session you mean, write')} *{me} {mrkdwn(word)}*"
            f"{mrkdwn(' (a mention, then the command), e.g. ')}{me} /stop{mrkdwn('.')}"
        )
        if word == "/help":
            hint = f"{mrkdwn(HELP_TEXT)}\n\n{hint}"
        await self._ephemeral(message.conversation, message.actor.user_id, hint, escaped=True)

    async def _on_click(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()  # at once: the outcome comes as an ephemeral and on the card
        click = click_of(body, team_id=self.team_id)
        if isinstance(click, Foreign):
            self._foreign(click)
            return
        if click is None:
            return
        if click.action_id == ANSWER_ACTION:
            self._running_lanes().spawn(lambda: self._open_form(click))
        elif click.action_id.startswith(MESSAGE_PREFIX):
            self._running_lanes().spawn(lambda: self._ask_message(click))
        else:
            self._running_lanes().spawn(lambda: self._act(click))

    async def _act(self, click: Click) -> None:
        action = InboundAction(
            conversation=click.conversation, actor=click.actor, token=click.token
        )
        answer = await self._attached().on_action(action)
        await self._tell(click.conversation, click.actor, answer)

    async def _open_form(self, click: Click) -> None:
        """May they answer? Then the modal, within the 3 s the click's trigger lives."""
        action = InboundAction(
            conversation=click.conversation, actor=click.actor, token=click.token
        )
        verdict = await self._attached().may_answer(action)
        if not verdict.accepted:
            await self._tell(click.conversation, click.actor, verdict)
            return
        form = self.forms.get((click.conversation.channel, click.message_ts))
        card_form = form.card.form if form is not None else None
        if card_form is None or card_form.submit_token != click.token:
            await self._tell(
                click.conversation,
                click.actor,
                Ack(text="This form is no longer open here.", accepted=False),
            )
            return
        assert form is not None
        place = FormPlace(
            token=click.token,
            channel=click.conversation.channel,
            thread=click.conversation.thread,
            message_ts=click.message_ts,
        )
        view = build_modal(card_form, place, title=form.card.title)
        try:
            await self.client.views_open(trigger_id=click.trigger_id, view=view)
        except SlackApiError as exc:
            log.warning("slack modal not opened: %s", error_of(exc))
            await self._tell(
                click.conversation,
                click.actor,
                Ack(
                    text="The form could not be opened in time: press Answer… again.",
                    accepted=False,
                ),
            )

    async def _ask_message(self, click: Click) -> None:
        """A button that takes a message (Keep planning): may they decide? Then a modal for
        the message, within the 3 s the click's trigger lives; its submit is the press."""
        action = InboundAction(
            conversation=click.conversation, actor=click.actor, token=click.token
        )
        verdict = await self._attached().may_answer(action)
        if not verdict.accepted:
            await self._tell(click.conversation, click.actor, verdict)
            return
        place = FormPlace(
            token=click.token,
            channel=click.conversation.channel,
            thread=click.conversation.thread,
            message_ts=click.message_ts,
        )
        view = build_message_modal(place)
        try:
            await self.client.views_open(trigger_id=click.trigger_id, view=view)
        except SlackApiError as exc:
            log.warning("slack modal not opened: %s", error_of(exc))
            await self._tell(
                click.conversation,
                click.actor,
                Ack(
                    text="The message box could not be opened in time: press again.", accepted=False
                ),
            )

    async def _on_message_submission(
        self, ack: Any, body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        user = body.get("user") or {}
        team = str(user.get("team_id") or (body.get("team") or {}).get("id") or "")
        place = place_of(view)
        if team != self.team_id or place is None:
            await ack(response_action="errors", errors={"message": "This is not taken here."})
            return
        await ack()  # the modal closes; the outcome goes to the person and on the card
        where = conversation(self.team_id, place.channel, place.thread)
        actor = actor_of(
            str(user.get("id") or ""), str(user.get("username") or user.get("name") or "")
        )
        message = message_of((view.get("state") or {}).get("values") or {})
        pressed = InboundAction(conversation=where, actor=actor, token=place.token, message=message)

        async def hand_over() -> None:
            answer = await self._attached().on_action(pressed)
            await self._tell(where, actor, answer)

        self._running_lanes().spawn(hand_over)

    async def _on_submission(self, ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = body.get("user") or {}
        team = str(user.get("team_id") or (body.get("team") or {}).get("id") or "")
        place = place_of(view)
        first = _first_input(view)
        if team != self.team_id or place is None:
            await ack(response_action="errors", errors={first: "This form is not taken here."})
            return
        form = self.forms.get((place.channel, place.message_ts))
        card_form = form.card.form if form is not None else None
        if card_form is None or card_form.submit_token != place.token:
            await ack(response_action="errors", errors={first: "This request is no longer open."})
            return
        state = (view.get("state") or {}).get("values") or {}
        answers = read_submission(card_form, state)
        if isinstance(answers, Errors):
            await ack(response_action="errors", errors=answers.errors)
            return
        await ack()  # the modal closes; the outcome goes to the person and on the card
        where = conversation(self.team_id, place.channel, place.thread)
        actor = actor_of(
            str(user.get("id") or ""), str(user.get("username") or user.get("name") or "")
        )
        submitted = InboundForm(
            conversation=where, actor=actor, token=place.token, answers=answers, private=True
        )

        async def hand_over() -> None:
            answer = await self._attached().on_form(submitted)
            await self._tell(where, actor, answer)

        self._running_lanes().spawn(hand_over)

    def _foreign(self, foreign: Foreign) -> None:
        if foreign.team not in self._foreign_said:
            self._foreign_said.add(foreign.team)
            log.warning("slack: events of team %s refused (not %s)", foreign.team, self.team_id)

    async def _tell(self, where: ConversationRef, actor: Actor, answer: Ack) -> None:
        if answer.text:
            await self._ephemeral(where, actor.user_id, answer.text)

    async def _ephemeral(
        self, where: ConversationRef, user: str, text: str, *, escaped: bool = False
    ) -> None:
        """Only ``user`` sees it (it may not reach a phone and is gone on reload: the card
        carries every outcome; this repeats it to the person who acted). ``escaped``: the
        text is mrkdwn already (a mention of the app in it)."""
        shown = text if escaped else mrkdwn(text)

        async def post() -> None:
            await self.client.chat_postEphemeral(
                channel=where.channel, user=user, text=shown, thread_ts=where.thread
            )

        try:
            await self._running().run(
                f"{where.channel}/ephemeral", Priority.CARD, post, method="chat.postEphemeral"
            )
        except PlatformError as exc:
            log.info("slack ephemeral to %s not shown: %s", user, exc)

    async def _named(self, actor: Actor) -> Actor:
        """The actor with their Slack name (users.info, remembered), else as given."""
        name = self._names.get(actor.user_id)
        if name is None:
            try:
                found = await self.client.users_info(user=actor.user_id)
                user = found.get("user") or {}
                name = str(user.get("name") or "")
            except Exception as exc:
                if classify(exc) is None:
                    raise
                name = ""
            self._names[actor.user_id] = name
            while len(self._names) > _NAMES:
                self._names.popitem(last=False)
        return actor_of(actor.user_id, name) if name else actor

    # --- back after an outage -------------------------------------------------------------

    def _unreachable(self) -> None:
        if self._tasks is not None and not self._stopped:
            self._comeback.lost(self._tasks)

    def _reached(self) -> None:
        self._comeback.reached(self._tasks)

    # --- the platform contract ------------------------------------------------------------

    def spell_command(self, name: str) -> str:
        return f"{self._config.command} {name}"

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return None

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
        self._check_length(text)
        shown = mrkdwn(text)

        async def post() -> str:
            sent = await self.client.chat_postMessage(
                channel=conversation.channel,
                thread_ts=conversation.thread,
                text=shown,
                unfurl_links=False,
                unfurl_media=False,
            )
            return str(sent["ts"])

        ts = await self._running().run(
            conversation.channel, Priority.TEXT, post, method="chat.postMessage"
        )
        self._remember((conversation.channel, ts), shown)
        self.turn_ends.sent(_turn_key(conversation), (conversation.channel, ts))
        return MessageRef(conversation=conversation, message_id=ts)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        self._check_length(text)
        channel, ts = ref.conversation.channel, ref.message_id
        shown = mrkdwn(text)
        if self._shown.get((channel, ts)) == shown:
            return EditResult.NOT_MODIFIED

        async def edit() -> EditResult:
            await self.client.chat_update(channel=channel, ts=ts, text=shown)
            self._remember((channel, ts), shown)
            self.turn_ends.edited((channel, ts))  # an edit: no phone is told of it
            return EditResult.EDITED

        return await self._edit(channel, ts, Priority.STREAM, edit, "text")

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        channel = conversation.channel
        form = self.forms.new(conversation, card)
        for attachment in card.attachments:  # the files first: what is approved is shown whole

            async def upload(
                name: str = attachment.name, content: str = attachment.content
            ) -> None:
                await self.client.files_upload_v2(
                    channel=channel,
                    thread_ts=conversation.thread,
                    content=content,
                    filename=name,
                    title=name,
                    initial_comment=mrkdwn(f"{card.title[:200]}: {name}"),
                )

            await self._running().run(channel, Priority.CARD, upload, method="files.upload")
        drawn = render_card(card, mention=await self._approvers_of(conversation))

        async def post() -> str:
            sent = await self.client.chat_postMessage(
                channel=channel,
                thread_ts=conversation.thread,
                text=drawn.text,
                blocks=drawn.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
            return str(sent["ts"])

        ts = await self._running().run(channel, Priority.CARD, post, method="chat.postMessage")
        self._remember((channel, ts), _drawn_key(drawn.text, drawn.blocks))
        self.turn_ends.sent(_turn_key(conversation), (channel, ts))  # a new card notifies
        if form is not None:
            self.forms.keep((channel, ts), form)
        return MessageRef(conversation=conversation, message_id=ts)

    async def _approvers_of(self, conversation: ConversationRef) -> str:
        """``<@U…>`` of who may decide, for a new card only (their phones are told once;
        an edit notifies nobody and drops it). Agent text never pings: it is escaped."""
        inbox = self._inbox
        if not isinstance(inbox, KnowsApprovers):
            return ""
        try:
            people = await inbox.approvers(conversation)
        except Exception:
            log.exception("slack: the approvers of a card in %s not found", conversation.channel)
            return ""
        named = " ".join(f"<@{user}>" for user in people if _USER_ID.fullmatch(user))
        return f"{named}: waiting for you." if named else ""

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        channel, ts = ref.conversation.channel, ref.message_id
        self.forms.update((channel, ts), ref.conversation, card)

        async def edit() -> EditResult:
            # drawn when the lane gets to it: the newest card wins
            form = self.forms.get((channel, ts))
            drawn = render_card(form.card if form is not None else card)
            key = _drawn_key(drawn.text, drawn.blocks)
            if self._shown.get((channel, ts)) == key:
                return EditResult.NOT_MODIFIED
            await self.client.chat_update(
                channel=channel, ts=ts, text=drawn.text, blocks=drawn.blocks
            )
            self._remember((channel, ts), key)
            return EditResult.EDITED

        return await self._edit(channel, ts, Priority.CARD, edit, "card")

    async def _edit(
        self,
        channel: str,
        ts: str,
        priority: Priority,
        edit: Callable[[], Awaitable[EditResult]],
        kind: str,
    ) -> EditResult:
        """A ``chat.update`` in the channel's lane; a message Slack refused to edit for good
        (no longer editable, deleted) is not asked again: refused here at once."""
        refused = self._uneditable.get((channel, ts))
        if refused is not None:
            raise permanent_refusal(refused)
        try:
            return await self._running().run(
                channel, priority, edit, key=(kind, ts), method="chat.update"
            )
        except SlackMessageGone as exc:
            self._uneditable[(channel, ts)] = exc.error
            while len(self._uneditable) > _SHOWN:
                self._uneditable.popitem(last=False)
            raise

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        """A reaction on the person's message (:data:`QUEUED_REACTION`, as Telegram's ✍),
        which notifies nobody and stays once the message runs: it says "noted", which stays
        true. An app installed before it asked for reactions:write (missing_scope) has no
        mark: False, and the core says it in a short text (and the log, once, what to add);
        Slack is not asked again until a restart."""
        if self._no_reactions:
            return False

        async def react() -> bool:
            try:
                await self.client.reactions_add(
                    channel=conversation.channel, timestamp=message_id, name=QUEUED_REACTION
                )
            except SlackApiError as exc:
                error = error_of(exc)
                if error == "already_reacted":  # a retried call that had reached Slack
                    return True
                if error == "missing_scope":
                    if not self._no_reactions:
                        self._no_reactions = True
                        log.warning(
                            "slack: the app lacks the reactions:write scope, so a queued "
                            "message is marked with a short reply instead; add the scope "
                            "(agent-gateway slack-manifest lists it) and reinstall the app"
                        )
                    return False
                raise
            return True

        return await self._running().run(
            conversation.channel, Priority.TEXT, react, method="reactions.add"
        )

    async def turn_started(self, conversation: ConversationRef) -> None:
        """What the turn shows is followed from now on (a bot in Slack has no typing
        indicator outside AI-app threads)."""
        self.turn_ends.started(_turn_key(conversation))

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        """The last ``chat.update`` is the final text (no stream to stop); where the turn's
        last words came by an edit, which no phone is told of, one short new message that
        notifies (platforms/turn_end.py)."""
        line = self.turn_ends.ended(_turn_key(conversation), status)
        if line is not None:
            try:
                await self.send_text(conversation, line)
            except PlatformError as exc:
                log.info("slack turn end in %s not told: %s", conversation.channel, exc)

    # --- helpers --------------------------------------------------------------------------

    def _running(self) -> SlackOutbox:
        if self._outbox is None:
            raise PlatformError("the Slack platform is not running")
        return self._outbox

    def _running_lanes(self) -> Lanes:
        if self._lanes is None:
            raise PlatformError("the Slack platform is not running")
        return self._lanes

    def _tell_problem(self, text: str) -> None:
        """A refusal for good, already in the log, to the gateway (its console shows it)."""
        if isinstance(self._inbox, HearsProblems):
            self._inbox.platform_problem("slack", text)

    def _attached(self) -> Inbox:
        if self._inbox is None:
            raise PlatformError("the Slack platform is not attached")
        return self._inbox

    def _check_length(self, text: str) -> None:
        if not text.strip() or len(text) > self.limits.text_max_chars:
            raise PlatformError(f"text of {len(text)} characters cannot be sent to Slack")

    def _remember(self, key: tuple[str, str], shown: str) -> None:
        self._shown.pop(key, None)
        self._shown[key] = shown
        while len(self._shown) > _SHOWN:
            self._shown.popitem(last=False)


_OURS = re.compile(r"^gw\.")
# the mark of a message queued behind a card (an emoji every workspace has: ✍)
QUEUED_REACTION = "writing_hand"
_USER_ID = re.compile(r"[UW][A-Z0-9]+")


def _turn_key(conversation: ConversationRef) -> tuple[str, str | None]:
    return conversation.channel, conversation.thread


def _drawn_key(text: str, blocks: list[dict[str, Any]]) -> str:
    return json.dumps([text, blocks], sort_keys=True)


def _first_input(view: dict[str, Any]) -> str:
    for block in view.get("blocks") or []:
        if isinstance(block, dict) and block.get("type") == "input":
            return str(block.get("block_id") or "")
    return ""
