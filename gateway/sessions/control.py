"""The prompt queue and the control channel: chat messages and commands, and recovery.

Chat text is never a decision: anything that is not a command is queued as a prompt, and
when an approval or question is waiting the person is told that its card still waits: in
full once per card in each conversation, then with a short mark on their message (a
reaction where the platform has one). A reply to a waiting card always gets the full notice,
and the card is drawn again under it, its buttons live (a copy of its own, edited like the
others after the decision: still one decision, by compare-and-set). Commands (/stop,
/status, ...) are never queued. /stop holds what was queued before it; a message typed
afterwards runs next (gateway/render/queue_notes.py).

Several hosts (issue 19): a command works whichever host receives it. A decision is
committed here and written by the session's host; /status, /pending and /clear are answered
here from the ledger; /stop, /new, /resume, /grants and /revoke do here what the ledger can
and pass the rest to the session's host as a request row (gateway/store/requests.py), which
wakes it and which it carries out once (:meth:`Control.take_requests`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from gateway.clock import Clock
from gateway.config.access import may_talk, stranger_refusal
from gateway.config.model import BusyInput, Config, SessionScope
from gateway.domain import (
    Actor,
    AgentKind,
    ConversationRef,
    InteractionKind,
    InteractionOrigin,
    InteractionState,
    TurnStatus,
)
from gateway.errors import GatewayError, InvalidDecision, PlatformError
from gateway.interactions.machine import Interaction, derive_run_state, run_state_words
from gateway.platform import (
    InboundMessage,
    KnowsTimeZones,
    LinksConversations,
    OpensThreads,
    Platform,
)
from gateway.render.card_pointers import restart_notice
from gateway.render.card_status import undelivered
from gateway.render.commands import (
    HELP_TEXT,
    AnswerCommand,
    ApproveCommand,
    ChatInput,
    ChatPrompt,
    CommandName,
    CommandUsage,
    ControlCommand,
    DenyCommand,
    NotForUs,
    UnknownCommand,
    WithdrawCommand,
    parse_answers,
    parse_chat_text,
)
from gateway.render.queue_notes import held_note
from gateway.session_record import SessionRecord
from gateway.sessions.agents import AgentLauncher, ReattachesAgents
from gateway.sessions.broker import Broker
from gateway.sessions.compaction import COMPACTING_WORDS, compaction_offered
from gateway.sessions.decisions import DecisionDesk
from gateway.sessions.file_checks import FILES_WITH_A_COMMAND, declared_refusal
from gateway.sessions.file_choice import FileChoices
from gateway.sessions.grant_desk import GrantDesk
from gateway.sessions.model_buttons import ModelButtons
from gateway.sessions.outbound import Notifier, card_messages
from gateway.sessions.platform_problems import PlatformProblems
from gateway.sessions.routing import project_for, route_key
from gateway.sessions.runner import SessionRunner
from gateway.sessions.schedule_buttons import ScheduleButtons, schedule_card
from gateway.sessions.schedule_desk import ScheduleDesk
from gateway.sessions.schedule_runs import ScheduleRuns
from gateway.sessions.schedule_topics import (
    configured_thread,
    open_schedule_thread,
    say_deleted,
)
from gateway.sessions.session_list import sessions_page, visible
from gateway.sessions.session_names import name_new_session, name_session, new_name_problem
from gateway.sessions.session_settings import SettingsDesk
from gateway.sessions.session_switch import switch_session
from gateway.sessions.session_topics import open_session_thread
from gateway.sessions.steer_button import SteerButtons
from gateway.sessions.turn_close import close_shown_turn
from gateway.sessions.voice_notes import VoiceNotes
from gateway.store.records import EnqueueOutcome, EnqueueResult, EpochRecord, PromptRecord
from gateway.store.requests import RequestKind, SessionRequest
from gateway.store.schedules import ScheduleRecord
from gateway.store.store import Store
from gateway.transcription import Transcriber

__all__ = ["Control"]

log = logging.getLogger(__name__)

# the cards whose full "queued, not a decision" notice each conversation was given: bounded,
# in memory (a restart orphans every card, so nothing here outlives its cards)
MAX_TOLD = 4096
# a platform that refused a schedule's thread is asked again after this (the bot may have
# been given the right meanwhile), not at every run
THREAD_ASKED_AGAIN_SECONDS = 3600.0
SHOWN_PROBLEMS = 3  # the latest platform problems /status repeats
_RECOVERED = {
    "stopped": "↻ The gateway restarted; the agent process it ran was ended.",
    "held": "↻ The gateway restarted; the agent process it ran was ended.",
    "reattach": "↻ The gateway restarted and reached the OpenCode server again: what it still"
    " asks still waits for an answer.",
    "let_go": "↻ The gateway restarted; the OpenCode server it is attached to was not ended.",
}
QUEUED_MARK = "✍ Queued for the agent."  # where a platform has no mark of its own

if TYPE_CHECKING:
    from gateway.store.leases import LeaseHolder


class SessionsHost(Protocol):
    """What the control channel uses of the engine that owns it (:class:`~gateway.sessions.
    engine.Gateway`): its config, ledger, platforms and launcher, the desks, and the session
    runners it holds."""

    config: Config
    host: str
    ledger_host: str | None
    platforms: dict[str, Platform]
    launcher: AgentLauncher
    store: Store
    broker: Broker
    desk: DecisionDesk
    steer_buttons: SteerButtons
    schedule_buttons: ScheduleButtons
    file_choices: FileChoices
    button_key: bytes
    host_lease: LeaseHolder | None
    platform_problems: PlatformProblems
    transcriber: Transcriber | None
    schedule_clock: Clock

    @property
    def fenced(self) -> bool: ...

    def runner(self, session: SessionRecord) -> SessionRunner: ...

    def existing_runner(self, session_id: str) -> SessionRunner | None: ...

    def runs_here(self, session: SessionRecord) -> bool: ...

    def session_host(self, project: str) -> str | None: ...

    def owner_elsewhere(self, session: SessionRecord) -> str | None: ...

    def kick(self, session: SessionRecord) -> None: ...

    async def config_mismatch(self) -> str | None: ...

    def wake_scheduler(self) -> None: ...


class Control:
    def __init__(self, gateway: SessionsHost) -> None:
        self._gw = gateway
        self._store = gateway.store
        self._notifier = Notifier(gateway.platforms)
        self._routing = asyncio.Lock()  # finding, creating and binding sessions
        self._told: OrderedDict[tuple[ConversationRef, str], None] = OrderedDict()
        self._held_told: dict[str, tuple[int, ...]] = {}  # session: the held prompts last told
        # conversations where the platform refused a config schedule's thread (the bot may
        # not manage a forum's topics), with when: not asked again before THREAD_ASKED_AGAIN
        self._threads_refused: dict[ConversationRef, float] = {}
        self._grants = GrantDesk(gateway.config, gateway.store, gateway.existing_runner)
        self._voice = VoiceNotes(
            lambda: gateway.config, gateway.transcriber, gateway.platforms, self._reply
        )
        self._settings = SettingsDesk(
            gateway.config.projects, gateway.store, gateway.broker, gateway.existing_runner
        )
        self.model_buttons = ModelButtons(
            gateway.config,
            gateway.store,
            gateway.platforms,
            self._settings,
            gateway.button_key,
            auth_platform=self._auth_platform,
            reply=self._reply,
            session_here=self._session_here,
        )

        self.schedules = ScheduleDesk(
            gateway.config,
            gateway.store,
            gateway.schedule_clock,
            person_zone=self._person_zone,
            place=self._schedule_thread,
            farewell=self.schedule_deleted,
        )
        self.schedule_runs = ScheduleRuns(
            gateway.config,
            gateway.store,
            say=self._reply,
            session_host=gateway.session_host,
            kick=gateway.kick,
            routing=self._routing,
            owner_elsewhere=gateway.owner_elsewhere,
            place=self._configured_thread,
        )

    def reload(self, config: Config) -> None:
        """Who may revoke, pick a model and schedule, from a reloaded config (the rest reads the
        engine's config)."""
        self._grants.reload(config)
        self.model_buttons.reload(config)
        self.schedules.reload(config)
        self.schedule_runs.reload(config)

    # --- recovery -------------------------------------------------------------------------

    async def recover(self) -> None:
        """End what a previous gateway process left, before anything else happens.

        An epoch whose agent server outlives the gateway (an attached OpenCode) is not ended
        blindly: the server is asked first. Its requests it still lists stay pending (cards
        untouched) and the session's runner reattaches to it; the others are orphaned as a
        runtime that outlived the gateway (an answer written to it: UNKNOWN)."""
        store = self._store
        touched: dict[str, str] = {}
        ended: dict[str, list[Interaction]] = {}  # by session: the requests orphaned here
        host = self._gw.ledger_host  # on a shared ledger: only this host's; else every one
        for epoch in await store.sessions.live_epochs(host=host):
            if await self._reattached(epoch, touched):
                continue
            outcome = "no process recorded"
            if epoch.pid is not None:
                outcome = await self._gw.launcher.end_leftover(
                    pid=epoch.pid,
                    pgid=epoch.pgid,
                    start_time=int(epoch.process_start_time)
                    if epoch.process_start_time is not None
                    else None,
                )
            await store.audit.record(
                "recovery.leftover_agent",
                session_id=epoch.session_id,
                details={"epoch": epoch.epoch, "pid": epoch.pid, "outcome": outcome},
            )
            turn = await store.turns.running(epoch.session_id)  # ended with its epoch
            await store.sessions.end_epoch(
                epoch.session_id, epoch.epoch, exit_description="the gateway restarted"
            )
            if turn is not None:  # its tool lines shown running: closed where shown
                await close_shown_turn(store, self._gw.platforms, turn.id)
            for update in await store.interactions.orphan_epoch(
                epoch.session_id, epoch.epoch, gateway_restarted=True, note="the gateway restarted"
            ):
                self._gw.broker.mark_dirty(update.interaction.id)
                ended.setdefault(epoch.session_id, []).append(update.interaction)
            touched[epoch.session_id] = "stopped"
        for session_id in await store.prompts.recover_after_restart(host=host):
            touched.setdefault(session_id, "held")
        if host is not None:  # commands other hosts passed to the previous process: dropped
            await self._drop_requests(host, why="restarted")
        for copy in await store.cards.list_outdated(host=host):
            self._gw.broker.mark_dirty(copy.interaction_id)
        await self._gw.broker.resend_failed()
        await self._gw.file_choices.offer_unshown()  # cards a platform failed to show
        for session_id, how in touched.items():
            held = await store.prompts.list_held(session_id)
            cards = ended.get(session_id, [])
            await self._notifier.send(
                await store.sessions.list_bindings(session_id),
                _recovered_text(how, cards, held=len(held)),
                await card_messages(store, *(i.id for i in cards)),  # replies to a card
            )
        for session_id, how in touched.items():
            if how == "reattach":
                session = await store.sessions.get(session_id)
                if session is not None and session.current_epoch:
                    self._gw.runner(session).reattach(session.current_epoch)

    async def reap(self, host: str) -> list[str]:
        """Another host stopped (its lease lapsed and this host fenced it out, design point
        9): orphan its live epochs' requests ("host X stopped"; an attached server's are left open:
        it outlives its host, which reattaches it when back), interrupt its in-flight
        prompts and hold its queues, edit the cards and tell the conversations. Its agents are
        processes on its machine: not signalled here, and their epochs stay live in the
        ledger, so that X's own recovery, when it comes back, finds them and ends their
        process groups (a SIGKILLed gateway leaves its agents running). Returns the sessions
        touched."""
        store = self._store
        note = f"host {host} stopped"
        touched: list[str] = []
        attached: set[str] = set()  # sessions whose agent is a server that outlives its host
        for epoch in await store.sessions.live_epochs(host=host):
            touched.append(epoch.session_id)
            if await self._outlives_its_host(epoch):
                # its server still asks what it asked: the requests stay open, and an answer
                # given meanwhile reaches it when the host is back (its recovery reattaches)
                attached.add(epoch.session_id)
                continue
            for update in await store.interactions.orphan_epoch(
                epoch.session_id, epoch.epoch, gateway_restarted=True, note=note
            ):
                self._gw.broker.mark_dirty(update.interaction.id)
        for session_id in await store.prompts.recover_after_restart(host=host):
            if session_id not in touched:
                touched.append(session_id)
        await self._drop_requests(host, why="stopped")
        for session_id in touched:
            await store.audit.record(
                "hosts.reaped", session_id=session_id, details={"host": host, "by": self._gw.host}
            )
            held = await store.prompts.list_held(session_id)
            text = (
                f"⚠ Host {host} stopped answering the ledger: its agent for this conversation"
                " is taken as ended, and its open requests can no longer be answered."
            )
            if session_id in attached:
                text = (
                    f"⚠ Host {host} stopped answering the ledger. This conversation's agent is "
                    "a server that outlives it: its open requests stay open, and an answer "
                    f"given now reaches it once host {host} is back."
                )
            if held:
                text += " " + held_note(len(held), typed_now=False)
            text += f" Once host {host} is back, a new message resumes the conversation."
            await self._notifier.send(await store.sessions.list_bindings(session_id), text)
        return touched

    async def _outlives_its_host(self, epoch: EpochRecord) -> bool:
        """The epoch is an attached server's (OpenCode ``url``): no process of the host's."""
        if epoch.pid is not None:
            return False
        session = await self._store.sessions.get(epoch.session_id)
        project = self._gw.config.projects.get(session.project) if session else None
        return project is not None and project.attached

    async def reply(self, conversation: ConversationRef, text: str) -> None:
        await self._reply(conversation, text)

    async def _reattached(self, epoch: EpochRecord, touched: dict[str, str]) -> bool:
        """An attached server's epoch: reconciled with what the server still lists (True),
        never signalled; False for an epoch whose process the gateway ran (even if its
        project is attached now: that process is a leftover to end)."""
        if epoch.pid is not None:
            return False
        store = self._store
        launcher = self._gw.launcher
        session = await store.sessions.get(epoch.session_id)
        project = self._gw.config.projects.get(session.project) if session else None
        if session is None or project is None or not project.attached:
            return False
        listed: frozenset[str] = frozenset()
        why = "the server no longer lists it"
        if isinstance(launcher, ReattachesAgents) and session.native_session_id:
            try:
                listed = await launcher.still_asked(project, session.native_session_id)
            except GatewayError as exc:
                why = f"the server could not be asked: {exc}"
        open_keys = {
            i.native_key
            for i in await store.interactions.list_open(epoch.session_id)
            if i.runtime_epoch == epoch.epoch and i.native_key is not None
        }
        keep = frozenset(open_keys & listed)
        await store.audit.record(
            "recovery.attached_agent",
            session_id=epoch.session_id,
            details={"epoch": epoch.epoch, "still_asked": sorted(keep), "gone": why},
        )
        # its running turn was the previous gateway's: it ends here (its prompt is never
        # resent); what the server still does for it is not shown
        turn = await store.turns.running(epoch.session_id)
        if turn is not None:
            await store.turns.end(turn.id, TurnStatus.INTERRUPTED, error="the gateway restarted")
            await close_shown_turn(store, self._gw.platforms, turn.id)
        for update in await store.interactions.orphan_epoch(
            epoch.session_id,
            epoch.epoch,
            runtime_outlives_gateway=True,
            note=f"the gateway restarted; {why}",
            keep=keep,
        ):
            self._gw.broker.mark_dirty(update.interaction.id)
        if keep:
            touched[epoch.session_id] = "reattach"
            return True
        await store.sessions.end_epoch(
            epoch.session_id, epoch.epoch, exit_description="the gateway restarted (attached)"
        )
        touched[epoch.session_id] = "let_go"
        return True

    # --- messages -------------------------------------------------------------------------

    async def on_message(self, message: InboundMessage) -> None:
        conversation, actor = message.conversation, message.actor
        auth_platform = self._auth_platform(conversation.platform)
        project = project_for(self._gw.config, conversation, auth_platform)
        if project is None:
            return  # not a conversation of ours: say nothing
        checked = Actor(
            platform=auth_platform, user_id=actor.user_id, display=actor.display, roles=actor.roles
        )
        if not may_talk(self._gw.config, project, checked):
            await self._refuse_stranger(message, project, checked)
            return
        parsed: ChatInput
        if any(a.voice for a in message.attachments):
            spoken = await self._voice.transcribed(message, project)
            if spoken is None:
                return  # said in the conversation
            # a transcript is words for the agent, never a command: spoken "/approve 3" or
            # "yes" decides nothing (a card waiting: the person is told so, as for typing)
            message, parsed = spoken, ChatPrompt(text=spoken.text)
        else:
            parsed = parse_chat_text(message.text)
            if isinstance(parsed, ControlCommand) and parsed.name is CommandName.TRANSCRIBE:
                again = await self._voice.again(message)  # a voice note that failed, again
                if again is None:
                    return
                message, parsed = again, ChatPrompt(text=again.text)
        if message.attachments and not isinstance(parsed, ChatPrompt | NotForUs):
            await self._reply(conversation, FILES_WITH_A_COMMAND)
            return
        refused = None
        if message.attachments:
            refused = declared_refusal(message.attachments, self._gw.config.projects[project].files)
        # whichever host receives it (issue 19): a prompt is queued in the ledger, which wakes
        # its host; a decision is committed here and written by that host; a command is
        # answered here from the ledger or passed to that host (_elsewhere_command)
        match parsed:
            case ChatPrompt(text=text, mode=mode):
                if mode is not None and not self._has_modes(project):
                    await self._reply(conversation, _NO_PLAN_MODE)
                    return
                if refused is not None:  # kept for its author's choice, never sent as it is
                    await self._files_refused(message, project, checked, text, refused)
                    return
                await self._prompt(message, project, checked, text, mode=mode)
            case ControlCommand(name=name, args=args):
                await self._command(name, conversation, project, checked, args)
            case ApproveCommand(interaction_id=iid, action=spec):
                ack = await self._gw.desk.by_command(iid, checked, conversation, action=spec)
                await self._reply(conversation, ack.text)
            case DenyCommand(interaction_id=iid, message=feedback):
                ack = await self._gw.desk.by_command(
                    iid, checked, conversation, deny=True, message=feedback
                )
                await self._reply(conversation, ack.text)
            case WithdrawCommand(interaction_id=iid):
                ack = await self._gw.desk.withdraw(iid, checked, conversation)
                await self._reply(conversation, ack.text)
            case AnswerCommand(interaction_id=iid, text=text):
                await self._answer(iid, text, checked, conversation, private=message.private)
            case CommandUsage(message=usage):
                await self._reply(conversation, usage)
            case UnknownCommand(name=name):
                await self._reply(conversation, f"Unknown command /{name}.\n\n{HELP_TEXT}")
            case NotForUs():
                pass

    async def _refuse_stranger(self, message: InboundMessage, project: str, actor: Actor) -> None:
        """``actor`` (named as the project's auth rules name people) is not in allow_from:
        in their private conversation with the bot, one reply with their id (what allow_from
        takes); in a shared one nothing (a group would hear the bot answer every stranger),
        logged without the text."""
        await self._store.audit.record(
            "message.refused",
            actor=message.actor.key(),
            details={"project": project, "answered": message.private},
        )
        if message.private:
            await self._reply(message.conversation, stranger_refusal(actor))
        else:
            log.info(
                "a message from %s, who is not in allow_from, in %s: not answered",
                message.actor.key(),
                message.conversation.key(),
            )

    def _auth_platform(self, platform: str) -> str:
        return self._gw.config.platforms.auth_platforms().get(platform, platform)

    async def _session_here(
        self, conversation: ConversationRef, project: str, actor: Actor
    ) -> SessionRecord | None:
        """The open session of ``project`` that ``actor``'s command in ``conversation``
        reaches (a button of a command's card acts as typing it), or None."""
        if (
            project_for(self._gw.config, conversation, self._auth_platform(conversation.platform))
            != project
        ):
            return None
        return await self._session(conversation, project, actor, create=False)

    async def _session(
        self, conversation: ConversationRef, project: str, actor: Actor, *, create: bool
    ) -> SessionRecord | None:
        # one at a time: a first message delivered twice at once must not start two sessions
        # (in this process; between hosts the ledger's compare-and-set on the route decides)
        async with self._routing:
            settings = self._gw.config.projects[project]
            key = route_key(settings.scope, conversation, actor)
            session = await self._store.sessions.lookup_route(key)
            host = self._gw.session_host(project)
            if session is not None and not session.is_closed and session.host != host:
                # its project moved to another host: its native session is a file on the
                # old one, so a new session starts on the new one (issue 19)
                if not create:
                    return None
                await self._store.sessions.close(
                    session.id, reason=f"this project now runs on {host}"
                )
            elif session is not None and not session.is_closed:
                if key != conversation:  # show the session in this conversation too
                    await self._show_here(session, conversation)
                return session
            if not create:
                return None
            session, made = await self._store.sessions.create_routed(
                key,
                replacing=None if session is None else session.id,
                project=project,
                agent_kind=settings.agent,
                initiator=actor,
                host=host,
                shown_in=conversation,
            )
            if not made:
                # another host routed this conversation first (issue 19): its session it is
                log.info("conversation %s: another host made session %s", key, session.id)
                await self._show_here(session, conversation)
                return session
            if settings.scope is SessionScope.USER:
                # a person's own session is shown in their direct conversation too, which
                # the platform knows (a Telegram private chat has the person's id; a Slack or
                # Discord DM channel does not)
                platform = self._gw.platforms.get(conversation.platform)
                direct = await platform.direct_conversation(actor) if platform else None
                if direct is not None and direct != conversation:
                    await self._store.sessions.bind(direct, session.id)
            return session

    async def route_page(self, page: ConversationRef, session: SessionRecord) -> None:
        """``page`` shows ``session`` alone (the console's page of a session started on
        another platform, which the engine binds to it): what is typed there goes to that
        session, as in its own chat, where it would otherwise start a second one. Routed
        where the project's sessions follow threads (each page its own route), while the
        session is open and nothing routes the page yet (a page routed since, by /new or
        /switch, keeps its route)."""
        settings = self._gw.config.projects.get(session.project)
        if settings is None or session.is_closed or settings.scope is not SessionScope.THREAD:
            return
        async with self._routing:
            if await self._store.sessions.lookup_route(page) is None:
                await self._store.sessions.route(page, session.id)

    async def _show_here(self, session: SessionRecord, conversation: ConversationRef) -> None:
        here = await self._store.sessions.lookup(conversation)
        if here is None or here.id != session.id:
            await self._store.sessions.bind(conversation, session.id)
            for waiting in await self._store.interactions.list_open(session.id):
                await self._gw.broker.show_in(waiting, conversation)

    def _has_modes(self, project: str) -> bool:
        return self._gw.config.projects[project].agent is AgentKind.CODEX_APP_SERVER

    async def _prompt(
        self,
        message: InboundMessage,
        project: str,
        actor: Actor,
        text: str,
        *,
        mode: str | None = None,
    ) -> None:
        conversation = message.conversation
        session, result = await self._enqueue(message, project, actor, text, mode=mode)
        if result.outcome is EnqueueOutcome.DUPLICATE:
            # a platform delivered the same message again: it is queued once; the attempt
            # that queued it may have failed before waking the runner, so wake it now
            self._gw.kick(session)
            return
        if result.outcome is EnqueueOutcome.FULL:
            await self._reply(
                conversation,
                f"The queue is full ({result.ahead} messages wait); this one was not queued. "
                "Wait for the agent, or /clear the queue.",
            )
            return
        open_ = await self._store.interactions.list_open(session.id)
        plan = InteractionOrigin.PLAN
        if any(i.origin is plan and i.state is InteractionState.PENDING for i in open_):
            await self._reply(conversation, _PLAN_SET_ASIDE)
        waiting = [
            i
            for i in open_
            if i.kind in (InteractionKind.APPROVAL, InteractionKind.QUESTION, InteractionKind.PLAN)
            and i.origin is not InteractionOrigin.PLAN  # the gateway's own plan: said above
        ]
        replied = await self._replied_card(message, waiting)
        if replied is not None:  # the full notice, and the card again under it
            await self._reply(conversation, _not_a_decision([replied], replying=True))
            self._tell(conversation, [replied])
            await self._gw.broker.show_again(replied, conversation)
        elif waiting and not all((conversation, i.id) in self._told for i in waiting):
            await self._reply(conversation, _not_a_decision(waiting, replying=False))
            self._tell(conversation, waiting)
        elif waiting:
            await self._mark_queued(message)
        else:
            await self._steer_or_offer(session, project, result.prompt, result.ahead)
        if result.held:
            await self._note_held(session.id, conversation)
        owner = self._gw.owner_elsewhere(session)
        if owner is not None and not await self._store.requests.owner_up(session.id):
            # nobody runs it now: said at once, and what becomes of the message
            await self._reply(conversation, _owner_down(owner))
        self._gw.kick(session)

    async def _enqueue(
        self,
        message: InboundMessage,
        project: str,
        actor: Actor,
        text: str,
        *,
        mode: str | None = None,
        files_refused: str | None = None,
    ) -> tuple[SessionRecord, EnqueueResult]:
        """The message queued in its conversation's session (made if there is none), with
        its files; ``files_refused``: kept waiting for its author's choice instead."""
        session = await self._session(message.conversation, project, actor, create=True)
        assert session is not None
        result = await self._store.prompts.enqueue(
            session.id,
            conversation=message.conversation,
            platform_message_id=message.message_id,
            author=actor,
            text=text,
            max_depth=self._gw.config.gateway.queue_depth,
            mode=mode,
            attachments=message.attachments,
            files_refused=files_refused,
        )
        return session, result

    async def _files_refused(
        self, message: InboundMessage, project: str, actor: Actor, text: str, why: str
    ) -> None:
        """A message whose files are refused from what the platform declares of them (too
        large, issue 32): kept in the ledger waiting for its author's choice (send it
        without them, or drop it), its card offered here; nothing is queued to be sent."""
        conversation = message.conversation
        _, result = await self._enqueue(message, project, actor, text, files_refused=why)
        if result.outcome is EnqueueOutcome.FULL:
            await self._reply(conversation, f"{why} The queue is full: it was not kept either.")
        elif result.outcome is EnqueueOutcome.QUEUED and result.prompt is not None:
            await self._gw.file_choices.offer(result.prompt)

    async def _steer_or_offer(
        self, session: SessionRecord, project: str, prompt: PromptRecord | None, ahead: int
    ) -> None:
        """A message typed during a turn, no card waiting: with ``busy_input = "steer"`` it
        goes into the turn (the runner checks again that nothing waits for a decision:
        gateway/sessions/steering.py); with "queue" its author is offered the button "Send
        into this turn now" (gateway/sessions/steer_button.py). Nothing of either where
        it cannot go: the session runs on another host, no turn runs in an agent that
        steers, messages wait ahead of it."""
        runner = self._gw.existing_runner(session.id)
        if prompt is None or ahead or runner is None or not runner.can_steer:
            return
        if prompt.attachments:  # files go with a turn of their own (fetched when it starts)
            return
        if self._gw.owner_elsewhere(session) is not None:
            return
        if self._gw.config.projects[project].busy_input is not BusyInput.STEER:
            self._gw.steer_buttons.offer(prompt)
            return
        why = await runner.steer(prompt.id)
        if why is not None:
            log.info("session %s: message %s queued, not steered: %s", session.id, prompt.id, why)

    async def _replied_card(
        self, message: InboundMessage, waiting: Sequence[Interaction]
    ) -> Interaction | None:
        """The card ``message`` replies to (one of its copies here), if that card still
        waits for a decision."""
        if message.reply_to is None or not waiting:
            return None
        copy = await self._store.cards.shown_by(message.conversation, message.reply_to)
        if copy is None:
            return None
        return next(
            (
                i
                for i in waiting
                if i.id == copy.interaction_id and i.state is InteractionState.PENDING
            ),
            None,
        )

    def _tell(self, conversation: ConversationRef, interactions: Sequence[Interaction]) -> None:
        for interaction in interactions:
            self._told[(conversation, interaction.id)] = None
            self._told.move_to_end((conversation, interaction.id))
        while len(self._told) > MAX_TOLD:
            self._told.popitem(last=False)

    async def _mark_queued(self, message: InboundMessage) -> None:
        """The short mark of a message queued while a card waits (its notice was given)."""
        conversation = message.conversation
        platform = self._gw.platforms.get(conversation.platform)
        marked = False
        if platform is not None:
            try:
                marked = await platform.mark_queued(conversation, message.message_id)
            except PlatformError as exc:
                log.info("queued mark in %s not shown: %s", conversation.key(), exc)
        if not marked:
            await self._reply(conversation, QUEUED_MARK)

    async def _note_held(self, session_id: str, conversation: ConversationRef) -> None:
        """Under the first message typed while earlier ones are held: one line on them (the
        same held messages are not told of again; more held by a new /stop are)."""
        held = tuple(p.id for p in await self._store.prompts.list_held(session_id))
        if not held or self._held_told.get(session_id) == held:
            return
        self._held_told[session_id] = held
        await self._reply(conversation, held_note(len(held), typed_now=True))

    async def _answer(
        self,
        interaction_id: str,
        text: str,
        actor: Actor,
        conversation: ConversationRef,
        *,
        private: bool,
    ) -> None:
        interaction = await self._store.interactions.get(interaction_id)
        if interaction is None:
            await self._reply(conversation, f"No request {interaction_id}.")
            return
        try:
            answers = parse_answers(interaction.questions, text, private=private)
        except InvalidDecision as exc:
            await self._reply(conversation, str(exc))
            return
        ack = await self._gw.desk.by_command(interaction_id, actor, conversation, answers=answers)
        await self._reply(conversation, ack.text)

    # --- commands -------------------------------------------------------------------------

    async def _command(
        self,
        name: CommandName,
        conversation: ConversationRef,
        project: str,
        actor: Actor,
        args: str = "",
    ) -> None:
        if name is CommandName.HELP:
            await self._reply(conversation, HELP_TEXT)
            return
        if name in _SCHEDULE_COMMANDS:  # the project's, answered from the ledger on any host
            await self._reply(
                conversation, await self._schedule_command(name, conversation, project, actor, args)
            )
            return
        if name in (CommandName.SESSIONS, CommandName.SWITCH):  # no session here needed
            await self._reply(
                conversation, await self._sessions_command(name, conversation, project, actor, args)
            )
            return
        if name is CommandName.NEW and self._opens_thread(conversation, project):
            await self._reply(
                conversation, await self._new_in_thread(conversation, project, actor, args)
            )
            return
        new_named = name is CommandName.NEW and bool(args.strip())  # /new NAME
        if new_named and (problem := new_name_problem(args.strip())) is not None:
            await self._reply(conversation, problem)  # nothing closed for a name refused
            return
        session = await self._session(conversation, project, actor, create=False)
        if session is None and new_named:
            await self._reply(
                conversation, await self._next_session(conversation, project, actor, args)
            )
            return
        if session is None:
            await self._reply(conversation, "No session here yet: send a message to start one.")
            return
        owner = self._gw.owner_elsewhere(session)
        if owner is not None and name in _OWNER_COMMANDS:
            await self._elsewhere_command(name, session, owner, conversation, actor, args)
            return
        runner = self._gw.existing_runner(session.id)
        store = self._store
        if name is CommandName.STOP:
            held = await store.prompts.hold(session.id, reason=f"/stop by {actor}")
            if runner is not None and await runner.interrupt(by=actor):
                return  # the turn's end is the one notice: who stopped it, what is held
            text = "Nothing is running."
            await self._reply(
                conversation, f"{text} {held_note(held, typed_now=False)}" if held else text
            )
        elif name is CommandName.RESUME:
            resumed = await store.prompts.resume(session.id)
            self._held_told.pop(session.id, None)
            self._gw.runner(session).kick()
            if not resumed:
                await self._reply(conversation, "Nothing is held.")
            else:
                messages = "1 held message runs" if resumed == 1 else f"{resumed} held messages run"
                await self._reply(conversation, f"▶ Resumed: {messages} next, in order.")
        elif name is CommandName.CLEAR:
            dropped = await store.prompts.clear(session.id, actor=actor)
            self._held_told.pop(session.id, None)
            await self._reply(conversation, f"Cleared {dropped} queued message(s).")
        elif name is CommandName.NEW:
            await store.sessions.close(session.id, reason=f"/new by {actor.key()}")
            if runner is not None:
                await runner.shutdown()
            await self._reply(
                conversation, await self._next_session(conversation, project, actor, args)
            )
        elif name is CommandName.STATUS:
            await self._reply(conversation, await self.status_text(session))
        elif name is CommandName.PENDING:
            await self._reply(conversation, await self.pending_text(session))
        elif name is CommandName.GRANTS:
            await self._reply(conversation, await self._grants.list_text(session))
        elif name is CommandName.REVOKE:
            await self._reply(conversation, await self._grants.revoke(session, args, actor))
        elif name is CommandName.COMPACT:
            await self._reply(conversation, self._compact(session, runner, conversation))
        elif name is CommandName.NAME:
            said = await name_session(store, session, args, actor)
            named = await store.sessions.get(session.id)
            if named is not None and named.name and named.name != session.name:
                # the agent's own session is named too, its answer awaited before the reply
                # (a /new right after then ends an agent that has the name); an agent not
                # running here is given the ledger's name at its next start
                if runner is not None and self._gw.runs_here(named):
                    await runner.name_agent_session(named.name)
            await self._reply(conversation, said)
        elif name is CommandName.MODEL:
            if not args.strip() and await self._model_card(session, conversation):
                return
            choice = await self._settings.choose_model(session, args, actor)
            await self._reply(conversation, choice.text)
            if choice.chosen is not None:  # a /model card on screen marks it too
                await self.model_buttons.redraw(session)
        elif name is CommandName.MODE:
            await self._reply(conversation, await self._settings.mode(session, args, actor))

    async def _next_session(
        self, conversation: ConversationRef, project: str, actor: Actor, args: str
    ) -> str:
        """What ``/new [NAME]`` says once the session here is closed. With a name (checked
        before anything closed), the next session is made now and named, so that
        ``/sessions`` and ``/switch NAME`` find it; its agent starts with the next message,
        as an unnamed one's does."""
        name = args.strip()
        if not name:
            return "A new session starts with your next message."
        session = await self._session(conversation, project, actor, create=True)
        assert session is not None  # create=True always routes one
        await name_new_session(self._store, session, name, actor)
        return f"A new session “{name}” starts with your next message."

    def _opens_thread(self, conversation: ConversationRef, project: str) -> bool:
        """Whether /new here opens a thread for the new session (a forum's General topic,
        where sessions follow threads)."""
        if self._gw.config.projects[project].scope is not SessionScope.THREAD:
            return False
        platform = self._gw.platforms.get(conversation.platform)
        return isinstance(platform, OpensThreads) and platform.opens_threads(conversation)

    async def _new_in_thread(
        self, conversation: ConversationRef, project: str, actor: Actor, args: str
    ) -> str:
        """/new in a forum's General topic (gateway/sessions/session_topics.py)."""
        platform = self._gw.platforms[conversation.platform]
        assert isinstance(platform, OpensThreads)
        return await open_session_thread(
            platform=platform,
            config=self._gw.config,
            store=self._store,
            project=project,
            actor=actor,
            here=conversation,
            args=args,
            host=self._gw.session_host(project),
            say=self._reply,
            link_of=self._link_of,
        )

    async def _model_card(self, session: SessionRecord, conversation: ConversationRef) -> bool:
        """``/model`` without a name: the project's models as buttons, where the platform
        shows a card that is no request's; False where the typed answer is given instead
        (no models listed, the console, a card the platform refused)."""
        platform = self._gw.platforms.get(conversation.platform)
        if platform is None or not platform.limits.loose_cards:
            return False
        return await self.model_buttons.show(session, platform, conversation)

    async def _schedule_command(
        self,
        name: CommandName,
        conversation: ConversationRef,
        project: str,
        actor: Actor,
        args: str,
    ) -> str:
        """/every, /at, /schedules, /unschedule (gateway/sessions/schedule_desk.py)."""
        desk = self.schedules
        if name is CommandName.EVERY:
            answer = await desk.every(project, actor, conversation, args)
        elif name is CommandName.AT:
            answer = await desk.at(project, actor, conversation, args)
        elif name is CommandName.UNSCHEDULE:
            answer, _ = await desk.unschedule(project, actor, args)
        else:
            return await self._show_schedules(conversation, project)
        self._gw.wake_scheduler()
        return answer

    async def _schedule_thread(self, schedule: ScheduleRecord, actor: Actor) -> str | None:
        """A thread of its own for a schedule just made (a forum topic, a Slack or Discord
        thread), where sessions follow threads (gateway/sessions/schedule_topics.py); the
        line saying where its runs speak, or None where it stays where it was made."""
        conversation = schedule.conversation
        if self._gw.config.projects[schedule.project].scope is not SessionScope.THREAD:
            return None
        platform = self._gw.platforms.get(conversation.platform)
        if not isinstance(platform, OpensThreads) or not await platform.threads_beside(
            conversation
        ):
            return None
        return await open_schedule_thread(
            platform=platform,
            store=self._store,
            schedule=schedule,
            actor=actor,
            say=self._reply,
            link_of=self._link_of,
        )

    async def _configured_thread(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """A config file's schedule gets its thread at its first run where the platform may
        open one in the conversation the file names (gateway/sessions/schedule_topics.py)."""
        home = schedule.home
        settings = self._gw.config.projects.get(schedule.project)
        if settings is None or settings.scope is not SessionScope.THREAD:
            return schedule
        if schedule.session_name is not None:  # it runs in that session's conversation
            return schedule
        platform = self._gw.platforms.get(home.platform)
        if not isinstance(platform, OpensThreads) or not await platform.threads_beside(home):
            return schedule
        refused = self._threads_refused.get(home)
        if refused is not None and time.monotonic() - refused < THREAD_ASKED_AGAIN_SECONDS:
            return schedule  # its runs speak where the file says, as at the refusal

        def refusal() -> None:
            self._threads_refused[home] = time.monotonic()

        return await configured_thread(
            platform=platform,
            store=self._store,
            schedule=schedule,
            say=self._reply,
            refused=refusal,
        )

    async def schedule_deleted(
        self, schedule: ScheduleRecord, by: Actor | str, *, anywhere: bool = False
    ) -> None:
        """A deleted schedule says so where its runs spoke, and its own topic is closed
        where the bot may (gateway/sessions/schedule_topics.py)."""
        who = str(by)
        try:
            await say_deleted(
                platform=self._gw.platforms.get(schedule.conversation.platform),
                schedule=schedule,
                by=who,
                say=self._reply,
                anywhere=anywhere,
            )
        except PlatformError as exc:
            log.info("schedule %s: its deletion not said (%s)", schedule.label, exc)

    async def _person_zone(self, actor: Actor, conversation: ConversationRef) -> str | None:
        """The person's zone where their platform says it (Slack's user tz)."""
        platform = self._gw.platforms.get(conversation.platform)
        if not isinstance(platform, KnowsTimeZones):
            return None
        try:
            return await platform.time_zone(actor)
        except PlatformError as exc:
            log.info("the zone of %s not known: %s", actor.key(), exc)
            return None

    async def _show_schedules(self, conversation: ConversationRef, project: str) -> str:
        """/schedules: each schedule as a card with its buttons (pause or resume, delete)
        where the platform shows cards; the answer is the listing's head (or all of it, in
        text, where a card cannot be sent)."""
        listed = await self.schedules.listing(project)
        if not listed:
            return f"No schedules in project {project}: /every or /at makes one."
        platform = self._gw.platforms.get(conversation.platform)
        await self._reply(conversation, f"Schedules of project {project}:")
        for schedule, line in listed:
            card = schedule_card(self._gw.button_key, schedule, line)
            try:
                if platform is None:
                    raise PlatformError(f"no platform {conversation.platform}")
                ref = await platform.send_card(conversation, card)
            except PlatformError as exc:
                log.info("a schedule's card in %s not shown: %s", conversation.key(), exc)
                await self._reply(conversation, line)
                continue
            if schedule.name is None:  # a config file's has no buttons to press
                self._gw.schedule_buttons.shown(schedule.id, ref)
        return "/unschedule ID deletes one; the buttons pause, resume or delete."

    def _compact(
        self, session: SessionRecord, runner: SessionRunner | None, conversation: ConversationRef
    ) -> str:
        """/compact: the agent's own compaction, run by the session's runner as a turn of its
        own before the next queued message (gateway/sessions/compaction.py)."""
        settings = self._gw.config.projects.get(session.project)
        offered = compaction_offered(settings.agent if settings else session.agent_kind)
        if offered is not None:
            return offered
        owner = self._gw.owner_elsewhere(session)
        if owner is not None:
            return f"/compact works on host {owner}, which runs this session: nothing was changed."
        if runner is None or runner.agent is None:
            return "The agent is not running: there is nothing to compact now."
        if not runner.compact(conversation):
            return f"/compact is not offered by this agent ({session.agent_kind}): nothing changed."
        return COMPACTING_WORDS

    async def _sessions_command(
        self,
        name: CommandName,
        conversation: ConversationRef,
        project: str,
        actor: Actor,
        args: str,
    ) -> str:
        """/sessions and /switch (gateway/sessions/session_list.py, session_switch.py),
        answered from the ledger on any host."""
        current = await self._session(conversation, project, actor, create=False)
        if name is CommandName.SESSIONS:
            summaries = await self._store.session_index.of_project(project)
            listed = visible(
                self._gw.config,
                project,
                actor,
                conversation,
                summaries,
                current=None if current is None else current.id,
            )
            return sessions_page(listed, args)

        async def retire(session: SessionRecord, reason: str) -> None:
            owner = self._gw.owner_elsewhere(session)
            if owner is not None:  # its host ends its agent, as for /new
                await self._store.requests.send(
                    session.id,
                    RequestKind.NEW,
                    actor=actor,
                    conversation=conversation,
                    by_host=self._gw.host,
                    close_reason=reason,
                )
                return
            runner = self._gw.existing_runner(session.id)
            if runner is not None:
                await runner.shutdown()

        async with self._routing:  # the route changes: no first message routes meanwhile
            return await switch_session(
                config=self._gw.config,
                store=self._store,
                project=project,
                actor=actor,
                here=conversation,
                spec=args,
                current=current,
                host=self._gw.session_host(project),
                retire=retire,
                show_here=self._show_here,
                link_of=self._link_of,
            )

    def _link_of(self, conversation: ConversationRef) -> str | None:
        platform = self._gw.platforms.get(conversation.platform)
        if isinstance(platform, LinksConversations):
            return platform.conversation_link(conversation)
        return None

    @property
    def grants(self) -> GrantDesk:
        """The grants of a session as this host sees them (a listing is right on any host)."""
        return self._grants

    async def revoke(
        self, session: SessionRecord, args: str, actor: Actor, conversation: ConversationRef
    ) -> str:
        """``/revoke ARGS`` by ``actor`` from a page or form of ``conversation`` (the console),
        carried out where the session runs, as the command typed in a chat is: here, the
        answer; on another host, a request it takes, and what was done with it here."""
        owner = self._gw.owner_elsewhere(session)
        if owner is None:
            return await self._grants.revoke(session, args, actor)
        sent = await self._store.requests.send(
            session.id,
            RequestKind.REVOKE,
            actor=actor,
            conversation=conversation,
            by_host=self._gw.host,
            args=args,
        )
        if not sent:
            return (
                f"Host {owner}, which runs this session, is not answering the ledger: "
                "nothing was revoked."
            )
        return (
            f"Sent to host {owner}, which runs this session: it revokes the grant there and "
            "answers in this conversation."
        )

    async def status_text(self, session: SessionRecord) -> str:
        """What /status says, on any host: from the ledger, and from this host's runner where
        it runs the session (its usage is counted there: another host says so)."""
        store = self._store
        owner = self._gw.owner_elsewhere(session)
        runner = self._gw.existing_runner(session.id)
        if owner is None:
            turn_running = runner is not None and runner.turn_running
        else:
            turn_running = await store.turns.running(session.id) is not None
        open_ = await store.interactions.list_open(session.id)
        state = derive_run_state(open_, turn_running=turn_running)
        named = f" “{session.name}”" if session.name else ""
        head = f"Session {session.id}{named} · project {session.project} · {session.agent_kind}"
        lines = [head if session.host is None else f"{head} · host {session.host}"]
        lines.append(f"State: {run_state_words(state)}")
        lines += filter(None, [await self._settings.describe_model(session)])
        lines += filter(None, [await self._settings.describe_mode(session)])
        epoch = (
            await store.sessions.get_epoch(session.id, session.current_epoch)
            if session.current_epoch
            else None
        )
        failed = runner.start_failure if runner is not None else None
        if failed is not None and (epoch is None or not epoch.is_live):
            lines.append(f"Agent: could not start: {failed}")
        elif epoch is not None:
            running = "running" if epoch.is_live else f"ended ({epoch.exit_description})"
            lines.append(f"Agent: {epoch.agent_version or 'version unknown'}, {running}")
            policy = ", ".join(f"{k} = {v}" for k, v in sorted(epoch.policy.items()))
            lines.append(f"Policy in force: {policy or 'not reported'}")
            if owner is not None and epoch.is_live:
                lines.append(f"Tokens: counted by host {owner}, which runs the agent")
            elif runner is not None and runner.usage.reported:
                lines.append(runner.usage.describe())
        else:
            lines.append("Agent: not started yet")
        queued = await store.prompts.list_queued(session.id)
        held = sum(p.held for p in queued)
        why = f" ({session.queue_pause_reason})" if session.queue_pause_reason else ""
        held_text = f", {held} held{why}: /resume or /clear" if held else ""
        lines.append(f"Queue: {len(queued) - held} waiting{held_text}")
        stuck = len(await store.prompts.waiting_for_files(session.id))
        if stuck:  # issue 32: each under its card (Send without, Try again, Drop it)
            lines.append(
                "Files: 1 message whose files did not come through waits for its author's"
                " choice, on the card under it"
                if stuck == 1
                else f"Files: {stuck} messages whose files did not come through wait for their"
                " authors' choice, on the card under each"
            )
        grants = await store.interactions.list_grants(session.id)
        lines.append("Grants: " + ("none" if not grants else ""))
        lines += [f"  · {g.description} ({g.scope.value}, by {g.actor})" for g in grants]
        lines.append(await self.pending_text(session))
        lines += filter(None, [await self._gw.config_mismatch()])
        problems = self._gw.platform_problems.listed()[-SHOWN_PROBLEMS:]
        if problems:  # a platform stopped or refused: said where people look, too
            lines.append("Platform problems (the console lists them all):")
            lines += [f"  · {p.platform}: {p.text}" for p in problems]
        return "\n".join(lines)

    async def pending_text(self, session: SessionRecord) -> str:
        open_ = await self._store.interactions.list_pending_view(session.id)  # a reader's
        if not open_:
            return "Open requests: none"
        unseen = {i.id for i in await self._gw.broker.unseen(session.id)}
        lines = ["Open requests:"]
        for interaction in open_:
            seen = "NOT SEEN by anyone yet" if interaction.id in unseen else "shown"
            lines.append(
                f"  · {interaction.id}: {interaction.title} [{interaction.state.value}, {seen}]"
            )
            problem = undelivered(interaction)
            if problem is not None:
                lines.append(f"    ⚠ {problem[0].upper()}{problem[1:]}")
        return "\n".join(lines)

    # --- commands for a session another host runs (issue 19) ------------------------------

    async def _elsewhere_command(
        self,
        name: CommandName,
        session: SessionRecord,
        owner: str,
        conversation: ConversationRef,
        actor: Actor,
        args: str,
    ) -> None:
        """A command that only ``owner``, which runs the session, can carry out: what the
        ledger can do is done here, the rest is a request the owner takes (woken by its
        insert) and answers as it answers its own commands. Nothing is said here that the
        owner says."""
        requests = self._store.requests
        by_host = self._gw.host
        down = f"Host {owner}, which runs this session, is not answering the ledger"
        if name is CommandName.STOP:
            stop = await requests.stop(
                session.id,
                actor=actor,
                conversation=conversation,
                by_host=by_host,
                reason=f"/stop by {actor}",
            )
            if stop.sent:
                return  # the owner's notice of the turn's end is the one answer
            text = "Nothing is running." if stop.owner_up else f"{down}: nothing was stopped."
            held = held_note(stop.held, typed_now=False) if stop.held else ""
            await self._reply(conversation, f"{text} {held}".rstrip())
        elif name is CommandName.NEW:
            await requests.send(
                session.id,
                RequestKind.NEW,
                actor=actor,
                conversation=conversation,
                by_host=by_host,
                close_reason=f"/new by {actor.key()}",
            )
            await self._reply(
                conversation, await self._next_session(conversation, session.project, actor, args)
            )
        elif name is CommandName.RESUME:
            resumed = await self._store.prompts.resume(session.id)
            self._held_told.pop(session.id, None)
            if not resumed:
                await self._reply(conversation, "Nothing is held.")
                return
            up = await requests.send(
                session.id,
                RequestKind.RESUME,
                actor=actor,
                conversation=conversation,
                by_host=by_host,
            )
            messages = "1 held message runs" if resumed == 1 else f"{resumed} held messages run"
            text = f"▶ Resumed: {messages} next, in order."
            if not up:  # its recovery holds the queue again, and says so
                text = f"▶ Resumed, but {down}: nothing runs until it is back."
            await self._reply(conversation, text)
        else:  # /grants, /revoke: the agent's process and rules file are on the owner
            kind = RequestKind.GRANTS if name is CommandName.GRANTS else RequestKind.REVOKE
            sent = await requests.send(
                session.id, kind, actor=actor, conversation=conversation, by_host=by_host, args=args
            )
            if not sent:
                await self._reply(conversation, f"{down}: /{name} was not taken.")

    async def take_requests(self, session_id: str) -> None:
        """This host was woken for a request another host wrote for one of its sessions:
        each is taken once (while this host holds its lease with its fence) and carried out
        as the command it is, answered where it was typed."""
        gw = self._gw
        lease = gw.host_lease
        if gw.fenced or gw.ledger_host is None or lease is None or lease.fence is None:
            return  # starting over: its recovery drops them
        try:
            taken = await self._store.requests.take(
                session_id, host=gw.ledger_host, fence=lease.fence
            )
            for request in taken:
                await self._carry_out(request)
        except GatewayError as exc:  # a ledger or agent error: logged, the session runs on
            log.warning("session %s: a request from another host failed: %s", session_id, exc)

    async def _carry_out(self, request: SessionRequest) -> None:
        session_id, actor = request.session_id, request.actor
        runner = self._gw.existing_runner(session_id)
        log.info(
            "session %s: /%s by %s, received by host %s",
            session_id,
            request.kind.value,
            actor.key(),
            request.by_host,
        )
        if request.kind is RequestKind.STOP:
            if runner is not None and await runner.interrupt(by=actor):
                return  # the turn's end is the one notice, as for a /stop typed here
            held = len(await self._store.prompts.list_held(session_id))
            text = "Nothing is running."
            await self._reply(
                request.conversation,
                f"{text} {held_note(held, typed_now=False)}" if held else text,
            )
        elif request.kind is RequestKind.NEW:
            if runner is not None:
                await runner.shutdown()
        elif request.kind is RequestKind.RESUME:
            session = await self._store.sessions.get(session_id)
            if session is not None and not session.is_closed and self._gw.runs_here(session):
                self._gw.runner(session).kick()
        else:
            session = await self._store.sessions.get(session_id)
            if session is None:
                return
            if request.kind is RequestKind.GRANTS:
                text = await self._grants.list_text(session)
            else:
                text = await self._grants.revoke(session, request.args, actor)
            await self._reply(request.conversation, text)

    async def _drop_requests(self, host: str, *, why: str) -> None:
        """The requests left for ``host`` (it stopped, or starts over) are dropped, never
        carried out later; a /grants or /revoke left unanswered is told so (a /stop, /new or
        /resume is answered by what is said of the host's end)."""
        for request in await self._store.requests.drop(host=host, by=self._gw.host, why=why):
            if request.kind in (RequestKind.GRANTS, RequestKind.REVOKE):
                await self._reply(
                    request.conversation,
                    f"Host {host} {why} before it took /{request.kind.value} from "
                    f"{request.actor}: it was not carried out; send it again.",
                )

    async def _reply(self, conversation: ConversationRef, text: str) -> None:
        await self._notifier.send([conversation], text)  # it splits to the platform's limit


_SCHEDULE_COMMANDS = frozenset(
    {CommandName.EVERY, CommandName.AT, CommandName.SCHEDULES, CommandName.UNSCHEDULE}
)
# passed to the host that runs the session (store.requests); the others are answered by the
# receiver from the ledger (/status, /pending, /clear, /help)
_OWNER_COMMANDS = frozenset(
    {
        CommandName.STOP,
        CommandName.NEW,
        CommandName.RESUME,
        CommandName.GRANTS,
        CommandName.REVOKE,
    }
)


def _recovered_text(how: str, ended: Sequence[Interaction], *, held: int) -> str:
    """What a conversation is told once the gateway is back. Where cards of its requests
    were ended, their edits say the restart and what a next message does; this short line
    only notifies and points at them (an edit notifies nobody). Elsewhere, in full."""
    if ended:
        text = restart_notice(ended)
        return f"{text} {held_note(held, typed_now=False)}" if held else text
    text = _RECOVERED.get(how, _RECOVERED["stopped"])
    if held:
        text += " " + held_note(held, typed_now=False)
    return text + " Your next message resumes the conversation."


def _owner_down(owner: str) -> str:
    return (
        f"Host {owner}, which runs this session, is not answering the ledger: your message is "
        f"kept in the queue. Once host {owner} is back, /resume runs it."
    )


_PLAN_SET_ASIDE = (
    "Queued as a message for the agent, not as a decision: the plan is not implemented. "
    "The plan card closes when your message runs."
)
_NO_PLAN_MODE = (
    "/plan works with Codex (app-server) projects. Claude Code plans when the project says "
    'permission_mode = "plan"; your message was not sent.'
)


def _not_a_decision(waiting: Sequence[Interaction], *, replying: bool) -> str:
    """The full notice: chat text is a message for the agent, never a decision. The
    commands it names are spelled by each platform as they work where it is read (a Slack
    thread: "@app /approve"; Discord registers /approve, /deny and /answer), with the
    request's own id where one waits."""
    names = ", ".join(f"{i.title} ({i.id})" for i in waiting)
    questions = all(i.kind is InteractionKind.QUESTION for i in waiting)
    which = waiting[0].id if len(waiting) == 1 else "ID"
    how = f"/answer {which}" if questions else f"/approve {which}, /deny {which}"
    if replying:
        return (
            f"Queued as a message for the agent, not as a decision. Still waiting for a "
            f"decision on: {names}. Decide with the buttons below, or {how}."
        )
    return (
        "Queued as a message for the agent, not as a decision. Still waiting for a decision "
        f"on: {names}. Use the card's buttons, or {how}."
    )
