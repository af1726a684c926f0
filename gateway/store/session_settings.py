"""The settings a person chose for one session (issue 31): ``/model`` and ``/mode``.

Kept apart from :class:`~gateway.session_record.SessionRecord`: what every reader of a
session needs is there; a setting is read where a turn starts and where ``/status`` shows
it. The choices are columns of ``sessions`` (migration 17), so they survive a restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import StoreError
from gateway.store.database import Conn, Database, fetch_one

__all__ = ["ChosenSettings", "SessionSettings"]

# the columns a person may set, by the name a setting has everywhere else
_COLUMNS = ("model", "approval_policy", "sandbox", "permission_mode")


@dataclass(frozen=True, kw_only=True, slots=True)
class ChosenSettings:
    """What was chosen for a session; None: nothing chosen (the project's own)."""

    model: str | None = None
    approval_policy: str | None = None
    sandbox: str | None = None
    permission_mode: str | None = None  # Claude Code's


class SessionSettings:
    """``store.settings``: what a person chose for a session."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def of(self, session_id: str) -> ChosenSettings:
        def read(conn: Conn) -> ChosenSettings:
            row = fetch_one(
                conn,
                "SELECT model, approval_policy, sandbox, permission_mode FROM sessions"
                " WHERE id = ?",
                (session_id,),
            )
            if row is None:
                return ChosenSettings()
            return ChosenSettings(
                model=row["model"],
                approval_policy=row["approval_policy"],
                sandbox=row["sandbox"],
                permission_mode=row["permission_mode"],
            )

        return await self._db.read(read)

    async def model(self, session_id: str) -> str | None:
        """The model chosen with ``/model``; None: none chosen (the project's own)."""
        return (await self.of(session_id)).model

    async def choose(self, session_id: str, setting: str, value: str | None) -> None:
        """Record ``value`` for ``setting`` (one of ``_COLUMNS``)
        from the session's next turn on; None: back to the project's."""
        if setting not in _COLUMNS:
            raise StoreError(f"no setting {setting!r}")

        def write(conn: Conn) -> None:
            sql = f"UPDATE sessions SET {setting} = ? WHERE id = ?"  # one of _COLUMNS
            cursor = conn.execute(sql, (value, session_id))
            if cursor.rowcount == 0:
                raise StoreError(f"no session {session_id}")

        await self._db.write(write)

    async def set_model(self, session_id: str, model: str | None) -> None:
        await self.choose(session_id, "model", model)
