"""Opening the ledger: the data dir, the SQLite file, its pragmas and its migrations."""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import quote

from gateway.errors import StoreError
from gateway.store.audit import AuditLog
from gateway.store.budget import read_room, room_problem
from gateway.store.cards import CardCopies
from gateway.store.clicks import ClickViews
from gateway.store.database import (
    Clock,
    Database,
    Lane,
    OnLoop,
    ReadOnlyDatabase,
    Runner,
    utc_now,
)
from gateway.store.datadir import check_data_dir, prepare_data_dir
from gateway.store.dialect import POSTGRESQL, Backend
from gateway.store.escalations import Escalations
from gateway.store.form_drafts import FormDraftLedger
from gateway.store.grants import GrantBook
from gateway.store.host_work import HostWorkViews
from gateway.store.ledger import InteractionLedger
from gateway.store.migrations import MIGRATIONS, Migration, apply_migrations
from gateway.store.prompts import PromptQueue
from gateway.store.readers import READERS, ReaderPool
from gateway.store.requests import SessionRequests
from gateway.store.retention import Retention
from gateway.store.schedules import ScheduleBook
from gateway.store.session_index import SessionIndex
from gateway.store.session_settings import SessionSettings
from gateway.store.sessions import SessionLedger
from gateway.store.timeline import TimelineLedger
from gateway.store.turns import TurnLedger
from gateway.store.votes import VoteLedger

if TYPE_CHECKING:
    from gateway.config.ledger_url import PgTarget
    from gateway.store.postgresql import PgConn

__all__ = ["DATABASE_FILE", "Store"]

log = logging.getLogger(__name__)

DATABASE_FILE = "ledger.sqlite3"
BUSY_TIMEOUT_MS = 5000  # another process (``agent-gateway ledger``) may hold a lock briefly
READER_BUSY_TIMEOUT_MS = 1000  # a WAL reader waits only while a crashed writer's log is recovered


class Store:
    """The SQLite ledger, opened with ``async with Store.open(data_dir) as store``.

    ``store.writer`` serves every call (SQLite: one connection; PostgreSQL: a pool of them,
    ``store_pool_size``, so a host's independent calls run side by side); each public method
    of its parts is one transaction:

    - ``store.sessions``: sessions, runtime epochs, conversation bindings
    - ``store.turns``: turns
    - ``store.timeline``: each turn's timeline (text, tool lines, requests, in order)
    - ``store.prompts``: the prompt queue of each session
    - ``store.interactions``: interactions, decisions, deliveries, resolutions, grants
    - ``store.cards``: every copy of every interaction card
    - ``store.audit``: the audit log
    - ``store.requests``: commands for another host's session (a shared ledger only)
    - ``store.clicks``: what a click is checked against, in one read
    - ``store.retention``: pruning texts and old interactions (``[gateway.retention]``)

    ``store.peek`` are the same reads as ``store.clicks`` through a second, read-only
    connection (``store.reader``), which never waits behind the writer: what must answer
    within a platform's deadline while a long write runs (``Inbox.may_answer``).
    ``store.readers`` are several more (gateway/store/readers.py) for what people look at:
    the console's pages, ``/pending``, the audit export.

    At start-up, before anything resumes: for each of ``sessions.live_epochs()`` end the
    leftover process (pid, pgid and start time are recorded), then ``sessions.end_epoch``
    and ``interactions.orphan_epoch``; then ``prompts.recover_after_restart()`` (in-flight
    prompts interrupted, waiting prompts held) and edit every card of
    ``cards.list_outdated()`` and resend ``cards.list_failed()``.
    """

    def __init__(
        self,
        db: Database,
        path: Path | None,
        reader: ReadOnlyDatabase,
        *,
        location: str,
        readers: ReaderPool | None = None,
    ) -> None:
        self.path = path  # the SQLite file; None on PostgreSQL
        self.location = location  # what may be shown of where the ledger is (no password)
        self.writer = db
        self.reader = reader
        # the reads people look at (pages, /pending, the audit export): never behind a write
        self.readers = readers if readers is not None else ReaderPool([reader])
        self.sessions = SessionLedger(db)
        self.session_index = SessionIndex(db)
        self.settings = SessionSettings(db)  # what a person chose (/model)
        self.turns = TurnLedger(db)
        self.timeline = TimelineLedger(db, views=self.readers)
        self.prompts = PromptQueue(db, views=self.readers)
        self.interactions = InteractionLedger(db, views=self.readers)
        self.votes = VoteLedger(db, self.interactions)
        self.cards = CardCopies(db)
        self.form_drafts = FormDraftLedger(db)
        self.requests = SessionRequests(db)  # a shared ledger only: commands between hosts
        self.escalations = Escalations(db)
        self.schedules = ScheduleBook(db)  # issue 35: schedules and their runs
        self.grants = GrantBook(db)
        self.audit = AuditLog(db)
        self.clicks = ClickViews(db)
        self.peek = ClickViews(reader)
        self.retention = Retention(db)  # what goes when (issue 36)
        # the safety sweep's one question (issue 36): on a reader, never a write
        self.host_work = HostWorkViews(
            self.readers, shared=db.dialect.backend is not Backend.SQLITE
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        data_dir: Path,
        *,
        work_dirs: Iterable[Path] = (),
        clock: Clock = utc_now,
        migrations: Sequence[Migration] = MIGRATIONS,
        postgresql: PgTarget | None = None,
        leased_receivers: int | None = None,
    ) -> AsyncIterator[Store]:
        """Open (creating if need be) the ledger in ``data_dir``, migrated to the newest schema.

        With ``postgresql`` the ledger is that database instead, and nothing is written in
        the data dir (still checked against ``work_dirs``; the gateway keeps its lock and key
        there); see :meth:`_open_postgresql`. A gateway host gives ``leased_receivers`` (the
        receivers it may hold by lease): its connection budget is checked against the
        server's room (a command's store does not).

        The data dir is refused if it lies inside any of ``work_dirs``, created 0700 (or
        tightened to it), and the database file is created 0600. WAL journal,
        ``synchronous=NORMAL``, foreign keys on. ``clock`` returns aware datetimes. The
        read-only connection is opened once the schema is migrated, and closed first.
        """
        check_data_dir(data_dir, work_dirs)
        if postgresql is not None:
            async with cls._open_postgresql(
                postgresql, clock, migrations, leased_receivers
            ) as store:
                yield store
            return
        path = prepare_data_dir(data_dir) / DATABASE_FILE
        _create_private_file(path)
        runner = Runner("ledger-writer")
        try:
            try:
                conn = await runner.call(_connect, str(path), False)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open the ledger {path}: {exc}") from exc
            db = Database(runner, conn, clock)
            try:
                await runner.call(_configure, conn)
                await runner.call(
                    functools.partial(apply_migrations, conn, migrations, now=db.now())
                )
                # from now on the writer's calls run on the loop (database.OnLoop)
                await runner.call(_on_loop, conn)
                db.on_loop = OnLoop(lock_wait_ms=BUSY_TIMEOUT_MS)
                async with AsyncExitStack() as readers:
                    # the click pre-check's own connection, then the pool's
                    reader = await readers.enter_async_context(_read_only(path))
                    pool = [
                        await readers.enter_async_context(_read_only(path)) for _ in range(READERS)
                    ]
                    yield cls(db, path, reader, location=str(path), readers=ReaderPool(pool))
            finally:
                db.close()
                try:
                    await runner.call(conn.close)
                except sqlite3.Error as exc:
                    raise StoreError(f"cannot close the ledger {path}: {exc}") from exc
        finally:
            runner.shutdown()

    @classmethod
    @asynccontextmanager
    async def _open_postgresql(
        cls,
        target: PgTarget,
        clock: Clock,
        migrations: Sequence[Migration],
        leased_receivers: int | None,
    ) -> AsyncIterator[Store]:
        """The writers' pool (``target.pool.writers`` connections, each on a thread of its
        own: the first migrates the schema before the others open), the click pre-check's
        read-only connection and the readers' pool (``target.pool.readers``, read-only),
        autocommit; closed in the reverse order. A host (``leased_receivers`` given) says in
        its log when the server has no room for its connections (gateway/store/budget.py).
        psycopg is imported here: a SQLite gateway never pays its ~0.2 s import, nor needs
        it installed."""
        psycopg = require_psycopg()
        errors = (psycopg.Error,)
        async with AsyncExitStack() as stack:
            runner, conn = await stack.enter_async_context(
                _pg_connection(target, "ledger-writer", read_only=False)
            )
            deadline = target.timeouts.call_deadline
            db = Database(runner, conn, clock, dialect=POSTGRESQL, errors=errors, deadline=deadline)
            try:
                await runner.call(
                    functools.partial(
                        apply_migrations,
                        conn,
                        migrations,
                        now=db.now(),
                        dialect=POSTGRESQL,
                        errors=errors,
                    )
                )
            except psycopg.Error as exc:  # the connection itself failed
                raise StoreError(f"could not migrate the ledger: {exc}") from exc
            more = [
                Lane(
                    *await stack.enter_async_context(
                        _pg_connection(target, f"ledger-writer-{n}", read_only=False)
                    )
                )
                for n in range(1, target.pool.writers)
            ]
            db.add_lanes(more)

            async def read_only(name: str) -> ReadOnlyDatabase:
                on, made = await stack.enter_async_context(
                    _pg_connection(target, name, read_only=True)
                )
                reader = ReadOnlyDatabase(
                    on, made, dialect=POSTGRESQL, errors=errors, deadline=deadline
                )
                stack.callback(reader.close)
                return reader

            reader = await read_only("ledger-reader")  # the click pre-check's own
            pool = [await read_only(f"ledger-reader-{n}") for n in range(target.pool.readers)]
            if leased_receivers is not None:
                room = await db.read(read_room, one_statement=True)
                problem = room_problem(
                    room,
                    target.pool,
                    leased_receivers=leased_receivers,
                    open_now=len(db.lanes) + 1 + len(pool),
                )
                if problem is not None:
                    log.warning("%s", problem)
            stack.callback(db.close)  # first of all at the end: later calls are refused
            yield cls(db, None, reader, location=str(target), readers=ReaderPool(pool))


def require_psycopg() -> ModuleType:
    """psycopg, which the ``[postgres]`` extra installs; its absence is a StoreError that says
    how to install it (a ledger on PostgreSQL is configured)."""
    try:
        import psycopg
    except ModuleNotFoundError:
        raise StoreError(
            "the ledger is on PostgreSQL, but psycopg is not installed: "
            "pip install 'agent-gateway[postgres]' (or [all])"
        ) from None
    return psycopg


@asynccontextmanager
async def _pg_connection(
    target: PgTarget, name: str, *, read_only: bool
) -> AsyncIterator[tuple[Runner, PgConn]]:
    import psycopg

    from gateway.store.postgresql import PgConn

    runner = Runner(name)
    try:
        try:
            conn = await runner.call(functools.partial(PgConn.connect, target, read_only=read_only))
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the ledger ({target}): {exc}") from exc
        try:
            yield runner, conn
        finally:
            try:
                await runner.call(conn.close)
            except psycopg.Error as exc:
                raise StoreError(f"cannot close the ledger ({target}): {exc}") from exc
    finally:
        runner.shutdown()


def _connect(database: str, uri: bool) -> sqlite3.Connection:
    """On the runner's thread: autocommit, rows by name. The writer's is used on the event
    loop's thread too (``OnLoop``), never by two threads at once."""
    conn = sqlite3.connect(database, uri=uri, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


@asynccontextmanager
async def _read_only(path: Path) -> AsyncIterator[ReadOnlyDatabase]:
    """The second connection: ``mode=ro`` (SQLite refuses any write through it)."""
    uri = f"file:{quote(str(path))}?mode=ro"
    runner = Runner("ledger-reader")
    try:
        try:
            conn = await runner.call(_connect, uri, True)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the ledger {path} to read: {exc}") from exc
        reader = ReadOnlyDatabase(runner, conn)
        try:
            try:
                await runner.call(conn.execute, f"PRAGMA busy_timeout = {READER_BUSY_TIMEOUT_MS}")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot configure the ledger's reader: {exc}") from exc
            yield reader
        finally:
            reader.close()
            try:
                await runner.call(conn.close)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot close the ledger's reader {path}: {exc}") from exc
    finally:
        runner.shutdown()


def _on_loop(conn: sqlite3.Connection) -> None:
    """The writer's connection made ready for calls on the event loop (``OnLoop``): it
    waits for no lock and runs no checkpoint at its commits."""
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot configure the ledger: {exc}") from exc


def _create_private_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does (its WAL and shm files copy the
    database file's mode)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        path.chmod(0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the ledger {path}: {exc}") from exc


def _configure(conn: sqlite3.Connection) -> None:
    """On the runner's thread: WAL, ``synchronous=NORMAL``, foreign keys, busy timeout."""
    try:
        row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if row is None or str(row[0]).lower() != "wal":
            raise StoreError("the ledger could not switch to WAL mode")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot configure the ledger: {exc}") from exc
