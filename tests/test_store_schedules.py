"""Schedules in the ledger and the scheduler's passes, on SQLite and PostgreSQL: a run is
claimed once (compare-and-set on the stored next time, the run's row in the same
transaction), fires at the right instants across daylight-saving changes by a clock the test
sets, and survives a crash on either side of the claim without being lost or doubled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.clock import FileClock
from gateway.config.ledger_url import PgTarget
from gateway.domain import Actor, AgentKind, ConversationRef
from gateway.errors import StoreError
from gateway.sessions.scheduler import MISSED_REASON, Scheduler
from gateway.store.leases import acquire, connect
from gateway.store.ledger_faults import LedgerFaults
from gateway.store.records import PromptState
from gateway.store.schedules import (
    RunState,
    ScheduleDraft,
    ScheduleRecord,
    ScheduleRun,
    run_message_id,
)
from gateway.store.store import Store
from tests.pg_cluster import PgCluster
from tests.store_backends import open_store
from tests.store_helpers import SteppingClock, running_session

ALICE = Actor(platform="slack", user_id="U1", display="alice")
ROOM = ConversationRef(platform="slack", space="T1", channel="C1", thread=None)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=SteppingClock()) as opened:
        yield opened


def draft(next_at: datetime, *, cron: str | None = "30 2 * * *", zone: str = "Europe/Berlin"):
    return ScheduleDraft(
        project="demo",
        cron=cron,
        zone=zone,
        text="run the tests and say what broke",
        conversation=ROOM,
        creator=ALICE,
        next_at=next_at,
    )


class Started:
    """What the engine would do with a claimed run: here, record it and mark it started."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs: list[tuple[int, datetime]] = []
        self.skipped: list[tuple[int, datetime, str | None]] = []

    async def start(self, schedule: ScheduleRecord, run: ScheduleRun) -> None:
        self.runs.append((schedule.id, run.due_at))
        await self.store.schedules.started(run, f"session-{len(self.runs)}")

    async def said_skipped(self, schedule: ScheduleRecord, run: ScheduleRun) -> None:
        self.skipped.append((schedule.id, run.due_at, run.reason))


def scheduler(store: Store, clock: FileClock, started: Started, grace: float = 600) -> Scheduler:
    return Scheduler(
        store,
        clock=clock,
        host=None,
        grace=timedelta(seconds=grace),
        start=started.start,
        said_skipped=started.said_skipped,
    )


async def test_a_claim_moves_the_next_time_once_and_a_stale_claim_takes_nothing(
    store: Store,
) -> None:
    made = await store.schedules.create(draft(utc(2026, 3, 29, 1, 0)), max_per_project=5)
    first = await store.schedules.claim(
        made, due_at=utc(2026, 3, 29, 1, 0), next_at=utc(2026, 3, 30, 0, 30), host="a"
    )
    assert first is not None and first.state is RunState.CLAIMED
    # another host read the same row before the first moved it: it claims nothing
    second = await store.schedules.claim(
        made, due_at=utc(2026, 3, 29, 1, 0), next_at=utc(2026, 3, 30, 0, 30), host="b"
    )
    assert second is None
    assert [run.host for run in await store.schedules.runs(made.id)] == ["a"]
    again = await store.schedules.get(made.id)
    assert again is not None and again.next_at == utc(2026, 3, 30, 0, 30)
    claimed = await store.audit.entries(event="schedule.claimed")
    assert [entry.details["host"] for entry in claimed] == ["a"]


async def test_runs_fire_at_the_right_instants_across_spring_forward_and_fall_back(
    store: Store, tmp_path: Path
) -> None:
    clock = FileClock(tmp_path / "clock")
    started = Started(store)
    passes = scheduler(store, clock, started)
    spring = await store.schedules.create(draft(utc(2026, 3, 28, 1, 30)), max_per_project=5)
    fall = await store.schedules.create(
        draft(utc(2026, 10, 25, 0, 0), cron="*/30 * * * *"), max_per_project=5
    )
    # spring: 02:30 CET on the 28th, then 03:00 CEST right after the change, then 02:30 CEST
    for moment in (
        utc(2026, 3, 28, 1, 29),
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 0, 59),
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 30, 0, 30),
    ):
        clock.set(moment)
        await passes.tick()
    assert [at for schedule_id, at in started.runs if schedule_id == spring.id] == [
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 30, 0, 30),
    ]
    # fall: */30 runs in both copies of the repeated hour; the ticks are inside the grace
    await store.schedules.delete(spring.id, actor=ALICE)
    started.runs.clear()
    for minutes in range(0, 150, 15):
        clock.set(utc(2026, 10, 25, 0, 0) + timedelta(minutes=minutes))
        await passes.tick()
    assert [at for schedule_id, at in started.runs if schedule_id == fall.id] == [
        utc(2026, 10, 25, 0, 0),  # 02:00 CEST
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST
        utc(2026, 10, 25, 1, 0),  # 02:00 CET
        utc(2026, 10, 25, 1, 30),  # 02:30 CET
        utc(2026, 10, 25, 2, 0),  # 03:00 CET
    ]


async def test_a_claim_whose_answer_was_lost_is_started_once_on_the_next_pass(
    store: Store, tmp_path: Path
) -> None:
    clock = FileClock(tmp_path / "clock")
    clock.set(utc(2026, 6, 1, 7, 0))
    started = Started(store)
    passes = scheduler(store, clock, started)
    made = await store.schedules.create(
        draft(utc(2026, 6, 1, 7, 0), cron="0 9 * * *"), max_per_project=5
    )
    # the claim commits, then its answer is lost (a connection cut after COMMIT)
    store.writer.faults = LedgerFaults.parse("ScheduleBook.claim#1=cut")
    with pytest.raises(StoreError):
        await passes.tick()
    store.writer.faults = None
    assert started.runs == []
    await passes.tick()
    await passes.tick()
    assert started.runs == [(made.id, utc(2026, 6, 1, 7, 0))]
    assert [run.state for run in await store.schedules.runs(made.id)] == [RunState.STARTED]


async def test_a_claim_that_never_ran_is_claimed_once_when_tried_again(
    store: Store, tmp_path: Path
) -> None:
    clock = FileClock(tmp_path / "clock")
    clock.set(utc(2026, 6, 1, 7, 0))
    started = Started(store)
    passes = scheduler(store, clock, started)
    made = await store.schedules.create(
        draft(utc(2026, 6, 1, 7, 0), cron="0 9 * * *"), max_per_project=5
    )
    # the connection is lost before the claim's statements were sent: the ledger tries again
    faults = LedgerFaults.parse("ScheduleBook.claim#1=fail")
    store.writer.faults = faults
    await passes.tick()
    await passes.tick()
    assert [fault for _, fault in faults.fired] == ["fail"]
    assert started.runs == [(made.id, utc(2026, 6, 1, 7, 0))]


async def test_a_crash_after_the_claim_starts_the_run_once_after_the_restart(
    tmp_path: Path, ledger: PgTarget | None
) -> None:
    clock = FileClock(tmp_path / "clock")
    clock.set(utc(2026, 6, 1, 7, 0))

    async def dies(schedule: ScheduleRecord, run: ScheduleRun) -> None:
        raise RuntimeError("the process died here")

    async with open_store(ledger, tmp_path / "data") as store:
        made = await store.schedules.create(
            draft(utc(2026, 6, 1, 7, 0), cron="0 9 * * *"), max_per_project=5
        )
        dying = Scheduler(
            store, clock=clock, host=None, grace=timedelta(0), start=dies, said_skipped=dies
        )
        with pytest.raises(RuntimeError):
            await dying.tick()
    clock.set(utc(2026, 6, 1, 8, 0))  # an hour later, past the grace: the claim stands
    async with open_store(ledger, tmp_path / "data") as store:
        started = Started(store)
        passes = scheduler(store, clock, started, grace=0)
        await passes.tick()
        await passes.tick()
        assert started.runs == [(made.id, utc(2026, 6, 1, 7, 0))]
        assert started.skipped == []
        schedule = await store.schedules.get(made.id)
        assert schedule is not None and schedule.next_at == utc(2026, 6, 2, 7, 0)


async def test_missed_runs_catch_up_once_inside_the_grace_and_are_skipped_outside(
    store: Store, tmp_path: Path
) -> None:
    clock = FileClock(tmp_path / "clock")
    started = Started(store)
    passes = scheduler(store, clock, started, grace=3600)
    inside = await store.schedules.create(
        draft(utc(2026, 6, 1, 7, 0), cron="0 9 * * *"), max_per_project=5
    )
    outside = await store.schedules.create(
        draft(utc(2026, 5, 30, 7, 0), cron="0 9 * * *"), max_per_project=5
    )
    clock.set(utc(2026, 6, 1, 7, 40))  # every host was down since before both
    await passes.tick()
    await passes.tick()
    assert started.runs == [(inside.id, utc(2026, 6, 1, 7, 0))]
    assert started.skipped == [(outside.id, utc(2026, 5, 30, 7, 0), MISSED_REASON)]
    later = await store.schedules.get(outside.id)
    assert later is not None and later.next_at == utc(2026, 6, 2, 7, 0)
    skipped = await store.audit.entries(event="schedule.skipped")
    assert [entry.details["schedule"] for entry in skipped] == [outside.id]


async def test_paused_deleted_and_once_schedules(store: Store, tmp_path: Path) -> None:
    clock = FileClock(tmp_path / "clock")
    started = Started(store)
    passes = scheduler(store, clock, started)
    once = await store.schedules.create(draft(utc(2026, 6, 1, 7, 0), cron=None), max_per_project=5)
    paused = await store.schedules.create(draft(utc(2026, 6, 1, 7, 0)), max_per_project=5)
    await store.schedules.set_paused(paused.id, paused=True, actor=ALICE)
    clock.set(utc(2026, 6, 1, 7, 0))
    await passes.tick()
    clock.set(utc(2026, 6, 8, 7, 0))
    await passes.tick()
    assert started.runs == [(once.id, utc(2026, 6, 1, 7, 0))]
    done = await store.schedules.get(once.id)
    assert done is not None and done.next_at is None
    with pytest.raises(StoreError, match="the most"):
        for _ in range(4):
            await store.schedules.create(draft(utc(2026, 7, 1)), max_per_project=5)
    events = [entry.event for entry in await store.audit.entries()]
    assert events.count("schedule.created") == 5 and "schedule.paused" in events


async def test_config_schedules_are_synced_by_name(store: Store) -> None:
    entry = ScheduleDraft(
        project="demo",
        name="tests",
        cron="0 9 * * 1-5",
        zone="Europe/Berlin",
        text="run the tests",
        conversation=ROOM,
        creator=ALICE,
        next_at=utc(2026, 6, 1, 7, 0),
    )
    assert await store.schedules.sync_configured("demo", [entry]) == ["tests: made"]
    # a second host starting with the same file changes nothing
    assert await store.schedules.sync_configured("demo", [entry]) == []
    [made] = await store.schedules.of_project("demo")
    reworded = ScheduleDraft(**{**_fields(entry), "text": "run all the tests"})
    assert await store.schedules.sync_configured("demo", [reworded]) == ["tests: changed"]
    [kept] = await store.schedules.of_project("demo")
    assert (kept.id, kept.text, kept.next_at) == (made.id, "run all the tests", made.next_at)
    assert await store.schedules.sync_configured("demo", []) == ["tests: deleted"]
    assert await store.schedules.of_project("demo") == []


async def test_a_config_schedules_thread_is_kept_by_the_sync_until_its_channel_changes(
    store: Store,
) -> None:
    entry = ScheduleDraft(
        project="demo",
        name="tests",
        cron="0 9 * * 1-5",
        zone="Europe/Berlin",
        text="run the tests",
        conversation=ROOM,
        creator=ALICE,
        next_at=utc(2026, 6, 1, 7, 0),
    )
    await store.schedules.sync_configured("demo", [entry])
    [made] = await store.schedules.of_project("demo")
    thread = ConversationRef(platform="slack", space="T1", channel="C1", thread="171.5")
    taken = await store.schedules.take_thread(made, thread, actor="config")
    assert taken is not None and taken.conversation == thread and taken.home == ROOM
    # a second taker (another host, the same moment) finds it taken: nothing changes
    other = ConversationRef(platform="slack", space="T1", channel="C1", thread="172.5")
    assert await store.schedules.take_thread(made, other, actor="config") is None
    # a restart with the same file, or a reworded text: the thread stays
    assert await store.schedules.sync_configured("demo", [entry]) == []
    reworded = ScheduleDraft(**{**_fields(entry), "text": "run all the tests"})
    assert await store.schedules.sync_configured("demo", [reworded]) == ["tests: changed"]
    [kept] = await store.schedules.of_project("demo")
    assert kept.conversation == thread
    # the file names another channel: the thread (of the old one) is forgotten
    elsewhere = ConversationRef(platform="slack", space="T1", channel="C2")
    moved = ScheduleDraft(**{**_fields(reworded), "conversation": elsewhere})
    assert await store.schedules.sync_configured("demo", [moved]) == ["tests: changed"]
    [now] = await store.schedules.of_project("demo")
    assert (now.conversation, now.own_thread) == (elsewhere, None)
    # a thread opened from the old channel's conversation is not taken for the new one
    assert await store.schedules.take_thread(kept, thread, actor="config") is None


def _fields(draft: ScheduleDraft) -> dict[str, object]:
    return {name: getattr(draft, name) for name in ScheduleDraft.__dataclass_fields__}


async def test_a_held_run_prompt_is_dropped_alone(store: Store) -> None:
    made = await store.schedules.create(draft(utc(2026, 6, 1, 7, 0)), max_per_project=5)
    run = await store.schedules.claim(made, due_at=utc(2026, 6, 1, 7, 0), next_at=None, host=None)
    assert run is not None
    session, _ = await running_session(store)
    for message_id, text in ((run_message_id(made.id, run.due_at), run.text), ("m1", "mine")):
        await store.prompts.enqueue(
            session.id,
            conversation=ROOM,
            platform_message_id=message_id,
            author=ALICE,
            text=text,
            max_depth=10,
        )
    await store.schedules.started(run, session.id)
    [started] = await store.schedules.started_runs(None)
    await store.prompts.hold(session.id, reason="the gateway restarted")
    assert await store.schedules.prompt_state(started) == (PromptState.QUEUED, True)
    assert await store.schedules.drop_held_prompt(started)
    assert not await store.schedules.drop_held_prompt(started)  # once
    assert [p.text for p in await store.prompts.list_held(session.id)] == ["mine"]
    assert await store.schedules.prompt_state(started) == (PromptState.DROPPED, False)


async def test_a_schedule_moves_to_its_thread_and_a_run_hands_its_conversation_back(
    store: Store,
) -> None:
    made = await store.schedules.create(draft(utc(2026, 6, 1, 7, 0)), max_per_project=5)
    topic = ConversationRef(platform="telegram", space=None, channel="-100", thread="7")
    moved = await store.schedules.move_to_thread(made.id, topic, actor=ALICE)
    assert moved.conversation == topic
    [entry] = await store.audit.entries(event="schedule.thread_opened")
    assert entry.details == {"schedule": made.id, "thread": topic.key()}

    mine = await store.sessions.create(project="demo", agent_kind=AgentKind.CODEX_APP_SERVER)
    await store.sessions.route(ROOM, mine.id)
    await store.sessions.bind(ROOM, mine.id)
    ran, _ = await store.sessions.create_routed(
        ROOM,
        replacing=mine.id,
        project="demo",
        agent_kind=AgentKind.CODEX_APP_SERVER,
        shown_in=ROOM,
    )
    run = await store.schedules.claim(made, due_at=utc(2026, 6, 1, 7, 0), next_at=None, host=None)
    assert run is not None
    await store.schedules.started(run, ran.id, replaced=mine.id)
    [started] = await store.schedules.started_runs(None)
    assert (started.session_id, started.replaced_session_id) == (ran.id, mine.id)
    assert await store.schedules.hand_back(started, ROOM, ROOM)
    assert not await store.schedules.hand_back(started, ROOM, ROOM)  # once: it moved on
    found = await store.sessions.lookup_route(ROOM)
    shown = await store.sessions.lookup(ROOM)
    assert found is not None and shown is not None and found.id == shown.id == mine.id
    # a /switch meanwhile wins: nothing is handed back over it
    await store.sessions.route(ROOM, ran.id)
    other = await store.sessions.create(project="demo", agent_kind=AgentKind.CODEX_APP_SERVER)
    await store.sessions.route(ROOM, other.id)
    assert not await store.schedules.hand_back(started, ROOM, ROOM)
    assert [e.session_id for e in await store.audit.entries(event="schedule.handed_back")] == [
        mine.id
    ]


async def test_a_dead_hosts_claim_is_taken_over_once_and_a_live_hosts_is_not(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """On PostgreSQL (the leases are its): host a claimed a run and holds no lease now; b and
    c, both holding theirs, take it over at once: one of them takes it. A run claimed by a
    host whose lease is held is nobody else's."""
    target = PgTarget(url=pg_database.dsn)
    async with open_store(target, tmp_path / "data", clock=SteppingClock()) as store:
        conn = await connect(target)
        async with conn:
            for host in ("b", "c", "d"):
                assert await acquire(conn, f"host:{host}", host, 60.0) is not None
            dead = await store.schedules.create(draft(utc(2026, 6, 1, 7, 0)), max_per_project=5)
            live = await store.schedules.create(draft(utc(2026, 6, 1, 7, 0)), max_per_project=5)
            for schedule, host in ((dead, "a"), (live, "d")):
                claimed = await store.schedules.claim(
                    schedule, due_at=utc(2026, 6, 1, 7, 0), next_at=None, host=host
                )
                assert claimed is not None
            took_b, took_c = await asyncio.gather(
                store.schedules.take_orphaned_runs("b"), store.schedules.take_orphaned_runs("c")
            )
            taken = took_b + took_c
            assert [(run.schedule_id, run.host) for run in taken] in (
                [(dead.id, "b")],
                [(dead.id, "c")],
            )
            [run] = await store.schedules.runs(live.id)
            assert run.host == "d"
            assert await store.schedules.take_orphaned_runs("b") == []  # once
            entries = await store.audit.entries(event="schedule.taken_over")
            assert [entry.details["host"] for entry in entries] == [taken[0].host]
