"""What people do in Slack, handed to the gateway: bolt's listeners for messages, slash
commands, clicks and modal submissions.

An envelope is acked once its effect is committed to the ledger (issue 19: with several
hosts on one Slack app, a host that dies before that lets Slack give the envelope to another
connection). bolt runs with ``process_before_response``: a listener's return is the ack. A
listener reads the payload purely (inbound.py, forms.py), hands the work to the platform's
:class:`~platforms.slack.receive.Lanes` and waits (acking.py): a message event until its
work ended, however long (Slack gives it again past 3 s, and the ledger takes a message id
once); a click, submission or command until the core answered, or at most
``ack_wait_seconds`` (Slack does not give those again, and shows the person a failure past
3 s), the rest going on in the platform's task. A host that is fenced (it lost its host
lease or the ledger) leaves a message event unacked so that Slack gives it to another
connection, except on Slack's last attempt, which it answers as before; a click, submission
or command it answers with why it took nothing (Slack never gives those again). A click's
outcome goes to the person who clicked as an ephemeral message (only they see it, it is gone
on reload), while the card's edit tells everyone. Events of another team are refused (said
in the log once per team); while the platform stops, every request is answered 503 so that
Slack gives it again.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.action_tokens import interaction_named
from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import Ack, InboundAction, InboundForm, InboundMessage, Inbox, KnowsFenced
from gateway.render.commands import HELP_TEXT
from platforms.form_drafts import PendingForms
from platforms.hand_over import BUSY, hand_over
from platforms.slack.acking import (
    Commit,
    acked_when_committed,
    acked_when_done,
    last_attempt,
    not_taken,
    retry_attempt,
)
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
    Click,
    Foreign,
    Heard,
    actor_of,
    click_of,
    command_text,
    conversation,
    heard,
)
from platforms.slack.outbox import classify, error_of
from platforms.slack.posting import SlackPosting
from platforms.slack.receive import Done, Lanes, NotTaken
from platforms.slack.render import ANSWER_ACTION, MESSAGE_PREFIX, mrkdwn

__all__ = ["SlackEvents"]

log = logging.getLogger(__name__)

_NAMES = 1024
_TAKEN_KEPT = 4096  # messages remembered as taken: a delivery again within them is acked
_OURS = re.compile(r"^gw\.")


class SlackEvents:
    """The listeners of one connected platform. ``inbox``: the gateway once attached;
    ``stopped``: whether the platform takes nothing more."""

    def __init__(
        self,
        config: SlackConfig,
        client: AsyncWebClient,
        *,
        bot_user_id: str,
        forms: PendingForms[tuple[str, str]],
        posting: SlackPosting,
        lanes: Lanes,
        inbox: Callable[[], Inbox | None],
        stopped: Callable[[], bool],
        ack_wait: float,
    ) -> None:
        self._config = config
        self.team_id = config.team_id
        self.client = client
        self.bot_user_id = bot_user_id
        self.forms = forms
        self._posting = posting
        self._lanes = lanes
        self._inbox = inbox
        self._stopped = stopped
        self._ack_wait = ack_wait  # seconds an interaction waits for the core before its ack
        self._names: OrderedDict[str, str] = OrderedDict()
        self._foreign_said: set[str] = set()
        # a message's delivery again (Slack's retry of an envelope not acked within 3 s, a
        # command's answer taking that long) is not handed to the gateway twice: the work
        # of each message under way, and the newest messages taken (:meth:`_once`)
        self._taking: dict[tuple[str, str], Done] = {}
        self._taken: OrderedDict[tuple[str, str], None] = OrderedDict()

    def bolt_app(self) -> AsyncApp:
        secret = self._config.signing_secret
        app = AsyncApp(
            client=self.client,
            # given explicitly: bolt would read SLACK_SIGNING_SECRET otherwise
            signing_secret=secret.get_secret_value() if secret is not None else "",
            request_verification_enabled=self._config.mode == "http",
            name="agent-gateway",
            process_before_response=True,  # a listener's return is the ack: after the commit
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
        if self._stopped() or self._inbox() is None:
            return BoltResponse(status=503, body="stopping")  # Slack gives it again
        result: BoltResponse | None = await next()
        return result

    # --- messages and commands ------------------------------------------------------------

    async def _on_mention(self, body: dict[str, Any]) -> None:
        """A mention comes as a ``message`` event too, which is what is taken."""

    async def _on_message(
        self, body: dict[str, Any], request: AsyncBoltRequest
    ) -> BoltResponse | None:
        found = heard(
            body, team_id=self.team_id, bot_user_id=self.bot_user_id, mode=self._config.channel_mode
        )
        if isinstance(found, Foreign):
            self._foreign(found)
        elif isinstance(found, Heard):
            last = last_attempt(request.headers)
            if self._fenced() and not last:
                # not acked: Slack gives it again, to any connection (a healthy host's)
                log.info(
                    "slack: a message left to another host, this one is fenced (attempt %d)",
                    retry_attempt(request.headers),
                )
                return not_taken()
            # acked once the gateway took it (queued in the ledger), however long that takes
            return await acked_when_done(self._once(found, lambda: self._take(found, last=last)))
        return None

    def _once(self, found: Heard, take: Callable[[], Awaitable[None]]) -> Done | None:
        """The work of taking ``found``, queued in its conversation's lane; for a message
        delivered again, the work of its first delivery (still under way: its outcome is
        this one's ack) or a done future (taken already: acked, not taken twice). A command
        is no prompt, which the ledger would find again: typed once, it runs once."""
        key = (found.conversation.key(), found.message_id)
        if key in self._taken:
            log.info("slack: message %s delivered again: taken already", found.message_id)
            taken: Done = asyncio.get_running_loop().create_future()
            taken.set_result(True)
            return taken
        running = self._taking.get(key)
        if running is not None:
            return running
        done = self._lanes.put(found.conversation.key(), take)
        if done is not None:
            self._taking[key] = done
            done.add_done_callback(lambda ended: self._settled(key, ended))
        return done

    def _settled(self, key: tuple[str, str], done: Done) -> None:
        """A message's work ended: taken (kept, bounded), or not (a delivery again takes it)."""
        self._taking.pop(key, None)
        if done.cancelled() or done.exception() is not None or not done.result():
            return
        self._taken[key] = None
        while len(self._taken) > _TAKEN_KEPT:
            self._taken.popitem(last=False)

    async def _take(self, found: Heard, *, last: bool) -> None:
        """The message to the gateway; declined (:class:`NotTaken`) if this host is fenced
        by now and Slack will give it again (not ``last``)."""
        self._decline_if_fenced(last)
        if found.needs_session and not await self._bound(found, last=last):
            return
        actor = await self._named(found.actor)
        self._decline_if_fenced(last)
        message = InboundMessage(
            conversation=found.conversation,
            actor=actor,
            text=found.text,
            message_id=found.message_id,
            private=found.direct,
            attachments=found.attachments,
        )
        await self._hand_over(message)

    def _decline_if_fenced(self, last: bool) -> None:
        if self._fenced() and not last:
            raise NotTaken("this host is fenced")

    async def _bound(self, found: Heard, *, last: bool) -> bool:
        """Whether a bare reply's conversation has a session. On Slack's last attempt at a
        fenced host that cannot read the ledger, unknown: the person alone is told (a
        reply to everyone would answer people talking among themselves)."""
        try:
            return await self._attached().has_session(found.conversation)
        except Exception:
            if not (last and self._fenced()):
                raise
        log.warning("slack: the last attempt of a message met a fenced host: the person told")
        text = f"Your message may not have reached the agent. {self._fenced_text()}"
        await self._posting.ephemeral(found.conversation, found.actor.user_id, text)
        return False

    async def _hand_over(self, message: InboundMessage) -> None:
        """The message to the gateway (platforms/hand_over.py); the person is told when it
        could not be taken."""
        if not await hand_over(self._attached(), message):
            await self._posting.ephemeral(message.conversation, message.actor.user_id, BUSY)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> BoltResponse | None:
        if str(command.get("team_id") or "") != self.team_id:
            await ack()
            self._foreign(Foreign(team=str(command.get("team_id")), user=""))
            return None
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
        if self._fenced():  # Slack never gives a command again: the person is told why
            told = self._lanes.spawn(
                lambda: self._posting.ephemeral(where, actor.user_id, self._fenced_text())
            )
            if told is None:
                return not_taken()
            return await acked_when_committed(ack, told, told, self._ack_wait)
        if message.private:
            done = self._lanes.put(where.key(), lambda: self._hand_over(message))
        else:
            done = self._lanes.put(where.key(), lambda: self._command_in_channel(message))
        if done is None:
            return not_taken()
        return await acked_when_committed(ack, done, done, self._ack_wait)

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
        await self._posting.ephemeral(
            message.conversation, message.actor.user_id, hint, escaped=True
        )

    # --- clicks and modals ----------------------------------------------------------------

    async def _on_click(self, ack: Any, body: dict[str, Any]) -> BoltResponse | None:
        click = click_of(body, team_id=self.team_id)
        if isinstance(click, Foreign):
            await ack()
            self._foreign(click)
            return None
        if click is None:
            await ack()
            return None
        if click.action_id == ANSWER_ACTION or click.action_id.startswith(MESSAGE_PREFIX):
            # a modal opens (its trigger lives 3 s): nothing is committed, acked at once
            opens = self._open_form if click.action_id == ANSWER_ACTION else self._ask_message
            if self._lanes.spawn(lambda: opens(click)) is None:
                return not_taken()
            await ack()
            return None
        decided = Commit()
        done = self._lanes.spawn(lambda: self._act(click, decided))
        return await acked_when_committed(ack, decided.future, done, self._ack_wait)

    async def _act(self, click: Click, decided: Commit) -> None:
        action = InboundAction(
            conversation=click.conversation, actor=click.actor, token=click.token
        )
        answer = await self._attached().on_action(action)
        decided.done()  # the decision is committed (or refused): the envelope is acked
        await self._tell(click.conversation, click.actor, answer)

    async def _open_form(self, click: Click) -> None:
        """Answer…: the card's form in a modal."""

        async def form_view(place: FormPlace) -> dict[str, Any] | None:
            named = interaction_named(click.token)
            form = (
                await self.forms.get(
                    (click.conversation.channel, click.message_ts),
                    click.actor,
                    at=(click.conversation, named),
                )
                if named is not None
                else None
            )
            card_form = form.card.form if form is not None else None
            if form is None or card_form is None or card_form.submit_token != click.token:
                return None
            return build_modal(card_form, place, title=form.card.title)

        await self._open_modal(
            click, form_view, failed="The form could not be opened in time: press Answer… again."
        )

    async def _ask_message(self, click: Click) -> None:
        """A button that takes a message (Keep planning): a modal for the message; its
        submit is the press."""

        async def message_view(place: FormPlace) -> dict[str, Any] | None:
            return build_message_modal(place)

        await self._open_modal(
            click,
            message_view,
            failed="The message box could not be opened in time: press again.",
        )

    async def _open_modal(
        self,
        click: Click,
        view_of: Callable[[FormPlace], Awaitable[dict[str, Any] | None]],
        *,
        failed: str,
    ) -> None:
        """May they answer? Then ``view_of``'s modal, within the 3 s the click's trigger
        lives (None: the form is no longer open here)."""
        if self._fenced():  # the ledger cannot be asked: nothing opens, the person is told why
            told = Ack(text=self._fenced_text(), accepted=False)
            await self._tell(click.conversation, click.actor, told)
            return
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
        view = await view_of(place)
        if view is None:
            gone = Ack(text="This form is no longer open here.", accepted=False)
            await self._tell(click.conversation, click.actor, gone)
            return
        try:
            await self.client.views_open(trigger_id=click.trigger_id, view=view)
        except SlackApiError as exc:
            log.warning("slack modal not opened: %s", error_of(exc))
            await self._tell(click.conversation, click.actor, Ack(text=failed, accepted=False))

    async def _on_message_submission(
        self, ack: Any, body: dict[str, Any], view: dict[str, Any]
    ) -> BoltResponse | None:
        team, actor = _submitter(body)
        place = place_of(view)
        if team != self.team_id or place is None:
            await ack(response_action="errors", errors={"message": "This is not taken here."})
            return None
        if self._fenced():  # the modal stays open with what was written: submit it again
            await ack(response_action="errors", errors={"message": self._fenced_text()})
            return None
        where = conversation(self.team_id, place.channel, place.thread)
        message = message_of((view.get("state") or {}).get("values") or {})
        pressed = InboundAction(conversation=where, actor=actor, token=place.token, message=message)
        # the modal closes with the ack; the outcome goes to the person and on the card
        act = self._attached().on_action
        return await self._answer_later(ack, where, actor, lambda: act(pressed))

    async def _on_submission(
        self, ack: Any, body: dict[str, Any], view: dict[str, Any]
    ) -> BoltResponse | None:
        team, actor = _submitter(body)
        place = place_of(view)
        first = _first_input(view)
        if team != self.team_id or place is None:
            await ack(response_action="errors", errors={first: "This form is not taken here."})
            return None
        if self._fenced():  # the modal stays open with the answers given: submit it again
            await ack(response_action="errors", errors={first: self._fenced_text()})
            return None
        where = conversation(self.team_id, place.channel, place.thread)
        named = interaction_named(place.token)
        form = (
            await self.forms.get((place.channel, place.message_ts), actor, at=(where, named))
            if named is not None
            else None
        )
        card_form = form.card.form if form is not None else None
        if card_form is None or card_form.submit_token != place.token:
            await ack(response_action="errors", errors={first: "This request is no longer open."})
            return None
        state = (view.get("state") or {}).get("values") or {}
        answers = read_submission(card_form, state)
        if isinstance(answers, Errors):
            await ack(response_action="errors", errors=answers.errors)
            return None
        submitted = InboundForm(
            conversation=where, actor=actor, token=place.token, answers=answers, private=True
        )
        # the modal closes with the ack; the outcome goes to the person and on the card
        take = self._attached().on_form
        return await self._answer_later(ack, where, actor, lambda: take(submitted))

    async def _answer_later(
        self,
        ack: Any,
        where: ConversationRef,
        actor: Actor,
        handle: Callable[[], Awaitable[Ack]],
    ) -> BoltResponse | None:
        """The gateway's answer to what ``actor`` sent from a modal, told to them, in a task
        of the platform's; the submission acked (the modal closed) once the core answered
        (its decision committed), or at the deadline."""
        committed = Commit()

        async def hand_over() -> None:
            answer = await handle()
            committed.done()
            await self._tell(where, actor, answer)

        done = self._lanes.spawn(hand_over)
        return await acked_when_committed(ack, committed.future, done, self._ack_wait)

    # --- helpers --------------------------------------------------------------------------

    def _foreign(self, foreign: Foreign) -> None:
        if foreign.team not in self._foreign_said:
            self._foreign_said.add(foreign.team)
            log.warning("slack: events of team %s refused (not %s)", foreign.team, self.team_id)

    async def _tell(self, where: ConversationRef, actor: Actor, answer: Ack) -> None:
        if answer.text:
            await self._posting.ephemeral(where, actor.user_id, answer.text)

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

    def _fenced(self) -> bool:
        """Whether this host takes nothing now (it lost its host lease or the ledger)."""
        inbox = self._inbox()
        return isinstance(inbox, KnowsFenced) and inbox.fenced

    def _fenced_text(self) -> str:
        inbox = self._inbox()
        if isinstance(inbox, KnowsFenced):
            return inbox.fenced_text()
        return "The gateway takes nothing now; try again in a moment."

    def _attached(self) -> Inbox:
        inbox = self._inbox()
        if inbox is None:
            raise PlatformError("the Slack platform is not attached")
        return inbox


def _submitter(body: dict[str, Any]) -> tuple[str, Actor]:
    """The team and the person of a modal's submission."""
    user = body.get("user") or {}
    team = str(user.get("team_id") or (body.get("team") or {}).get("id") or "")
    actor = actor_of(str(user.get("id") or ""), str(user.get("username") or user.get("name") or ""))
    return team, actor


def _first_input(view: dict[str, Any]) -> str:
    for block in view.get("blocks") or []:
        if isinstance(block, dict) and block.get("type") == "input":
            return str(block.get("block_id") or "")
    return ""
