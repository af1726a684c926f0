"""``/every``, ``/at``, ``/schedules`` and ``/unschedule`` (issue 35): schedules made, listed
and deleted from the chat, answered from the ledger on any host.

Who may: making, pausing, resuming and deleting a schedule is a project approver's (the
project's approvers, or, where the project names none, the person who made the schedule:
``may_decide`` with the creator as the initiator), or one of the project's ``schedulers``
(``may_schedule``); every change is audited by the ledger.
What is refused, with what to do instead: a cron field that is wrong (named), a schedule
that would run more often than the minimum interval, more than the project's maximum, an
empty or too long text, a time already past, and any schedule of another project. A
schedule of the config file is listed here, never changed here.

What a schedule's run does is gateway/sessions/schedule_runs.py's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.clock import Clock
from gateway.config.access import may_schedule
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError
from gateway.schedule_times import (
    ALIASES,
    ScheduleTimeError,
    cron_of,
    next_after,
    parse_at,
    shortest_gap,
    split_every,
    zone_of,
)
from gateway.store.records import PromptState
from gateway.store.schedules import RunState, ScheduleDraft, ScheduleRecord, ScheduleRun
from gateway.store.store import Store
from gateway.wording import named

__all__ = ["ScheduleDesk", "configured_drafts", "schedule_id_of", "when_words"]

_NOT_APPROVER = (
    "Only an approver of project {project} (or one of its schedulers) may {what} schedules:"
    " a schedule's runs ask for approvals like any other, and it takes an approver to set"
    " one up."
)


def when_words(at: datetime, zone: ZoneInfo) -> str:
    """An instant as a person reads it: local time with its zone, and UTC."""
    local = at.astimezone(zone)
    if zone.key == "UTC":
        return f"{local:%Y-%m-%d %H:%M} UTC"
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()} ({at:%H:%M} UTC)"


def schedule_id_of(spec: str) -> int | None:
    """``S3``, ``s3`` or ``3``: the schedule's id; None if it is none of those."""
    text = spec.strip().removeprefix("S").removeprefix("s")
    return int(text) if text.isdigit() and len(text) <= 18 else None


def configured_drafts(config: Config, project: str, now: datetime) -> list[ScheduleDraft]:
    """The project's ``[[projects.X.schedule]]`` entries as the ledger keeps them (checked by
    the config's model already), each next due after ``now``."""
    settings = config.projects[project]
    drafts: list[ScheduleDraft] = []
    for entry in settings.schedule:
        zone = zone_of(
            entry.time_zone or config.time_zone_of(entry.creator) or settings.time_zone or "UTC"
        )
        platform, _, where = entry.channel.partition(":#")
        space, _, channel = where.rpartition("/")
        creator_platform, _, creator_id = entry.creator.partition(":")
        drafts.append(
            ScheduleDraft(
                project=project,
                name=entry.name,
                cron=entry.cron,
                zone=zone.key,
                text=entry.text,
                conversation=ConversationRef(
                    platform=platform, space=space or None, channel=channel
                ),
                creator=Actor(platform=creator_platform, user_id=creator_id, display=creator_id),
                next_at=next_after(entry.cron, zone, now),
                session_name=entry.session,
            )
        )
    return drafts


PersonZone = Callable[[Actor, ConversationRef], Awaitable[str | None]]
"""The zone a person's platform says they are in (Slack's user ``tz``), or None."""


async def _no_zone(actor: Actor, conversation: ConversationRef) -> str | None:
    return None


PlaceSchedule = Callable[[ScheduleRecord, Actor], Awaitable[str | None]]
"""Give a schedule just made a thread of its own where the platform can (a Telegram forum's
topic: gateway/sessions/schedule_topics.py); the line saying where its runs speak, or None
(they speak where it was made)."""


async def _made_here(schedule: ScheduleRecord, actor: Actor) -> str | None:
    return None


Farewell = Callable[[ScheduleRecord, Actor], Awaitable[None]]
"""Say in a deleted schedule's conversation (its thread) that no more runs come."""


async def _no_farewell(schedule: ScheduleRecord, actor: Actor) -> None:
    return None


class ScheduleDesk:
    def __init__(
        self,
        config: Config,
        store: Store,
        clock: Clock,
        *,
        person_zone: PersonZone = _no_zone,
        place: PlaceSchedule = _made_here,
        farewell: Farewell = _no_farewell,
    ) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._person_zone = person_zone
        self._place = place
        self._farewell = farewell

    def reload(self, config: Config) -> None:
        """Who may schedule and whose runs may go, from a reloaded config."""
        self._config = config

    def zone(self, project: str) -> ZoneInfo:
        """The project's zone (``time_zone``), else UTC."""
        settings = self._config.projects.get(project)
        name = settings.time_zone if settings is not None else None
        return zone_of(name or "UTC")

    async def zone_for(self, project: str, actor: Actor, conversation: ConversationRef) -> ZoneInfo:
        """The zone a schedule ``actor`` makes reads its times in: theirs where their
        platform says it (Slack's user ``tz``), else their ``[people]`` entry's
        ``time_zone``, else the project's, else UTC."""
        named = await self._person_zone(actor, conversation)
        if named:
            try:
                return zone_of(named)
            except ScheduleTimeError:
                pass  # a zone this machine's zone data does not know: the config's
        configured = self._config.time_zone_of(actor.key())
        if configured is not None:
            return zone_of(configured)  # checked when the config was read
        return self.zone(project)

    def _may_manage(self, project: str, actor: Actor, creator: Actor) -> bool:
        return may_schedule(self._config, project, actor, creator)

    def _text_problem(self, text: str) -> str | None:
        limit = self._config.gateway.schedule_text_max_chars
        if not text.strip():
            return "say what the agent should do, after the time"
        if len(text) > limit:
            return f"the text is {len(text)} characters; a scheduled prompt is at most {limit}"
        return None

    async def every(
        self, project: str, actor: Actor, conversation: ConversationRef, args: str
    ) -> str:
        """``/every CRON TEXT``."""
        usage = (
            "Usage: /every CRON TEXT, CRON being five fields (minute hour day-of-month month"
            " day-of-week), @hourly, @daily, @weekly or one of: "
            + ", ".join(f"{word} ({cron})" for word, cron in ALIASES.items() if word[0] != "@")
            + ". Example: /every 0 9 * * 1-5 run the tests and say what broke"
        )
        if not self._may_manage(project, actor, actor):
            return _NOT_APPROVER.format(project=project, what="make")
        typed, text = split_every(args)
        if not typed:
            return usage
        try:
            cron = cron_of(typed)
        except ScheduleTimeError as exc:
            return f"Not scheduled: {exc}.\n{usage}"
        problem = self._text_problem(text)
        if problem is not None:
            return f"Not scheduled: {problem}.\n{usage}"
        zone = await self.zone_for(project, actor, conversation)
        now = self._clock()
        minimum = timedelta(minutes=self._config.gateway.schedule_min_interval_minutes)
        gap = shortest_gap(cron, zone, now)
        if gap < minimum:
            return (
                f"Not scheduled: {named(cron)} would run every {_span(gap)} at its most"
                f" frequent; schedules here run at most every {_span(minimum)}."
            )
        return await self._create(
            project,
            actor,
            conversation,
            cron=cron,
            text=text,
            zone=zone,
            next_at=next_after(cron, zone, now),
            shown=cron if cron == typed else f"{typed}: {cron}",
        )

    async def at(self, project: str, actor: Actor, conversation: ConversationRef, args: str) -> str:
        """``/at WHEN TEXT``."""
        usage = (
            "Usage: /at WHEN TEXT, WHEN being HH:MM, YYYY-MM-DD HH:MM or in 2h (in 90m, in 1d)."
            " Example: /at 18:00 summarize today's failed builds"
        )
        if not self._may_manage(project, actor, actor):
            return _NOT_APPROVER.format(project=project, what="make")
        if not args.strip():
            return usage
        zone = await self.zone_for(project, actor, conversation)
        try:
            when, text = parse_at(args, zone=zone, now=self._clock())
        except ScheduleTimeError as exc:
            return f"Not scheduled: {exc}.\n{usage}"
        problem = self._text_problem(text)
        if problem is not None:
            return f"Not scheduled: {problem}.\n{usage}"
        return await self._create(
            project, actor, conversation, cron=None, text=text, zone=zone, next_at=when, shown=None
        )

    async def _create(
        self,
        project: str,
        actor: Actor,
        conversation: ConversationRef,
        *,
        cron: str | None,
        text: str,
        zone: ZoneInfo,
        next_at: datetime,
        shown: str | None,
    ) -> str:
        draft = ScheduleDraft(
            project=project,
            cron=cron,
            zone=zone.key,
            text=text,
            conversation=conversation,
            creator=actor,
            next_at=next_at,
        )
        try:
            made = await self._store.schedules.create(
                draft, max_per_project=self._config.gateway.schedule_max_per_project
            )
        except StoreError as exc:
            return f"Not scheduled: {exc}."
        when = when_words(next_at, zone)
        how = (
            f"every {shown} ({zone.key}), next run {when}" if shown is not None else f"once, {when}"
        )
        where = await self._place(made, actor)
        return (
            f"⏰ Schedule {made.label} made: {how}.\n"
            f"Each run gives the agent “{_one_line(text)}” in a fresh session; what the agent"
            " asks waits for the project's approvers, as always.\n"
            + ("" if where is None else where + "\n")
            + f"/schedules lists it; /unschedule {made.label} deletes it."
        )

    async def listing(self, project: str) -> list[tuple[ScheduleRecord, str]]:
        """``/schedules``: each of the project's schedules and its line (next run, last run
        and its outcome), oldest first."""
        schedules = await self._store.schedules.of_project(project)
        last = await self._store.schedules.last_runs([s.id for s in schedules])
        lines: list[tuple[ScheduleRecord, str]] = []
        for schedule in schedules:
            run = last.get(schedule.id)
            outcome = None if run is None else await self._outcome(run)
            lines.append((schedule, _schedule_line(schedule, run, outcome)))
        return lines

    async def list_text(self, project: str) -> str:
        """``/schedules`` as one text (where no buttons are shown)."""
        listed = await self.listing(project)
        if not listed:
            return f"No schedules in project {project}: /every or /at makes one."
        lines = [f"Schedules of project {project}:", *(line for _, line in listed)]
        lines.append("/unschedule ID deletes one.")
        return "\n".join(lines)

    async def _outcome(self, run: ScheduleRun) -> str:
        """A run's outcome in words; a started one's from its prompt."""
        if run.state is not RunState.STARTED:
            return run.state.value if run.reason is None else f"{run.state.value}: {run.reason}"
        found = await self._store.schedules.prompt_state(run)
        if found is None:
            return "started"
        return _PROMPT_WORDS.get(found[0], found[0].value)

    async def unschedule(self, project: str, actor: Actor, args: str) -> tuple[str, bool]:
        """``/unschedule ID``: what to answer, and whether it was deleted."""
        schedule, refusal = await self._own(project, args, "/unschedule ID (S3: see /schedules)")
        if schedule is None:
            return refusal, False
        if not self._may_manage(project, actor, schedule.creator):
            return _NOT_APPROVER.format(project=project, what="delete"), False
        deleted = await self._store.schedules.delete(schedule.id, actor=actor)
        await self._farewell(deleted, actor)
        return f"Schedule {schedule.label} deleted: it runs no more.", True

    async def set_paused(
        self, project: str, actor: Actor, args: str, *, paused: bool
    ) -> tuple[str, bool]:
        """Pause or resume a schedule (its buttons on /schedules): what to answer, and
        whether it changed."""
        schedule, refusal = await self._own(project, args, "a schedule's ID (see /schedules)")
        if schedule is None:
            return refusal, False
        if not self._may_manage(project, actor, schedule.creator):
            return _NOT_APPROVER.format(project=project, what="pause or resume"), False
        if schedule.paused == paused:
            state = "paused" if paused else "running"
            return f"Schedule {schedule.label} is {state} already.", False
        next_at = None
        zone = zone_of(schedule.zone)
        if not paused and schedule.cron is not None:
            next_at = next_after(schedule.cron, zone, self._clock())
        changed = await self._store.schedules.set_paused(
            schedule.id, paused=paused, actor=actor, next_at=next_at
        )
        if paused:
            return f"Schedule {schedule.label} paused: it runs no more until resumed.", True
        after = changed.next_at
        return f"Schedule {schedule.label} resumed: next run " + (
            when_words(after, zone) if after is not None else "none (its time has passed)"
        ) + ".", True

    async def _own(self, project: str, spec: str, usage: str) -> tuple[ScheduleRecord | None, str]:
        schedule_id = schedule_id_of(spec)
        if schedule_id is None:
            return None, f"Usage: {usage}."
        schedule = await self._store.schedules.get(schedule_id)
        if schedule is None or schedule.deleted:
            return None, f"No schedule S{schedule_id}: /schedules lists this project's."
        if schedule.project != project:
            return None, (
                f"Schedule S{schedule_id} is not a schedule of project {project}: it is changed"
                " only from a conversation of its own project."
            )
        if schedule.name is not None:
            return None, (
                f"Schedule {schedule.label} comes from the config file"
                f" ([[projects.{project}.schedule]]): change it there."
            )
        return schedule, ""


def _span(gap: timedelta) -> str:
    minutes = int(gap.total_seconds() // 60)
    if minutes < 60 or minutes % 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = minutes // 60
    return f"{hours} hour{'s' if hours != 1 else ''}"


_PROMPT_WORDS = {
    PromptState.QUEUED: "waiting to run",
    PromptState.IN_FLIGHT: "running",
    PromptState.DONE: "done",
    PromptState.INTERRUPTED: "interrupted",
    PromptState.DROPPED: "dropped",
}


def _one_line(text: str) -> str:
    """A schedule's text on one line, cut at 80 characters (as /schedules shows it)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:79] + "…"


def _schedule_line(schedule: ScheduleRecord, last: ScheduleRun | None, outcome: str | None) -> str:
    zone = zone_of(schedule.zone)
    how = f"every {schedule.cron} ({schedule.zone})" if schedule.cron else f"once ({schedule.zone})"
    parts = [f"{schedule.label}: {how}"]
    if schedule.paused:
        parts.append("paused")
    elif schedule.next_at is not None:
        parts.append(f"next {when_words(schedule.next_at, zone)}")
    else:
        parts.append("no next run")
    if last is None:
        parts.append("not run yet")
    else:
        parts.append(f"last {when_words(last.due_at, zone)}, {outcome}")
    parts.append(f"by {schedule.creator}")
    parts.append(f"“{_one_line(schedule.text)}”")
    return " · ".join(parts)
