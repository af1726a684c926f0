"""Sessions, their runtime epochs, and the conversations bound to them."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping

from gateway.domain import Actor, AgentKind, ConversationRef
from gateway.errors import StoreError
from gateway.interactions.machine import new_short_id
from gateway.session_record import SessionRecord
from gateway.store.database import (
    Conn,
    Database,
    Row,
    conversation_from_row,
    conversation_params,
    fetch_all,
    fetch_one,
    parse_optional_time,
    parse_time,
)
from gateway.store.dialect import FOR_UPDATE
from gateway.store.records import EpochRecord

__all__ = [
    "ON_HOST",
    "SESSION_COLUMNS",
    "SessionLedger",
    "bindings_of",
    "epoch_of",
    "session_by_id",
    "session_from_row",
    "session_of",
]

SESSION_COLUMNS = (
    "id, project, agent_kind, native_session_id, created_at, current_epoch, closed_at,"
    " close_reason, queue_paused, queue_pause_reason, initiator_platform, initiator_user_id,"
    " initiator_display, host, name"
)
_SESSION_NAMES = tuple(name.strip() for name in SESSION_COLUMNS.split(","))
# the same, of a join whose sessions are ``s``: read by session_from_row as they are
SESSION_COLUMNS_OF_S = ", ".join(f"s.{name}" for name in _SESSION_NAMES)
# a host's rows, or every row where the host asked for is None (a single-host ledger): the
# host is given twice
ON_HOST = "(CAST(? AS TEXT) IS NULL OR host = ?)"
_EPOCH_COLUMNS = (
    "session_id, epoch, pid, pgid, process_start_time, started_at, ended_at,"
    " exit_description, agent_version, policy_json"
)
_EPOCH_NAMES = tuple(name.strip() for name in _EPOCH_COLUMNS.split(","))


class SessionLedger:
    """``store.sessions``: sessions, runtime epochs and conversation bindings."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # --- sessions ----------------------------------------------------------------------

    async def create(
        self,
        *,
        project: str,
        agent_kind: AgentKind,
        initiator: Actor | None = None,
        host: str | None = None,
    ) -> SessionRecord:
        """A new session with no runtime yet (``current_epoch`` 0). ``initiator``: the person
        who started it, the default approver of its interactions; ``host``: the host that
        runs it, for good (None: this machine, on a ledger no other host shares)."""

        def create(conn: Conn) -> SessionRecord:
            return self._insert(conn, project, agent_kind, initiator, host)

        return await self._db.write(create)

    def _insert(
        self,
        conn: Conn,
        project: str,
        agent_kind: AgentKind,
        initiator: Actor | None,
        host: str | None,
    ) -> SessionRecord:
        session_id = new_short_id()
        who = (
            (None, None, None)
            if initiator is None
            else (initiator.platform, initiator.user_id, initiator.display)
        )
        conn.execute(
            "INSERT INTO sessions (id, project, agent_kind, created_at, initiator_platform,"
            " initiator_user_id, initiator_display, host) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, project, agent_kind.value, self._db.now(), *who, host),
        )
        return _session(conn, session_id)

    async def create_routed(
        self,
        key: ConversationRef,
        *,
        replacing: str | None,
        project: str,
        agent_kind: AgentKind,
        initiator: Actor | None = None,
        host: str | None = None,
        shown_in: ConversationRef | None = None,
    ) -> tuple[SessionRecord, bool]:
        """A new session routed by ``key``, made only if the route still names ``replacing``
        (None: no session yet; else the closed or moved one the caller read): a
        compare-and-set on the route, in one transaction with the session's row.

        Several hosts may receive a conversation's first message at once (issue 19), and
        the routing lock is per process: the ledger is where one of them wins. Returns
        ``(session, True)`` for the one made here, ``(the winner's session, False)`` when
        another writer routed ``key`` first (nothing of this call is kept then).

        On PostgreSQL a second INSERT of one route waits for the first's COMMIT, then meets
        the conflict, and the ``DO UPDATE ... WHERE`` re-reads the committed row: the
        loser's route is never written. ``shown_in``: the conversation the made session is
        bound to, in the same transaction (a route without its binding would take messages
        for a session shown nowhere).
        """

        def route_if_unchanged(conn: Conn) -> tuple[SessionRecord, bool]:
            made = self._insert(conn, project, agent_kind, initiator, host)
            cursor = conn.execute(
                "INSERT INTO routes (platform, space, channel, thread, session_id, routed_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (platform, space, channel, thread)"
                " DO UPDATE SET session_id = excluded.session_id, routed_at = excluded.routed_at"
                " WHERE routes.session_id = ?",
                (*conversation_params(key), made.id, self._db.now(), replacing),
            )
            if cursor.rowcount == 1:
                if shown_in is not None:  # shown where it was asked for, in the same commit
                    self._bind(conn, shown_in, made.id)
                return made, True
            # another writer routed it first: the row made here goes with this transaction
            conn.execute("DELETE FROM sessions WHERE id = ?", (made.id,))
            row = fetch_one(
                conn,
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = (SELECT session_id"
                " FROM routes WHERE platform = ? AND space = ? AND channel = ? AND thread = ?)",
                conversation_params(key),
            )
            assert row is not None  # the route that refused this one names a session
            return session_from_row(row), False

        return await self._db.write(route_if_unchanged)

    async def get(self, session_id: str) -> SessionRecord | None:
        return await self._db.read(lambda conn: session_by_id(conn, session_id), one_statement=True)

    async def list_sessions(
        self,
        *,
        project: str | None = None,
        include_closed: bool = False,
        host: str | None = None,
    ) -> list[SessionRecord]:
        """Sessions, oldest first; closed ones only when asked; only ``host``'s if given."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                f"SELECT {SESSION_COLUMNS} FROM sessions"
                " WHERE (CAST(? AS TEXT) IS NULL OR project = ?) AND (? OR closed_at IS NULL)"
                f" AND {ON_HOST} ORDER BY created_at, id",
                (project, project, include_closed, host, host),
            ),
            one_statement=True,
        )
        return [session_from_row(row) for row in rows]

    async def adopt(self, host: str, projects: Collection[str]) -> int:
        """Give ``host`` the sessions of ``projects`` that name no host: those a single
        gateway made on this PostgreSQL ledger before it had hosts (its recovery must find
        them). Returns how many."""
        if not projects:
            return 0
        marks = ", ".join("?" for _ in projects)

        def adopt(conn: Conn) -> int:
            cursor = conn.execute(
                f"UPDATE sessions SET host = ? WHERE host IS NULL AND project IN ({marks})",
                (host, *projects),
            )
            return cursor.rowcount

        return await self._db.write(adopt)

    async def set_native_session_id(self, session_id: str, native_session_id: str) -> None:
        """Record the agent's own session id, what a later resume passes back."""
        await self._db.write(
            lambda conn: _require_update(
                conn,
                "UPDATE sessions SET native_session_id = ? WHERE id = ?",
                (native_session_id, session_id),
                f"no session {session_id}",
            )
        )

    async def set_name(self, session_id: str, name: str) -> None:
        """Name the session (/name): checked by the caller (gateway/sessions/session_names.py)."""
        await self._db.write(
            lambda conn: _require_update(
                conn,
                "UPDATE sessions SET name = ? WHERE id = ?",
                (name, session_id),
                f"no session {session_id}",
            )
        )

    async def reopen(self, session_id: str) -> SessionRecord:
        """Take a closed session up again (/switch): it takes prompts, and its agent's next
        start resumes its native session."""

        def reopen(conn: Conn) -> SessionRecord:
            _require_update(
                conn,
                "UPDATE sessions SET closed_at = NULL, close_reason = NULL WHERE id = ?",
                (session_id,),
                f"no session {session_id}",
            )
            return _session(conn, session_id)

        return await self._db.write(reopen)

    async def close(self, session_id: str, *, reason: str) -> SessionRecord:
        """Mark the session closed (for example by /new); idempotent, the first reason stays."""

        def close(conn: Conn) -> SessionRecord:
            _require_update(
                conn,
                "UPDATE sessions SET closed_at = coalesce(closed_at, ?),"
                " close_reason = coalesce(close_reason, ?) WHERE id = ?",
                (self._db.now(), reason, session_id),
                f"no session {session_id}",
            )
            return _session(conn, session_id)

        return await self._db.write(close)

    # --- runtime epochs ----------------------------------------------------------------

    async def begin_epoch(
        self,
        session_id: str,
        *,
        pid: int | None,
        pgid: int | None,
        process_start_time: int | None,
        agent_version: str | None = None,
    ) -> int:
        """Record a new runtime instance of the session; return its epoch number (1, 2, ...).

        Refused while the session's previous epoch has not ended: two live runtimes of one
        session would answer each other's requests.
        """

        def begin_epoch(conn: Conn) -> int:
            session = _session(conn, session_id)
            live = fetch_one(
                conn,
                "SELECT epoch FROM runtime_epochs WHERE session_id = ? AND ended_at IS NULL",
                (session_id,),
            )
            if live is not None:
                raise StoreError(
                    f"session {session_id} still has live epoch {live['epoch']}; end it first"
                )
            epoch = session.current_epoch + 1
            conn.execute(
                "INSERT INTO runtime_epochs (session_id, epoch, pid, pgid, process_start_time,"
                " started_at, agent_version) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, epoch, pid, pgid, process_start_time, self._db.now(), agent_version),
            )
            conn.execute("UPDATE sessions SET current_epoch = ? WHERE id = ?", (epoch, session_id))
            return epoch

        return await self._db.write(begin_epoch)

    async def set_policy(
        self,
        session_id: str,
        epoch: int,
        policy: Mapping[str, str],
        *,
        agent_version: str | None = None,
    ) -> None:
        """Record the policy actually in force (and the agent's version, once it is known)."""
        await self._db.write(
            lambda conn: _require_update(
                conn,
                "UPDATE runtime_epochs SET policy_json = ?,"
                " agent_version = coalesce(?, agent_version)"
                " WHERE session_id = ? AND epoch = ?",
                (json.dumps(dict(policy), sort_keys=True), agent_version, session_id, epoch),
                f"no epoch {epoch} of session {session_id}",
            )
        )

    async def end_epoch(self, session_id: str, epoch: int, *, exit_description: str) -> EpochRecord:
        """Mark the runtime ended; idempotent (the first description stays).

        Its running turns end as interrupted and their in-flight prompts are marked
        interrupted: they are never resent on their own. Its open interactions are
        :meth:`InteractionLedger.orphan_epoch`'s business.
        """
        now = self._db.now()

        def end_epoch(conn: Conn) -> EpochRecord:
            epoch_row = _epoch(conn, session_id, epoch, lock=True)
            if epoch_row.ended_at is not None:
                return epoch_row
            conn.execute(
                "UPDATE runtime_epochs SET ended_at = ?, exit_description = ?"
                " WHERE session_id = ? AND epoch = ?",
                (now, exit_description, session_id, epoch),
            )
            conn.execute(
                "UPDATE prompts SET state = 'interrupted', updated_at = ? WHERE state = 'in_flight'"
                " AND id IN (SELECT prompt_id FROM turns WHERE session_id = ? AND epoch = ?"
                " AND ended_at IS NULL)",
                (now, session_id, epoch),
            )
            conn.execute(
                "UPDATE turns SET status = 'interrupted', ended_at = ?, error = ?"
                " WHERE session_id = ? AND epoch = ? AND ended_at IS NULL",
                (now, f"runtime ended: {exit_description}", session_id, epoch),
            )
            return _epoch(conn, session_id, epoch)

        return await self._db.write(end_epoch)

    async def get_epoch(self, session_id: str, epoch: int) -> EpochRecord | None:
        return await self._db.read(
            lambda conn: epoch_of(conn, session_id, epoch), one_statement=True
        )

    async def live_epochs(self, *, host: str | None = None) -> list[EpochRecord]:
        """Epochs never ended: after a crash, the processes a restart must find and end.
        ``host``: only the epochs of that host's sessions (the other hosts' agents are
        theirs to end); None: every one (a ledger no other host shares)."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                f"SELECT {_EPOCH_COLUMNS} FROM runtime_epochs WHERE ended_at IS NULL"
                f" AND session_id IN (SELECT id FROM sessions WHERE {ON_HOST})"
                " ORDER BY started_at, session_id",
                (host, host),
            ),
            one_statement=True,
        )
        return [_epoch_from_row(row) for row in rows]

    # --- conversations -----------------------------------------------------------------

    async def bind(self, conversation: ConversationRef, session_id: str) -> None:
        """Make ``session_id`` the conversation's current session (replacing any other)."""

        def bind(conn: Conn) -> None:
            _session(conn, session_id)
            self._bind(conn, conversation, session_id)

        await self._db.write(bind)

    def _bind(self, conn: Conn, conversation: ConversationRef, session_id: str) -> None:
        conn.execute(
            "INSERT INTO conversations (platform, space, channel, thread, session_id,"
            " bound_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (platform, space, channel, thread)"
            " DO UPDATE SET session_id = excluded.session_id, bound_at = excluded.bound_at",
            (*conversation_params(conversation), session_id, self._db.now()),
        )

    async def unbind(self, conversation: ConversationRef) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "DELETE FROM conversations"
                " WHERE platform = ? AND space = ? AND channel = ? AND thread = ?",
                conversation_params(conversation),
            )
        )

    async def lookup(self, conversation: ConversationRef) -> SessionRecord | None:
        """The conversation's current session, if it has one."""
        return await self._db.read(lambda conn: session_of(conn, conversation), one_statement=True)

    # --- routes ------------------------------------------------------------------------

    async def route(self, key: ConversationRef, session_id: str) -> None:
        """Make ``session_id`` the session found by ``key`` (gateway/sessions/routing.py route_key),
        replacing any other. A route is not a binding: nothing is shown there."""

        def route(conn: Conn) -> None:
            _session(conn, session_id)
            conn.execute(
                "INSERT INTO routes (platform, space, channel, thread, session_id, routed_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (platform, space, channel, thread)"
                " DO UPDATE SET session_id = excluded.session_id, routed_at = excluded.routed_at",
                (*conversation_params(key), session_id, self._db.now()),
            )

        await self._db.write(route)

    async def lookup_route(self, key: ConversationRef) -> SessionRecord | None:
        """The session routed by ``key``, if any (it may be closed)."""
        row = await self._db.read(
            lambda conn: fetch_one(
                conn,
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = (SELECT session_id"
                " FROM routes WHERE platform = ? AND space = ? AND channel = ? AND thread = ?)",
                conversation_params(key),
            ),
            one_statement=True,
        )
        return None if row is None else session_from_row(row)

    async def list_bindings(self, session_id: str) -> list[ConversationRef]:
        """Every conversation that shows the session, in the order they were bound."""
        return await self._db.read(lambda conn: bindings_of(conn, session_id), one_statement=True)


def session_by_id(conn: Conn, session_id: str) -> SessionRecord | None:
    """``SessionLedger.get`` inside a caller's read or transaction."""
    row = fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
    return _session_or_none(row)


def session_of(conn: Conn, conversation: ConversationRef) -> SessionRecord | None:
    """``SessionLedger.lookup`` inside a caller's read or transaction."""
    row = fetch_one(
        conn,
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = (SELECT session_id"
        " FROM conversations"
        " WHERE platform = ? AND space = ? AND channel = ? AND thread = ?)",
        conversation_params(conversation),
    )
    return _session_or_none(row)


# a request's session (``n``) and runtime epoch (``e``) in the request's row, named apart
# from its own columns: read by session_and_epoch_from_row
SESSION_AND_EPOCH_AS = ", ".join(
    [f"n.{name} AS session__{name}" for name in _SESSION_NAMES]
    + [f"e.{name} AS epoch__{name}" for name in _EPOCH_NAMES]
)


def session_and_epoch_from_row(row: Row) -> tuple[SessionRecord | None, EpochRecord | None]:
    """The session and the epoch of a row with ``SESSION_AND_EPOCH_AS`` (each None where its
    join found no row)."""
    session = None
    if row["session__id"] is not None:
        session = session_from_row({name: row[f"session__{name}"] for name in _SESSION_NAMES})
    epoch = None
    if row["epoch__epoch"] is not None:
        epoch = _epoch_from_row({name: row[f"epoch__{name}"] for name in _EPOCH_NAMES})
    return session, epoch


def _session_or_none(row: Row | None) -> SessionRecord | None:
    return None if row is None else session_from_row(row)


def epoch_of(conn: Conn, session_id: str, epoch: int) -> EpochRecord | None:
    """``SessionLedger.get_epoch`` inside a caller's read or transaction."""
    row = fetch_one(
        conn,
        f"SELECT {_EPOCH_COLUMNS} FROM runtime_epochs WHERE session_id = ? AND epoch = ?",
        (session_id, epoch),
    )
    return None if row is None else _epoch_from_row(row)


def bindings_of(conn: Conn, session_id: str) -> list[ConversationRef]:
    """``SessionLedger.list_bindings`` inside a caller's read or transaction."""
    return bindings_of_sent(conn, session_id)()


def bindings_of_sent(conn: Conn, session_id: str) -> Callable[[], list[ConversationRef]]:
    """``bindings_of``'s SELECT, sent; what it returns reads the answer (on PostgreSQL a
    caller sends its other statements before it reads: one wait for all)."""
    cursor = conn.execute(
        "SELECT platform, space, channel, thread FROM conversations"
        " WHERE session_id = ? ORDER BY bound_at, platform, space, channel, thread",
        (session_id,),
    )
    return lambda: [conversation_from_row(row) for row in cursor.fetchall()]


def _require_update(conn: Conn, sql: str, params: tuple[object, ...], missing: str) -> None:
    cursor = conn.execute(sql, params)
    if cursor.rowcount == 0:
        raise StoreError(missing)


def _session(conn: Conn, session_id: str) -> SessionRecord:
    row = fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
    if row is None:
        raise StoreError(f"no session {session_id}")
    return session_from_row(row)


def _epoch(conn: Conn, session_id: str, epoch: int, *, lock: bool = False) -> EpochRecord:
    suffix = FOR_UPDATE if lock else ""
    row = fetch_one(
        conn,
        f"SELECT {_EPOCH_COLUMNS} FROM runtime_epochs WHERE session_id = ? AND epoch = ?{suffix}",
        (session_id, epoch),
    )
    if row is None:
        raise StoreError(f"no epoch {epoch} of session {session_id}")
    return _epoch_from_row(row)


def session_from_row(row: Row) -> SessionRecord:
    return SessionRecord(
        id=row["id"],
        project=row["project"],
        agent_kind=AgentKind(row["agent_kind"]),
        native_session_id=row["native_session_id"],
        created_at=parse_time(row["created_at"]),
        current_epoch=row["current_epoch"],
        closed_at=parse_optional_time(row["closed_at"]),
        close_reason=row["close_reason"],
        queue_paused=bool(row["queue_paused"]),
        queue_pause_reason=row["queue_pause_reason"],
        initiator=None
        if row["initiator_platform"] is None
        else Actor(
            platform=row["initiator_platform"],
            user_id=row["initiator_user_id"],
            display=row["initiator_display"] or "",
        ),
        host=row["host"],
        name=row["name"],
    )


def _epoch_from_row(row: Row) -> EpochRecord:
    return EpochRecord(
        session_id=row["session_id"],
        epoch=row["epoch"],
        pid=row["pid"],
        pgid=row["pgid"],
        process_start_time=row["process_start_time"],
        started_at=parse_time(row["started_at"]),
        ended_at=parse_optional_time(row["ended_at"]),
        exit_description=row["exit_description"],
        agent_version=row["agent_version"],
        policy=json.loads(row["policy_json"]),
    )
