"""Turns: one prompt, the agent's work on it, and how it ended."""

from __future__ import annotations

from gateway.domain import TurnStatus
from gateway.errors import EpochEnded, StoreError
from gateway.store.database import Conn, Database, Row, fetch_one, parse_optional_time, parse_time
from gateway.store.dialect import Backend
from gateway.store.records import TurnRecord

__all__ = ["TURN_COLUMNS", "TURN_TEXT_CHANNEL", "TurnLedger", "tell_turn_changed", "turn_from_row"]

# A shared ledger's NOTIFY channel every host listens on (gateway/store/wakeups.py): a turn's
# timeline was saved, or it started or ended. The payload is the session's id only (a
# payload is capped at 8,000 bytes: never the text, which each console reads from the ledger).
TURN_TEXT_CHANNEL = "turn_text"


def tell_turn_changed(db: Database, conn: Conn, *, turn_id: int) -> None:
    """PostgreSQL: NOTIFY every host, at this transaction's COMMIT, that the session of
    ``turn_id`` has a turn whose text or state moved (nothing on SQLite: one host, whose
    console the runner tells itself)."""
    if db.dialect.backend is Backend.POSTGRESQL:
        conn.execute(
            "SELECT pg_notify(?, session_id) FROM turns WHERE id = ?",
            (TURN_TEXT_CHANNEL, turn_id),
        )


TURN_COLUMNS = (
    "id, session_id, epoch, prompt_id, native_turn_id, status, error, started_at, ended_at"
)


class TurnLedger:
    """``store.turns``: at most one running turn per session."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def start(
        self,
        session_id: str,
        epoch: int,
        *,
        prompt_id: int | None = None,
        native_turn_id: str | None = None,
    ) -> TurnRecord:
        """Record a turn as running in a live epoch; refused while another turn runs."""

        def start(conn: Conn) -> TurnRecord:
            # both reads sent before either is read (one wait on PostgreSQL)
            epoch_read = conn.execute(
                "SELECT ended_at FROM runtime_epochs WHERE session_id = ? AND epoch = ?",
                (session_id, epoch),
            )
            running_read = conn.execute(
                "SELECT id FROM turns WHERE session_id = ? AND ended_at IS NULL",
                (session_id,),
            )
            live, running = epoch_read.fetchone(), running_read.fetchone()
            if live is None or live["ended_at"] is not None:
                raise EpochEnded(f"epoch {epoch} of session {session_id} is not live")
            if running is not None:
                raise StoreError(f"session {session_id} already runs turn {running['id']}")
            inserted = fetch_one(
                conn,
                "INSERT INTO turns (session_id, epoch, prompt_id, native_turn_id, started_at)"
                f" VALUES (?, ?, ?, ?, ?) RETURNING {TURN_COLUMNS}",
                (session_id, epoch, prompt_id, native_turn_id, self._db.now()),
            )
            assert inserted is not None
            tell_turn_changed(self._db, conn, turn_id=inserted["id"])
            return turn_from_row(inserted)

        return await self._db.write(start)

    async def set_native_id(self, turn_id: int, native_turn_id: str) -> None:

        def set_native_id(conn: Conn) -> None:
            cursor = conn.execute(
                "UPDATE turns SET native_turn_id = ? WHERE id = ?", (native_turn_id, turn_id)
            )
            if cursor.rowcount == 0:
                raise StoreError(f"no turn {turn_id}")

        await self._db.write(set_native_id, one_statement=True)

    async def end(
        self, turn_id: int, status: TurnStatus, *, error: str | None = None
    ) -> TurnRecord:
        """Record how the turn ended. A turn already ended keeps its first ending (a late
        completion after the runtime died is audited, not applied)."""

        def end(conn: Conn) -> TurnRecord:
            # the running turn ended, and returned as written (one wait on PostgreSQL)
            ended = fetch_one(
                conn,
                "UPDATE turns SET status = ?, error = ?, ended_at = ?"
                f" WHERE id = ? AND ended_at IS NULL RETURNING {TURN_COLUMNS}",
                (status.value, error, self._db.now(), turn_id),
            )
            if ended is not None:
                tell_turn_changed(self._db, conn, turn_id=turn_id)
                return turn_from_row(ended)
            turn = _turn(conn, turn_id)  # none, or one that ended before
            self._db.audit(
                conn,
                "turn.late_end_ignored",
                session_id=turn.session_id,
                details={"turn_id": turn_id, "status": status.value, "kept": turn.status},
            )
            return turn

        return await self._db.write(end)

    async def get(self, turn_id: int) -> TurnRecord | None:
        row = await self._db.read(
            lambda conn: fetch_one(
                conn, f"SELECT {TURN_COLUMNS} FROM turns WHERE id = ?", (turn_id,)
            ),
            one_statement=True,
        )
        return None if row is None else turn_from_row(row)

    async def running(self, session_id: str) -> TurnRecord | None:
        """The session's running turn, if any."""
        row = await self._db.read(
            lambda conn: fetch_one(
                conn,
                f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? AND ended_at IS NULL",
                (session_id,),
            ),
            one_statement=True,
        )
        return None if row is None else turn_from_row(row)

    async def latest(self, session_id: str) -> TurnRecord | None:
        """The session's most recent turn, running or ended (how its last turn went)."""
        row = await self._db.read(
            lambda conn: fetch_one(
                conn,
                f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                (session_id,),
            ),
            one_statement=True,
        )
        return None if row is None else turn_from_row(row)


def _turn(conn: Conn, turn_id: int) -> TurnRecord:
    row = fetch_one(conn, f"SELECT {TURN_COLUMNS} FROM turns WHERE id = ?", (turn_id,))
    if row is None:
        raise StoreError(f"no turn {turn_id}")
    return turn_from_row(row)


def turn_from_row(row: Row) -> TurnRecord:
    return TurnRecord(
        id=row["id"],
        session_id=row["session_id"],
        epoch=row["epoch"],
        prompt_id=row["prompt_id"],
        native_turn_id=row["native_turn_id"],
        status=None if row["status"] is None else TurnStatus(row["status"]),
        error=row["error"],
        started_at=parse_time(row["started_at"]),
        ended_at=parse_optional_time(row["ended_at"]),
    )
