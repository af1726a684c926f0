"""Schedules and their runs (issue 35; DESIGN.md, "Schedules"): rows of the ledger.

A run is claimed by compare-and-set on the schedule's stored next time: one transaction moves
``next_at`` on (``UPDATE ... WHERE next_at = <the value read>``) and inserts the run's row,
whose key is the schedule and the due instant. Of two hosts that see the same due schedule,
one moves it and the other updates nothing and claims nothing; a crash before the COMMIT
leaves the schedule due (claimed again on restart), a crash after it leaves the run's row
``claimed`` (started on restart: :meth:`ScheduleBook.open_runs`), so a run is neither lost
nor doubled. The run's row holds the prompt (its text as it was when claimed); the host that
claimed it opens its session and queues it under the message key ``schedule:ID:DUE``
(:func:`run_message_id`), which the prompt queue takes once.

A run moves ``claimed → started → done | failed``, or ``claimed → skipped`` (a reason said
in the schedule's conversation: missed while every host was down, the previous run still
working, the creator no longer allowed, a held queue).

Every instant stored here was computed by the scheduler's clock (gateway/clock.py) and is
compared as stored: the database's own time is not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError
from gateway.store.database import (
    Conn,
    Database,
    Row,
    conversation_from_row,
    conversation_params,
    fetch_all,
    fetch_one,
    parse_optional_time,
    parse_time,
)
from gateway.store.records import PromptState

__all__ = [
    "RunState",
    "ScheduleBook",
    "ScheduleDraft",
    "ScheduleRecord",
    "ScheduleRun",
    "run_message_id",
]

_COLUMNS = (
    "id, project, name, cron, zone, text, platform, space, channel, thread, creator_platform,"
    " creator_user_id, creator_display, session_name, paused, next_at, created_at, deleted_at,"
    " own_thread"
)
_RUN_COLUMNS = (
    "schedule_id, due_at, state, reason, text, host, session_id, claimed_at, replaced_session_id"
)

# a run claimed by a host whose lease is gone (``take_orphaned_runs``; one parameter: the
# host that would take it)
_ORPHANED = (
    "state = 'claimed' AND host IS NOT NULL AND host <> ? AND NOT EXISTS (SELECT 1 FROM"
    " leases l WHERE l.name = 'host:' || schedule_runs.host AND l.holder = schedule_runs.host"
    " AND l.expires_at >= now())"
)


class RunState(StrEnum):
    CLAIMED = "claimed"  # next time moved on, the run's row in; no session yet
    STARTED = "started"  # its prompt queued in its session
    SKIPPED = "skipped"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleDraft:
    """What a new schedule is made of; ``cron`` None: once, at ``next_at``."""

    project: str
    cron: str | None
    zone: str
    text: str
    conversation: ConversationRef  # where it was made: where its runs are said
    creator: Actor
    next_at: datetime
    name: str | None = None  # a config entry's stable name
    session_name: str | None = None  # run in this named session, not a fresh one


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleRecord:
    id: int
    project: str
    name: str | None
    cron: str | None
    zone: str
    text: str
    conversation: ConversationRef  # where its runs speak and route (its own thread, if any)
    creator: Actor
    session_name: str | None
    paused: bool
    next_at: datetime | None
    created_at: datetime
    deleted: bool
    # the conversation it was made in or the config file names (the stored columns)
    configured: ConversationRef | None = None
    # the thread opened for it in ``configured``'s channel (migration 24), or None
    own_thread: str | None = None

    @property
    def label(self) -> str:
        """How a person names it: ``S3``, or a config entry's name."""
        return self.name or f"S{self.id}"

    @property
    def home(self) -> ConversationRef:
        """The conversation the schedule was made in or the config file names."""
        return self.configured if self.configured is not None else self.conversation


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleRun:
    schedule_id: int
    due_at: datetime
    state: RunState
    reason: str | None
    text: str
    host: str | None
    session_id: str | None
    claimed_at: datetime
    # the session the run's fresh session took the conversation from: given back after it
    replaced_session_id: str | None = None


def run_message_id(schedule_id: int, due_at: datetime) -> str:
    """The key a run's prompt is queued under: the schedule and the due instant."""
    return f"schedule:{schedule_id}:{due_at.isoformat()}"


class ScheduleBook:
    """``store.schedules``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # --- the schedules -------------------------------------------------------------------

    async def create(self, draft: ScheduleDraft, *, max_per_project: int) -> ScheduleRecord:
        """Record a schedule (audited ``schedule.created``). StoreError if the project has
        ``max_per_project`` already."""

        def create(conn: Conn) -> ScheduleRecord:
            counted = fetch_one(
                conn,
                "SELECT count(*) AS n FROM schedules WHERE project = ? AND deleted_at IS NULL",
                (draft.project,),
            )
            if counted is not None and int(counted["n"]) >= max_per_project:
                raise StoreError(
                    f"project {draft.project} has {max_per_project} schedules already (the most"
                    " it may have): delete one first"
                )
            now = self._db.now()
            row = fetch_one(
                conn,
                "INSERT INTO schedules (project, name, cron, zone, text, platform, space,"
                " channel, thread, creator_platform, creator_user_id, creator_display,"
                " session_name, next_at, created_at, updated_at)"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
                (
                    draft.project,
                    draft.name,
                    draft.cron,
                    draft.zone,
                    draft.text,
                    *conversation_params(draft.conversation),
                    draft.creator.platform,
                    draft.creator.user_id,
                    draft.creator.display,
                    draft.session_name,
                    self._db.stored_time(draft.next_at),
                    now,
                    now,
                ),
            )
            assert row is not None
            record = _schedule_from_row(row)
            self._db.audit(
                conn,
                "schedule.created",
                actor=draft.creator,
                details={
                    "schedule": record.id,
                    "project": record.project,
                    "name": record.name,
                    "cron": record.cron,
                    "zone": record.zone,
                    "next_at": self._db.stored_time(draft.next_at),
                    "text": record.text,
                },
            )
            return record

        return await self._db.write(create)

    async def sync_configured(self, project: str, drafts: Sequence[ScheduleDraft]) -> list[str]:
        """Make the project's config-file schedules (``draft.name`` set) what ``drafts`` say,
        in one transaction: a new name is made, a changed one updated (its next time moved
        when its cron or zone changed, or it had none), a name gone from the file deleted.
        Each change is audited (``schedule.config_*``); returns what changed, in words.
        Several hosts starting at once make each name once (``UNIQUE (project, name)``)."""

        def write(conn: Conn) -> list[str]:
            now = self._db.now()
            changes: list[str] = []
            rows = fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM schedules WHERE project = ? AND name IS NOT NULL",
                (project,),
            )
            existing = {row["name"]: _schedule_from_row(row) for row in rows}
            for draft in drafts:
                assert draft.name is not None
                values = (
                    draft.cron,
                    draft.zone,
                    draft.text,
                    *conversation_params(draft.conversation),
                    draft.creator.platform,
                    draft.creator.user_id,
                    draft.creator.display,
                    draft.session_name,
                )
                found = existing.get(draft.name)
                if found is None:
                    conn.execute(
                        "INSERT INTO schedules (project, name, cron, zone, text, platform, space,"
                        " channel, thread, creator_platform, creator_user_id, creator_display,"
                        " session_name, next_at, created_at, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                        " ON CONFLICT (project, name) DO NOTHING",
                        (
                            project,
                            draft.name,
                            *values,
                            self._db.stored_time(draft.next_at),
                            now,
                            now,
                        ),
                    )
                    changes.append(f"{draft.name}: made")
                    self._audit_config(conn, "schedule.config_added", project, draft.name)
                    continue
                same = (
                    found.cron == draft.cron
                    and found.zone == draft.zone
                    and found.text == draft.text
                    and found.home == draft.conversation
                    and found.creator == draft.creator
                    and found.session_name == draft.session_name
                )
                if same and not found.deleted:
                    continue
                moved = (
                    found.deleted
                    or found.next_at is None
                    or (found.cron, found.zone) != (draft.cron, draft.zone)
                )
                next_at = self._db.stored_time(draft.next_at) if moved else None
                # its own thread is kept unless the file names another conversation
                elsewhere = int(found.home != draft.conversation)
                conn.execute(
                    "UPDATE schedules SET cron = ?, zone = ?, text = ?, platform = ?, space = ?,"
                    " channel = ?, thread = ?, creator_platform = ?, creator_user_id = ?,"
                    " creator_display = ?, session_name = ?, next_at = coalesce(?, next_at),"
                    " deleted_at = NULL,"
                    " own_thread = CASE WHEN ? = 1 THEN NULL ELSE own_thread END,"
                    " updated_at = ? WHERE id = ?",
                    (*values, next_at, elsewhere, now, found.id),
                )
                changes.append(f"{draft.name}: changed")
                self._audit_config(conn, "schedule.config_changed", project, draft.name)
            wanted = {draft.name for draft in drafts}
            for name, found in existing.items():
                if name not in wanted and not found.deleted:
                    conn.execute(
                        "UPDATE schedules SET deleted_at = ?, next_at = NULL, updated_at = ?"
                        " WHERE id = ?",
                        (now, now, found.id),
                    )
                    changes.append(f"{name}: deleted")
                    self._audit_config(conn, "schedule.config_removed", project, name)
            return changes

        return await self._db.write(write)

    def _audit_config(self, conn: Conn, event: str, project: str, name: str) -> None:
        self._db.audit(conn, event, actor="config", details={"project": project, "name": name})

    async def get(self, schedule_id: int) -> ScheduleRecord | None:
        def read(conn: Conn) -> ScheduleRecord | None:
            row = fetch_one(conn, f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))
            return None if row is None else _schedule_from_row(row)

        return await self._db.read(read)

    async def of_project(self, project: str) -> list[ScheduleRecord]:
        """The project's schedules that are not deleted, oldest first."""

        def read(conn: Conn) -> list[ScheduleRecord]:
            rows = fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM schedules WHERE project = ? AND deleted_at IS NULL"
                " ORDER BY id",
                (project,),
            )
            return [_schedule_from_row(row) for row in rows]

        return await self._db.read(read)

    async def due(self, now: datetime) -> list[ScheduleRecord]:
        """The schedules whose next time is ``now`` or before, neither paused nor deleted."""

        def read(conn: Conn) -> list[ScheduleRecord]:
            rows = fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM schedules WHERE deleted_at IS NULL AND paused = 0"
                " AND next_at IS NOT NULL AND next_at <= ? ORDER BY next_at, id",
                (self._db.stored_time(now),),
            )
            return [_schedule_from_row(row) for row in rows]

        return await self._db.read(read)

    async def next_due(self) -> datetime | None:
        """The earliest next time of any schedule that runs (the scheduler's next wake)."""

        def read(conn: Conn) -> datetime | None:
            row = fetch_one(
                conn,
                "SELECT min(next_at) AS soonest FROM schedules"
                " WHERE deleted_at IS NULL AND paused = 0",
            )
            return None if row is None else parse_optional_time(row["soonest"])

        return await self._db.read(read)

    async def set_paused(
        self, schedule_id: int, *, paused: bool, actor: Actor, next_at: datetime | None = None
    ) -> ScheduleRecord:
        """Pause, or resume with ``next_at`` (the first time after now), audited."""

        def write(conn: Conn) -> ScheduleRecord:
            stored = None if next_at is None else self._db.stored_time(next_at)
            row = fetch_one(
                conn,
                "UPDATE schedules SET paused = ?, next_at = coalesce(?, next_at),"
                f" updated_at = ? WHERE id = ? AND deleted_at IS NULL RETURNING {_COLUMNS}",
                (int(paused), stored, self._db.now(), schedule_id),
            )
            if row is None:
                raise StoreError(f"no schedule S{schedule_id}")
            self._db.audit(
                conn,
                "schedule.paused" if paused else "schedule.resumed",
                actor=actor,
                details={"schedule": schedule_id, "next_at": stored},
            )
            return _schedule_from_row(row)

        return await self._db.write(write)

    async def move_to_thread(
        self, schedule_id: int, thread: ConversationRef, *, actor: Actor
    ) -> ScheduleRecord:
        """The schedule's runs speak and run in ``thread`` from now on (a Telegram topic
        opened for it), audited ``schedule.thread_opened``."""

        def write(conn: Conn) -> ScheduleRecord:
            row = fetch_one(
                conn,
                "UPDATE schedules SET platform = ?, space = ?, channel = ?, thread = ?,"
                " own_thread = ?,"
                f" updated_at = ? WHERE id = ? AND deleted_at IS NULL RETURNING {_COLUMNS}",
                (*conversation_params(thread), thread.thread, self._db.now(), schedule_id),
            )
            if row is None:
                raise StoreError(f"no schedule S{schedule_id}")
            self._db.audit(
                conn,
                "schedule.thread_opened",
                actor=actor,
                details={"schedule": schedule_id, "thread": thread.key()},
            )
            return _schedule_from_row(row)

        return await self._db.write(write)

    async def take_thread(
        self, schedule: ScheduleRecord, thread: ConversationRef, *, actor: Actor | str
    ) -> ScheduleRecord | None:
        """Record ``thread`` (opened in the schedule's configured conversation's channel) as
        the thread a config file's schedule speaks in, by compare-and-set: only while it has
        none and the file still names the conversation it was opened from; audited
        ``schedule.thread_opened``. None when another host (or a changed file) won: the
        schedule as stored then is to be read again."""

        def write(conn: Conn) -> ScheduleRecord | None:
            row = fetch_one(
                conn,
                "UPDATE schedules SET own_thread = ?, updated_at = ?"
                " WHERE id = ? AND own_thread IS NULL AND deleted_at IS NULL"
                " AND platform = ? AND space = ? AND channel = ? AND thread = ?"
                f" RETURNING {_COLUMNS}",
                (
                    thread.thread,
                    self._db.now(),
                    schedule.id,
                    *conversation_params(schedule.home),
                ),
            )
            if row is None:
                return None
            self._db.audit(
                conn,
                "schedule.thread_opened",
                actor=actor,
                details={"schedule": schedule.id, "thread": thread.key()},
            )
            return _schedule_from_row(row)

        return await self._db.write(write)

    async def hand_back(
        self, run: ScheduleRun, key: ConversationRef, conversation: ConversationRef
    ) -> bool:
        """Route ``key`` and show ``conversation`` to the session the run's took them from,
        if they still name the run's session (compare-and-set, one transaction: a person's
        ``/new`` or ``/switch`` meanwhile wins); audited ``schedule.handed_back``."""
        assert run.session_id is not None and run.replaced_session_id is not None

        def write(conn: Conn) -> bool:
            now = self._db.now()
            cursor = conn.execute(
                "UPDATE routes SET session_id = ?, routed_at = ?"
                " WHERE platform = ? AND space = ? AND channel = ? AND thread = ?"
                " AND session_id = ?",
                (run.replaced_session_id, now, *conversation_params(key), run.session_id),
            )
            if cursor.rowcount != 1:
                return False
            conn.execute(
                "UPDATE conversations SET session_id = ?, bound_at = ?"
                " WHERE platform = ? AND space = ? AND channel = ? AND thread = ?"
                " AND session_id = ?",
                (run.replaced_session_id, now, *conversation_params(conversation), run.session_id),
            )
            self._db.audit(
                conn,
                "schedule.handed_back",
                actor=f"schedule:{run.schedule_id}",
                session_id=run.replaced_session_id,
                details={
                    "schedule": run.schedule_id,
                    "due_at": self._db.stored_time(run.due_at),
                    "from_session": run.session_id,
                },
            )
            return True

        return await self._db.write(write)

    async def delete(self, schedule_id: int, *, actor: Actor) -> ScheduleRecord:
        """Delete (the row stays, marked, for its runs and the audit), audited."""

        def write(conn: Conn) -> ScheduleRecord:
            now = self._db.now()
            row = fetch_one(
                conn,
                "UPDATE schedules SET deleted_at = ?, next_at = NULL, updated_at = ?"
                f" WHERE id = ? AND deleted_at IS NULL RETURNING {_COLUMNS}",
                (now, now, schedule_id),
            )
            if row is None:
                raise StoreError(f"no schedule S{schedule_id}")
            self._db.audit(conn, "schedule.deleted", actor=actor, details={"schedule": schedule_id})
            return _schedule_from_row(row)

        return await self._db.write(write)

    # --- runs ------------------------------------------------------------------------------

    async def claim(
        self,
        schedule: ScheduleRecord,
        *,
        due_at: datetime,
        next_at: datetime | None,
        host: str | None,
        skip_reason: str | None = None,
    ) -> ScheduleRun | None:
        """Move ``schedule`` from ``due_at`` (its stored next time, as read) to ``next_at``
        and insert the run's row, in one transaction; None if another host moved it first
        (or it was paused or deleted meanwhile). ``skip_reason``: the run is recorded as
        skipped (missed while every host was down) rather than claimed."""
        state = RunState.CLAIMED if skip_reason is None else RunState.SKIPPED

        def write(conn: Conn) -> ScheduleRun | None:
            now = self._db.now()
            moved = conn.execute(
                "UPDATE schedules SET next_at = ?, updated_at = ? WHERE id = ? AND next_at = ?"
                " AND deleted_at IS NULL AND paused = 0",
                (
                    None if next_at is None else self._db.stored_time(next_at),
                    now,
                    schedule.id,
                    self._db.stored_time(due_at),
                ),
            )
            if moved.rowcount != 1:
                return None
            row = fetch_one(
                conn,
                "INSERT INTO schedule_runs (schedule_id, due_at, state, reason, text, host,"
                " claimed_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (schedule_id, due_at) DO NOTHING"
                f" RETURNING {_RUN_COLUMNS}",
                (
                    schedule.id,
                    self._db.stored_time(due_at),
                    state.value,
                    skip_reason,
                    schedule.text,
                    host,
                    now,
                    now,
                ),
            )
            if row is None:
                return None
            self._db.audit(
                conn,
                "schedule.claimed" if skip_reason is None else "schedule.skipped",
                actor=f"schedule:{schedule.id}",
                details={
                    "schedule": schedule.id,
                    "due_at": self._db.stored_time(due_at),
                    "host": host,
                    "reason": skip_reason,
                },
            )
            return _run_from_row(row)

        return await self._db.write(write)

    async def open_runs(self, host: str | None) -> list[ScheduleRun]:
        """Runs claimed and not yet started (a crash between the claim and the start),
        of ``host`` (every host's where None), oldest first."""

        def read(conn: Conn) -> list[ScheduleRun]:
            rows = fetch_all(
                conn,
                f"SELECT {_RUN_COLUMNS} FROM schedule_runs WHERE state = 'claimed'"
                " AND (CAST(? AS TEXT) IS NULL OR host = ?) ORDER BY due_at, schedule_id",
                (host, host),
            )
            return [_run_from_row(row) for row in rows]

        return await self._db.read(read)

    async def take_orphaned_runs(self, host: str) -> list[ScheduleRun]:
        """Runs another host claimed and never started, whose lease is gone (it died between
        the claim and the start, and has not come back): made ``host``'s, each by one taker
        (the UPDATE's row lock: a second host re-reads the row, now of a host whose lease is
        held, and takes nothing), audited ``schedule.taken_over``. A shared ledger only (its
        ``leases``); the database's ``now()`` says whether a lease is gone. Asked first with
        a read, so that a pass with none to take (every pass of an idle host) writes
        nothing (issue 36)."""

        def any_orphaned(conn: Conn) -> bool:
            row = conn.execute(
                f"SELECT 1 AS found FROM schedule_runs WHERE {_ORPHANED} LIMIT 1", (host,)
            ).fetchone()
            return row is not None

        if not await self._db.read(any_orphaned):
            return []

        def write(conn: Conn) -> list[ScheduleRun]:
            # each run taken from the host it was seen claimed by (a compare-and-set): a host
            # whose UPDATE waited on another's row lock re-reads the row, now another host's,
            # and takes nothing. The lease's NOT EXISTS alone let two hosts take one run (seen
            # with two of one host's writes side by side): PostgreSQL rechecks the row it
            # waited for against the join it had made before the wait, not the new holder's
            # lease
            orphaned = fetch_all(
                conn,
                f"SELECT schedule_id, due_at, host FROM schedule_runs WHERE {_ORPHANED}",
                (host,),
            )
            rows = []
            for run in orphaned:
                row = fetch_one(
                    conn,
                    "UPDATE schedule_runs SET host = ?, updated_at = ? WHERE schedule_id = ?"
                    " AND due_at = ? AND state = 'claimed' AND host = ?"
                    f" RETURNING {_RUN_COLUMNS}",
                    (host, self._db.now(), run["schedule_id"], run["due_at"], run["host"]),
                )
                if row is not None:
                    rows.append(row)
            taken = sorted(
                (_run_from_row(row) for row in rows), key=lambda r: (r.due_at, r.schedule_id)
            )
            for run in taken:
                self._db.audit(
                    conn,
                    "schedule.taken_over",
                    actor=f"schedule:{run.schedule_id}",
                    details={
                        "schedule": run.schedule_id,
                        "due_at": self._db.stored_time(run.due_at),
                        "host": host,
                    },
                )
            return taken

        return await self._db.write(write)

    async def started_runs(self, host: str | None) -> list[ScheduleRun]:
        """Runs whose prompt was queued and whose outcome is not recorded yet, of ``host``
        (every host's where None), oldest first."""

        def read(conn: Conn) -> list[ScheduleRun]:
            rows = fetch_all(
                conn,
                f"SELECT {_RUN_COLUMNS} FROM schedule_runs WHERE state = 'started'"
                " AND (CAST(? AS TEXT) IS NULL OR host = ?) ORDER BY due_at, schedule_id",
                (host, host),
            )
            return [_run_from_row(row) for row in rows]

        return await self._db.read(read)

    async def prompt_state(self, run: ScheduleRun) -> tuple[PromptState, bool] | None:
        """The state of the run's prompt and whether it is held; None if none was queued."""

        def read(conn: Conn) -> tuple[PromptState, bool] | None:
            row = fetch_one(
                conn,
                "SELECT state, held FROM prompts WHERE session_id = ? AND platform_message_id = ?",
                (run.session_id, run_message_id(run.schedule_id, run.due_at)),
            )
            return None if row is None else (PromptState(row["state"]), bool(row["held"]))

        return await self._db.read(read)

    async def drop_held_prompt(self, run: ScheduleRun) -> bool:
        """Drop the run's prompt if it is still queued and held (a restart or /stop held it
        before it ran), leaving anything else of its session's queue as it is; whether it
        was dropped. The session's queue stops being held once nothing in it is."""

        def write(conn: Conn) -> bool:
            dropped = conn.execute(
                "UPDATE prompts SET state = 'dropped', held = 0, updated_at = ?"
                " WHERE session_id = ? AND platform_message_id = ? AND state = 'queued'"
                " AND held = 1",
                (self._db.now(), run.session_id, run_message_id(run.schedule_id, run.due_at)),
            )
            if dropped.rowcount != 1:
                return False
            conn.execute(
                "UPDATE sessions SET queue_paused = 0, queue_pause_reason = NULL WHERE id = ?"
                " AND NOT EXISTS (SELECT 1 FROM prompts WHERE session_id = ? AND"
                " state = 'queued' AND held = 1)",
                (run.session_id, run.session_id),
            )
            self._db.audit(
                conn,
                "schedule.prompt_dropped",
                actor=f"schedule:{run.schedule_id}",
                session_id=run.session_id,
                details={"schedule": run.schedule_id, "due_at": self._db.stored_time(run.due_at)},
            )
            return True

        return await self._db.write(write)

    async def runs(self, schedule_id: int) -> list[ScheduleRun]:
        """The schedule's runs, newest first."""

        def read(conn: Conn) -> list[ScheduleRun]:
            rows = fetch_all(
                conn,
                f"SELECT {_RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = ?"
                " ORDER BY due_at DESC",
                (schedule_id,),
            )
            return [_run_from_row(row) for row in rows]

        return await self._db.read(read)

    async def ran_in(self, schedule_id: int, session_id: str) -> bool:
        """Whether a run of the schedule ran in ``session_id``."""
        found = await self._db.read(
            lambda conn: fetch_one(
                conn,
                "SELECT 1 AS ran FROM schedule_runs WHERE schedule_id = ? AND session_id = ?",
                (schedule_id, session_id),
            ),
            one_statement=True,
        )
        return found is not None

    async def last_runs(self, schedule_ids: list[int]) -> dict[int, ScheduleRun]:
        """The newest run of each schedule that has one."""
        found: dict[int, ScheduleRun] = {}
        for schedule_id in schedule_ids:
            runs = await self.runs(schedule_id)
            if runs:
                found[schedule_id] = runs[0]
        return found

    async def started(
        self, run: ScheduleRun, session_id: str, *, replaced: str | None = None
    ) -> None:
        """The run's prompt is queued in ``session_id``, which took the conversation from
        ``replaced`` (a person's session, given back when the run is over)."""
        await self._move(run, RunState.STARTED, session_id=session_id, replaced=replaced)

    async def skipped(self, run: ScheduleRun, reason: str) -> None:
        await self._move(run, RunState.SKIPPED, reason=reason)

    async def ended(self, run: ScheduleRun, *, failed: bool, reason: str | None = None) -> None:
        await self._move(run, RunState.FAILED if failed else RunState.DONE, reason=reason)

    async def _move(
        self,
        run: ScheduleRun,
        state: RunState,
        *,
        reason: str | None = None,
        session_id: str | None = None,
        replaced: str | None = None,
    ) -> None:
        def write(conn: Conn) -> None:
            now = self._db.now()
            conn.execute(
                "UPDATE schedule_runs SET state = ?, reason = coalesce(?, reason),"
                " session_id = coalesce(?, session_id),"
                " replaced_session_id = coalesce(?, replaced_session_id), updated_at = ?"
                " WHERE schedule_id = ? AND due_at = ?",
                (
                    state.value,
                    reason,
                    session_id,
                    replaced,
                    now,
                    run.schedule_id,
                    self._db.stored_time(run.due_at),
                ),
            )
            if state is RunState.SKIPPED:
                self._db.audit(
                    conn,
                    "schedule.skipped",
                    actor=f"schedule:{run.schedule_id}",
                    session_id=session_id,
                    details={
                        "schedule": run.schedule_id,
                        "due_at": self._db.stored_time(run.due_at),
                        "reason": reason,
                    },
                )

        await self._db.write(write)


def _schedule_from_row(row: Row) -> ScheduleRecord:
    configured = conversation_from_row(row)
    own_thread = row["own_thread"] or None
    return ScheduleRecord(
        id=int(row["id"]),
        project=row["project"],
        name=row["name"],
        cron=row["cron"],
        zone=row["zone"],
        text=row["text"],
        conversation=configured if own_thread is None else replace(configured, thread=own_thread),
        configured=configured,
        own_thread=own_thread,
        creator=Actor(
            platform=row["creator_platform"],
            user_id=row["creator_user_id"],
            display=row["creator_display"],
        ),
        session_name=row["session_name"],
        paused=bool(row["paused"]),
        next_at=parse_optional_time(row["next_at"]),
        created_at=parse_time(row["created_at"]),
        deleted=row["deleted_at"] is not None,
    )


def _run_from_row(row: Row) -> ScheduleRun:
    return ScheduleRun(
        schedule_id=int(row["schedule_id"]),
        due_at=parse_time(row["due_at"]),
        state=RunState(row["state"]),
        reason=row["reason"],
        text=row["text"],
        host=row["host"],
        session_id=row["session_id"],
        claimed_at=parse_time(row["claimed_at"]),
        replaced_session_id=row["replaced_session_id"],
    )
