"""``agent-gateway audit``: every interaction, as an auditor reads it (issue 17).

One record per interaction opened since a date (of one project, or all): who asked (the
agent of a session, and the person whose message started the turn: a scheduled run's is
"schedule S1 by alice"), the content hash and a summary of what was asked, each vote
(withdrawn ones too, with when), the decision and its three facts (decided, delivered,
resolved), the expiry and the escalation. Then one record per change of a schedule (issue
35: made, paused, resumed, deleted, from chat or the config file), ``kind`` "schedule", its
``title`` the change and ``asked_by`` who made it; the interaction's columns are empty.

No answer text is exported: a decision names the questions it answered, as the audit log
does (answers to secret questions are never stored at all: gateway/store/codec.py). The
summary is the card's own, cut to :data:`SUMMARY_CHARS`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from gateway.domain import InteractionState, Resolution
from gateway.store.database import Conn, fetch_all
from gateway.store.escalations import ESCALATED
from gateway.store.interaction_rows import SELECT_INTERACTION, interaction_from_row
from gateway.store.store import Store

__all__ = ["CSV_COLUMNS", "SUMMARY_CHARS", "audit_records", "to_csv", "to_jsonl"]

SUMMARY_CHARS = 200

Record = dict[str, Any]


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _read(conn: Conn, since: datetime, project: str | None) -> list[Record]:
    found = fetch_all(
        conn,
        "SELECT i.id, s.project, s.agent_kind, p.author_platform, p.author_user_id,"
        " p.author_display, p.platform_message_id"
        " FROM interactions i JOIN sessions s ON s.id = i.session_id"
        " LEFT JOIN turns t ON t.id = i.turn_id LEFT JOIN prompts p ON p.id = t.prompt_id"
        " WHERE i.created_at >= ? AND (CAST(? AS TEXT) IS NULL OR s.project = ?)"
        " ORDER BY i.created_at, i.id",
        (since.astimezone(UTC).isoformat(timespec="microseconds"), project, project),
    )
    records = []
    for head in found:
        [row] = fetch_all(conn, f"{SELECT_INTERACTION} WHERE i.id = ?", (head["id"],))
        interaction = interaction_from_row(row)
        votes = fetch_all(
            conn,
            "SELECT person, actor_platform, actor_user_id, actor_display, action_id, needed,"
            " surface, content_hash, voted_at, withdrawn_at FROM votes"
            " WHERE interaction_id = ? ORDER BY voted_at, person",
            (interaction.id,),
        )
        entries = {
            entry["event"]: entry
            for entry in fetch_all(
                conn,
                "SELECT event, at, details_json FROM audit WHERE interaction_id = ?"
                " AND event IN ('interaction.decided', ?) ORDER BY id",
                (interaction.id, ESCALATED),
            )
        }
        asked_by = None
        if head["author_platform"] is not None:
            asked_by = f"{head['author_platform']}:{head['author_user_id']}"
            scheduled = str(head["platform_message_id"] or "").split(":")
            if scheduled[0] == "schedule" and len(scheduled) > 2:  # "schedule:ID:DUE"
                asked_by = f"schedule S{scheduled[1]} by {asked_by}"
        decided = entries.get("interaction.decided")
        decided_details = json.loads(decided["details_json"]) if decided else {}
        escalated = entries.get(ESCALATED)
        escalated_details = json.loads(escalated["details_json"]) if escalated else {}
        decision = interaction.decision
        delivery = interaction.delivery
        resolution = interaction.resolution
        expired = resolution is not None and resolution.how is Resolution.EXPIRED
        records.append(
            {
                "interaction": interaction.id,
                "project": head["project"],
                "session": interaction.session_id,
                "agent": head["agent_kind"],
                "asked_by": asked_by,
                "asked_at": _iso(interaction.created_at),
                "kind": interaction.kind.value,
                "title": interaction.title,
                "summary": interaction.summary[:SUMMARY_CHARS],
                "content_hash": interaction.content_hash,
                "state": interaction.state.value,
                "votes": [
                    {
                        "person": vote["person"],
                        "account": f"{vote['actor_platform']}:{vote['actor_user_id']}",
                        "action": vote["action_id"],
                        "needed": vote["needed"],
                        "surface": vote["surface"],
                        "content_hash": vote["content_hash"],
                        "at": vote["voted_at"],
                        "withdrawn_at": vote["withdrawn_at"],
                    }
                    for vote in votes
                ],
                "decided_by": None if decision is None else decision.actor.key(),
                "decided_at": None if decision is None else _iso(decision.at),
                "decision": None
                if decision is None
                else (decision.decision.action_id or "answered"),
                "answered": None if decision is None else sorted(decision.decision.answers),
                "decided_on": decided_details.get("surface"),
                "decided_hash": decided_details.get("content_hash"),
                "delivered": None if delivery is None else delivery.outcome.value,
                "delivered_at": None if delivery is None else _iso(delivery.at),
                "resolved": None if resolution is None else resolution.how.value,
                "resolved_by": None if resolution is None else resolution.by,
                "resolved_at": None if resolution is None else _iso(resolution.at),
                "expired_at": _iso(resolution.at) if expired and resolution else None,
                "escalated_at": escalated["at"] if escalated else None,
                "escalated_to": escalated_details.get("asked"),
                "open": interaction.state is InteractionState.PENDING,
            }
        )
    return records + _schedule_changes(conn, since, project)


_SCHEDULE_CHANGES = (
    "schedule.created",
    "schedule.paused",
    "schedule.resumed",
    "schedule.deleted",
    "schedule.config_added",
    "schedule.config_changed",
    "schedule.config_removed",
)


# the schedule changes since a time (its one parameter after the events'), with every
# schedule event spelled as the partial index ``audit_schedule_changes`` spells it
# (migration 31): the planner uses that index only for these terms as written
SCHEDULE_CHANGES_SINCE = (
    "SELECT id, at, actor, event, details_json FROM audit"
    f" WHERE event IN ({', '.join('?' for _ in _SCHEDULE_CHANGES)})"
    " AND event >= 'schedule.' AND event < 'schedule/' AND at >= ? ORDER BY id"
)


def _schedule_changes(conn: Conn, since: datetime, project: str | None) -> list[Record]:
    rows = fetch_all(
        conn,
        SCHEDULE_CHANGES_SINCE,
        (*_SCHEDULE_CHANGES, since.astimezone(UTC).isoformat(timespec="microseconds")),
    )
    schedules = {
        int(row["id"]): row
        for row in fetch_all(conn, "SELECT id, project, name, cron, zone, text FROM schedules")
    }
    by_name = {(row["project"], row["name"]): row for row in schedules.values() if row["name"]}
    records: list[Record] = []
    for row in rows:
        details = json.loads(row["details_json"])
        schedule = schedules.get(int(details.get("schedule") or 0)) or by_name.get(
            (details.get("project"), details.get("name"))
        )
        if schedule is None or (project is not None and schedule["project"] != project):
            continue
        label = schedule["name"] or f"S{schedule['id']}"
        how = f"every {schedule['cron']} ({schedule['zone']})" if schedule["cron"] else "once"
        record: Record = {column: None for column in CSV_COLUMNS}
        record.update(
            votes=[],
            answered=None,
            open=False,
            project=schedule["project"],
            asked_by=row["actor"],
            asked_at=row["at"],
            kind="schedule",
            title=f"{row['event']} {label}",
            summary=f"{label}: {how}: {schedule['text']}"[:SUMMARY_CHARS],
            state=row["event"].removeprefix("schedule."),
        )
        records.append(record)
    return records


async def audit_records(store: Store, since: datetime, project: str | None) -> list[Record]:
    # one snapshot on a reader (store.readers): a long export never holds up the writer
    return await store.readers.read(lambda conn: _read(conn, since, project))


def to_jsonl(records: Iterable[Record]) -> str:
    return "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)


CSV_COLUMNS = (
    "interaction",
    "project",
    "session",
    "agent",
    "asked_by",
    "asked_at",
    "kind",
    "title",
    "summary",
    "content_hash",
    "state",
    "votes",
    "decided_by",
    "decided_at",
    "decision",
    "answered",
    "decided_on",
    "decided_hash",
    "delivered",
    "delivered_at",
    "resolved",
    "resolved_by",
    "resolved_at",
    "expired_at",
    "escalated_at",
    "escalated_to",
)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        if value and isinstance(value[0], dict):  # votes: "person action at (withdrawn …)"
            return "; ".join(
                f"{v['person']} {v['action']} {v['at']} on {v['surface']}"
                + (f" (withdrawn {v['withdrawn_at']})" if v["withdrawn_at"] else "")
                for v in value
            )
        return "; ".join(str(item) for item in value)
    return str(value)


def to_csv(records: Iterable[Record]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        writer.writerow([_cell(record[column]) for column in CSV_COLUMNS])
    return out.getvalue()
