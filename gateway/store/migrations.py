"""The ledger's schema as an ordered list of migrations.

Migration N is applied once, in order, each in its own transaction, and recorded in
``schema_version``. A database whose schema is newer than this code is refused rather than
guessed at. To change the schema, append a migration; never edit one that has shipped.

Conventions: times are ISO 8601 text in UTC; a conversation is stored as its four parts
(platform, space, channel, thread) with '' for a part the platform does not have, so that
UNIQUE constraints hold; JSON columns end in ``_json``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.errors import StoreError
from gateway.store.database import Conn
from gateway.store.dialect import SQLITE, Backend, Dialect, postgresql_ddl

__all__ = ["MIGRATIONS", "POSTGRESQL_ONLY_TABLES", "Migration", "apply_migrations"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Migration:
    """One schema change: ``statements`` in SQLite's spelling; on PostgreSQL ``postgresql``,
    or where that is None the same statements in PostgreSQL's types (``postgresql_ddl``)."""

    version: int
    name: str
    statements: tuple[str, ...]
    postgresql: tuple[str, ...] | None = None

    def statements_for(self, dialect: Dialect) -> tuple[str, ...]:
        if dialect.backend is Backend.SQLITE:
            return self.statements
        if self.postgresql is not None:
            return self.postgresql
        return tuple(postgresql_ddl(statement) for statement in self.statements)


def _rebuilt_on_postgresql(statements: tuple[str, ...], table: str) -> tuple[str, ...]:
    """A SQLite table rebuild (copy with explicit ids, drop, rename) on PostgreSQL: the same
    statements, then the identity's sequence moved past the copied ids (an explicit id does
    not move it)."""
    return (
        *(postgresql_ddl(statement) for statement in statements),
        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
        f" coalesce((SELECT max(id) FROM {table}), 0) + 1, false)",
    )


_INITIAL = (
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        agent_kind TEXT NOT NULL,
        native_session_id TEXT,
        created_at TEXT NOT NULL,
        current_epoch INTEGER NOT NULL DEFAULT 0,
        closed_at TEXT,
        close_reason TEXT,
        queue_paused INTEGER NOT NULL DEFAULT 0 CHECK (queue_paused IN (0, 1)),
        queue_pause_reason TEXT,
        initiator_platform TEXT,
        initiator_user_id TEXT,
        initiator_display TEXT
    )
    """,
    """
    CREATE TABLE runtime_epochs (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        epoch INTEGER NOT NULL CHECK (epoch >= 1),
        pid INTEGER,
        pgid INTEGER,
        process_start_time INTEGER,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        exit_description TEXT,
        agent_version TEXT,
        policy_json TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (session_id, epoch)
    )
    """,
    "CREATE INDEX runtime_epochs_live ON runtime_epochs(ended_at) WHERE ended_at IS NULL",
    """
    CREATE TABLE conversations (
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        bound_at TEXT NOT NULL,
        PRIMARY KEY (platform, space, channel, thread)
    )
    """,
    "CREATE INDEX conversations_session ON conversations(session_id)",
    """
    CREATE TABLE prompts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        platform_message_id TEXT NOT NULL,
        author_platform TEXT NOT NULL,
        author_user_id TEXT NOT NULL,
        author_display TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL
            CHECK (state IN ('queued', 'in_flight', 'done', 'interrupted', 'dropped')),
        position INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (platform, space, channel, thread, platform_message_id),
        UNIQUE (session_id, position)
    )
    """,
    "CREATE INDEX prompts_queue ON prompts(session_id, state, position)",
    """
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        prompt_id INTEGER REFERENCES prompts(id),
        native_turn_id TEXT,
        status TEXT CHECK (status IN ('completed', 'interrupted', 'failed')),
        error TEXT,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        FOREIGN KEY (session_id, epoch) REFERENCES runtime_epochs(session_id, epoch)
    )
    """,
    "CREATE INDEX turns_running ON turns(session_id) WHERE ended_at IS NULL",
    """
    CREATE TABLE interactions (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        runtime_epoch INTEGER NOT NULL,
        turn_id INTEGER REFERENCES turns(id),
        native_key TEXT,
        kind TEXT NOT NULL,
        title TEXT NOT NULL,
        summary TEXT NOT NULL,
        detail_json TEXT,
        actions_json TEXT NOT NULL,
        questions_json TEXT NOT NULL,
        state TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (session_id, runtime_epoch, native_key),
        FOREIGN KEY (session_id, runtime_epoch) REFERENCES runtime_epochs(session_id, epoch)
    )
    """,
    "CREATE INDEX interactions_state ON interactions(state, session_id)",
    """
    CREATE TABLE decisions (
        interaction_id TEXT PRIMARY KEY REFERENCES interactions(id),
        actor_platform TEXT NOT NULL,
        actor_user_id TEXT NOT NULL,
        actor_display TEXT NOT NULL,
        action_id TEXT,
        answers_json TEXT NOT NULL,
        message TEXT,
        decided_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'skipped')),
        error TEXT,
        at TEXT NOT NULL
    )
    """,
    "CREATE INDEX deliveries_interaction ON deliveries(interaction_id, id)",
    """
    CREATE TABLE resolutions (
        interaction_id TEXT PRIMARY KEY REFERENCES interactions(id),
        how TEXT NOT NULL,
        by TEXT NOT NULL,
        note TEXT NOT NULL,
        at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE interaction_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        message_ref TEXT,
        state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed', 'edited')),
        rendered_version INTEGER,
        error TEXT,
        updated_at TEXT NOT NULL,
        UNIQUE (interaction_id, platform, space, channel, thread)
    )
    """,
    "CREATE INDEX interaction_messages_state ON interaction_messages(state)",
    """
    CREATE TABLE grants (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        action_id TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'always')),
        description TEXT NOT NULL,
        actor_platform TEXT NOT NULL,
        actor_user_id TEXT NOT NULL,
        actor_display TEXT NOT NULL,
        granted_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX grants_session ON grants(session_id)",
    """
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        actor TEXT,
        event TEXT NOT NULL,
        session_id TEXT,
        interaction_id TEXT,
        details_json TEXT NOT NULL
    )
    """,
    "CREATE INDEX audit_interaction ON audit(interaction_id)",
    "CREATE INDEX audit_session ON audit(session_id)",
)

# A delivery whose outcome is unknown: an expired request whose "timed out" write was not
# recorded before its runtime ended. SQLite cannot alter a CHECK: the table is rebuilt.
_UNKNOWN_DELIVERY = (
    """
    CREATE TABLE deliveries_v2 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'skipped', 'unknown')),
        error TEXT,
        at TEXT NOT NULL
    )
    """,
    "INSERT INTO deliveries_v2 (id, interaction_id, outcome, error, at)"
    " SELECT id, interaction_id, outcome, error, at FROM deliveries",
    "DROP TABLE deliveries",
    "ALTER TABLE deliveries_v2 RENAME TO deliveries",
    "CREATE INDEX deliveries_interaction ON deliveries(interaction_id, id)",
)

# The key a session is routed by, apart from the conversations that show it: a session of
# scope "channel" is found by its channel but shown in the thread it started in; one of scope
# "user" by the person, shown where they talk and in their direct conversation. Every binding
# so far was also a route: they are copied, so that existing sessions are found as before.
_ROUTES = (
    """
    CREATE TABLE routes (
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        routed_at TEXT NOT NULL,
        PRIMARY KEY (platform, space, channel, thread)
    )
    """,
    "CREATE INDEX routes_session ON routes(session_id)",
    "INSERT INTO routes (platform, space, channel, thread, session_id, routed_at)"
    " SELECT platform, space, channel, thread, session_id, bound_at FROM conversations",
)

# A turn as an ordered timeline (gateway/timeline.py): its entries under one sequence (seq,
# per turn), and each entry's text in parts: a streamed answer is saved as the text that came
# since the last save, appended, never rewritten whole (docs/decisions.md).
_TIMELINE = (
    """
    CREATE TABLE timeline_entries (
        turn_id INTEGER NOT NULL REFERENCES turns(id),
        seq INTEGER NOT NULL CHECK (seq >= 0),
        kind TEXT NOT NULL CHECK (kind IN ('text', 'tool', 'interaction')),
        item_id TEXT,
        interaction_id TEXT REFERENCES interactions(id),
        at TEXT NOT NULL,
        PRIMARY KEY (turn_id, seq),
        CHECK ((kind = 'interaction') = (interaction_id IS NOT NULL))
    )
    """,
    """
    CREATE TABLE timeline_text (
        turn_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        part INTEGER NOT NULL CHECK (part >= 0),
        text TEXT NOT NULL,
        PRIMARY KEY (turn_id, seq, part),
        FOREIGN KEY (turn_id, seq) REFERENCES timeline_entries(turn_id, seq)
    )
    """,
    "CREATE INDEX turns_session ON turns(session_id, id)",
)

# /stop holds the messages queued before it, each prompt on its own (``held``), instead of
# pausing the whole queue: a message typed after /stop runs next, the held ones wait for
# /resume or /clear (docs/decisions.md). Queues paused by an earlier gateway become holds.
# A card may be drawn again in the same conversation (a reply to it: the card again under
# the notice), each drawing a copy of its own that later edits reach: ``again`` numbers
# them (0: the conversation's first copy). SQLite cannot alter a UNIQUE: the table is rebuilt.
_HOLDS_AND_CARDS_AGAIN = (
    "ALTER TABLE prompts ADD COLUMN held INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1))",
    "UPDATE prompts SET held = 1 WHERE state = 'queued'"
    " AND session_id IN (SELECT id FROM sessions WHERE queue_paused = 1)",
    "UPDATE sessions SET queue_paused = 0, queue_pause_reason = NULL WHERE NOT EXISTS"
    " (SELECT 1 FROM prompts p WHERE p.session_id = sessions.id AND p.held = 1)",
    """
    CREATE TABLE interaction_messages_v2 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        again INTEGER NOT NULL DEFAULT 0 CHECK (again >= 0),
        message_ref TEXT,
        state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed', 'edited')),
        rendered_version INTEGER,
        error TEXT,
        updated_at TEXT NOT NULL,
        UNIQUE (interaction_id, platform, space, channel, thread, again)
    )
    """,
    "INSERT INTO interaction_messages_v2 (id, interaction_id, platform, space, channel, thread,"
    " message_ref, state, rendered_version, error, updated_at)"
    " SELECT id, interaction_id, platform, space, channel, thread, message_ref, state,"
    " rendered_version, error, updated_at FROM interaction_messages",
    "DROP TABLE interaction_messages",
    "ALTER TABLE interaction_messages_v2 RENAME TO interaction_messages",
    "CREATE INDEX interaction_messages_state ON interaction_messages(state)",
    "CREATE INDEX interaction_messages_ref ON interaction_messages(platform, space, channel,"
    " thread, message_ref)",
)

# issue 17: one vote per person and interaction (a withdrawn vote stays, as audit). IF NOT
# EXISTS: the tests that run today's code on an older schema create it first (tests/test_store)
VOTES_TABLE = """
    CREATE TABLE IF NOT EXISTS votes (
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        person TEXT NOT NULL,
        actor_platform TEXT NOT NULL,
        actor_user_id TEXT NOT NULL,
        actor_display TEXT NOT NULL,
        action_id TEXT NOT NULL,
        needed INTEGER NOT NULL CHECK (needed >= 1),
        surface TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        voted_at TEXT NOT NULL,
        withdrawn_at TEXT,
        PRIMARY KEY (interaction_id, person)
    )
"""
_VOTES = (VOTES_TABLE,)

# A prompt may ask for a collaboration mode (Codex): "/plan TEXT", or a decision on a plan
# card (Implement: "default", Keep planning: "plan"); NULL: the agent's own.
_PROMPT_MODE = (
    "ALTER TABLE prompts ADD COLUMN mode TEXT CHECK (mode IS NULL OR mode IN ('plan', 'default'))",
)

# issue 19: the host that runs a session's agents (``run --host``), set when the session is
# made on a PostgreSQL ledger that several hosts share; NULL: this machine (a SQLite ledger's
# rows, and those a single host made on PostgreSQL before hosts, which the host running
# their project adopts at start). Recovery ends only its own host's epochs.
_SESSION_HOST = (
    "ALTER TABLE sessions ADD COLUMN host TEXT",
    "CREATE INDEX sessions_host ON sessions(host)",
)

# issue 19, design point 3: a decision or a prompt wakes the host that runs its session, in
# the committing transaction (NOTIFY is sent at COMMIT only): gateway/store/wakeups.py listens.
# SQLite: one host, nothing to wake.
_WAKE_THE_OWNER = (
    """
    CREATE FUNCTION wake_session_host() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
        session TEXT;
    BEGIN
        SELECT s.host, s.id INTO owner, session FROM interactions i
            JOIN sessions s ON s.id = i.session_id WHERE i.id = NEW.interaction_id;
        IF owner IS NOT NULL THEN
            PERFORM pg_notify('host_' || owner, session);
        END IF;
        RETURN NEW;
    END
    $$
    """,
    "CREATE TRIGGER decisions_wake_host AFTER INSERT ON decisions"
    " FOR EACH ROW EXECUTE FUNCTION wake_session_host()",
    # a prompt queued (by any host) for a session of a host wakes that host too
    """
    CREATE FUNCTION wake_prompt_host() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
    BEGIN
        SELECT host INTO owner FROM sessions WHERE id = NEW.session_id;
        IF owner IS NOT NULL THEN
            PERFORM pg_notify('host_' || owner, NEW.session_id);
        END IF;
        RETURN NEW;
    END
    $$
    """,
    "CREATE TRIGGER prompts_wake_host AFTER INSERT ON prompts"
    " FOR EACH ROW EXECUTE FUNCTION wake_prompt_host()",
)

# issue 19, design point 4: a secret answer submitted on one host for a session another host
# runs, sealed (gateway/store/sealing.py: AES-GCM under a key derived from the shared HMAC key) in
# the decide transaction; the owner opens it and deletes the row in the transaction that
# records its write, and every other end of the interaction deletes it. Text (base64url), the
# same column on both backends. On SQLite (one host) no row is ever written.
_SEALED_ANSWERS = (
    """
    CREATE TABLE sealed_answers (
        interaction_id TEXT PRIMARY KEY REFERENCES interactions(id),
        sealed TEXT NOT NULL,
        sealed_at TEXT NOT NULL
    )
    """,
)

# Leases by the database's clock (issue 19, design point 5; gateway/store/leases.py): one row
# per lease, its fence only grows. PostgreSQL only: a single host on SQLite needs no lease.
_LEASES = (
    """
    CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        fence BIGINT NOT NULL CHECK (fence >= 1),
        expires_at TIMESTAMPTZ NOT NULL
    )
    """,
)

# issue 19, design point 8: a person's answers in progress to a card's form, where the next
# click of the form may reach another host. Keyed by interaction and person (``Actor.key``);
# the payload is platforms/form_drafts.py's, its secret answers sealed (gateway/store/sealing.py).
# A draft is read only while its interaction is pending and before ``expires_at``; a submit
# deletes it, ``FormDraftLedger.purge`` the rest.
_FORM_DRAFTS = (
    """
    CREATE TABLE form_drafts (
        interaction_id TEXT NOT NULL REFERENCES interactions(id),
        person TEXT NOT NULL,
        payload TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        PRIMARY KEY (interaction_id, person)
    )
    """,
    "CREATE INDEX form_drafts_expiry ON form_drafts(expires_at)",
)

# issue 19, design point 6: where the next Telegram poller starts, per receiver lease
# ("telegram:<bot id>"), written by the lease's holder with its fence after each batch's
# effects are committed (gateway/store/receiver_offsets.py). PostgreSQL only: a single host
# polls alone and keeps the offset in memory (Telegram keeps the rest).
_RECEIVER_OFFSETS = (
    """
    CREATE TABLE receiver_offsets (
        lease TEXT PRIMARY KEY,
        next_offset BIGINT NOT NULL
    )
    """,
)

# issue 19, design point 7: a bot's rate budgets, shared by the hosts that send with it
# (gateway/store/rate_buckets.py). A row per (platform, bot, bucket): ``times`` the calls in
# its window, as epoch seconds of the database's clock (a call in flight as a mark in the
# future, replaced by its return time), ``hold_until`` a 429's end, ``used_at`` the last
# take that named it (an idle row is purged). A single host keeps
# its budgets in memory (platforms/outbox.py), so SQLite has no such table.
_RATE_BUCKETS = (
    """
    CREATE TABLE rate_buckets (
        platform TEXT NOT NULL,
        bot TEXT NOT NULL,
        key TEXT NOT NULL,
        times DOUBLE PRECISION[] NOT NULL DEFAULT '{}',
        hold_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        used_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        PRIMARY KEY (platform, bot, key)
    )
    """,
)

# issue 19: a command received by one host for a session another host runs, which only that
# host can carry out (/stop interrupts its agent, /new ends it, /resume wakes its runner,
# /grants and /revoke read and change what its agent and its rules file hold): a row the
# receiver writes, whose insert wakes the owner (the payload "request:<session id>", at
# COMMIT) and which the owner takes (deletes) once, while it holds its host lease with its
# fence (gateway/store/requests.py). A row the owner never took is dropped by the reaper or
# the owner's recovery, never acted on later. PostgreSQL only: one host acts on its own.
_SESSION_REQUESTS = (
    """
    CREATE TABLE session_requests (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        kind TEXT NOT NULL,
        args TEXT NOT NULL DEFAULT '',
        actor_platform TEXT NOT NULL,
        actor_user_id TEXT NOT NULL,
        actor_display TEXT NOT NULL,
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        by_host TEXT NOT NULL,
        requested_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX session_requests_session ON session_requests(session_id)",
    """
    CREATE FUNCTION wake_request_host() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
    BEGIN
        SELECT host INTO owner FROM sessions WHERE id = NEW.session_id;
        IF owner IS NOT NULL THEN
            PERFORM pg_notify('host_' || owner, 'request:' || NEW.session_id);
        END IF;
        RETURN NEW;
    END
    $$
    """,
    "CREATE TRIGGER session_requests_wake_host AFTER INSERT ON session_requests"
    " FOR EACH ROW EXECUTE FUNCTION wake_request_host()",
)

# the tables only a shared (PostgreSQL) ledger has: what several hosts need and one does not
POSTGRESQL_ONLY_TABLES = frozenset(
    {"leases", "receiver_offsets", "rate_buckets", "session_requests"}
)

# Which platform messages show each part of a turn's text (a section, split to a platform's
# limit): the recovery of a gateway that died mid-turn edits them, so a tool line it showed
# running ("▸") is closed there too, as /stop and an agent's crash close it live
_TURN_MESSAGES = (
    """
    CREATE TABLE turn_messages (
        turn_id INTEGER NOT NULL REFERENCES turns(id),
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        section INTEGER NOT NULL CHECK (section >= 0),
        part INTEGER NOT NULL CHECK (part >= 0),
        message_id TEXT NOT NULL,
        PRIMARY KEY (turn_id, platform, space, channel, thread, section, part)
    )
    """,
)

# issue 31: a person names a session (/name), to find it again in /sessions and /switch to it
_SESSION_NAME = ("ALTER TABLE sessions ADD COLUMN name TEXT",)

# issue 31: what a person chose for a session, used from its next turn and after a restart:
# the model (/model, one of the project's ``models``) and the approval policy and sandbox
# (Codex) or the permission mode (Claude Code) (/mode, its ``allowed_modes``); NULL: the
# project's own
# ... and who asks an interaction (gateway.domain.InteractionOrigin): the agent, the gateway's
# plan (until now: the rows without a native key), or a setting change an approver accepts
_SESSION_SETTINGS = (
    "ALTER TABLE sessions ADD COLUMN model TEXT",
    "ALTER TABLE sessions ADD COLUMN approval_policy TEXT",
    "ALTER TABLE sessions ADD COLUMN sandbox TEXT",
    "ALTER TABLE sessions ADD COLUMN permission_mode TEXT",
    "ALTER TABLE interactions ADD COLUMN origin TEXT NOT NULL DEFAULT 'agent'"
    " CHECK (origin IN ('agent', 'plan', 'setting'))",
    "UPDATE interactions SET origin = 'plan' WHERE native_key IS NULL",
)

# issue 32: the files sent with a prompt (gateway.attachments.InboundAttachment: name, size,
# the platform's reference), kept with it so that a held or queued prompt keeps its files
# across a restart; downloaded by the session's host when its turn comes
_PROMPT_ATTACHMENTS = (
    "ALTER TABLE prompts ADD COLUMN attachments_json TEXT NOT NULL DEFAULT '[]'",
)

# issue 36: the indexes the console's pages, /pending, the audit export and pruning read by
# (each scanned the whole table, ORDER BY created_at, before), and the content hash an
# interaction had before retention pruned its details (gateway/store/retention.py): the audit
# export and the votes keep naming the content that was decided. NULL: the details are whole
# (the hash is computed from the row, gateway/store/interaction_rows.py).
_LEDGER_INDEXES = (
    "CREATE INDEX interactions_created ON interactions(created_at, id)",
    "CREATE INDEX interactions_live ON interactions(created_at, id)"
    " WHERE state IN ('decided', 'delivered', 'pending')",
    "CREATE INDEX interactions_updated ON interactions(updated_at)",
    "CREATE INDEX audit_at ON audit(at)",
    # pruning's: only the rows it has still to empty are in these two
    "CREATE INDEX prompts_text_kept ON prompts(updated_at) WHERE text <> ''",
    "CREATE INDEX interactions_detail_kept ON interactions(updated_at)"
    " WHERE detail_json IS NOT NULL",
    "CREATE INDEX turns_ended ON turns(ended_at)",
    "CREATE INDEX grants_interaction ON grants(interaction_id)",
    "CREATE INDEX timeline_entries_interaction ON timeline_entries(interaction_id)",
    "ALTER TABLE interactions ADD COLUMN pruned_hash TEXT",
)

# issue 35: scheduled work. A schedule is a row; a run is claimed by compare-and-set on its
# stored next time, and its row (unique: the schedule and the due instant) is inserted in the
# same transaction (gateway/store/schedules.py). Times are instants (UTC text), computed by the
# scheduler's clock (gateway/clock.py), never by the database's. A deleted schedule keeps its
# row (its runs and audit name it). ``name``: a config entry's stable id across hosts; NULL for
# one made in chat.
_SCHEDULES = (
    """
    CREATE TABLE schedules (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project TEXT NOT NULL,
        name TEXT,
        cron TEXT,
        zone TEXT NOT NULL,
        text TEXT NOT NULL,
        platform TEXT NOT NULL,
        space TEXT NOT NULL,
        channel TEXT NOT NULL,
        thread TEXT NOT NULL,
        creator_platform TEXT NOT NULL,
        creator_user_id TEXT NOT NULL,
        creator_display TEXT NOT NULL,
        session_name TEXT,
        paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
        next_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        deleted_at TEXT,
        UNIQUE (project, name)
    )
    """,
    "CREATE INDEX schedules_due ON schedules(next_at) WHERE deleted_at IS NULL AND paused = 0",
    """
    CREATE TABLE schedule_runs (
        schedule_id INTEGER NOT NULL REFERENCES schedules(id),
        due_at TEXT NOT NULL,
        state TEXT NOT NULL
            CHECK (state IN ('claimed', 'started', 'skipped', 'done', 'failed')),
        reason TEXT,
        text TEXT NOT NULL,
        host TEXT,
        session_id TEXT,
        claimed_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (schedule_id, due_at)
    )
    """,
    "CREATE INDEX schedule_runs_open ON schedule_runs(state) WHERE state IN ('claimed', 'started')",
)

# issue 35, branch schedules35b: the session a run's fresh session took the conversation
# from, given back to it when the run is over (gateway/sessions/schedule_runs.py)
_RUN_HANDS_BACK = ("ALTER TABLE schedule_runs ADD COLUMN replaced_session_id TEXT",)

# issue 35, branch sched35c: the thread a schedule speaks in (a forum topic, a Slack thread
# opened for it), kept apart from the conversation the config file names (``thread`` and
# the columns beside it), so that the start-up sync, which compares and rewrites those,
# leaves it alone; NULL: it speaks in that conversation itself
_SCHEDULE_OWN_THREAD = ("ALTER TABLE schedules ADD COLUMN own_thread TEXT",)

# issue 32, a prompt whose files could not be fetched (or were refused when its turn came):
# it waits, interrupted, for its author's choice on buttons (gateway/sessions/file_choice.py):
# send it without them, fetch them again, or drop it. ``files_choice``: NULL (nothing asked),
# 'waiting', or what was chosen; ``files_round``: how many times its files failed, named by
# the buttons of each offer so that those of an earlier offer are stale. On PostgreSQL a
# prompt queued again (a choice, made on any host) wakes its session's host, as a new one does.
_FILES_CHOICE = (
    "ALTER TABLE prompts ADD COLUMN files_choice TEXT"
    " CHECK (files_choice IN ('waiting', 'without', 'again', 'dropped'))",
    "ALTER TABLE prompts ADD COLUMN files_round INTEGER NOT NULL DEFAULT 0",
)
_FILES_CHOICE_WAKES = (
    *(postgresql_ddl(statement) for statement in _FILES_CHOICE),
    "CREATE TRIGGER prompts_requeued_wake_host AFTER UPDATE OF state ON prompts"
    " FOR EACH ROW WHEN (NEW.state = 'queued' AND OLD.state <> 'queued')"
    " EXECUTE FUNCTION wake_prompt_host()",
)

# issue 36, branch sweep36: the safety sweep's question (gateway/store/host_work.py) reads
# what is open only: the prompts a runner could claim, by this partial index (the sessions'
# own rows are looked up by key for each one found), so its cost grows with queued prompts,
# not with a host's sessions. The in-flight probe and the decided interactions already had
# theirs (``prompts_queue``, ``interactions_state``).
_OPEN_WORK_INDEX = (
    "CREATE INDEX prompts_claimable ON prompts(session_id) WHERE state = 'queued' AND held = 0",
)
# ... and on PostgreSQL a wake-up says what woke the host: "decision:<session id>" (a
# decision committed: its runner looks for what to deliver) or "prompt:<session id>" (a
# prompt queued or queued again: its runner looks at the queue), each one look, where the
# bare session id made the runner do both (gateway/sessions/engine.py ``_woken``)
_WAKE_SAYS_WHY = (
    *_OPEN_WORK_INDEX,
    """
    CREATE OR REPLACE FUNCTION wake_session_host() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
        session TEXT;
    BEGIN
        SELECT s.host, s.id INTO owner, session FROM interactions i
            JOIN sessions s ON s.id = i.session_id WHERE i.id = NEW.interaction_id;
        IF owner IS NOT NULL THEN
            PERFORM pg_notify('host_' || owner, 'decision:' || session);
        END IF;
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION wake_prompt_host() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
    BEGIN
        SELECT host INTO owner FROM sessions WHERE id = NEW.session_id;
        IF owner IS NOT NULL THEN
            PERFORM pg_notify('host_' || owner, 'prompt:' || NEW.session_id);
        END IF;
        RETURN NEW;
    END
    $$
    """,
)

# the card offered under a prompt whose files failed (gateway/sessions/file_choice.py): the
# reason it gives and whether it offers "Try again", kept as the prompt starts to wait, and
# its message in the prompt's conversation once shown (NULL: not shown yet). A card its
# platform failed to show is shown once the platform is back, after a restart too; and the
# card is edited to say what was chosen (its buttons gone) by whichever host takes the press
_FILES_CARD = (
    "ALTER TABLE prompts ADD COLUMN files_card_why TEXT",
    "ALTER TABLE prompts ADD COLUMN files_card_again INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE prompts ADD COLUMN files_card_message TEXT",
    "CREATE INDEX prompts_files_waiting ON prompts(id) WHERE files_choice = 'waiting'",
)

# the audit read by event, newest first: each host's newest ``config.in_force`` (/status on
# a shared ledger compares the hosts' configs), found without walking back through every
# other entry since (a busy ledger adds a few at each approval, and keeps them a year)
_AUDIT_BY_EVENT = ("CREATE INDEX audit_event ON audit(event, id)",)

# issue 36, CPU per approval: an index is written whenever a column it holds or filters by
# is (each page written is a frame in the write-ahead log, two system calls), so the ones
# every step rewrote (``updated_at``, ``state``) now hold only the rows their readers look
# for: pruning's two, closed requests only (a live request's updated_at moves at each step,
# and a live request is never pruned); the cards' state, the failed copies only
# (``list_failed``). ``interactions_state`` goes: every question by a request's state asks
# for live ones (the sweep's decided ones, a project's pending ones), and the live requests'
# partial index holds those. The live index tests equalities: SQLite built a temporary table
# for its IN list of three each time it tested a row written. A request's pending -> decided
# -> delivered and a card's sent -> edited now write one index of the request's, not four,
# and none of the card's. The queries spell the conditions as these do (``IS_LIVE``,
# ``IS_CLOSED`` in gateway/store/interaction_rows.py). ``audit_session`` goes too: no query
# reads the audit by session (the export reads it by request and by event), and every entry
# wrote it.
_INDEXES_OF_WHAT_IS_READ = (
    "DROP INDEX interactions_state",
    "DROP INDEX interactions_live",
    "DROP INDEX interactions_updated",
    "DROP INDEX interactions_detail_kept",
    "DROP INDEX interaction_messages_state",
    "DROP INDEX audit_session",
    "CREATE INDEX interactions_live ON interactions(created_at, id)"
    " WHERE state = 'pending' OR state = 'decided' OR state = 'delivered'",
    "CREATE INDEX interactions_closed ON interactions(updated_at)"
    " WHERE state <> 'pending' AND state <> 'decided' AND state <> 'delivered'",
    "CREATE INDEX interactions_detail_kept ON interactions(updated_at)"
    " WHERE detail_json IS NOT NULL"
    " AND state <> 'pending' AND state <> 'decided' AND state <> 'delivered'",
    "CREATE INDEX interaction_messages_failed ON interaction_messages(id) WHERE state = 'failed'",
)

# issue 36: a card's copy is recorded before it is sent, its message unknown (NULL), and
# the index by message held an entry for it too: the send's record moved that entry from
# the conversation's NULLs to its message, two leaves of the index written (2.3 pages of
# the write-ahead log per approval, with the create's). The one query that reads it
# (``CardCopies.shown_by``) asks for a message, never for none: the index holds sent copies.
_COPIES_BY_MESSAGE_SENT = (
    "DROP INDEX interaction_messages_ref",
    "CREATE INDEX interaction_messages_ref ON interaction_messages(platform, space, channel,"
    " thread, message_ref) WHERE message_ref IS NOT NULL",
)

# issue 36: a decision and a resolution are one row each, found by their request's id;
# with SQLite's hidden row number as their key, each was kept in two b-trees (the rows, and
# an index of the request's id), two pages of the write-ahead log per row written and two
# searches per read. Keyed by the request's id alone (WITHOUT ROWID), one of each.
# PostgreSQL keeps a table and its key's index, as before.
_DECISIONS_AND_RESOLUTIONS_BY_KEY = (
    """
    CREATE TABLE decisions_v2 (
        interaction_id TEXT PRIMARY KEY REFERENCES interactions(id),
        actor_platform TEXT NOT NULL,
        actor_user_id TEXT NOT NULL,
        actor_display TEXT NOT NULL,
        action_id TEXT,
        answers_json TEXT NOT NULL,
        message TEXT,
        decided_at TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    "INSERT INTO decisions_v2 (interaction_id, actor_platform, actor_user_id, actor_display,"
    " action_id, answers_json, message, decided_at) SELECT interaction_id, actor_platform,"
    " actor_user_id, actor_display, action_id, answers_json, message, decided_at"
    " FROM decisions ORDER BY interaction_id",
    "DROP TABLE decisions",
    "ALTER TABLE decisions_v2 RENAME TO decisions",
    """
    CREATE TABLE resolutions_v2 (
        interaction_id TEXT PRIMARY KEY REFERENCES interactions(id),
        how TEXT NOT NULL,
        by TEXT NOT NULL,
        note TEXT NOT NULL,
        at TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    "INSERT INTO resolutions_v2 (interaction_id, how, by, note, at)"
    " SELECT interaction_id, how, by, note, at FROM resolutions ORDER BY interaction_id",
    "DROP TABLE resolutions",
    "ALTER TABLE resolutions_v2 RENAME TO resolutions",
)

# issue 36: ``audit_event`` (migration 27) held every entry, two or more per approval, for
# two readers that ask for rare events: each host's newest ``config.in_force`` (/status on a
# shared ledger) and the schedule changes the export lists. Each reader now has a partial
# index of its events alone, and says the condition in its query as the index says it (the
# planner matches a partial index's terms as written, never a bound parameter's value).
_AUDIT_BY_THE_EVENTS_READ = (
    "DROP INDEX audit_event",
    "CREATE INDEX audit_config_in_force ON audit(id) WHERE event = 'config.in_force'",
    "CREATE INDEX audit_schedule_changes ON audit(id)"
    " WHERE event >= 'schedule.' AND event < 'schedule/'",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(version=1, name="initial ledger", statements=_INITIAL),
    Migration(
        version=2,
        name="a delivery whose outcome is unknown",
        statements=_UNKNOWN_DELIVERY,
        postgresql=_rebuilt_on_postgresql(_UNKNOWN_DELIVERY, "deliveries"),
    ),
    Migration(version=3, name="routes apart from the conversations shown", statements=_ROUTES),
    Migration(version=4, name="turn timelines", statements=_TIMELINE),
    Migration(
        version=5,
        name="held prompts, a card drawn again",
        statements=_HOLDS_AND_CARDS_AGAIN,
        postgresql=_rebuilt_on_postgresql(_HOLDS_AND_CARDS_AGAIN, "interaction_messages"),
    ),
    Migration(version=6, name="votes and the content a decision saw", statements=_VOTES),
    Migration(version=7, name="a prompt's collaboration mode", statements=_PROMPT_MODE),
    Migration(version=8, name="the host a session runs on", statements=_SESSION_HOST),
    Migration(
        version=9,
        name="a decision or a prompt wakes its session's host",
        statements=(),
        postgresql=_WAKE_THE_OWNER,
    ),
    Migration(version=10, name="secret answers sealed between hosts", statements=_SEALED_ANSWERS),
    Migration(version=11, name="form drafts any host reads", statements=_FORM_DRAFTS),
    Migration(version=12, name="leases", statements=(), postgresql=_LEASES),
    Migration(
        version=13,
        name="the Telegram poller's offset",
        statements=(),
        postgresql=_RECEIVER_OFFSETS,
    ),
    Migration(version=14, name="rate budgets per bot", statements=(), postgresql=_RATE_BUCKETS),
    Migration(
        version=15,
        name="commands for another host's session",
        statements=(),
        postgresql=_SESSION_REQUESTS,
    ),
    Migration(version=16, name="the messages that show a turn", statements=_TURN_MESSAGES),
    Migration(version=17, name="a session's name", statements=_SESSION_NAME),
    Migration(
        version=18,
        name="a person's settings; who asks an interaction",
        statements=_SESSION_SETTINGS,
    ),
    Migration(version=19, name="the files sent with a prompt", statements=_PROMPT_ATTACHMENTS),
    Migration(
        version=20,
        name="indexes for pages, /pending, audit and pruning; a pruned interaction's hash",
        statements=_LEDGER_INDEXES,
    ),
    Migration(version=21, name="schedules and their runs", statements=_SCHEDULES),
    Migration(
        version=22,
        name="the session a scheduled run gives the conversation back to",
        statements=_RUN_HANDS_BACK,
    ),
    Migration(
        version=23,
        name="a prompt whose files failed waits for its author's choice",
        statements=_FILES_CHOICE,
        postgresql=_FILES_CHOICE_WAKES,
    ),
    Migration(
        version=24,
        name="the thread a schedule speaks in, apart from its configured conversation",
        statements=_SCHEDULE_OWN_THREAD,
    ),
    Migration(
        version=25,
        name="the prompts a runner could claim, indexed; a wake-up says why",
        statements=_OPEN_WORK_INDEX,
        postgresql=_WAKE_SAYS_WHY,
    ),
    Migration(
        version=26,
        name="the card a prompt's files choice was offered on",
        statements=_FILES_CARD,
    ),
    Migration(version=27, name="the audit read by event", statements=_AUDIT_BY_EVENT),
    Migration(
        version=28,
        name="indexes that a live request's steps do not write",
        statements=_INDEXES_OF_WHAT_IS_READ,
    ),
    Migration(
        version=29,
        name="cards by message: the copies sent",
        statements=_COPIES_BY_MESSAGE_SENT,
    ),
    Migration(
        version=30,
        name="decisions and resolutions kept by their request's id",
        statements=_DECISIONS_AND_RESOLUTIONS_BY_KEY,
        postgresql=(),
    ),
    Migration(
        version=31,
        name="the audit by event: only the events read so",
        statements=_AUDIT_BY_THE_EVENTS_READ,
    ),
)


# Two hosts starting at once on one PostgreSQL ledger: each migration's transaction takes
# this advisory lock first, so one migrates and the other then finds it applied.
MIGRATION_LOCK = 0x4147_4C45  # "AGLE"


def apply_migrations(
    conn: Conn,
    migrations: Sequence[Migration],
    *,
    now: str,
    dialect: Dialect = SQLITE,
    errors: tuple[type[Exception], ...] = (sqlite3.Error,),
) -> list[int]:
    """Apply the migrations ``conn`` has not seen, in order; return the versions applied.

    Runs on the connection's thread. ``conn`` must be in autocommit mode: each migration
    runs in its own transaction (``dialect.begin_write``; on PostgreSQL after the advisory
    lock), so a failure leaves the earlier ones applied and this one not at all.
    """
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"migrations must be numbered 1..N in order, got {versions}")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        applied_now: list[int] = []
        for migration in migrations:
            conn.execute(dialect.begin_write)
            try:
                if dialect.backend is Backend.POSTGRESQL:
                    # a migration may take its time, and wait for another host's: the
                    # connection's interactive timeouts are not for it (this transaction only)
                    conn.execute("SET LOCAL statement_timeout = 0")
                    conn.execute("SET LOCAL lock_timeout = 0")
                    conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
                if _is_applied(conn, migration.version, known=len(migrations)):
                    conn.execute("ROLLBACK")
                    continue
                for statement in migration.statements_for(dialect):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, now),
                )
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            applied_now.append(migration.version)
    except errors as exc:
        raise StoreError(f"could not migrate the ledger: {exc}") from exc
    return applied_now


def _is_applied(conn: Conn, version: int, *, known: int) -> bool:
    row = conn.execute("SELECT max(version) AS newest FROM schema_version").fetchone()
    newest = row["newest"] if row is not None and row["newest"] is not None else 0
    if newest > known:
        raise StoreError(
            f"the ledger's schema is version {newest}, newer than this gateway knows "
            f"({known}): upgrade agent-gateway or use another data dir"
        )
    applied = conn.execute("SELECT 1 AS applied FROM schema_version WHERE version = ?", (version,))
    return applied.fetchone() is not None
