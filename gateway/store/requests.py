"""Commands for another host's session, passed through the ledger (issue 19).

A command only the host that runs a session can carry out (``/stop`` interrupts its agent,
``/new`` ends it, ``/resume`` wakes its runner, ``/revoke`` ends its process or edits its
rules file) is written by the host that received it as a row of ``session_requests``
(migration 15, PostgreSQL only) naming who asked, when, and from which conversation. The
row's insert wakes the owner (``pg_notify('host_<owner>', 'request:<session id>')``, sent
at COMMIT); the owner takes each row once (:meth:`SessionRequests.take` deletes it,
only while it holds its host lease with its fence) and acts as on a command it received
itself. A row no owner took is dropped, never acted on later: by the reaper when the owner
stopped, or by the owner's own recovery when it comes back (:meth:`SessionRequests.drop`).

A request is only written while the owner holds its lease: for a host that stopped, the
receiver says so at once instead of leaving a row nobody takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gateway.domain import Actor, ConversationRef
from gateway.store.database import (
    Conn,
    Database,
    Row,
    conversation_from_row,
    conversation_params,
    fetch_all,
    fetch_one,
)
from gateway.store.dialect import FOR_UPDATE
from gateway.store.prompts import hold_queue

__all__ = ["RequestKind", "SessionRequest", "SessionRequests", "StopSent"]


class RequestKind(StrEnum):
    STOP = "stop"
    NEW = "new"
    RESUME = "resume"
    GRANTS = "grants"
    REVOKE = "revoke"


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRequest:
    id: int
    session_id: str
    kind: RequestKind
    args: str
    actor: Actor
    conversation: ConversationRef
    by_host: str
    requested_at: str


@dataclass(frozen=True, kw_only=True, slots=True)
class StopSent:
    """What a /stop for another host's session did in the ledger: ``held`` prompts held
    (those held before included); ``sent``: a request was written (a turn runs and its
    host holds its lease); ``owner_up``: the session's host holds its lease."""

    held: int
    sent: bool
    owner_up: bool


_COLUMNS = (
    "id, session_id, kind, args, actor_platform, actor_user_id, actor_display, platform,"
    " space, channel, thread, by_host, requested_at"
)
# the session's host holds its lease now (by the database's clock)
_OWNER_UP = (
    "SELECT 1 AS up FROM sessions s JOIN leases l ON l.name = 'host:' || s.host"
    " AND l.holder = s.host WHERE s.id = ? AND l.expires_at >= now()"
)
# taken only while ``host`` holds host:<host> with ``fence``: the lease row is locked (FOR
# SHARE), so a reaper's fence_out waits for this statement or it finds the fence moved
_TAKE = (
    "WITH held AS (SELECT 1 FROM leases WHERE name = ? AND holder = ? AND fence = ?"
    " AND expires_at >= now() FOR SHARE)"
    " DELETE FROM session_requests WHERE session_id = ? AND EXISTS (SELECT 1 FROM held)"
    " AND session_id IN (SELECT id FROM sessions WHERE host = ?)"
    f" RETURNING {_COLUMNS}"
)


class SessionRequests:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def stop(
        self,
        session_id: str,
        *,
        actor: Actor,
        conversation: ConversationRef,
        by_host: str,
        reason: str,
    ) -> StopSent:
        """/stop for another host's session, in one transaction: its queue held (as a local
        /stop holds it), and, if a turn runs and its host is up, the request to interrupt it."""

        def stop(conn: Conn) -> StopSent:
            conn.execute(f"SELECT id FROM sessions WHERE id = ?{FOR_UPDATE}", (session_id,))
            held = hold_queue(self._db, conn, session_id, reason)
            owner_up = fetch_one(conn, _OWNER_UP, (session_id,)) is not None
            running = fetch_one(
                conn,
                "SELECT id FROM turns WHERE session_id = ? AND ended_at IS NULL",
                (session_id,),
            )
            sent = owner_up and running is not None
            # one stop request at a time: a second /stop (from any host) before the owner
            # took the first is that one (the session's row lock orders them)
            waiting = fetch_one(
                conn,
                "SELECT id FROM session_requests WHERE session_id = ? AND kind = ?",
                (session_id, RequestKind.STOP.value),
            )
            if sent and waiting is None:
                self._insert(conn, session_id, RequestKind.STOP, "", actor, conversation, by_host)
            return StopSent(held=held, sent=sent, owner_up=owner_up)

        return await self._db.write(stop)

    async def send(
        self,
        session_id: str,
        kind: RequestKind,
        *,
        actor: Actor,
        conversation: ConversationRef,
        by_host: str,
        args: str = "",
        close_reason: str | None = None,
    ) -> bool:
        """Write a request for the session's host; False (nothing written) if that host
        does not hold its lease. ``close_reason``: the session is closed in the same
        transaction (/new), whether or not its host is up."""

        def send(conn: Conn) -> bool:
            if close_reason is not None:
                conn.execute(
                    "UPDATE sessions SET closed_at = coalesce(closed_at, ?),"
                    " close_reason = coalesce(close_reason, ?) WHERE id = ?",
                    (self._db.now(), close_reason, session_id),
                )
            if fetch_one(conn, _OWNER_UP, (session_id,)) is None:
                return False
            self._insert(conn, session_id, kind, args, actor, conversation, by_host)
            return True

        return await self._db.write(send)

    def _insert(
        self,
        conn: Conn,
        session_id: str,
        kind: RequestKind,
        args: str,
        actor: Actor,
        conversation: ConversationRef,
        by_host: str,
    ) -> None:
        conn.execute(
            "INSERT INTO session_requests (session_id, kind, args, actor_platform,"
            " actor_user_id, actor_display, platform, space, channel, thread, by_host,"
            " requested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                kind.value,
                args,
                actor.platform,
                actor.user_id,
                actor.display,
                *conversation_params(conversation),
                by_host,
                self._db.now(),
            ),
        )
        self._db.audit(
            conn,
            "hosts.request_sent",
            actor=actor,
            session_id=session_id,
            details={"kind": kind.value, "by": by_host},
        )

    async def owner_up(self, session_id: str) -> bool:
        """The host that runs the session holds its lease now (a shared ledger only)."""
        found = await self._db.read(
            lambda conn: fetch_one(conn, _OWNER_UP, (session_id,)), one_statement=True
        )
        return found is not None

    async def take(self, session_id: str, *, host: str, fence: int) -> list[SessionRequest]:
        """The session's requests, deleted as they are handed over (each to one taker,
        once), oldest first; none unless ``host`` runs the session and holds its lease with
        ``fence``."""

        def take(conn: Conn) -> list[SessionRequest]:
            rows = fetch_all(conn, _TAKE, (f"host:{host}", host, fence, session_id, host))
            taken = sorted((_request(row) for row in rows), key=lambda request: request.id)
            for request in taken:
                self._db.audit(
                    conn,
                    "hosts.request_taken",
                    actor=request.actor,
                    session_id=session_id,
                    details={
                        "kind": request.kind.value,
                        "by": request.by_host,
                        "requested_at": request.requested_at,
                        "taken_by": host,
                    },
                )
            return taken

        return await self._db.write(take)

    async def waiting(self, *, host: str) -> list[str]:
        """The sessions of ``host`` with a request waiting (found again when a wake-up was
        lost)."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                "SELECT DISTINCT r.session_id AS session_id FROM session_requests r"
                " JOIN sessions s ON s.id = r.session_id WHERE s.host = ?"
                " ORDER BY r.session_id",
                (host,),
            )
        )
        return [str(row["session_id"]) for row in rows]

    async def drop(self, *, host: str, by: str, why: str) -> list[SessionRequest]:
        """Every request left for ``host``'s sessions, deleted unacted (its host stopped, or
        starts over): each audited ``hosts.request_dropped``."""

        def drop(conn: Conn) -> list[SessionRequest]:
            rows = fetch_all(
                conn,
                "DELETE FROM session_requests WHERE session_id IN"
                f" (SELECT id FROM sessions WHERE host = ?) RETURNING {_COLUMNS}",
                (host,),
            )
            dropped = sorted((_request(row) for row in rows), key=lambda r: r.id)
            for request in dropped:
                self._db.audit(
                    conn,
                    "hosts.request_dropped",
                    actor=request.actor,
                    session_id=request.session_id,
                    details={"kind": request.kind.value, "by": by, "why": why},
                )
            return dropped

        return await self._db.write(drop)


def _request(row: Row) -> SessionRequest:
    return SessionRequest(
        id=int(row["id"]),
        session_id=str(row["session_id"]),
        kind=RequestKind(row["kind"]),
        args=str(row["args"]),
        actor=Actor(
            platform=row["actor_platform"],
            user_id=row["actor_user_id"],
            display=row["actor_display"],
        ),
        conversation=conversation_from_row(row),
        by_host=str(row["by_host"]),
        requested_at=str(row["requested_at"]),
    )
