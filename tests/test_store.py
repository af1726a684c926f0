"""The ledger on a real SQLite file: opening, data dir, migrations, sessions, turns, queue.

Interactions, decisions and cards are in test_store_interactions.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import stat
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import Actor, AgentKind, ConversationRef, Decision, InteractionState, TurnStatus
from gateway.errors import StoreError
from gateway.interactions.machine import DeliveryOutcome
from gateway.store.database import Conn, fetch_one
from gateway.store.datadir import check_data_dir
from gateway.store.migrations import MIGRATIONS, Migration
from gateway.store.records import EnqueueOutcome, EnqueueResult, PromptState
from gateway.store.store import DATABASE_FILE, Store
from gateway.store.trip_tally import TripTally
from tests.store_backends import open_store
from tests.store_helpers import (
    ALICE,
    BOB,
    SLACK,
    TELEGRAM,
    SteppingClock,
    approval,
    as_it_was,
    running_session,
    todays_reads,
)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def store(data_dir: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, data_dir, clock=SteppingClock()) as opened:
        yield opened


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- opening -------------------------------------------------------------------------------


async def test_open_creates_a_private_data_dir_and_a_wal_database(data_dir: Path) -> None:
    async with Store.open(data_dir / "nested") as store:
        assert store.path == (data_dir / "nested" / DATABASE_FILE).resolve()
        await store.sessions.create(project="demo", agent_kind=AgentKind.CLAUDE_CODE)
    assert mode(data_dir / "nested") == 0o700
    assert mode(data_dir / "nested" / DATABASE_FILE) == 0o600
    with sqlite3.connect(data_dir / "nested" / DATABASE_FILE) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.fixture
def loose_data_dir(data_dir: Path) -> Path:
    data_dir.mkdir()
    data_dir.chmod(0o755)
    return data_dir


async def test_a_data_dir_open_to_others_is_tightened(loose_data_dir: Path) -> None:
    assert mode(loose_data_dir) == 0o755
    async with Store.open(loose_data_dir):
        pass
    assert mode(loose_data_dir) == 0o700


@pytest.mark.parametrize("where", ["inside", "equal", "via-symlink"])
async def test_a_data_dir_inside_a_work_dir_is_refused(
    tmp_path: Path, workdir: Path, where: str
) -> None:
    if where == "inside":
        data_dir = workdir / ".gateway"
    elif where == "equal":
        data_dir = workdir
    else:
        (tmp_path / "link").symlink_to(workdir)
        data_dir = tmp_path / "link" / "data"
    with pytest.raises(StoreError, match="inside the project work dir"):
        async with Store.open(data_dir, work_dirs=[tmp_path / "other", workdir]):
            pass
    assert not (workdir / ".gateway").exists()  # refused before anything was created


def test_a_sibling_with_a_common_prefix_is_not_inside(tmp_path: Path) -> None:
    check_data_dir(tmp_path / "work-data", [tmp_path / "work"])


async def test_database_errors_become_store_errors(store: Store) -> None:
    # foreign keys are on: a card copy of no interaction is refused by the database itself
    with pytest.raises(StoreError) as caught:
        await store.cards.add("no-such-id", TELEGRAM)
    integrity = sqlite3.IntegrityError if store.path else psycopg.IntegrityError
    assert isinstance(caught.value.__cause__, integrity)


async def test_a_one_statement_read_that_runs_two_is_refused(store: Store) -> None:
    def two(conn: Conn) -> None:
        conn.execute("SELECT 1").fetchone()
        conn.execute("SELECT 2").fetchone()

    with pytest.raises(RuntimeError, match="second statement"):
        await store.writer.read(two, one_statement=True)
    with pytest.raises(RuntimeError, match="second statement"):
        await store.reader.read(two, one_statement=True)
    row = await store.writer.read(lambda conn: fetch_one(conn, "SELECT 3 AS n"), one_statement=True)
    assert row is not None and row["n"] == 3  # the connection serves on


@pytest.mark.parametrize("ledger", ["postgresql"], indirect=True)  # round trips are its own
async def test_an_approval_s_ledger_calls_take_few_round_trips(store: Store) -> None:
    """What a bench measures per approval (docs/decisions.md, "Many hosts, fewer ledger
    round trips"), held: each call's waits for the network, as counted on PostgreSQL."""
    assert store.path is None
    session, epoch = await running_session(store)
    await store.sessions.bind(TELEGRAM, session.id)
    tally = TripTally()
    store.writer.tally = store.reader.tally = tally
    assert (await enqueue_result(store, session.id, "m1")).outcome is EnqueueOutcome.QUEUED
    opened = await store.interactions.create_with_copies(session.id, epoch, approval())
    [copy] = opened.copies
    view = await store.clicks.view(opened.interaction.id, TELEGRAM)
    assert view is not None and view.shown_in(TELEGRAM) and view.epoch is not None
    assert await store.peek.has_open_session(TELEGRAM)
    interaction, copies = await store.interactions.get_with_copies(opened.interaction.id)
    assert interaction is not None and copies == [copy]
    assert [i.id for i in await store.interactions.list_open(session.id)] == [interaction.id]
    claimed = await store.prompts.claim_next(session.id)
    assert claimed is not None and claimed.state is PromptState.IN_FLIGHT
    assert (await store.prompts.mark_done(claimed.id)).state is PromptState.DONE
    assert tally.round_trips == {
        "PromptQueue.enqueue": 3,  # the lock and its reads; the insert; the commit
        "InteractionLedger.create_with_copies": 4,  # reads; insert; the copy; the commit
        "ClickViews.view": 1,  # one statement (the request, its session, epoch and copies)
        "ClickViews.has_open_session": 1,  # one statement: no transaction
        "InteractionLedger.get_with_copies": 1,  # the request and its copies: one statement
        "InteractionLedger.list_open": 1,
        "PromptQueue.claim_next": 2,  # the lock, and the claim returning the prompt; commit
        "PromptQueue._finish": 2,
    }


async def test_a_call_after_the_ledger_closed_is_a_store_error(data_dir: Path) -> None:
    # what a page of the console meets while the gateway stops: answered 503, not a crash
    async with Store.open(data_dir) as store:
        pass
    with pytest.raises(StoreError, match="the ledger is closed"):
        await store.sessions.list_sessions()


# --- SQLite: calls on the event loop ------------------------------------------------------


async def gone_to_the_thread(store: Store) -> None:
    """Until a call just made has gone to the ledger's thread (a few turns of the loop: the
    call's yield, the lock met), failing if it has not."""
    for _ in range(100):
        if not store.writer.runner.idle:
            return
        await asyncio.sleep(0)
    raise AssertionError("the call did not go to the ledger's thread")


def name_session(session_id: str, name: str) -> Callable[[Conn], None]:
    def write(conn: Conn) -> None:
        conn.execute("UPDATE sessions SET name = ? WHERE id = ?", (name, session_id))

    return write


async def test_sqlite_calls_run_on_the_loop_and_wait_for_another_process_s_lock_elsewhere(
    data_dir: Path,
) -> None:
    """No trip to the ledger's thread for a call; a write that meets the lock another
    process holds (an ``agent-gateway`` command's) waits for it on the thread while the loop
    goes on, and is written once the lock is let go: never refused, never written twice."""
    async with Store.open(data_dir) as store:
        session = await store.sessions.create(project="demo", agent_kind=AgentKind.CLAUDE_CODE)
        thread_trips = store.writer.runner.trips
        await store.writer.write(name_session(session.id, "on the loop"))
        assert store.writer.runner.trips == thread_trips  # run where it was asked
        with closing(sqlite3.connect(data_dir / DATABASE_FILE, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            waiting = asyncio.create_task(store.writer.write(name_session(session.id, "later")))
            await gone_to_the_thread(store)  # the lock met: it waits there
            assert not waiting.done()
            for _ in range(3):  # the loop goes on meanwhile
                await asyncio.sleep(0)
            other.execute("ROLLBACK")
        await waiting
        assert (await store.sessions.get(session.id)).name == "later"


async def test_a_call_while_the_ledger_s_thread_has_the_connection_queues_behind_it(
    data_dir: Path,
) -> None:
    """While the ledger's thread uses the connection (a checkpoint, or a write cancelled
    while it waited there for a lock, which still runs), a call is queued behind it there,
    never run on the loop at once: the connection is never used by two threads."""
    async with Store.open(data_dir) as store:
        session = await store.sessions.create(project="demo", agent_kind=AgentKind.CLAUDE_CODE)
        holding, release = threading.Event(), threading.Event()

        def checkpoint_taking_its_time() -> None:
            holding.set()
            release.wait(30)

        store.writer.runner.post(checkpoint_taking_its_time)
        await asyncio.to_thread(holding.wait, 30)
        queued = asyncio.create_task(store.writer.write(name_session(session.id, "queued")))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not queued.done()  # behind the thread's own work
        release.set()
        await queued
        # a write cancelled in its wait for a lock runs all the same, and the next one
        # after it
        with closing(sqlite3.connect(data_dir / DATABASE_FILE, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            first = asyncio.create_task(store.writer.write(name_session(session.id, "first")))
            await gone_to_the_thread(store)  # waiting for the lock there
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            second = asyncio.create_task(store.writer.write(name_session(session.id, "second")))
            for _ in range(5):
                await asyncio.sleep(0)
            assert not second.done()
            other.execute("ROLLBACK")
        await second
        assert (await store.sessions.get(session.id)).name == "second"


async def test_calls_on_the_loop_are_written_in_the_order_they_were_made(
    data_dir: Path,
) -> None:
    """A call on the loop yields to other tasks only now and then (not at every call), yet
    calls made one after another by tasks started one after another land in that order,
    whichever of them yielded (an audit read in order of time depends on it)."""
    async with Store.open(data_dir) as store:
        for _ in range(3):  # each round meets the yield of every few calls at another place
            writes = [
                asyncio.create_task(store.audit.record("test.ordered", details={"n": n}))
                for n in range(40)
            ]
            await asyncio.gather(*writes)
            written = await store.audit.entries(event="test.ordered", limit=40)  # newest first
            assert [e.details["n"] for e in reversed(written)] == list(range(40))


async def test_checkpoints_keep_the_write_ahead_log_small(data_dir: Path) -> None:
    """The writer runs no checkpoint at its commits (they would sync the disk on the loop):
    one is queued on its thread every few hundred writes, and the log stays a few hundred
    writes long however many are made (without them it grew with every write)."""
    async with Store.open(data_dir) as store:
        session = await store.sessions.create(project="demo", agent_kind=AgentKind.CLAUDE_CODE)
        every = store.writer.on_loop.checkpoint_every if store.writer.on_loop else 0
        assert every > 0
        wal = data_dir / f"{DATABASE_FILE}-wal"
        sizes = []
        for n in range(8 * every):
            await store.writer.write(name_session(session.id, f"name {n}"))
            if n % every == every - 1:
                sizes.append(wal.stat().st_size)
        # the log reused from its start once checkpointed: its size stops growing
        assert sizes[-1] == sizes[-4], sizes
        assert sizes[-1] < 4 * sizes[0], sizes


# --- migrations ----------------------------------------------------------------------------


def applied_versions(data_dir: Path) -> list[int]:
    with sqlite3.connect(data_dir / DATABASE_FILE) as raw:
        return [row[0] for row in raw.execute("SELECT version FROM schema_version ORDER BY 1")]


async def test_reopening_applies_no_migration_twice_and_keeps_the_data(data_dir: Path) -> None:
    async with Store.open(data_dir) as store:
        session, epoch = await running_session(store)
        await store.sessions.set_native_session_id(session.id, "thread-abc")
        await store.sessions.bind(TELEGRAM, session.id)
    async with Store.open(data_dir) as store:
        again = await store.sessions.lookup(TELEGRAM)
        assert again is not None
        assert again.id == session.id
        assert again.native_session_id == "thread-abc"
        assert again.current_epoch == epoch
    assert applied_versions(data_dir) == [m.version for m in MIGRATIONS]


async def test_a_new_migration_is_applied_once_after_the_old_ones(data_dir: Path) -> None:
    async with Store.open(data_dir):
        pass
    after = len(MIGRATIONS) + 1
    extra = Migration(version=after, name="notes", statements=("CREATE TABLE notes (x TEXT)",))
    for _ in range(2):
        async with Store.open(data_dir, migrations=(*MIGRATIONS, extra)):
            pass
    assert applied_versions(data_dir) == list(range(1, after + 1))
    # an older gateway refuses a ledger it does not understand instead of guessing
    with pytest.raises(StoreError, match="newer than this gateway"):
        async with Store.open(data_dir):
            pass


async def test_a_version_1_ledger_keeps_its_deliveries_and_can_record_an_unknown_one(
    data_dir: Path,
) -> None:
    async with Store.open(data_dir, migrations=MIGRATIONS[:1]) as old:
        await todays_reads(old)
        session, epoch = await running_session(old)
        opened = (
            await old.interactions.create(session.id, epoch, approval("codex:0"), turn_id=None)
        ).interaction
        decided = await old.interactions.decide(
            opened.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
        )
        await old.interactions.record_delivery(decided.id, ok=True)
        expiring = (
            await old.interactions.create(session.id, epoch, approval("codex:1"), turn_id=None)
        ).interaction
        await old.interactions.expire(expiring.id, expected_version=1, outcome="deny")
        await as_it_was(old)
    async with Store.open(data_dir) as store:
        assert applied_versions(data_dir) == [m.version for m in MIGRATIONS]
        kept = await store.interactions.get(decided.id)
        assert kept is not None and kept.delivery is not None
        assert kept.delivery.outcome is DeliveryOutcome.OK
        # the decision and the expiry's resolution, in the tables migration 30 rebuilt
        assert kept.decision is not None and kept.decision.actor == ALICE
        assert kept.decision.decision.action_id == "accept"
        expired = await store.interactions.get(expiring.id)
        assert expired is not None and expired.resolution is not None
        # the gateway died between the expiry and its write: the outcome is not known
        ended = {
            update.interaction.id: update.interaction
            for update in await store.interactions.orphan_epoch(
                session.id, epoch, gateway_restarted=True, note="the gateway restarted"
            )
        }
        assert ended[decided.id].state is InteractionState.ORPHANED
        assert ended[expiring.id].state is InteractionState.EXPIRED
        delivery = ended[expiring.id].delivery
        assert delivery is not None and delivery.outcome is DeliveryOutcome.UNKNOWN
        assert delivery.error == "the gateway restarted"


async def test_a_session_bound_before_routes_existed_is_still_found_by_its_route(
    data_dir: Path,
) -> None:
    async with Store.open(data_dir, migrations=MIGRATIONS[:2]) as old:
        await todays_reads(old)
        session = await old.sessions.create(project="demo", agent_kind=AgentKind.CODEX_APP_SERVER)
        await old.sessions.bind(TELEGRAM, session.id)  # then, a binding was its route too
        await as_it_was(old)
    async with Store.open(data_dir) as store:
        found = await store.sessions.lookup_route(TELEGRAM)
        assert found is not None and found.id == session.id
        # a route is not a binding: a new route shows nothing new
        other = ConversationRef(platform="telegram", space=None, channel="42")
        await store.sessions.route(other, session.id)
        assert await store.sessions.list_bindings(session.id) == [TELEGRAM]


async def test_a_queue_paused_before_holds_existed_is_held_and_cards_keep_their_copies(
    data_dir: Path,
) -> None:
    async with Store.open(data_dir, migrations=MIGRATIONS[:4]) as old:
        await todays_reads(old)
        session, epoch = await running_session(old)
        opened = await old.interactions.create(session.id, epoch, approval("codex:0"), turn_id=None)
        await as_it_was(old)
    with closing(sqlite3.connect(data_dir / DATABASE_FILE)) as raw, raw:
        raw.execute(  # the card, shown in one chat as message 7
            "INSERT INTO interaction_messages (interaction_id, platform, space, channel, thread,"
            " message_ref, state, rendered_version, updated_at) VALUES (?, 'telegram', '-1001',"
            " '-1001', '7', '7', 'sent', 1, '2026-01-01T00:00:00Z')",
            (opened.interaction.id,),
        )
        for n in (1, 2):  # two messages waited in a queue /stop had paused
            raw.execute(
                "INSERT INTO prompts (session_id, platform, space, channel, thread,"
                " platform_message_id, author_platform, author_user_id, author_display, text,"
                " state, position, created_at, updated_at) VALUES (?, 'telegram', '', '100',"
                " '', ?, 'telegram', '100', 'alice', ?, 'queued', ?, '2026-01-01T00:00:00Z',"
                " '2026-01-01T00:00:00Z')",
                (session.id, f"m{n}", f"waiting {n}", n),
            )
        raw.execute(
            "UPDATE sessions SET queue_paused = 1, queue_pause_reason = 'stopped by /stop'"
            " WHERE id = ?",
            (session.id,),
        )
    async with Store.open(data_dir) as store:
        assert [p.text for p in await store.prompts.list_held(session.id)] == [
            "waiting 1",
            "waiting 2",
        ]
        await enqueue(store, session.id, "m3", "typed after")
        assert await drain(store, session.id) == ["typed after"]
        kept = await store.cards.shown_by(TELEGRAM, "7")
        assert kept is not None and kept.interaction_id == opened.interaction.id
        assert kept.again == 0 and kept.rendered_version == 1
        again = await store.cards.add_again(opened.interaction.id, TELEGRAM)
        assert again.again == 1 and again.message_ref is None
        assert [c.id for c in await store.cards.list_for(opened.interaction.id)] == [
            kept.id,
            again.id,
        ]
        assert await store.prompts.resume(session.id) == 2
        assert await drain(store, session.id) == ["waiting 1", "waiting 2"]


async def test_migrations_must_be_numbered_in_order(data_dir: Path) -> None:
    skipped = Migration(version=len(MIGRATIONS) + 2, name="gap", statements=())
    with pytest.raises(StoreError, match=r"numbered 1\.\.N"):
        async with Store.open(data_dir, migrations=(*MIGRATIONS, skipped)):
            pass


# --- sessions, epochs, bindings --------------------------------------------------------------


async def test_epochs_count_up_and_one_runtime_lives_at_a_time(store: Store) -> None:
    session, first = await running_session(store)
    assert first == 1
    with pytest.raises(StoreError, match="still has live epoch 1"):
        await store.sessions.begin_epoch(session.id, pid=1, pgid=1, process_start_time=9)
    await store.sessions.set_policy(
        session.id, first, {"approvalPolicy": "on-request", "sandbox": "workspace-write"}
    )
    ended = await store.sessions.end_epoch(session.id, first, exit_description="exited 0")
    assert ended.ended_at is not None
    assert ended.policy == {"approvalPolicy": "on-request", "sandbox": "workspace-write"}
    again = await store.sessions.end_epoch(session.id, first, exit_description="later")
    assert again.exit_description == "exited 0"  # the first ending stays
    second = await store.sessions.begin_epoch(session.id, pid=7, pgid=7, process_start_time=8)
    assert second == 2
    reloaded = await store.sessions.get(session.id)
    assert reloaded is not None and reloaded.current_epoch == 2


async def test_live_epochs_after_a_crash_name_the_processes_to_end(data_dir: Path) -> None:
    async with Store.open(data_dir) as store:
        crashed, _ = await running_session(store, "one")
        finished, epoch = await running_session(store, "two")
        await store.sessions.end_epoch(finished.id, epoch, exit_description="exited 0")
    # the gateway died here: nothing ended the first runtime
    async with Store.open(data_dir) as store:
        live = await store.sessions.live_epochs()
    assert [(e.session_id, e.epoch, e.pid, e.pgid, e.process_start_time) for e in live] == [
        (crashed.id, 1, 4242, 4242, 123456)
    ]
    assert live[0].agent_version == "0.171.0"


async def test_a_session_shows_in_several_conversations_until_new(store: Store) -> None:
    session, _ = await running_session(store)
    await store.sessions.bind(TELEGRAM, session.id)
    await store.sessions.bind(SLACK, session.id)
    assert await store.sessions.list_bindings(session.id) == [TELEGRAM, SLACK]
    # /new in the Telegram topic: it now points at a new session, Slack keeps the old one
    fresh = await store.sessions.create(project="demo", agent_kind=AgentKind.CODEX_APP_SERVER)
    await store.sessions.bind(TELEGRAM, fresh.id)
    closed = await store.sessions.close(session.id, reason="/new")
    assert closed.is_closed and closed.close_reason == "/new"
    current = await store.sessions.lookup(TELEGRAM)
    assert current is not None and current.id == fresh.id
    assert await store.sessions.list_bindings(session.id) == [SLACK]
    other = ConversationRef(platform="telegram", space="-1001", channel="-1001", thread=None)
    assert await store.sessions.lookup(other) is None
    assert [s.id for s in await store.sessions.list_sessions()] == [fresh.id]


# --- turns ---------------------------------------------------------------------------------


async def test_one_turn_runs_at_a_time_and_ends_once(store: Store) -> None:
    session, epoch = await running_session(store)
    turn = await store.turns.start(session.id, epoch)
    with pytest.raises(StoreError, match="already runs turn"):
        await store.turns.start(session.id, epoch)
    await store.turns.set_native_id(turn.id, "turn-1")
    ended = await store.turns.end(turn.id, TurnStatus.COMPLETED)
    assert ended.status is TurnStatus.COMPLETED and ended.native_turn_id == "turn-1"
    late = await store.turns.end(turn.id, TurnStatus.FAILED, error="late")
    assert late.status is TurnStatus.COMPLETED
    assert await store.turns.running(session.id) is None


async def test_ending_a_runtime_interrupts_its_turn_and_prompt(store: Store) -> None:
    session, epoch = await running_session(store)
    await enqueue(store, session.id, "m1", "fix the tests")
    prompt = await store.prompts.claim_next(session.id)
    assert prompt is not None
    turn = await store.turns.start(session.id, epoch, prompt_id=prompt.id)
    await store.sessions.end_epoch(session.id, epoch, exit_description="killed by signal 9")
    ended = await store.turns.get(turn.id)
    assert ended is not None and ended.status is TurnStatus.INTERRUPTED
    assert ended.error is not None and "killed by signal 9" in ended.error
    interrupted = await store.prompts.get(prompt.id)
    assert interrupted is not None and interrupted.state is PromptState.INTERRUPTED
    with pytest.raises(StoreError, match="not live"):
        await store.turns.start(session.id, epoch)


# --- the prompt queue ----------------------------------------------------------------------


async def enqueue_result(
    store: Store,
    session_id: str,
    message_id: str,
    text: str = "hello",
    *,
    max_depth: int = 10,
    author: Actor = ALICE,
    conversation: ConversationRef = TELEGRAM,
) -> EnqueueResult:
    return await store.prompts.enqueue(
        session_id,
        conversation=conversation,
        platform_message_id=message_id,
        author=author,
        text=text,
        max_depth=max_depth,
    )


async def enqueue(
    store: Store, session_id: str, message_id: str, text: str = "hello", **options: Any
) -> EnqueueOutcome:
    """Only the outcome of :func:`enqueue_result`."""
    return (await enqueue_result(store, session_id, message_id, text, **options)).outcome


async def drain(store: Store, session_id: str) -> list[str]:
    texts = []
    while (prompt := await store.prompts.claim_next(session_id)) is not None:
        texts.append(prompt.text)
        await store.prompts.mark_done(prompt.id)
    return texts


async def test_prompts_leave_in_the_order_they_came(store: Store) -> None:
    session, _ = await running_session(store)
    for n in range(3):
        assert await enqueue(store, session.id, f"m{n}", f"prompt {n}") is EnqueueOutcome.QUEUED
    assert await drain(store, session.id) == ["prompt 0", "prompt 1", "prompt 2"]


async def test_one_prompt_in_flight_at_a_time(store: Store) -> None:
    session, _ = await running_session(store)
    await enqueue(store, session.id, "m1", "first")
    await enqueue(store, session.id, "m2", "second")
    first = await store.prompts.claim_next(session.id)
    assert first is not None and first.text == "first"
    assert await store.prompts.claim_next(session.id) is None  # waits for the turn to end
    await store.prompts.mark_done(first.id)
    second = await store.prompts.claim_next(session.id)
    assert second is not None and second.text == "second"


async def test_a_released_prompt_keeps_its_place_in_the_queue(store: Store) -> None:
    session, _ = await running_session(store)
    await enqueue(store, session.id, "m1", "first")
    await enqueue(store, session.id, "m2", "second")
    first = await store.prompts.claim_next(session.id)
    assert first is not None
    await store.prompts.release(first.id)  # its turn could not start: nothing was sent
    assert await drain(store, session.id) == ["first", "second"]


async def test_a_redelivered_message_is_never_queued_twice(store: Store) -> None:
    session, _ = await running_session(store)
    await enqueue(store, session.id, "m0", "before")
    first = await enqueue_result(store, session.id, "m1", "run the tests")
    again = await enqueue_result(store, session.id, "m1", "run the tests")
    assert again.outcome is EnqueueOutcome.DUPLICATE
    assert again.prompt == first.prompt and again.ahead == 1
    # the same message id in another conversation is another message
    other = await enqueue(store, session.id, "m1", "other", author=BOB, conversation=SLACK)
    assert other is EnqueueOutcome.QUEUED
    assert await drain(store, session.id) == ["before", "run the tests", "other"]


async def test_a_full_queue_refuses_and_says_so(store: Store) -> None:
    session, _ = await running_session(store)
    assert await enqueue(store, session.id, "m1", max_depth=2) is EnqueueOutcome.QUEUED
    assert await enqueue(store, session.id, "m2", max_depth=2) is EnqueueOutcome.QUEUED
    full = await enqueue_result(store, session.id, "m3", "one too many", max_depth=2)
    assert full.outcome is EnqueueOutcome.FULL and full.prompt is None and full.ahead == 2
    assert [p.platform_message_id for p in await store.prompts.list_queued(session.id)] == [
        "m1",
        "m2",
    ]
    refused = await store.audit.entries(event="prompt.refused_full")
    assert [(e.actor, e.details["platform_message_id"]) for e in refused] == [
        ("telegram:100", "m3")
    ]
    # room again once one leaves
    await drain(store, session.id)
    assert await enqueue(store, session.id, "m3", max_depth=2) is EnqueueOutcome.QUEUED


async def test_held_prompts_wait_and_what_came_after_the_stop_goes_first(store: Store) -> None:
    session, _ = await running_session(store)
    await enqueue(store, session.id, "m1", "before stop 1")
    await enqueue(store, session.id, "m2", "before stop 2")
    assert await store.prompts.hold(session.id, reason="/stop") == 2
    result = await enqueue_result(store, session.id, "m3", "after stop")
    assert result.outcome is EnqueueOutcome.QUEUED and result.held == 2 and result.ahead == 0
    held = await store.sessions.get(session.id)
    assert held is not None and held.queue_paused and held.queue_pause_reason == "/stop"
    assert [p.text for p in await store.prompts.list_held(session.id)] == [
        "before stop 1",
        "before stop 2",
    ]
    assert await drain(store, session.id) == ["after stop"]  # the held ones wait
    assert await store.prompts.claim_next(session.id) is None
    await enqueue(store, session.id, "m4", "typed later")
    claimed = await store.prompts.claim_next(session.id)
    assert claimed is not None and claimed.text == "typed later"
    # /resume while that one runs: the held ones go after it, in their order
    assert await store.prompts.resume(session.id) == 2
    await enqueue(store, session.id, "m5", "after resume")
    await store.prompts.mark_done(claimed.id)
    assert await drain(store, session.id) == ["before stop 1", "before stop 2", "after resume"]
    resumed = await store.sessions.get(session.id)
    assert resumed is not None and not resumed.queue_paused


async def test_holding_an_empty_queue_holds_nothing(store: Store) -> None:
    session, _ = await running_session(store)
    assert await store.prompts.hold(session.id, reason="/stop") == 0
    record = await store.sessions.get(session.id)
    assert record is not None and not record.queue_paused


async def test_clear_drops_what_waits_and_records_it(store: Store) -> None:
    session, _ = await running_session(store)
    await enqueue(store, session.id, "m1")
    await enqueue(store, session.id, "m2")
    assert await store.prompts.clear(session.id, actor=ALICE) == 2
    assert await store.prompts.list_queued(session.id) == []
    first = await store.prompts.get(1)
    assert first is not None and first.state is PromptState.DROPPED
    [entry] = await store.audit.entries(event="queue.cleared")
    assert entry.actor == "telegram:100" and entry.details == {"ids": [1, 2]}


async def test_after_a_restart_nothing_is_resent_on_its_own(data_dir: Path) -> None:
    async with Store.open(data_dir) as store:
        session, _ = await running_session(store)
        await enqueue(store, session.id, "m1", "being worked on")
        await enqueue(store, session.id, "m2", "waiting")
        in_flight = await store.prompts.claim_next(session.id)
        assert in_flight is not None
    async with Store.open(data_dir) as store:
        assert await store.prompts.recover_after_restart() == [session.id]
        interrupted = await store.prompts.get(in_flight.id)
        assert interrupted is not None and interrupted.state is PromptState.INTERRUPTED
        assert await store.prompts.claim_next(session.id) is None  # held until /resume
        await enqueue(store, session.id, "m3", "typed after the restart")
        assert await drain(store, session.id) == ["typed after the restart"]
        assert await store.prompts.resume(session.id) == 1
        assert await drain(store, session.id) == ["waiting"]


async def test_a_closed_session_takes_no_prompt(store: Store) -> None:
    session, _ = await running_session(store)
    await store.sessions.close(session.id, reason="/new")
    with pytest.raises(StoreError, match="closed"):
        await enqueue(store, session.id, "m1")
