"""The prompt queue and the control channel: chat messages and commands, and recovery.

Chat text is never a decision: anything that is not a command is queued as a prompt, and
when an approval or question is waiting the person is told that its card still waits.
Commands (/stop, /status, ...) are never queued.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from gateway.auth import may_talk, stranger_refusal
from gateway.cards import undelivered
from gateway.commands import (
    HELP_TEXT,
    AnswerCommand,
    ApproveCommand,
    ChatPrompt,
    CommandName,
    CommandUsage,
    ControlCommand,
    DenyCommand,
    NotForUs,
    UnknownCommand,
    parse_answers,
    parse_chat_text,
)
from gateway.config import SessionScope
from gateway.domain import Actor, ConversationRef, InteractionKind
from gateway.errors import InvalidDecision
from gateway.interactions import derive_run_state
from gateway.outbound import Notifier
from gateway.platform import InboundMessage
from gateway.routing import project_for, route_key
from gateway.store import EnqueueOutcome, SessionRecord

if TYPE_CHECKING:
    from gateway.engine import Gateway

__all__ = ["Control"]

log = logging.getLogger(__name__)


class Control:
    def __init__(self, gateway: Gateway) -> None:
        self._gw = gateway
        self._store = gateway.store
        self._notifier = Notifier(gateway.platforms)
        self._routing = asyncio.Lock()  # finding, creating and binding sessions

    # --- recovery -------------------------------------------------------------------------

    async def recover(self) -> None:
        """End what a previous gateway process left, before anything else happens."""
        store = self._store
        touched: dict[str, str] = {}
        for epoch in await store.sessions.live_epochs():
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
            await store.sessions.end_epoch(
                epoch.session_id, epoch.epoch, exit_description="the gateway restarted"
            )
            for update in await store.interactions.orphan_epoch(
                epoch.session_id, epoch.epoch, gateway_restarted=True, note="the gateway restarted"
            ):
                self._gw.broker.mark_dirty(update.interaction.id)
            touched[epoch.session_id] = "stopped"
        for session_id in await store.prompts.recover_after_restart():
            touched.setdefault(session_id, "paused")
        for copy in await store.cards.list_outdated():
            self._gw.broker.mark_dirty(copy.interaction_id)
        await self._gw.broker.resend_failed()
        for session_id in touched:
            waiting = len(await store.prompts.list_queued(session_id))
            text = "↻ The gateway restarted; the agent process it ran was ended."
            if waiting:
                text += (
                    f" {waiting} message(s) wait, paused: /resume to send them, /clear to drop"
                    " them."
                )
            text += " Your next message resumes the conversation."
            await self._notifier.send(await store.sessions.list_bindings(session_id), text)

    # --- messages -------------------------------------------------------------------------

    async def on_message(self, message: InboundMessage) -> None:
        conversation, actor = message.conversation, message.actor
        auth_platform = self._auth_platform(conversation.platform)
        project = project_for(self._gw.config, conversation, auth_platform)
        if project is None:
            return  # not a conversation of ours: say nothing
        checked = Actor(platform=auth_platform, user_id=actor.user_id, display=actor.display)
        if not may_talk(self._gw.config, project, checked):
            await self._refuse_stranger(message, project, checked)
            return
        parsed = parse_chat_text(message.text)
        match parsed:
            case ChatPrompt(text=text):
                await self._prompt(message, project, checked, text)
            case ControlCommand(name=name):
                await self._command(name, conversation, project, checked)
            case ApproveCommand(interaction_id=iid, action=spec):
                ack = await self._gw.desk.by_command(iid, checked, conversation, action=spec)
                await self._reply(conversation, ack.text)
            case DenyCommand(interaction_id=iid, message=feedback):
                ack = await self._gw.desk.by_command(
                    iid, checked, conversation, deny=True, message=feedback
                )
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

    async def _session(
        self, conversation: ConversationRef, project: str, actor: Actor, *, create: bool
    ) -> SessionRecord | None:
        # one at a time: a first message delivered twice at once must not start two sessions
        async with self._routing:
            settings = self._gw.config.projects[project]
            key = route_key(settings.scope, conversation, actor)
            session = await self._store.sessions.lookup_route(key)
            if session is not None and not session.is_closed:
                if key != conversation:  # show the session in this conversation too
                    await self._show_here(session, conversation)
                return session
            if not create:
                return None
            session = await self._store.sessions.create(
                project=project, agent_kind=settings.agent, initiator=actor
            )
            await self._store.sessions.route(key, session.id)
            await self._store.sessions.bind(conversation, session.id)
            if settings.scope is SessionScope.USER:
                # a person's own session is shown in their direct conversation too, which
                # the platform knows (a Telegram private chat has the person's id; a Slack or
                # Discord DM channel does not)
                platform = self._gw.platforms.get(conversation.platform)
                direct = await platform.direct_conversation(actor) if platform else None
                if direct is not None and direct != conversation:
                    await self._store.sessions.bind(direct, session.id)
            return session

    async def _show_here(self, session: SessionRecord, conversation: ConversationRef) -> None:
        here = await self._store.sessions.lookup(conversation)
        if here is None or here.id != session.id:
            await self._store.sessions.bind(conversation, session.id)
            for waiting in await self._store.interactions.list_open(session.id):
                await self._gw.broker.show_in(waiting, conversation)

    async def _prompt(self, message: InboundMessage, project: str, actor: Actor, text: str) -> None:
        conversation = message.conversation
        session = await self._session(conversation, project, actor, create=True)
        assert session is not None
        result = await self._store.prompts.enqueue(
            session.id,
            conversation=conversation,
            platform_message_id=message.message_id,
            author=actor,
            text=text,
            max_depth=self._gw.config.gateway.queue_depth,
        )
        if result.outcome is EnqueueOutcome.DUPLICATE:
            # a platform delivered the same message again: it is queued once; the attempt
            # that queued it may have failed before waking the runner, so wake it now
            self._gw.runner(session).kick()
            return
        if result.outcome is EnqueueOutcome.FULL:
            await self._reply(
                conversation,
                f"The queue is full ({result.ahead} messages wait); this one was not queued. "
                "Wait for the agent, or /clear the queue.",
            )
            return
        waiting = [
            i
            for i in await self._store.interactions.list_open(session.id)
            if i.kind in (InteractionKind.APPROVAL, InteractionKind.QUESTION, InteractionKind.PLAN)
        ]
        if waiting:
            names = ", ".join(f"{i.title} ({i.id})" for i in waiting)
            await self._reply(
                conversation,
                f"Queued as a message for the agent, not as a decision. Still waiting for a "
                f"decision on: {names}. Use the card's buttons, or /approve ID, /deny ID.",
            )
        elif result.paused:
            await self._reply(
                conversation,
                f"Queued ({result.ahead} ahead). The queue is paused: /resume to send, "
                "/clear to drop.",
            )
        self._gw.runner(session).kick()

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
        self, name: CommandName, conversation: ConversationRef, project: str, actor: Actor
    ) -> None:
        if name is CommandName.HELP:
            await self._reply(conversation, HELP_TEXT)
            return
        session = await self._session(conversation, project, actor, create=False)
        if session is None:
            await self._reply(conversation, "No session here yet: send a message to start one.")
            return
        runner = self._gw.existing_runner(session.id)
        store = self._store
        if name is CommandName.STOP:
            await store.prompts.pause(session.id, reason="stopped by /stop")
            interrupted = runner is not None and await runner.interrupt()
            waiting = len(await store.prompts.list_queued(session.id))
            head = "⏹ Stopping the turn." if interrupted else "Nothing is running."
            await self._reply(
                conversation,
                f"{head} The queue is paused ({waiting} waiting): /resume to send, /clear to drop.",
            )
        elif name is CommandName.RESUME:
            waiting = await store.prompts.resume(session.id)
            self._gw.runner(session).kick()
            await self._reply(conversation, f"▶ Resumed: {waiting} queued message(s) to send.")
        elif name is CommandName.CLEAR:
            dropped = await store.prompts.clear(session.id, actor=actor)
            await self._reply(conversation, f"Cleared {dropped} queued message(s).")
        elif name is CommandName.NEW:
            await store.sessions.close(session.id, reason=f"/new by {actor.key()}")
            if runner is not None:
                await runner.shutdown()
            await self._reply(conversation, "A new session starts with your next message.")
        elif name is CommandName.STATUS:
            await self._reply(conversation, await self.status_text(session))
        elif name is CommandName.PENDING:
            await self._reply(conversation, await self.pending_text(session))

    async def status_text(self, session: SessionRecord) -> str:
        store = self._store
        runner = self._gw.existing_runner(session.id)
        open_ = await store.interactions.list_open(session.id)
        state = derive_run_state(open_, turn_running=runner is not None and runner.turn_running)
        lines = [f"Session {session.id} · project {session.project} · {session.agent_kind}"]
        lines.append(f"State: {state.value.replace('_', ' ')}")
        epoch = (
            await store.sessions.get_epoch(session.id, session.current_epoch)
            if session.current_epoch
            else None
        )
        if epoch is not None:
            running = "running" if epoch.is_live else f"ended ({epoch.exit_description})"
            lines.append(f"Agent: {epoch.agent_version or 'version unknown'}, {running}")
            policy = ", ".join(f"{k} = {v}" for k, v in sorted(epoch.policy.items()))
            lines.append(f"Policy in force: {policy or 'not reported'}")
        else:
            lines.append("Agent: not started yet")
        queued = len(await store.prompts.list_queued(session.id))
        paused = f", paused ({session.queue_pause_reason})" if session.queue_paused else ""
        lines.append(f"Queue: {queued} waiting{paused}")
        grants = await store.interactions.list_grants(session.id)
        lines.append("Grants: " + ("none" if not grants else ""))
        lines += [f"  · {g.description} ({g.scope.value}, by {g.actor})" for g in grants]
        lines.append(await self.pending_text(session))
        return "\n".join(lines)

    async def pending_text(self, session: SessionRecord) -> str:
        open_ = await self._store.interactions.list_open(session.id)
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

    async def _reply(self, conversation: ConversationRef, text: str) -> None:
        await self._notifier.send([conversation], text)  # it splits to the platform's limit
