"""asyncpg or psycopg 3: the ledger's approval path on PostgreSQL, driver against driver.

    python -m bench.pg_drivers [--count 250] [--warmup 30] [--rounds 4] [--json]

Starts a throwaway cluster (tests/pg_cluster.py: ``initdb`` + ``pg_ctl`` on a Unix socket in a
temp dir, ``fsync = off`` so that the disk does not drown the drivers' own cost) and runs, for
each driver, ``count`` approvals of the shape the SQLite store runs today (counted on
``bench.interactions`` with a trace of every statement of every trip, 2026-12-01): the store
calls of one approval, in order, each with the statements it runs now, in the PostgreSQL
dialect (``$n`` / ``%s``, ``json_agg``, ``FOR UPDATE`` on the interaction read before a
decision):

    create_with_copies (8 statements) -> get_with_copies (2) -> card edit (2) -> click view (5)
    -> decide (5) -> get_with_copies (2) -> card edit (2) -> record_delivery (5)
    -> close_from_agent (5) -> card edit (2)

Writes are ``BEGIN`` .. ``COMMIT``; reads of more than one statement ``BEGIN ISOLATION LEVEL
REPEATABLE READ READ ONLY`` .. ``COMMIT`` (issue 18). A *trip* is one network round trip:
a message the client sends and must wait for an answer to before it goes on. Statement at a
time (what both drivers do by default) every statement, BEGIN and COMMIT is one. psycopg's
pipeline mode sends the statements of a call together and waits once for each *stage* (the
point where the store needs a result before it can go on: the reads before a decision); the
third row measures that. On SQLite the same approval is 11-12 trips to aiosqlite's thread
(docs/benchmarks.md, "database trips per approval").

Prints, per driver: approvals/s, p50/p99 of one approval's store work, and trips per approval.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg
import psycopg

from bench.figures import Figure, Latency, emit
from tests.pg_cluster import PgCluster, find_pg_bindir, throwaway_cluster

__all__ = ["measure"]

NAME = "pg_drivers"
RTT_MS = 0.5  # a round trip to a database on another host in the same network (estimate)

SCHEMA = """
CREATE TABLE sessions (
    id text PRIMARY KEY, project text NOT NULL, agent_kind text NOT NULL,
    native_session_id text, created_at text NOT NULL, current_epoch integer,
    closed_at text, close_reason text, queue_paused integer NOT NULL DEFAULT 0,
    queue_pause_reason text, initiator_platform text, initiator_user_id text,
    initiator_display text);
CREATE TABLE runtime_epochs (
    session_id text NOT NULL REFERENCES sessions (id), epoch integer NOT NULL, pid integer,
    pgid integer, process_start_time text, started_at text NOT NULL, ended_at text,
    exit_description text, agent_version text, policy_json text,
    PRIMARY KEY (session_id, epoch));
CREATE TABLE conversations (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text NOT NULL REFERENCES sessions (id), platform text NOT NULL,
    space text NOT NULL, channel text NOT NULL, thread text NOT NULL, bound_at text NOT NULL,
    UNIQUE (platform, space, channel, thread));
CREATE TABLE interactions (
    id text PRIMARY KEY, session_id text NOT NULL REFERENCES sessions (id),
    runtime_epoch integer NOT NULL, turn_id bigint, native_key text NOT NULL, kind text NOT NULL,
    title text NOT NULL, summary text NOT NULL, detail_json text NOT NULL,
    actions_json text NOT NULL, questions_json text NOT NULL, state text NOT NULL,
    version integer NOT NULL, created_at text NOT NULL, updated_at text NOT NULL,
    UNIQUE (session_id, runtime_epoch, native_key));
CREATE TABLE decisions (
    interaction_id text PRIMARY KEY REFERENCES interactions (id), actor_platform text,
    actor_user_id text, actor_display text, action_id text, answers_json text, message text,
    decided_at text NOT NULL);
CREATE TABLE deliveries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    interaction_id text NOT NULL REFERENCES interactions (id), outcome text NOT NULL,
    error text, at text NOT NULL);
CREATE INDEX deliveries_interaction ON deliveries (interaction_id);
CREATE TABLE resolutions (
    interaction_id text PRIMARY KEY REFERENCES interactions (id), how text NOT NULL,
    "by" text, note text, at text NOT NULL);
CREATE TABLE votes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    interaction_id text NOT NULL REFERENCES interactions (id), person text NOT NULL,
    actor_platform text, actor_user_id text, actor_display text, action_id text,
    needed integer, surface text, content_hash text, voted_at text NOT NULL,
    withdrawn_at text);
CREATE INDEX votes_interaction ON votes (interaction_id);
CREATE TABLE interaction_messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    interaction_id text NOT NULL REFERENCES interactions (id), platform text NOT NULL,
    space text NOT NULL, channel text NOT NULL, thread text NOT NULL, message_ref text,
    state text NOT NULL, rendered_version integer, error text, updated_at text NOT NULL,
    again integer NOT NULL DEFAULT 0,
    UNIQUE (interaction_id, platform, space, channel, thread, again));
CREATE TABLE audit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at text NOT NULL, actor text,
    event text NOT NULL, session_id text, interaction_id text, details_json text NOT NULL);
"""

INTERACTION = (
    "SELECT i.id, i.session_id, i.runtime_epoch, i.turn_id, i.native_key, i.kind, i.title,"
    " i.summary, i.detail_json, i.actions_json, i.questions_json, i.state, i.version,"
    " i.created_at, i.updated_at, d.actor_platform, d.actor_user_id, d.actor_display,"
    " d.action_id, d.answers_json, d.message, d.decided_at, v.outcome AS delivery_outcome,"
    " v.error AS delivery_error, v.at AS delivered_at, r.how, r.by AS resolved_by,"
    " r.note AS resolution_note, r.at AS resolved_at,"
    " (SELECT coalesce(json_agg(json_build_array(s.person, s.actor_platform, s.actor_user_id,"
    " s.actor_display, s.action_id, s.needed, s.surface, s.content_hash, s.voted_at)"
    " ORDER BY s.voted_at, s.id), '[]') FROM votes s"
    " WHERE s.interaction_id = i.id AND s.withdrawn_at IS NULL) AS votes_json"
    " FROM interactions i LEFT JOIN decisions d ON d.interaction_id = i.id"
    " LEFT JOIN deliveries v ON v.id = (SELECT max(id) FROM deliveries"
    " WHERE interaction_id = i.id) LEFT JOIN resolutions r ON r.interaction_id = i.id"
)
BY_ID = INTERACTION + " WHERE i.id = $1"
BY_ID_LOCKED = BY_ID + " FOR UPDATE OF i"
BY_KEY = INTERACTION + " WHERE i.session_id = $1 AND i.runtime_epoch = $2 AND i.native_key = $3"
BY_KEY_LOCKED = BY_KEY + " FOR UPDATE OF i"
MESSAGE = (
    "SELECT m.id, m.interaction_id, m.platform, m.space, m.channel, m.thread, m.message_ref,"
    " m.state, m.rendered_version, m.error, m.updated_at, m.again FROM interaction_messages m"
)
SESSION = (
    "SELECT id, project, agent_kind, native_session_id, created_at, current_epoch, closed_at,"
    " close_reason, queue_paused, queue_pause_reason, initiator_platform, initiator_user_id,"
    " initiator_display FROM sessions"
)
AUDIT = (
    "INSERT INTO audit (at, actor, event, session_id, interaction_id, details_json)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
)
ACTIONS = (
    '[{"effect": "allow", "id": "accept", "label": "Allow once", "scope": "once"},'
    ' {"effect": "deny", "id": "decline", "label": "Deny", "scope": "once"}]'
)
SID, EPOCH, ROOM = "s1", 1, ("memory", "bench", "room", "t0")

Args = Callable[["Approval"], tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str  # with $n placeholders
    args: Args
    keep: str = ""  # store the first column of the first row under this name


@dataclass(frozen=True, slots=True)
class Call:
    """One store call: a transaction whose stages are sent together (pipelined), each stage
    ending where the store needs a result before it can go on."""

    name: str
    begin: str  # "" for a single-statement read (no transaction needed)
    stages: Sequence[Sequence[Statement]]


@dataclass(slots=True)
class Approval:
    k: int
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def iid(self) -> str:
        return f"i{self.k}"

    @property
    def key(self) -> str:
        return f"rpc:{self.k}"

    @staticmethod
    def now() -> str:
        return "2026-12-01T10:43:12.728514+00:00"


WRITE = "BEGIN"
READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def _s(sql: str, args: Args, keep: str = "") -> Statement:
    return Statement(sql, args, keep)


CREATE = Call(
    "create_with_copies",
    WRITE,
    [
        [
            _s(
                "SELECT ended_at FROM runtime_epochs WHERE session_id = $1 AND epoch = $2",
                lambda a: (SID, EPOCH),
            ),
            _s(BY_KEY, lambda a: (SID, EPOCH, a.key)),
        ],
        [
            _s(
                "INSERT INTO interactions (id, session_id, runtime_epoch, turn_id, native_key,"
                " kind, title, summary, detail_json, actions_json, questions_json, state, version,"
                " created_at, updated_at) VALUES ($1, $2, $3, 1, $4, 'approval', 'Run a command',"
                " 'benchmark', $5, $6, '[]', 'pending', 1, $7, $7)",
                lambda a: (
                    a.iid,
                    SID,
                    EPOCH,
                    a.key,
                    f'{{"command": "bench {a.k}", "type": "command"}}',
                    ACTIONS,
                    a.now(),
                ),
            ),
            _s(
                AUDIT,
                lambda a: (a.now(), "agent", "interaction.opened", SID, a.iid, '{"kind": "x"}'),
            ),
            _s(BY_ID, lambda a: (a.iid,)),
            _s(
                "SELECT platform, space, channel, thread FROM conversations"
                " WHERE session_id = $1 ORDER BY bound_at, id",
                lambda a: (SID,),
            ),
            _s(
                "INSERT INTO interaction_messages (interaction_id, platform, space, channel,"
                " thread, state, updated_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6)"
                " ON CONFLICT (interaction_id, platform, space, channel, thread, again)"
                " DO NOTHING",
                lambda a: (a.iid, *ROOM, a.now()),
            ),
            _s(
                MESSAGE + " WHERE m.interaction_id = $1 AND m.platform = $2 AND m.space = $3"
                " AND m.channel = $4 AND m.thread = $5 AND m.again = 0",
                lambda a: (a.iid, *ROOM),
                keep="message",
            ),
        ],
    ],
)
GET_WITH_COPIES = Call(
    "get_with_copies",
    READ,
    [
        [
            _s(BY_ID, lambda a: (a.iid,)),
            _s(MESSAGE + " WHERE m.interaction_id = $1 ORDER BY m.id", lambda a: (a.iid,)),
        ]
    ],
)
CARD_EDIT = Call(
    "card edit",
    WRITE,
    [
        [
            _s(
                "UPDATE interaction_messages SET state = 'edited', rendered_version = 4,"
                " error = NULL, updated_at = $1 WHERE id = $2",
                lambda a: (a.now(), a.kept["message"]),
            ),
            _s(MESSAGE + " WHERE m.id = $1", lambda a: (a.kept["message"],)),
        ]
    ],
)
CLICK_VIEW = Call(
    "click view",
    READ,
    [
        [
            _s(BY_ID, lambda a: (a.iid,)),
            _s(SESSION + " WHERE id = $1", lambda a: (SID,)),
            _s(MESSAGE + " WHERE m.interaction_id = $1 ORDER BY m.id", lambda a: (a.iid,)),
            _s(
                SESSION + " WHERE id = (SELECT session_id FROM conversations WHERE platform = $1"
                " AND space = $2 AND channel = $3 AND thread = $4)",
                lambda a: ROOM,
            ),
            _s(
                "SELECT session_id, epoch, pid, pgid, process_start_time, started_at, ended_at,"
                " exit_description, agent_version, policy_json FROM runtime_epochs"
                " WHERE session_id = $1 AND epoch = $2",
                lambda a: (SID, EPOCH),
            ),
        ]
    ],
)
DECIDE = Call(
    "decide",
    WRITE,
    [
        [_s(BY_ID_LOCKED, lambda a: (a.iid,))],
        [
            _s(
                "UPDATE interactions SET state = 'decided', version = version + 1,"
                " updated_at = $1 WHERE id = $2 AND version = 1 AND state = 'pending'",
                lambda a: (a.now(), a.iid),
            ),
            _s(
                "INSERT INTO decisions (interaction_id, actor_platform, actor_user_id,"
                " actor_display, action_id, answers_json, message, decided_at)"
                " VALUES ($1, 'memory', 'alice', 'Alice', 'accept', '{}', NULL, $2)",
                lambda a: (a.iid, a.now()),
            ),
            _s(
                AUDIT,
                lambda a: (a.now(), "memory:alice", "interaction.decided", SID, a.iid, "{}"),
            ),
            _s(BY_ID, lambda a: (a.iid,)),
        ],
    ],
)
RECORD_DELIVERY = Call(
    "record_delivery",
    WRITE,
    [
        [_s(BY_ID_LOCKED, lambda a: (a.iid,))],
        [
            _s(
                "INSERT INTO deliveries (interaction_id, outcome, error, at)"
                " VALUES ($1, 'ok', NULL, $2)",
                lambda a: (a.iid, a.now()),
            ),
            _s(
                "UPDATE interactions SET state = 'delivered', version = version + 1,"
                " updated_at = $1 WHERE id = $2 AND version = 2",
                lambda a: (a.now(), a.iid),
            ),
            _s(BY_ID, lambda a: (a.iid,)),
        ],
    ],
)
CLOSE = Call(
    "close_from_agent",
    WRITE,
    [
        [_s(BY_KEY_LOCKED, lambda a: (SID, EPOCH, a.key))],
        [
            _s(
                "UPDATE interactions SET state = 'resolved', version = version + 1,"
                " updated_at = $1 WHERE id = $2 AND version = 3",
                lambda a: (a.now(), a.iid),
            ),
            _s(
                'INSERT INTO resolutions (interaction_id, how, "by", note, at)'
                " VALUES ($1, 'answered', 'agent', 'agent: answered', $2)",
                lambda a: (a.iid, a.now()),
            ),
            _s(BY_ID, lambda a: (a.iid,)),
        ],
    ],
)
APPROVAL: Sequence[Call] = (
    CREATE,
    GET_WITH_COPIES,
    CARD_EDIT,
    CLICK_VIEW,
    DECIDE,
    GET_WITH_COPIES,
    CARD_EDIT,
    RECORD_DELIVERY,
    CLOSE,
    CARD_EDIT,
)


def statement_trips(calls: Sequence[Call]) -> int:
    """Round trips statement at a time: every statement, and BEGIN and COMMIT."""
    return sum(sum(len(s) for s in c.stages) + (2 if c.begin else 0) for c in calls)


def pipelined_trips(calls: Sequence[Call]) -> int:
    """Round trips pipelined: one wait per stage (BEGIN rides with the first, COMMIT with the
    last)."""
    return sum(len(c.stages) for c in calls)


class Driver(Protocol):
    name: str
    trips: int

    async def run(self, call: Call, approval: Approval) -> None: ...

    async def close(self) -> None: ...


@functools.cache
def _psycopg_sql(sql: str) -> str:
    """``$n`` -> ``%(pn)s``: psycopg's named placeholders (a ``$n`` may be used twice).
    Cached: converted once per statement, as a port would write them once."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", sql)


def _named(args: tuple[Any, ...]) -> dict[str, Any]:
    return {f"p{n}": value for n, value in enumerate(args, start=1)}


class AsyncpgDriver:
    name = "asyncpg"

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self.trips = 0

    @classmethod
    async def connect(cls, cluster: PgCluster) -> AsyncpgDriver:
        return cls(await asyncpg.connect(cluster.dsn))

    async def run(self, call: Call, approval: Approval) -> None:
        conn = self._conn
        if call.begin:
            await conn.execute(call.begin)
            self.trips += 1
        try:
            for stage in call.stages:
                for statement in stage:
                    row = await conn.fetchrow(statement.sql, *statement.args(approval))
                    self.trips += 1
                    if statement.keep and row is not None:
                        approval.kept[statement.keep] = row[0]
        except BaseException:
            if call.begin:
                await conn.execute("ROLLBACK")
            raise
        if call.begin:
            await conn.execute("COMMIT")
            self.trips += 1

    async def close(self) -> None:
        await self._conn.close()


class PsycopgDriver:
    """psycopg 3, async, autocommit (transactions are explicit, as on SQLite)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], *, pipeline: bool) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self.name = "psycopg (pipeline)" if pipeline else "psycopg"
        self.trips = 0

    @classmethod
    async def connect(cls, cluster: PgCluster, *, pipeline: bool) -> PsycopgDriver:
        conn = await psycopg.AsyncConnection.connect(cluster.dsn, autocommit=True)
        return cls(conn, pipeline=pipeline)

    async def run(self, call: Call, approval: Approval) -> None:
        if self._pipeline:
            await self._run_pipelined(call, approval)
        else:
            await self._run_each(call, approval)

    async def _run_each(self, call: Call, approval: Approval) -> None:
        conn = self._conn
        if call.begin:
            await conn.execute(call.begin)
            self.trips += 1
        try:
            for stage in call.stages:
                for statement in stage:
                    cur = await conn.execute(
                        _psycopg_sql(statement.sql), _named(statement.args(approval))
                    )
                    row = await cur.fetchone() if cur.description else None
                    self.trips += 1
                    if statement.keep and row is not None:
                        approval.kept[statement.keep] = row[0]
        except BaseException:
            if call.begin:
                await conn.execute("ROLLBACK")
            raise
        if call.begin:
            await conn.execute("COMMIT")
            self.trips += 1

    async def _run_pipelined(self, call: Call, approval: Approval) -> None:
        conn = self._conn
        last = len(call.stages) - 1
        async with conn.pipeline() as pipeline:
            for n, stage in enumerate(call.stages):
                if n == 0 and call.begin:
                    await conn.execute(call.begin)
                kept = []
                for statement in stage:
                    cur = await conn.execute(
                        _psycopg_sql(statement.sql), _named(statement.args(approval))
                    )
                    kept.append((statement, cur))
                if n == last and call.begin:
                    await conn.execute("COMMIT")
                await pipeline.sync()  # one round trip: everything sent, every result read
                self.trips += 1
                for statement, cur in kept:
                    if statement.keep:
                        row = await cur.fetchone()
                        if row is not None:
                            approval.kept[statement.keep] = row[0]

    async def close(self) -> None:
        await self._conn.close()


class ThreadDriver:
    """psycopg 3's sync connection on one thread of our own, pipelined: each store call is one
    plain function of the connection, run whole on that thread (one hop there and back, as
    the SQLite store runs its calls on aiosqlite's thread today)."""

    def __init__(self, conn: psycopg.Connection[Any], pool: ThreadPoolExecutor) -> None:
        self._conn = conn
        self._pool = pool
        self.name = "psycopg sync on a thread (pipeline)"
        self.trips = 0

    @classmethod
    async def connect(cls, cluster: PgCluster) -> ThreadDriver:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        loop = asyncio.get_running_loop()
        conn = await loop.run_in_executor(
            pool, functools.partial(psycopg.Connection.connect, cluster.dsn, autocommit=True)
        )
        return cls(conn, pool)

    async def run(self, call: Call, approval: Approval) -> None:
        loop = asyncio.get_running_loop()
        self.trips += await loop.run_in_executor(self._pool, self._call, call, approval)

    def _call(self, call: Call, approval: Approval) -> int:
        conn, trips, last = self._conn, 0, len(call.stages) - 1
        with conn.pipeline() as pipeline:
            for n, stage in enumerate(call.stages):
                if n == 0 and call.begin:
                    conn.execute(call.begin)
                kept = []
                for statement in stage:
                    cur = conn.execute(
                        _psycopg_sql(statement.sql), _named(statement.args(approval))
                    )
                    kept.append((statement, cur))
                if n == last and call.begin:
                    conn.execute("COMMIT")
                pipeline.sync()
                trips += 1
                for statement, cur in kept:
                    if statement.keep:
                        row = cur.fetchone()
                        if row is not None:
                            approval.kept[statement.keep] = row[0]
        return trips

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self._conn.close)
        self._pool.shutdown()


async def _prepare(cluster: PgCluster, dbname: str) -> str:
    admin = await asyncpg.connect(cluster.dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{dbname}"')
    finally:
        await admin.close()
    dsn = cluster.dsn_for(dbname)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(SCHEMA)
        await conn.execute(
            "INSERT INTO sessions (id, project, agent_kind, created_at, current_epoch)"
            " VALUES ($1, 'bench', 'codex', $2, 1)",
            SID,
            Approval.now(),
        )
        await conn.execute(
            "INSERT INTO runtime_epochs (session_id, epoch, started_at) VALUES ($1, $2, $3)",
            SID,
            EPOCH,
            Approval.now(),
        )
        await conn.execute(
            "INSERT INTO conversations (session_id, platform, space, channel, thread, bound_at)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            SID,
            *ROOM,
            Approval.now(),
        )
    finally:
        await conn.close()
    return dsn


@dataclass(slots=True)
class Runs:
    """One driver's approvals, pooled over the rounds."""

    durations: list[int] = field(default_factory=list)  # ns, one approval each
    trips: int = 0
    wall: float = 0.0  # seconds
    cpu: float = 0.0  # this process's CPU seconds: the driver's own cost, and ours


async def _one_driver(driver: Driver, runs: Runs, *, count: int, warmup: int) -> None:
    for k in range(warmup):
        approval = Approval(k)
        for call in APPROVAL:
            await driver.run(call, approval)
    driver.trips = 0
    started, cpu = time.perf_counter(), time.process_time()
    for k in range(warmup, warmup + count):
        approval = Approval(k)
        t0 = time.perf_counter_ns()
        for call in APPROVAL:
            await driver.run(call, approval)
        runs.durations.append(time.perf_counter_ns() - t0)
    runs.wall += time.perf_counter() - started
    runs.cpu += time.process_time() - cpu
    runs.trips += driver.trips


DRIVERS: Sequence[tuple[str, Callable[[PgCluster], Any]]] = (
    ("asyncpg", AsyncpgDriver.connect),
    ("psycopg", lambda c: PsycopgDriver.connect(c, pipeline=False)),
    ("psycopg_pipeline", lambda c: PsycopgDriver.connect(c, pipeline=True)),
    ("psycopg_thread", ThreadDriver.connect),
)


async def measure(cluster: PgCluster, *, count: int, warmup: int, rounds: int) -> list[Figure]:
    """``rounds`` rounds of ``count`` approvals per driver, each round in another order (the
    machine is shared: whoever runs first must not be the only one to find it quiet)."""
    figures = [
        Figure(
            benchmark=NAME,
            name="store calls per approval",
            value=(
                f"{len(APPROVAL)} (SQLite: 1 trip each); statement at a time"
                f" {statement_trips(APPROVAL)} round trips, pipelined"
                f" {pipelined_trips(APPROVAL)}"
            ),
        )
    ]
    pooled = {label: Runs() for label, _ in DRIVERS}
    names: dict[str, str] = {}
    for r in range(rounds):
        shift = r % len(DRIVERS)
        for label, make in [*DRIVERS[shift:], *DRIVERS[:shift]]:
            dbname = f"bench_{label}_{r}"
            await _prepare(cluster, dbname)
            driver: Driver = await make(PgCluster(cluster.host, cluster.port, dbname=dbname))
            names[label] = driver.name
            try:
                await _one_driver(driver, pooled[label], count=count, warmup=warmup)
            finally:
                await driver.close()
    for label, _ in DRIVERS:
        runs, n = pooled[label], count * rounds
        latency, trips = Latency.of_ns(runs.durations), runs.trips / n
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"{names[label]}: one approval's store work",
                value=(
                    f"p50 {latency.p50:.2f} ms, p99 {latency.p99:.2f} ms;"
                    f" {trips:.0f} trips per approval; {n / runs.wall:.0f} approvals/s;"
                    f" client CPU {1000 * runs.cpu / n:.2f} ms per approval; a {RTT_MS} ms"
                    f" network round trip (another host) would add {trips * RTT_MS:.0f} ms"
                ),
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pg_drivers", description=__doc__)
    parser.add_argument("--count", type=int, default=250)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bindir = find_pg_bindir()
    if bindir is None:
        parser.error("PostgreSQL is not installed (scripts/setup.sh installs it, as root)")
    # a SIGTERM ends the run through the ``with`` (the cluster is stopped), not around it
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with throwaway_cluster(bindir) as cluster:
        figures = asyncio.run(
            measure(cluster, count=args.count, warmup=args.warmup, rounds=args.rounds)
        )
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
