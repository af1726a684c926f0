"""The scheduler (issue 35): one task per host that claims due runs and hands each one on.

Each pass (:meth:`Scheduler.tick`) first settles the runs it started (their outcome, or a
prompt a restart held), then takes up the runs this host claimed and never started
(a crash between the claim and the start), with those of another host whose lease is gone
(it died there and has not come back: each taken by one host), then reads the schedules
due by the scheduler's clock (gateway/clock.py), decides each one purely
(:func:`gateway.schedule_times.due_now`: run, or skip as missed beyond the grace period)
and claims it by compare-and-set on its stored next time
(:meth:`gateway.store.schedules.ScheduleBook.claim`). A claim another host won is nothing
to this one. What a claimed run does (a session, a prompt, the checks that may
skip it) is :class:`RunStarter`'s, given by the engine.

A ledger error in a pass is logged and the pass is tried again at the next wake: what the
claim committed is in the ledger either way (a claimed run is taken up as an open run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from gateway.clock import Clock
from gateway.errors import StoreError
from gateway.schedule_times import DueKind, ScheduleTimeError, due_now, zone_of
from gateway.sessions.faults import crashpoint
from gateway.store.schedules import ScheduleRecord, ScheduleRun
from gateway.store.store import Store

__all__ = ["MISSED_REASON", "RunStarter", "Scheduler"]

log = logging.getLogger(__name__)

_SOONEST_WAIT = 0.05  # seconds: a run due now is looked at again after this, not at once
MISSED_REASON = "missed: no host was running at the time, and the grace period had passed"

RunStarter = Callable[[ScheduleRecord, ScheduleRun], Awaitable[None]]
"""Starts a claimed run (or skips it and says so); must not raise for the run's own reasons."""


class Scheduler:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        host: str | None,
        grace: timedelta,
        start: RunStarter,
        said_skipped: RunStarter,
        settle: RunStarter | None = None,
        poll_seconds: float = 30.0,
        fenced: Callable[[], bool] = lambda: False,
    ) -> None:
        self._store = store
        self._clock = clock
        self._host = host  # the ledger's host (None: a single-host ledger)
        self._grace = grace
        self._start = start
        self._said_skipped = said_skipped
        self._settle = settle
        self._poll_seconds = poll_seconds
        self._wake = asyncio.Event()
        self._pass = asyncio.Lock()  # one pass at a time: a run claimed here starts once
        self._fenced = fenced  # a host that lost its lease claims nothing

    def wake(self) -> None:
        """Look again now (a schedule was made or resumed)."""
        self._wake.set()

    async def tick(self) -> list[ScheduleRun]:
        """One pass; returns the runs this host claimed (started or skipped) in it."""
        async with self._pass:
            return await self._tick()

    async def _tick(self) -> list[ScheduleRun]:
        handled: list[ScheduleRun] = []
        if self._fenced():
            return handled
        if self._settle is not None:
            for started in await self._store.schedules.started_runs(self._host):
                schedule = await self._store.schedules.get(started.schedule_id)
                if schedule is not None:
                    await self._settle(schedule, started)
        if self._host is not None:  # a shared ledger: a dead host's claims become ours
            for taken in await self._store.schedules.take_orphaned_runs(self._host):
                log.info("schedule S%s: the run of %s taken over", taken.schedule_id, taken.due_at)
        for open_run in await self._store.schedules.open_runs(self._host):
            schedule = await self._store.schedules.get(open_run.schedule_id)
            if schedule is not None:
                await self._start(schedule, open_run)
                handled.append(open_run)
        now = self._clock()
        for schedule in await self._store.schedules.due(now):
            assert schedule.next_at is not None  # due() reads only those with one
            try:
                due = due_now(
                    due_at=schedule.next_at,
                    now=now,
                    grace=self._grace,
                    cron=schedule.cron,
                    zone=zone_of(schedule.zone),
                )
            except ScheduleTimeError as exc:  # a zone gone from the zone data
                log.warning("schedule %s: %s", schedule.label, exc)
                continue
            if due.kind is DueKind.NOT_YET:
                continue
            missed = due.kind is DueKind.MISSED
            run = await self._store.schedules.claim(
                schedule,
                due_at=due.due_at,
                next_at=due.next_at,
                host=self._host,
                skip_reason=MISSED_REASON if missed else None,
            )
            if run is None:
                continue  # another host claimed it, or it was paused or deleted meanwhile
            handled.append(run)
            if missed:
                await self._said_skipped(schedule, run)
            else:
                crashpoint("schedule_claimed")
                await self._start(schedule, run)
        return handled

    async def run(self) -> None:
        """Until cancelled: a pass, then wait until the next due time (at most the poll
        interval: the clock may be moved, and another host may make a schedule) or a wake.
        A pass that fails is logged and tried again: the scheduler never ends the gateway."""
        while True:
            wait = self._poll_seconds
            try:
                await self.tick()
                soonest = await self._store.schedules.next_due()
                ahead = None if soonest is None else (soonest - self._clock()).total_seconds()
                if ahead is not None and ahead > 0:  # one still due now was left for cause
                    wait = min(wait, max(ahead, _SOONEST_WAIT))
            except (StoreError, RuntimeError) as exc:
                log.warning("the scheduler's pass failed (%s); again at the next wake", exc)
            except Exception:
                log.exception("the scheduler's pass failed; again at the next wake")
            self._wake.clear()
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass
