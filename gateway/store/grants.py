"""Grants in force and their revocation (issue 17, ``/grants`` and ``/revoke``).

The ``grants`` table holds what people granted; a revocation is an audit entry
``grant.revoked`` (who, when, how), written once per grant: no column to add, and the
audit keeps the facts an export reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.domain import Actor, Scope
from gateway.store.database import Conn, Database, Row, fetch_all, fetch_one, parse_time
from gateway.store.interaction_rows import actor_from_row
from gateway.store.records import Grant

__all__ = ["REVOKED", "GrantBook", "ProjectGrant", "Revocation"]

REVOKED = "grant.revoked"


@dataclass(frozen=True, kw_only=True, slots=True)
class Revocation:
    by: str
    at: datetime
    how: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ProjectGrant:
    grant: Grant
    runtime_epoch: int  # the epoch of the request it was given on
    revoked: Revocation | None


def _grant(row: Row) -> Grant:
    return Grant(
        id=row["id"],
        session_id=row["session_id"],
        interaction_id=row["interaction_id"],
        action_id=row["action_id"],
        scope=Scope(row["scope"]),
        description=row["description"],
        actor=actor_from_row(row),
        granted_at=parse_time(row["granted_at"]),
    )


_SELECT = (
    "SELECT g.id, g.session_id, g.interaction_id, g.action_id, g.scope, g.description,"
    " g.actor_platform, g.actor_user_id, g.actor_display, g.granted_at, i.runtime_epoch,"
    " (SELECT json_extract(a.details_json, '$.by') || char(9) || a.at || char(9)"
    "  || json_extract(a.details_json, '$.how')"
    "  FROM audit a WHERE a.event = 'grant.revoked' AND a.interaction_id = g.interaction_id"
    "  AND json_extract(a.details_json, '$.grant') = g.id) AS revoked"
    " FROM grants g JOIN interactions i ON i.id = g.interaction_id"
    " JOIN sessions s ON s.id = g.session_id"
)


def _project_grant(row: Row) -> ProjectGrant:
    revoked = None
    if row["revoked"]:
        by, at, how = str(row["revoked"]).split("\t", 2)
        revoked = Revocation(by=by, at=parse_time(at), how=how)
    return ProjectGrant(grant=_grant(row), runtime_epoch=row["runtime_epoch"], revoked=revoked)


class GrantBook:
    """``store.grants``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def for_session(self, session_id: str, project: str) -> list[ProjectGrant]:
        """The session's grants and the project's lasting ones (any session), oldest first."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                f"{_SELECT} WHERE g.session_id = ? OR (s.project = ? AND g.scope = 'always')"
                " ORDER BY g.id",
                (session_id, project),
            ),
            one_statement=True,
        )
        return [_project_grant(row) for row in rows]

    async def get(self, grant_id: int) -> ProjectGrant | None:
        row = await self._db.read(
            lambda conn: fetch_one(conn, f"{_SELECT} WHERE g.id = ?", (grant_id,)),
            one_statement=True,
        )
        return None if row is None else _project_grant(row)

    async def revoke(self, grant: Grant, actor: Actor, *, how: str) -> bool:
        """Record the revocation; False when it was revoked already."""

        def revoke(conn: Conn) -> bool:
            row = fetch_one(conn, f"{_SELECT} WHERE g.id = ?", (grant.id,))
            if row is None or row["revoked"]:
                return False
            self._db.audit(
                conn,
                REVOKED,
                actor=actor,
                session_id=grant.session_id,
                interaction_id=grant.interaction_id,
                details={"grant": grant.id, "how": how, "by": str(actor)},
            )
            return True

        return await self._db.write(revoke)
