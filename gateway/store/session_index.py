"""A project's sessions as ``/sessions`` lists them: each with where it was shown, when it
was last active, whether a turn runs and how many of its requests wait (one read).

The conversations of a session are those it is bound to now and those its prompts were
typed in: a session closed by ``/new`` is bound nowhere, yet it is still "this
conversation's" where people talked to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.domain import ConversationRef
from gateway.session_record import SessionRecord
from gateway.store.database import Conn, Database, conversation_from_row, fetch_all, parse_time
from gateway.store.sessions import SESSION_COLUMNS, session_from_row

__all__ = ["SessionIndex", "SessionSummary"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionSummary:
    session: SessionRecord
    conversations: tuple[ConversationRef, ...]  # where it is shown or was talked to
    last_activity: datetime  # its latest prompt or turn, else its creation
    turn_running: bool
    waiting: int  # its requests waiting for a decision


class SessionIndex:
    """``store.session_index``: the sessions of a project, summarised."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def of_project(self, project: str) -> list[SessionSummary]:
        """Every session of ``project``, closed ones too, newest activity first."""

        def read(conn: Conn) -> list[SessionSummary]:
            sessions = [
                session_from_row(row)
                for row in fetch_all(
                    conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE project = ?", (project,)
                )
            ]
            where: dict[str, list[ConversationRef]] = {s.id: [] for s in sessions}
            for row in fetch_all(
                conn,
                "SELECT c.session_id, c.platform, c.space, c.channel, c.thread"
                " FROM conversations c JOIN sessions s ON s.id = c.session_id WHERE s.project = ?"
                " UNION SELECT p.session_id, p.platform, p.space, p.channel, p.thread"
                " FROM prompts p JOIN sessions s ON s.id = p.session_id WHERE s.project = ?",
                (project, project),
            ):
                shown = conversation_from_row(row)
                if shown not in where[row["session_id"]]:
                    where[row["session_id"]].append(shown)
            latest: dict[str, str] = {}
            for row in fetch_all(
                conn,
                "SELECT p.session_id, max(p.created_at) AS at FROM prompts p"
                " JOIN sessions s ON s.id = p.session_id WHERE s.project = ? GROUP BY p.session_id"
                " UNION ALL SELECT t.session_id, max(coalesce(t.ended_at, t.started_at)) AS at"
                " FROM turns t JOIN sessions s ON s.id = t.session_id WHERE s.project = ?"
                " GROUP BY t.session_id",
                (project, project),
            ):
                latest[row["session_id"]] = max(latest.get(row["session_id"], ""), row["at"])
            running = {
                row["session_id"]
                for row in fetch_all(
                    conn,
                    "SELECT t.session_id FROM turns t JOIN sessions s ON s.id = t.session_id"
                    " WHERE s.project = ? AND t.ended_at IS NULL",
                    (project,),
                )
            }
            waiting = {
                row["session_id"]: int(row["n"])
                for row in fetch_all(
                    conn,
                    "SELECT i.session_id, count(*) AS n FROM interactions i"
                    " JOIN sessions s ON s.id = i.session_id"
                    " WHERE s.project = ? AND i.state = 'pending' GROUP BY i.session_id",
                    (project,),
                )
            }
            found = [
                SessionSummary(
                    session=s,
                    conversations=tuple(where[s.id]),
                    last_activity=max(
                        s.created_at,
                        parse_time(latest[s.id]) if s.id in latest else s.created_at,
                    ),
                    turn_running=s.id in running,
                    waiting=waiting.get(s.id, 0),
                )
                for s in sessions
            ]
            found.sort(key=lambda f: (f.last_activity, f.session.created_at), reverse=True)
            return found

        return await self._db.read(read)
