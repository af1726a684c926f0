"""The audit log: rejected tokens, ignored races, grants, decisions, refused prompts.

Details are JSON and must never hold a secret: callers pass ids and outcomes, not the text
of answers or tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway.domain import Actor
from gateway.store.database import Database, fetch_all, parse_time
from gateway.store.records import AuditEntry

__all__ = ["AuditLog"]


class AuditLog:
    """``store.audit``: append-only."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self,
        event: str,
        *,
        actor: Actor | str | None = None,
        session_id: str | None = None,
        interaction_id: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one entry, for example ``record("token.rejected", actor=a, details=...)``."""
        await self._db.write(
            lambda conn: self._db.audit(
                conn,
                event,
                actor=actor,
                session_id=session_id,
                interaction_id=interaction_id,
                details=details,
            )
        )

    async def entries(
        self,
        *,
        event: str | None = None,
        session_id: str | None = None,
        interaction_id: str | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """The newest entries first, filtered by any of event, session, interaction."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                "SELECT id, at, actor, event, session_id, interaction_id, details_json"
                " FROM audit WHERE (CAST(? AS TEXT) IS NULL OR event = ?)"
                " AND (CAST(? AS TEXT) IS NULL OR session_id = ?)"
                " AND (CAST(? AS TEXT) IS NULL OR interaction_id = ?) ORDER BY id DESC LIMIT ?",
                (event, event, session_id, session_id, interaction_id, interaction_id, limit),
            ),
            one_statement=True,
        )
        return [
            AuditEntry(
                id=row["id"],
                at=parse_time(row["at"]),
                actor=row["actor"],
                event=row["event"],
                session_id=row["session_id"],
                interaction_id=row["interaction_id"],
                details=json.loads(row["details_json"]),
            )
            for row in rows
        ]
