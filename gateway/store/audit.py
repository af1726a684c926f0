"""The audit log: rejected tokens, ignored races, grants, decisions, refused prompts.

Details are JSON and must never hold a secret: callers pass ids and outcomes, not the text
of answers or tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gateway.domain import Actor
from gateway.store.database import Conn, Database, Row, fetch_all, parse_time
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

    async def newest_in_force(self, hosts: Iterable[str]) -> dict[str, AuditEntry]:
        """The newest ``config.in_force`` entry of each of ``hosts`` (``details.host``),
        however many other entries came since: one indexed look each (the partial index
        ``audit_config_in_force``, migration 31), in one read. A host with none is left out."""
        wanted = sorted(set(hosts))

        def read(conn: Conn) -> dict[str, AuditEntry]:
            sent = [(host, conn.execute(f"{_NEWEST_IN_FORCE} LIMIT 1", (host,))) for host in wanted]
            return {
                host: _entry_from_row(row)
                for host, cursor in sent
                if (row := cursor.fetchone()) is not None
            }

        return await self._db.read(read)

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
        return [_entry_from_row(row) for row in rows]


CONFIG_IN_FORCE = "config.in_force"  # audited: the hash of the config a host runs
# the event spelled as ``audit_config_in_force`` spells it (a bound one would not use it)
_NEWEST_IN_FORCE = (
    "SELECT a.id, a.at, a.actor, a.event, a.session_id, a.interaction_id, a.details_json"
    f" FROM audit a WHERE a.event = '{CONFIG_IN_FORCE}'"
    " AND json_extract(a.details_json, '$.host') = ? ORDER BY a.id DESC"
)


def _entry_from_row(row: Row) -> AuditEntry:
    return AuditEntry(
        id=row["id"],
        at=parse_time(row["at"]),
        actor=row["actor"],
        event=row["event"],
        session_id=row["session_id"],
        interaction_id=row["interaction_id"],
        details=json.loads(row["details_json"]),
    )
