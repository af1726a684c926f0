"""What a schedule's run does (issue 35; DESIGN.md, "Schedules"), once the scheduler claimed it.

A run is a prompt like a person's, in a **fresh session** routed to the schedule's
conversation (so it inherits no session grant and no loosened mode a person gave while
watching), started by the schedule's creator (the session's initiator: where the project
names no approvers, the creator decides its requests; else the project's approvers do). Its
author is recorded as "schedule S3 by alice": the audit's "who asked". "⏰ scheduled: TEXT"
is said in the conversation first. A schedule approves nothing: its agent's requests are
cards like any other, under the same policy and expiry.

A run is **skipped and said**, not run, when (checked in this order, each run):

- its project is gone from the config, or its creator may no longer talk to the project;
- the conversation's current session (the previous run's, or a person's) still works, has a
  request waiting for a decision, or has messages waiting, or the host that runs it is down
  (several hosts): no pile-up;
- that session's queue is held (after ``/stop`` or a restart): ``/resume`` or ``/clear`` it.

A run's prompt held by a restart before it ran is dropped and its run recorded as skipped
(:meth:`ScheduleRuns.settle`): nothing scheduled runs late without being asked again.

A run whose fresh session took the conversation from a person's session **gives it back**
once it is over (:meth:`ScheduleRuns.settle`, woken by the turn's end), and says so: the
person's next message goes to their own session, not the run's. Not when someone talked to
the run's session meanwhile (it is theirs now), nor when the conversation moved on. A
schedule made in a Telegram forum runs in a topic of its own (schedule_topics.py), where
there is nothing to give back; a config file's schedule gets its own at its first run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gateway.config.access import may_talk
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef, InteractionState
from gateway.schedule_times import zone_of
from gateway.session_record import SessionRecord
from gateway.sessions.routing import route_key
from gateway.sessions.schedule_desk import when_words
from gateway.store.records import EnqueueOutcome, PromptState
from gateway.store.schedules import ScheduleRecord, ScheduleRun, run_message_id
from gateway.store.store import Store

__all__ = ["SCHEDULED_MARK", "ScheduleRuns", "author_of"]

log = logging.getLogger(__name__)

SCHEDULED_MARK = "⏰ scheduled:"


def author_of(schedule: ScheduleRecord) -> Actor:
    """Who asked a run's prompt: the creator's account, named as the schedule's."""
    creator = schedule.creator
    return Actor(
        platform=creator.platform,
        user_id=creator.user_id,
        display=f"schedule {schedule.label} by {creator}",
    )


class ScheduleRuns:
    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        say: Callable[[ConversationRef, str], Awaitable[None]],
        session_host: Callable[[str], str | None],
        kick: Callable[[SessionRecord], None],
        routing: asyncio.Lock,
        owner_elsewhere: Callable[[SessionRecord], str | None] = lambda session: None,
        place: Callable[[ScheduleRecord], Awaitable[ScheduleRecord]] | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._say = say
        self._session_host = session_host
        self._kick = kick
        self._routing = routing
        self._owner_elsewhere = owner_elsewhere
        self._place = place  # a config file's schedule gets its thread (schedule_topics.py)

    def reload(self, config: Config) -> None:
        """Who may schedule and whose runs may go, from a reloaded config."""
        self._config = config

    async def start(self, schedule: ScheduleRecord, run: ScheduleRun) -> None:
        """Start a claimed run, or skip it and say why."""
        store = self._store
        if self._place is not None and schedule.name is not None and schedule.own_thread is None:
            schedule = await self._place(schedule)  # its first run: a thread of its own
        settings = self._config.projects.get(schedule.project)
        if settings is None:
            await self._skip(schedule, run, f"project {schedule.project} is no longer configured")
            return
        if not may_talk(self._config, schedule.project, schedule.creator):
            await self._skip(
                schedule,
                run,
                f"its creator {schedule.creator} may no longer talk to project {schedule.project}",
            )
            return
        if schedule.session_name is not None:
            await self._start_named(schedule, run, schedule.session_name)
            return
        key = route_key(settings.scope, schedule.conversation, schedule.creator)
        async with self._routing:
            current = await store.sessions.lookup_route(key)
            busy = None if current is None else await self._busy(current)
            if busy is not None:
                await self._skip(schedule, run, busy)
                return
            session, made = await store.sessions.create_routed(
                key,
                replacing=None if current is None else current.id,
                project=schedule.project,
                agent_kind=settings.agent,
                initiator=schedule.creator,
                host=self._session_host(schedule.project),
                shown_in=schedule.conversation,
            )
        if not made:  # a person's first message routed the conversation meanwhile
            await self._skip(schedule, run, "the conversation started a session of its own")
            return
        replaced = await self._given_back_to(schedule, current)
        result = await store.prompts.enqueue(
            session.id,
            conversation=schedule.conversation,
            platform_message_id=run_message_id(schedule.id, run.due_at),
            author=author_of(schedule),
            text=run.text,
            max_depth=self._config.gateway.queue_depth,
        )
        if result.outcome is EnqueueOutcome.DUPLICATE and result.prompt is not None:
            # queued before a crash, in the session made then: that one is the run's
            await store.schedules.started(run, result.prompt.session_id)
            return
        await self._say(schedule.conversation, f"{SCHEDULED_MARK} {run.text}")
        await store.schedules.started(run, session.id, replaced=replaced)
        await store.audit.record(
            "schedule.run",
            actor=author_of(schedule),
            session_id=session.id,
            details={"schedule": schedule.id, "due_at": run.due_at.isoformat()},
        )
        self._kick(session)

    async def _start_named(self, schedule: ScheduleRecord, run: ScheduleRun, name: str) -> None:
        """A run in the project's open session named ``name`` (a config entry's ``session``):
        only while it holds no session grant and no mode a person chose, which a run must
        not inherit; else skipped and said."""
        store = self._store
        found = [
            summary.session
            for summary in await store.session_index.of_project(schedule.project)
            if summary.session.name == name and not summary.session.is_closed
        ]
        if not found:
            await self._skip(
                schedule, run, f"no open session is named “{name}” in project {schedule.project}"
            )
            return
        session = found[0]
        why = await self._busy(session) or await self._holds(session)
        if why is not None:
            await self._skip(schedule, run, why)
            return
        result = await store.prompts.enqueue(
            session.id,
            conversation=schedule.conversation,
            platform_message_id=run_message_id(schedule.id, run.due_at),
            author=author_of(schedule),
            text=run.text,
            max_depth=self._config.gateway.queue_depth,
        )
        if result.outcome is not EnqueueOutcome.DUPLICATE:
            await self._say(schedule.conversation, f"{SCHEDULED_MARK} {run.text}")
        await store.schedules.started(run, session.id)
        self._kick(session)

    async def _given_back_to(
        self, schedule: ScheduleRecord, current: SessionRecord | None
    ) -> str | None:
        """The session the conversation goes back to once the run is over: the one the run
        took it from, unless that was closed or a run of this schedule (in a topic of the
        schedule's own the newest run stays)."""
        if current is None or current.is_closed:
            return None
        if await self._store.schedules.ran_in(schedule.id, current.id):
            return None
        return current.id

    async def _hand_back(self, schedule: ScheduleRecord, run: ScheduleRun) -> None:
        """A run that is over gives its conversation back to the session it took it from,
        so a person's next message goes to their session, not the run's: unless someone
        talked to the run's session meanwhile (it is theirs now), it still works or waits, or
        the conversation moved on (a /new, a /switch, a later run)."""
        store = self._store
        if run.session_id is None or run.replaced_session_id is None:
            return
        settings = self._config.projects.get(schedule.project)
        ran = await store.sessions.get(run.session_id)
        before = await store.sessions.get(run.replaced_session_id)
        if settings is None or ran is None or before is None or before.is_closed:
            return
        if await self._busy(ran) is not None:
            return
        if len(await store.timeline.of_session(ran.id, turns=2)) > 1:  # a person's turn too
            return
        key = route_key(settings.scope, schedule.conversation, schedule.creator)
        async with self._routing:
            if not await store.schedules.hand_back(run, key, schedule.conversation):
                return
        shown = f"“{before.name}”" if before.name else before.id
        await self._say(
            schedule.conversation,
            f"⏰ Schedule {schedule.label}'s run is over: this conversation is back to the"
            f" session it showed before ({shown}). /sessions lists the run's ({ran.id}).",
        )

    async def _holds(self, session: SessionRecord) -> str | None:
        """What a person gave ``session`` that a scheduled run must not inherit."""
        grants = [
            g
            for g in await self._store.grants.for_session(session.id, session.project)
            if g.revoked is None and g.grant.session_id == session.id
        ]
        if grants:
            return f"session “{session.name}” holds a grant a person gave (/grants, /revoke)"
        chosen = await self._store.settings.of(session.id)
        if chosen.approval_policy or chosen.sandbox or chosen.permission_mode:
            return f"session “{session.name}” runs with a mode a person chose (/mode)"
        return None

    async def said_skipped(self, schedule: ScheduleRecord, run: ScheduleRun) -> None:
        """A run the scheduler recorded as skipped (missed): said in the conversation."""
        await self._say(schedule.conversation, _skipped_words(schedule, run, run.reason or ""))

    async def settle(self, schedule: ScheduleRecord, run: ScheduleRun) -> None:
        """A started run: its outcome recorded once its prompt ran; a prompt a restart (or
        /stop) held before it ran is dropped and the run skipped and said."""
        found = await self._store.schedules.prompt_state(run)
        if found is None:
            return
        state, held = found
        if state is PromptState.QUEUED and held:
            if await self._store.schedules.drop_held_prompt(run):
                await self._skip(schedule, run, "its prompt met a held queue (a restart or /stop)")
                await self._hand_back(schedule, run)
        elif state is PromptState.DONE:
            await self._store.schedules.ended(run, failed=False)
            await self._hand_back(schedule, run)
        elif state in (PromptState.INTERRUPTED, PromptState.DROPPED):
            await self._store.schedules.ended(run, failed=True, reason=state.value)
            await self._hand_back(schedule, run)

    async def _busy(self, session: SessionRecord) -> str | None:
        """Why a new run may not replace ``session`` in its conversation now (None: it may)."""
        if session.is_closed:
            return None
        store = self._store
        owner = self._owner_elsewhere(session)
        if owner is not None and not await store.requests.owner_up(session.id):
            return f"host {owner}, which runs the conversation's session, is not running"
        waiting = [
            i
            for i in await store.interactions.list_open(session.id)
            if i.state is InteractionState.PENDING
        ]
        if waiting:
            return "a request of the conversation's session still waits for a decision"
        if await store.turns.running(session.id) is not None:
            return "the conversation's session is still working (the previous run, or a person's)"
        queued = await store.prompts.list_queued(session.id)
        if any(prompt.held for prompt in queued):
            return "the conversation's queue is held (after /stop or a restart): /resume or /clear"
        if queued:
            return "messages still wait in the conversation's queue"
        return None

    async def _skip(self, schedule: ScheduleRecord, run: ScheduleRun, reason: str) -> None:
        await self._store.schedules.skipped(run, reason)
        log.info("schedule %s: run of %s skipped: %s", schedule.label, run.due_at, reason)
        await self._say(schedule.conversation, _skipped_words(schedule, run, reason))


def _skipped_words(schedule: ScheduleRecord, run: ScheduleRun, reason: str) -> str:
    when = when_words(run.due_at, zone_of(schedule.zone))
    return f"⏰ Schedule {schedule.label}: the run of {when} was skipped: {reason}."
