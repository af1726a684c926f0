"""Form drafts in the ledger (issue 19, design point 8): each person's answers in progress
to a card's form, where the next click may reach another host.

The payload is opaque here (platforms/form_drafts.py writes and reads it, secret answers
sealed). A draft is found only while its interaction is pending and before it expires, so
a decided, expired or orphaned request never shows an old draft; :meth:`purge` deletes those
rows. One host keeps its drafts in memory instead (platforms/form_drafts.py PendingForms).
"""

from __future__ import annotations

from datetime import datetime

from gateway.store.database import Conn, Database, fetch_one

__all__ = ["FormDraftLedger"]


class FormDraftLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(
        self, interaction_id: str, person: str, payload: str, *, expires_at: datetime
    ) -> None:
        """Keep ``person``'s draft (replacing theirs) until ``expires_at``."""
        until = self._db.stored_time(expires_at)

        def save(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO form_drafts (interaction_id, person, payload, expires_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (interaction_id, person)"
                " DO UPDATE SET payload = excluded.payload, expires_at = excluded.expires_at",
                (interaction_id, person, payload, until),
            )

        await self._db.write(save)

    async def load(self, interaction_id: str, person: str) -> str | None:
        """``person``'s draft, if the interaction is still pending and it has not expired."""
        now = self._db.now()

        def load(conn: Conn) -> str | None:
            row = conn.execute(
                "SELECT d.payload AS payload FROM form_drafts d"
                " JOIN interactions i ON i.id = d.interaction_id"
                " WHERE d.interaction_id = ? AND d.person = ? AND d.expires_at > ?"
                " AND i.state = 'pending'",
                (interaction_id, person, now),
            ).fetchone()
            return None if row is None else str(row["payload"])

        return await self._db.read(load)

    async def drop(self, interaction_id: str, person: str) -> None:
        """The person's answers were submitted (or abandoned): their draft is done."""
        await self._db.write(
            lambda conn: conn.execute(
                "DELETE FROM form_drafts WHERE interaction_id = ? AND person = ?",
                (interaction_id, person),
            )
        )

    async def purgeable(self) -> bool:
        """Whether :meth:`purge` would delete anything (a read: an idle host's periodic
        purge writes nothing when nothing is to go)."""
        now = self._db.now()
        row = await self._db.read(
            lambda conn: fetch_one(
                conn,
                "SELECT 1 AS found FROM form_drafts WHERE expires_at <= ? OR NOT EXISTS"
                " (SELECT 1 FROM interactions i WHERE i.id = form_drafts.interaction_id"
                " AND i.state = 'pending') LIMIT 1",
                (now,),
            ),
            one_statement=True,
        )
        return row is not None

    async def purge(self) -> int:
        """Delete every expired draft and every draft of a request no longer pending;
        returns how many."""
        now = self._db.now()

        def purge(conn: Conn) -> int:
            cursor = conn.execute(
                "DELETE FROM form_drafts WHERE expires_at <= ? OR NOT EXISTS (SELECT 1"
                " FROM interactions i WHERE i.id = form_drafts.interaction_id"
                " AND i.state = 'pending')",
                (now,),
            )
            return cursor.rowcount

        return await self._db.write(purge)
