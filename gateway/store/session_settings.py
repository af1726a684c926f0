"""The settings a person chose for one session (issue 31): ``/model``'s choice.

Kept apart from :class:`~gateway.session_record.SessionRecord`: what every reader of a
session needs is there; a setting is read where a turn starts and where ``/status`` shows
it. The choice is a column of ``sessions`` (migration 17), so it survives a restart.
"""

from __future__ import annotations

from gateway.errors import StoreError
from gateway.store.database import Conn, Database, fetch_one

__all__ = ["SessionSettings"]


class SessionSettings:
    """``store.settings``: what a person chose for a session."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def model(self, session_id: str) -> str | None:
        """The model chosen with ``/model``; None: none chosen (the project's own)."""

        def read(conn: Conn) -> str | None:
            row = fetch_one(conn, "SELECT model FROM sessions WHERE id = ?", (session_id,))
            return None if row is None or row["model"] is None else str(row["model"])

        return await self._db.read(read)

    async def set_model(self, session_id: str, model: str | None) -> None:
        """Choose ``model`` for the session's next turns (None: back to the project's)."""

        def write(conn: Conn) -> None:
            cursor = conn.execute("UPDATE sessions SET model = ? WHERE id = ?", (model, session_id))
            if cursor.rowcount == 0:
                raise StoreError(f"no session {session_id}")

        await self._db.write(write)
