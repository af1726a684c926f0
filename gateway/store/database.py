"""The connections to the ledger, the writers' lanes, and the helpers every table module shares.

Every public store method is one plain function of the connection, run whole on the
connection's own thread (:class:`Runner`) by :meth:`Database.write` (in a ``BEGIN
IMMEDIATE`` transaction on SQLite, ``BEGIN`` on PostgreSQL) or :meth:`Database.read`; on
SQLite on the event loop's thread instead (:class:`OnLoop`: no trip, the thread only for a
call that must wait for a lock or may take long). A connection and its thread are a lane; a
call takes a free lane for its whole run (its retries too) and no other call uses that lane
meanwhile. SQLite has one lane: the gateway has a single writer, and no method ever sees
another's half-done work. PostgreSQL has several (issue 36,
``store_pool_size``): independent calls of one host run side by side, and what keeps two
writes of one row apart is what already kept two hosts' writes apart (row locks taken in one
order, the compare-and-set on decisions). Beside them, :class:`ReadOnlyDatabase` is a
connection opened read-only on a thread of its own, for the reads that must answer while the
writers are busy (WAL: a reader never waits for a writer). The driver's errors are translated
to :class:`~gateway.errors.StoreError` here, chained.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import functools
import json
import logging
import queue
import random
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError
from gateway.store.dialect import SQLITE, Dialect
from gateway.store.ledger_faults import Fault, LedgerFaults
from gateway.store.trip_tally import CountedConn, TripTally, label_of

__all__ = [
    "Clock",
    "Conn",
    "Cursor",
    "Database",
    "Lane",
    "OnLoop",
    "ReadOnlyDatabase",
    "Reader",
    "Row",
    "Runner",
    "conversation_from_row",
    "conversation_params",
    "fetch_all",
    "fetch_one",
    "parse_optional_time",
    "parse_time",
    "utc_now",
]

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime; injected so tests control time."""

JsonObject = Mapping[str, Any]
T = TypeVar("T")
log = logging.getLogger(__name__)

Row = Any
"""A row of a result: ``sqlite3.Row`` or psycopg's ``dict_row``; decoders index it by name."""


def by_name(row: Row) -> Row:
    """``row`` for a decoder that reads many of its columns by name: ``sqlite3.Row`` finds a
    name by a scan of its columns (a request's row, 35 of them: a third of its decoding), a
    dict by one hash. A dict (PostgreSQL's rows) is taken as it is, as is a row with a name
    twice (the first is what a name finds in it)."""
    if type(row) is sqlite3.Row:
        named = dict(zip(row.keys(), row, strict=True))
        if len(named) == len(row):
            return named
    return row


class Cursor(Protocol):
    """What a closure reads from a statement it ran (both drivers' cursors are this)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Conn(Protocol):
    """What every store closure is a function of: a ``sqlite3.Connection``, or a
    :class:`~gateway.store.postgresql.PgConn` that runs the same SQL text on PostgreSQL."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def parse_optional_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def conversation_params(conversation: ConversationRef) -> tuple[str, str, str, str]:
    """The four stored parts of a conversation ('' where the platform has none)."""
    return (
        conversation.platform,
        conversation.space or "",
        conversation.channel,
        conversation.thread or "",
    )


def conversation_from_row(row: Row) -> ConversationRef:
    return ConversationRef(
        platform=row["platform"],
        space=row["space"] or None,
        channel=row["channel"],
        thread=row["thread"] or None,
    )


class Runner:
    """A thread of our own that owns one connection and runs functions of it, one at a time.

    A function given to :meth:`call` runs whole on that thread, in one trip there and back.
    Cancelled while queued, it is never run; cancelled while it runs, it ends (commits or
    rolls back) on its own, and the next call queues behind it. ``trips`` counts the calls
    (what ``bench.interactions`` reports per approval).

    The trip is a queue and the loop's own wake-up, no more: a ``ThreadPoolExecutor``'s
    (its work item, its future's condition, the future chained to asyncio's) cost twice
    as much CPU, about 100 µs a call on this machine against 45 (docs/decisions.md); with
    ten and more calls per approval that was a third of the gateway's CPU for one.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.trips = 0
        self._ended = 0  # jobs ended on the thread (run, or skipped as cancelled)
        # a daemon: a connection's thread never holds the interpreter's exit (a write cut
        # there is rolled back by the database, as after a crash)
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        self.trips += 1
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, done, fn, args))
        return await done

    @property
    def idle(self) -> bool:
        """Nothing queued here and nothing running (read on the loop's thread: a function
        ended here has let go of the connection)."""
        return self._ended == self.trips

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn`` on this thread when its turn comes, nobody waiting for it (an error
        is logged: the caller has moved on)."""
        self.trips += 1
        self._jobs.put((None, None, fn, args))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, done, fn, args = job
            if done is None:
                try:
                    fn(*args)
                except Exception:
                    log.exception("%s: a job nobody waited for failed", self._thread.name)
                self._ended += 1
                continue
            if done.cancelled():
                self._ended += 1
                continue  # cancelled while queued: never run
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the caller, whatever it is
                error = exc
            self._ended += 1
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                assert loop is not None
                loop.call_soon_threadsafe(_settle, done, result, error)
            del job, done, result, error  # nothing of the call kept while the queue waits

    def shutdown(self) -> None:
        """Let the thread end once its queue is empty (nothing waits for it here)."""
        self._jobs.put(None)


_Job = tuple[
    asyncio.AbstractEventLoop | None,
    "asyncio.Future[Any] | None",
    Callable[..., Any],
    tuple[Any, ...],
]


def _settle(done: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: the call's outcome to its awaiter (gone if it was cancelled)."""
    if done.cancelled():
        return
    if error is None:
        done.set_result(result)
    elif isinstance(error, StopIteration):  # a future refuses it: said as what it was
        done.set_exception(RuntimeError(f"StopIteration on the ledger's thread: {error!r}"))
    else:
        done.set_exception(error)


class Lane:
    """One connection and the thread that owns it (:class:`Runner`): what a store call holds
    while it runs."""

    __slots__ = ("conn", "runner")

    def __init__(self, runner: Runner, conn: Conn) -> None:
        self.runner = runner
        self.conn = conn


@dataclass(frozen=True, slots=True)
class OnLoop:
    """A ledger whose calls run on the event loop's own thread, not the lane's (SQLite: no
    network, and a call is a few statements of microseconds each; the trip to a thread and
    back cost more CPU than the call, docs/decisions.md). The connection waits for no lock
    there (``busy_timeout`` 0): a call that meets one another process holds (an
    ``agent-gateway`` command's) is run again on the lane's thread, waiting up to
    ``lock_wait_ms``; nothing of it was kept (SQLite refuses at its first write, and a
    transaction refused is rolled back whole).

    A call runs on the loop only while the lane's thread has nothing of its own (a call
    cancelled while it waited there for a lock may still be running): else it is queued
    there behind it, and the connection is never used by two threads at once.

    Checkpoints (copying the write-ahead log back into the database file, with
    ``synchronous=NORMAL`` the only time SQLite syncs the disk) are not run at the commits,
    where a sync would hold up the loop (``wal_autocheckpoint`` 0): every
    ``checkpoint_every`` write calls, a ``PASSIVE`` one is queued on the lane's thread, and
    the calls that come meanwhile queue behind it there, as they waited behind SQLite's own
    checkpoint at a commit before.

    One call in ``yield_every`` lets other tasks run first (a call returns without
    suspending, so a loop of calls would otherwise keep the loop), and one that comes while
    another does waits behind it: calls keep their order. By count, not by time: the same
    calls interleave the same way on every run."""

    lock_wait_ms: int
    checkpoint_every: int = 1000
    yield_every: int = 8


class Database:
    """The writers' connections (autocommit mode, so transactions are explicit).

    A transaction is one plain function of the connection, run whole on the connection's
    thread (:class:`Runner`): one trip there and back per store call, where a statement each
    was ~50 trips per approval (docs/decisions.md); on SQLite (:class:`OnLoop`) on the event
    loop's thread, no trip at all. The function must not await or block on the event loop;
    it may raise to roll back.

    ``runner`` and ``conn`` are the first lane (the migrations run on it); :meth:`add_lanes`
    adds the others (PostgreSQL's pool). A call takes the lane used last among the free ones
    (one warm connection while calls come one at a time), or waits, in turn, for the first
    freed: none overtakes a call that waits, as none did behind the lock this replaced.
    """

    def __init__(
        self,
        runner: Runner,
        conn: Conn,
        clock: Clock,
        *,
        dialect: Dialect = SQLITE,
        errors: tuple[type[Exception], ...] = (sqlite3.Error,),
        deadline: float | None = None,
        on_loop: OnLoop | None = None,
    ) -> None:
        self.runner = runner
        self.dialect = dialect
        self.on_loop = on_loop
        self._calls_on_loop = 0
        self._unyielded = 0  # calls on the loop since one let other tasks run (OnLoop)
        self._yielding = 0  # calls on the loop letting other tasks run now
        self._writes_unchecked = 0  # write calls since the last checkpoint (OnLoop)
        self.lanes: tuple[Lane, ...] = (Lane(runner, conn),)
        self._idle: list[Lane] = [self.lanes[0]]  # the one freed last on top
        # calls waiting for a lane, in the order they came: a freed lane goes to the first
        # (none overtakes: with one lane, as SQLite has, calls run in the order they came)
        self._waiting: collections.deque[asyncio.Future[Lane]] = collections.deque()
        self._errors = errors
        self._deadline = deadline
        self._clock = clock
        self._closed = False
        self.tally: TripTally | None = None  # what each call was for (a bench sets one)
        self.faults = LedgerFaults.from_environment()  # a test's faults (ledger_faults.py)

    def add_lanes(self, more: Sequence[Lane]) -> None:
        """More lanes (PostgreSQL's pool, opened once the first has migrated the schema)."""
        self.lanes = (*self.lanes, *more)
        for lane in more:
            self._give(lane)

    async def _take(self) -> Lane:
        """A free lane, or the first freed once the calls that came before took theirs."""
        if self._idle and not self._waiting:
            return self._idle.pop()
        handed: asyncio.Future[Lane] = asyncio.get_running_loop().create_future()
        self._waiting.append(handed)
        try:
            return await handed
        except asyncio.CancelledError:
            if handed.done() and not handed.cancelled():
                self._give(handed.result())  # handed over as it was cancelled: passed on
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(handed)
            raise

    def _give(self, lane: Lane) -> None:
        """``lane`` is free: to the first call waiting, else kept for the next."""
        while self._waiting:
            handed = self._waiting.popleft()
            if not handed.done():
                handed.set_result(lane)
                return
        self._idle.append(lane)

    def connection_ids(self) -> frozenset[int]:
        """PostgreSQL: the server's process ids of the lanes' connections as they are now (a
        notification names the connection that sent it); SQLite: none."""
        return frozenset(
            pid for lane in self.lanes if (pid := getattr(lane.conn, "backend_pid", None))
        )

    @property
    def trips(self) -> int:
        """The calls run so far, on every lane (on the loop's thread or the lane's)."""
        return self._calls_on_loop + sum(lane.runner.trips for lane in self.lanes)

    def close(self) -> None:
        """Refuse every later call with StoreError (the connection is being closed)."""
        self._closed = True

    @property
    def round_trips(self) -> int | None:
        """PostgreSQL: the statements sent so far on every lane (each a network round trip);
        SQLite: None (no network: ``trips`` are its trips)."""
        counted = [getattr(lane.conn, "round_trips", None) for lane in self.lanes]
        if not all(isinstance(each, int) for each in counted):
            return None
        return sum(each for each in counted if isinstance(each, int))

    def now(self) -> str:
        """The clock's time as stored: ISO 8601 in UTC, microseconds."""
        return self.stored_time(self._clock())

    def stored_time(self, moment: datetime) -> str:
        """A time as stored: ISO 8601 in UTC, microseconds."""
        if moment.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
        return utc.isoformat(timespec="microseconds")

    async def write(
        self,
        work: Callable[[Conn], T],
        *,
        one_statement: bool = False,
        again: bool = False,
        on_thread: bool = False,
    ) -> T:
        """Run ``work`` as one write transaction (``dialect.begin_write``), in one trip to
        the database thread: committed if it returns, rolled back if it raises.

        ``one_statement``: ``work`` runs a single statement, which is atomic on its own: it
        is sent alone, no BEGIN/COMMIT (autocommit), one network round trip on PostgreSQL
        where a transaction that reads an answer takes two. ``work`` may still raise on what
        it reads (no row updated: nothing was written). A second statement is refused.

        ``again``: run twice, ``work`` leaves the ledger as run once (and its caller writes
        nothing else of the same rows until it returns): a lost answer to its COMMIT is then
        no unknown outcome, and it is run once more on a new connection, as a call lost
        before its COMMIT is. A cut ends every call in flight on a host's pool at once.

        ``on_thread``: a call that may take milliseconds (a prune's batch, a count of a
        table) runs on the lane's thread even where calls run on the loop (:class:`OnLoop`):
        the loop goes on meanwhile.
        """
        if one_statement:
            return await self._submit(
                functools.partial(_alone, writes=True),
                work,
                writes=True,
                again=again,
                on_thread=on_thread,
            )
        return await self._submit(
            functools.partial(_in_transaction, self.dialect.begin_write),
            work,
            writes=True,
            again=again,
            on_thread=on_thread,
        )

    async def read(
        self,
        work: Callable[[Conn], T],
        *,
        one_statement: bool = False,
        on_thread: bool = False,
    ) -> T:
        """Run ``work``'s SELECTs on a lane of their own, in one trip: a consistent view
        (``on_thread``: as :meth:`write`'s).

        On SQLite no BEGIN/COMMIT (docs/decisions.md): its one lane is the only writer and
        every write holds it, so nothing can change between the SELECTs of one read. On
        PostgreSQL other lanes and hosts write too: the read is one REPEATABLE READ
        transaction, unless ``one_statement``: ``work`` runs a single SELECT, which is
        consistent in itself, so it goes alone, no BEGIN, no pipeline: one network round
        trip where the transaction takes two (a second statement is refused, on both).
        """
        begin = self.dialect.begin_read
        if one_statement:
            return await self._submit(_alone, work, on_thread=on_thread)
        if begin is None:
            return await self._submit(_bare, work, on_thread=on_thread)
        return await self._submit(functools.partial(_snapshot, begin), work, on_thread=on_thread)

    async def _submit(
        self,
        runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
        work: Callable[[Conn], T],
        *,
        writes: bool = False,
        again: bool = False,
        on_thread: bool = False,
    ) -> T:
        """Run one store call on a free lane, the only call on it until it ends. Run again,
        on the same lane, never more than it is safe to: a deadlock or serialization failure
        (the server rolled it back whole), up to RETRIES times; a connection lost before the
        call's COMMIT (or its one writing statement) was sent, once, on a new connection
        (nothing of it was written). A call whose COMMIT was sent and whose answer was lost
        is never run again: its StoreError says the outcome is unknown (``outcome_unknown``),
        for the caller to read back."""
        if self.on_loop is not None:
            # now and then a point where other tasks run, as each trip to a thread was (OnLoop)
            self._unyielded += 1
            if self._yielding or self._unyielded >= self.on_loop.yield_every:
                self._unyielded = 0
                self._yielding += 1
                try:
                    await asyncio.sleep(0)
                finally:
                    self._yielding -= 1
        lane = await self._take()
        try:
            return await self._on_lane(
                lane, runner, work, writes=writes, again=again, on_thread=on_thread
            )
        finally:
            self._give(lane)

    async def _on_lane(
        self,
        lane: Lane,
        runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
        work: Callable[[Conn], T],
        *,
        writes: bool,
        again: bool,
        on_thread: bool = False,
    ) -> T:
        """:meth:`_submit`'s attempts, every one on ``lane`` (a lost connection is made again
        on the lane it was lost on: the next attempt's ``ready``)."""
        reconnected = False
        for attempt in range(1, RETRIES + 1):
            if self._closed:
                raise StoreError("the ledger is closed")
            ticket = _Ticket()
            try:
                return await self._run_once(
                    lane, runner, work, ticket, writes=writes, on_thread=on_thread
                )
            except StoreError as exc:
                if ticket.commit_sent and _lost(exc) and not (again and not reconnected):
                    exc.outcome_unknown = True
                    raise
                # PostgreSQL: a deadlock between two connections' locks, or a serialization
                # failure: rolled back whole by the server, so run again (at most RETRIES)
                if attempt < RETRIES and _retryable(exc):
                    # the other transaction may not have taken the locks it waited for
                    # yet: running again at once can deadlock with it again (seen in tests)
                    await asyncio.sleep(random.uniform(0, RETRY_PAUSE * attempt))
                    continue
                if not reconnected and _lost(exc):
                    reconnected = True  # nothing was written: once more, newly connected
                    log.warning(
                        "ledger: %s lost its connection (%s); trying again", label_of(work), exc
                    )
                    continue
                raise
        raise AssertionError("unreachable")

    async def _run_once(
        self,
        lane: Lane,
        runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
        work: Callable[[Conn], T],
        ticket: _Ticket,
        *,
        writes: bool,
        on_thread: bool = False,
    ) -> T:
        fault = self.faults.next_call(label_of(work)) if self.faults is not None else None
        if fault is Fault.FAIL:
            lost = ConnectionError("injected")
            raise StoreError(
                f"ledger fault: {label_of(work)} lost its connection before it ran"
            ) from lost
        if fault is Fault.HANG:
            waited = self._deadline or 1.0
            await asyncio.sleep(waited)  # the deadline's own wait, as a frozen server's
            raise StoreError(f"the ledger did not answer within {waited:g} s") from TimeoutError()
        if self.on_loop is not None:
            # on the loop's thread (:class:`OnLoop`), unless long (``on_thread``) or while
            # the lane's thread still has the connection; one that meets another process's
            # lock is run again on the lane's thread, where it may wait for it
            here: T | _Locked = _LOCKED
            if not on_thread and lane.runner.idle:
                here = self._here(lane, runner, work, ticket)
            if isinstance(here, _Locked):
                waiting = functools.partial(_waiting_for_locks, self.on_loop.lock_wait_ms, runner)
                here = await _on_thread(
                    lane.runner, lane.conn, waiting, work, self._errors, self.tally, ticket=ticket
                )
            result = cast("T", here)  # no call's answer is _LOCKED
            if writes:
                self._written(self.on_loop, lane)
        else:
            result = await _on_thread(
                lane.runner,
                lane.conn,
                runner,
                work,
                self._errors,
                self.tally,
                deadline=self._deadline,
                ticket=ticket,
            )
        if fault is Fault.CUT:
            ticket.commit_sent = writes  # a read's lost answer is only a lost answer
            lost = ConnectionError("injected")
            raise StoreError(f"ledger fault: {label_of(work)}'s answer lost after it ran") from lost
        return result

    def _here(
        self,
        lane: Lane,
        runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
        work: Callable[[Conn], T],
        ticket: _Ticket,
    ) -> T | _Locked:
        """One call on the event loop's thread (:class:`OnLoop`); ``_LOCKED`` if another
        process holds the lock it needs (SQLite rolled it back: nothing of it was written)."""
        self._calls_on_loop += 1
        run = runner if self.tally is None else functools.partial(_tallied, runner, self.tally)
        try:
            return run(lane.conn, work, ticket)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise StoreError(f"ledger error: {exc}") from exc
            log.info("ledger: %s waits for a lock another process holds", label_of(work))
        except self._errors as exc:
            raise StoreError(f"ledger error: {exc}") from exc
        self._calls_on_loop -= 1  # counted on the lane's thread instead
        return _LOCKED

    def _written(self, on_loop: OnLoop, lane: Lane) -> None:
        """A write call ended (:class:`OnLoop`): every ``checkpoint_every``, a checkpoint
        queued on the lane's thread."""
        self._writes_unchecked += 1
        if self._writes_unchecked >= on_loop.checkpoint_every:
            self._writes_unchecked = 0
            lane.runner.post(_checkpoint, lane.conn)

    def audit(
        self,
        conn: Conn,
        event: str,
        *,
        actor: Actor | str | None = None,
        session_id: str | None = None,
        interaction_id: str | None = None,
        details: JsonObject | None = None,
    ) -> None:
        """Append an audit entry inside the caller's transaction."""
        actor_text = actor.key() if isinstance(actor, Actor) else actor
        conn.execute(
            "INSERT INTO audit (at, actor, event, session_id, interaction_id, details_json)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                self.now(),
                actor_text,
                event,
                session_id,
                interaction_id,
                json.dumps(dict(details or {}), sort_keys=True),
            ),
        )


class Reader(Protocol):
    """What runs a read: the writer's connection (:class:`Database`) or the read-only one."""

    async def read(self, work: Callable[[Conn], T], *, one_statement: bool = False) -> T: ...


class ReadOnlyDatabase:
    """A second connection, opened read-only (``mode=ro``), with a thread of its own.

    WAL lets it read while the writer writes: a read here never waits for the writer's lock,
    its thread or its transaction, and sees what was committed when the read began. Each read
    is one deferred transaction, so its SELECTs share one snapshot (on this connection the
    writer may commit between two statements; the SQLite writer's own reads need no BEGIN: a
    read holds its one lane, so no write runs meanwhile). Nothing can be written through it:
    SQLite refuses.
    """

    def __init__(
        self,
        runner: Runner,
        conn: Conn,
        *,
        dialect: Dialect = SQLITE,
        errors: tuple[type[Exception], ...] = (sqlite3.Error,),
        deadline: float | None = None,
    ) -> None:
        self.runner = runner
        self.dialect = dialect
        self._conn = conn
        self._errors = errors
        self._deadline = deadline
        self._closed = False
        self.tally: TripTally | None = None  # as Database.tally

    def close(self) -> None:
        """Refuse every later call with StoreError (the connection is being closed)."""
        self._closed = True

    @property
    def round_trips(self) -> int | None:
        """As :attr:`Database.round_trips`, for this connection."""
        counted = getattr(self._conn, "round_trips", None)
        return counted if isinstance(counted, int) else None

    async def read(self, work: Callable[[Conn], T], *, one_statement: bool = False) -> T:
        """Run ``work``'s SELECTs in one snapshot, on this connection's thread
        (``one_statement``: as :meth:`Database.read`'s)."""
        if self._closed:
            raise StoreError("the ledger is closed")
        snapshot: Callable[[Conn, Callable[[Conn], T], _Ticket], T]
        if one_statement:
            snapshot = _alone
        else:
            snapshot = functools.partial(_snapshot, self.dialect.begin_snapshot)
        return await _on_thread(
            self.runner,
            self._conn,
            snapshot,
            work,
            self._errors,
            self.tally,
            deadline=self._deadline,
        )


async def _on_thread(
    on: Runner,
    conn: Conn,
    runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
    work: Callable[[Conn], T],
    errors: tuple[type[Exception], ...],
    tally: TripTally | None = None,
    *,
    deadline: float | None = None,
    ticket: _Ticket | None = None,
) -> T:
    """Run ``runner(work)`` on ``conn``'s thread, in one trip; the driver's errors become
    StoreError. With a ``tally``, the call and its network round trips are recorded (counted
    on the thread, so calls of other connections in between do not count).

    With a ``deadline`` (seconds; PostgreSQL), a call the server has not answered by then is
    given up: the connection is aborted (``conn.abort()``: the thread's wait fails at once,
    and the next call connects again) and StoreError says so. What the call wrote is then
    unknown, as after a cut connection: the server rolls back a transaction that had not
    committed."""
    ticket = ticket if ticket is not None else _Ticket()
    if tally is not None:
        runner = functools.partial(_tallied, runner, tally)
    try:
        async with asyncio.timeout(deadline):
            return await on.call(runner, conn, work, ticket)
    except TimeoutError as exc:
        ticket.cancelled = True
        abort = getattr(conn, "abort", None)
        if abort is not None:
            abort()
        raise StoreError(f"the ledger did not answer within {deadline:g} s") from exc
    except errors as exc:
        raise StoreError(f"ledger error: {exc}") from exc
    except BaseException:
        # Cancelled: the function may be queued or running on the database thread.
        # Queued, it is skipped; running, it ends (commits or rolls back) on its own,
        # and the next transaction queues behind it: none is ever left open.
        ticket.cancelled = True
        raise


RETRIES = 5
RETRY_PAUSE = 0.02  # seconds: the most a retry waits, times its attempt (a random share)
_RETRYABLE = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected


def _retryable(exc: StoreError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) in _RETRYABLE


def _lost(exc: StoreError) -> bool:
    """The call's connection was lost (cut, shut at the deadline, or an injected fault), as
    opposed to the database refusing what it was asked."""
    cause = exc.__cause__
    if isinstance(cause, TimeoutError | ConnectionError):
        return True
    state = getattr(cause, "sqlstate", None)
    if state is not None:
        return bool(state.startswith("08") or state in _ENDED_BY_SERVER)
    # psycopg: the connection went away (no SQLSTATE: the server never answered)
    return (
        type(cause).__module__.startswith("psycopg") and type(cause).__name__ == "OperationalError"
    )


_ENDED_BY_SERVER = frozenset({"57P01", "57P02", "57P03"})  # admin shutdown, crash, cannot connect


class _Locked(enum.Enum):
    """What a call on the loop's thread gives back when another process holds its lock."""

    LOCKED = enum.auto()


_LOCKED = _Locked.LOCKED


class _Ticket:
    """``cancelled``: set from the event loop when the awaiter is cancelled, read on the
    database thread. ``commit_sent``: set on the database thread just before the call's
    COMMIT (or its one writing statement) is sent: from then on, a lost answer leaves its
    outcome unknown."""

    __slots__ = ("cancelled", "commit_sent")

    def __init__(self) -> None:
        self.cancelled = False
        self.commit_sent = False


def _tallied(
    runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
    tally: TripTally,
    conn: Conn,
    work: Callable[[Conn], T],
    ticket: _Ticket,
) -> T:
    before = getattr(conn, "round_trips", 0)
    counted = CountedConn(conn)
    try:
        return runner(cast(Conn, counted), work, ticket)
    finally:
        tally.record(work, getattr(conn, "round_trips", 0) - before, counted.statements)


class _Skipped(Exception):
    """A transaction whose awaiter was cancelled before it started (nobody reads this)."""


def _bare(conn: Conn, work: Callable[[Conn], T], ticket: _Ticket) -> T:
    """A read without a transaction of its own (on PostgreSQL its statements pipelined:
    sent together, each in its own snapshot)."""
    if ticket.cancelled:
        raise _Skipped
    with _pipelined(conn):
        return work(conn)


def _alone(conn: Conn, work: Callable[[Conn], T], ticket: _Ticket, *, writes: bool = False) -> T:
    """A call of one statement: no transaction, no pipeline (on PostgreSQL a connection cut
    in an earlier call is made again first, as ``PgConn.pipelined`` does). A writing one
    commits as it is sent."""
    if ticket.cancelled:
        raise _Skipped
    ready = getattr(conn, "ready", None)
    if ready is not None:
        ready()
    ticket.commit_sent = writes
    return work(_OneStatement(conn))


class _OneStatement:
    """The connection, for a call that said it runs one statement: a second is a bug."""

    __slots__ = ("_conn", "_ran")

    def __init__(self, conn: Conn) -> None:
        self._conn = conn
        self._ran = False

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        if self._ran:
            raise RuntimeError("a one-statement call ran a second statement")
        self._ran = True
        return self._conn.execute(sql, parameters)


def _pipelined(conn: Conn) -> contextlib.AbstractContextManager[object]:
    """PostgreSQL: the call in pipeline mode (``PgConn.pipelined``); SQLite: nothing."""
    pipelined = getattr(conn, "pipelined", None)
    return contextlib.nullcontext() if pipelined is None else pipelined()


def _snapshot(begin: str, conn: Conn, work: Callable[[Conn], T], ticket: _Ticket) -> T:
    """On a connection's thread: ``begin`` (a read), ``work``, then end it."""
    if ticket.cancelled:
        raise _Skipped
    try:
        with _pipelined(conn):
            conn.execute(begin)
            result = work(conn)
            conn.execute("ROLLBACK")  # nothing was written: nothing to keep
        return result
    finally:
        if conn.in_transaction:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")


def _in_transaction(begin: str, conn: Conn, work: Callable[[Conn], T], ticket: _Ticket) -> T:
    """On the database thread: ``begin``, ``work``, COMMIT; ROLLBACK on any error (on
    PostgreSQL after the pipeline's end, where a statement's error surfaces at the latest)."""
    if ticket.cancelled:
        raise _Skipped
    try:
        with _pipelined(conn):
            conn.execute(begin)
            result = work(conn)
            ticket.commit_sent = True
            conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(Exception):  # the original error is what matters
                conn.execute("ROLLBACK")
        raise
    return result


def _checkpoint(conn: Conn) -> None:
    """On the lane's thread: a ``PASSIVE`` checkpoint (:class:`OnLoop`); one that fails is
    said, and the next one does its work."""
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error as exc:
        log.warning("ledger: a checkpoint failed (%s); the next one tries again", exc)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLite refused a statement because another connection holds a lock (SQLITE_BUSY and
    its extended codes): nothing of it was done."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY


def _waiting_for_locks(
    wait_ms: int,
    runner: Callable[[Conn, Callable[[Conn], T], _Ticket], T],
    conn: Conn,
    work: Callable[[Conn], T],
    ticket: _Ticket,
) -> T:
    """On the lane's thread: ``runner(work)`` with SQLite waiting up to ``wait_ms`` for a
    lock (the connection waits for none while calls run on the loop)."""
    conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
    try:
        return runner(conn, work, ticket)
    finally:
        conn.execute("PRAGMA busy_timeout = 0")


# Statements run on the database thread, inside a function given to Database.write/read.
# Queries given to fetch_one name one row.


def fetch_one(conn: Conn, sql: str, params: Sequence[Any] = ()) -> Row | None:
    return conn.execute(sql, params).fetchone()


def fetch_all(conn: Conn, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    return conn.execute(sql, params).fetchall()
