"""Retention without breaking the audit (issue 36): what goes, when, in small batches.

Two clocks (``[gateway.retention]``, :class:`RetentionRules`):

- **texts** (short): a finished prompt's text (the row stays, emptied: who asked, when, in
  which turn), a finished turn's timeline text (its entries stay: what happened, in order),
  and a closed request's details (``detail_json``; its title, summary, actions and
  questions stay, and the content hash it had is kept in ``pruned_hash``, so the audit
  export and the votes still name the content that was decided).
- **audit** (long, a year by default): a closed interaction whose agent process has ended,
  with its decision, votes, deliveries, resolution, card copies and audit entries, once it
  and every one of its audit entries are older than the clock; and the audit entries of no
  interaction older than it. Until then the audit export says who asked, who decided and
  what. The turn, prompt and session skeletons stay (small rows, referenced by the tables
  of files and schedules): docs/decisions.md.

Never pruned: an interaction a live grant references (a grant not revoked, with the texts of
its request), a live interaction (pending, decided, delivered), a prompt still queued,
running or waiting for its author's files choice, a turn still running, and the newest
``config.in_force`` entries the hosts compare (those entries are never pruned at all).

Each batch is one write transaction touching at most ``batch`` rows of each kind, so a live
session's writes wait for one batch at most, never for the whole prune. On PostgreSQL one
host prunes at a time: the ``retention`` lease (gateway/store/leases.py's table, taken and
given back through the writer's connection; a host that holds it and dies lets it lapse).

Hook for files into the agent (issue 32, merged into main after this branch forked): a
prompt whose text is pruned loses its files on the same clock. At merge,
:func:`_prune_prompt_texts` also sets ``attachments_json = '[]'`` (the names and saved paths
of its files, migration 19 on main) and counts the paths it cleared; the files themselves,
in the session's inbox inside its work dir, are deleted by the host that runs the session
(the work dir is on that host only), from those paths, after the batch commits.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import timedelta

from gateway.config.model import RetentionSection
from gateway.store.database import Conn, Database, fetch_all, fetch_one, parse_time
from gateway.store.dialect import Backend
from gateway.store.interaction_rows import IS_CLOSED, SELECT_INTERACTION, interaction_from_row

__all__ = [
    "KEPT_EVENTS",
    "LEASE",
    "PruneCounts",
    "Retention",
    "RetentionRules",
    "rules_of",
]

log = logging.getLogger(__name__)

LEASE = "retention"  # the lease one host prunes under (PostgreSQL)
LEASE_SECONDS = 300.0  # renewed at every batch; a host that died lets it lapse this soon
KEPT_EVENTS = ("config.in_force",)  # audit entries the hosts compare: never pruned
_IN_CHUNK = 100  # ids per ``IN (...)`` of a delete

_FINISHED_PROMPT = "('done', 'dropped', 'interrupted')"

# an interaction a grant references that is not revoked (gateway/store/grants.py)
_LIVE_GRANT = (
    "EXISTS (SELECT 1 FROM grants g WHERE g.interaction_id = i.id AND NOT EXISTS"
    " (SELECT 1 FROM audit a WHERE a.event = 'grant.revoked'"
    " AND a.interaction_id = g.interaction_id"
    " AND json_extract(a.details_json, '$.grant') = g.id))"
)

# a prompt waiting for its author's files choice is interrupted but not finished: the
# choice queues it again, words and files (gateway/store/prompts.py)
_PROMPT_TEXTS = (
    f"FROM prompts WHERE updated_at < ? AND state IN {_FINISHED_PROMPT} AND text <> ''"
    " AND coalesce(files_choice, '') <> 'waiting'"
)
_TIMELINE_TURNS = (
    "FROM turns t WHERE t.ended_at IS NOT NULL AND t.ended_at < ?"
    " AND EXISTS (SELECT 1 FROM timeline_text x WHERE x.turn_id = t.id)"
)
# a closed request whose whole rows go (the audit's clock): params (audit, audit)
_GOES_WHOLE = (
    "(i.updated_at < ?"
    " AND NOT EXISTS (SELECT 1 FROM audit a WHERE a.interaction_id = i.id AND a.at >= ?)"
    " AND EXISTS (SELECT 1 FROM runtime_epochs e WHERE e.session_id = i.session_id"
    " AND e.epoch = i.runtime_epoch AND e.ended_at IS NOT NULL))"
)
_INTERACTIONS = f"FROM interactions i WHERE {IS_CLOSED} AND NOT {_LIVE_GRANT} AND {_GOES_WHOLE}"
# details of a closed request that stays (one that goes whole is not emptied first):
# params (texts, audit, audit)
_DETAILS = (
    f"FROM interactions i WHERE i.updated_at < ? AND {IS_CLOSED}"
    f" AND i.detail_json IS NOT NULL AND NOT {_LIVE_GRANT} AND NOT {_GOES_WHOLE}"
)
_KEPT = "(" + ", ".join(f"'{event}'" for event in KEPT_EVENTS) + ")"
_LOOSE_AUDIT = (
    f"FROM audit a WHERE a.at < ? AND a.event NOT IN {_KEPT} AND (a.interaction_id IS NULL"
    " OR NOT EXISTS (SELECT 1 FROM interactions i WHERE i.id = a.interaction_id))"
)

# the rows of an interaction, deleted before it (children first: foreign keys)
_INTERACTION_CHILDREN = (
    "DELETE FROM timeline_text WHERE (turn_id, seq) IN (SELECT turn_id, seq"
    " FROM timeline_entries WHERE interaction_id IN ({ids}))",
    "DELETE FROM timeline_entries WHERE interaction_id IN ({ids})",
    "DELETE FROM votes WHERE interaction_id IN ({ids})",
    "DELETE FROM decisions WHERE interaction_id IN ({ids})",
    "DELETE FROM deliveries WHERE interaction_id IN ({ids})",
    "DELETE FROM resolutions WHERE interaction_id IN ({ids})",
    "DELETE FROM interaction_messages WHERE interaction_id IN ({ids})",
    "DELETE FROM sealed_answers WHERE interaction_id IN ({ids})",
    "DELETE FROM form_drafts WHERE interaction_id IN ({ids})",
    "DELETE FROM grants WHERE interaction_id IN ({ids})",  # revoked ones only (_LIVE_GRANT)
    "DELETE FROM audit WHERE interaction_id IN ({ids})",
    "DELETE FROM interactions WHERE id IN ({ids})",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class RetentionRules:
    """How long each kind of row is kept (``[gateway.retention]``), and the batch size."""

    texts: timedelta
    audit: timedelta
    batch: int = 100


def rules_of(section: RetentionSection) -> RetentionRules:
    return RetentionRules(
        texts=timedelta(days=section.text_days),
        audit=timedelta(days=section.audit_days),
        batch=section.batch_rows,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PruneCounts:
    """What a prune removed, or (a dry run) would remove."""

    prompt_texts: int = 0
    timeline_texts: int = 0  # turns whose text goes
    request_details: int = 0
    interactions: int = 0  # with their decisions, votes, deliveries, cards, audit entries
    audit_entries: int = 0  # entries of no interaction

    def __add__(self, other: PruneCounts) -> PruneCounts:
        return PruneCounts(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def lines(self) -> list[str]:
        return [
            f"prompt texts:       {self.prompt_texts}",
            f"turn timeline text: {self.timeline_texts} turns",
            f"request details:    {self.request_details}",
            f"interactions:       {self.interactions} (with decisions, votes, cards, audit)",
            f"other audit entries: {self.audit_entries}",
        ]


class Retention:
    """``store.retention``: what the rules would prune (:meth:`count`), and pruning it
    (:meth:`prune`, batch after batch)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _cutoffs(self, rules: RetentionRules) -> tuple[str, str]:
        now = parse_time(self._db.now())
        return self._db.stored_time(now - rules.texts), self._db.stored_time(now - rules.audit)

    async def count(self, rules: RetentionRules) -> PruneCounts:
        """What :meth:`prune` would remove now (a dry run: nothing is written)."""
        texts, audit = self._cutoffs(rules)

        def count(conn: Conn) -> PruneCounts:
            def n(sql: str, params: Sequence[object]) -> int:
                row = fetch_one(conn, f"SELECT count(*) AS n {sql}", params)
                return 0 if row is None else int(row["n"])

            return PruneCounts(
                prompt_texts=n(_PROMPT_TEXTS, (texts,)),
                timeline_texts=n(_TIMELINE_TURNS, (texts,)),
                request_details=n(_DETAILS, (texts, audit, audit)),
                interactions=n(_INTERACTIONS, (audit, audit)),
                audit_entries=n(_LOOSE_AUDIT, (audit,)),
            )

        return await self._db.read(count, on_thread=True)  # every row of five tables

    async def due(self, rules: RetentionRules) -> bool:
        """Whether :meth:`prune` would remove anything now: a read, each kind asked for one
        row only (an idle ledger's periodic prune takes no lease and writes nothing)."""
        texts, audit = self._cutoffs(rules)
        kinds: tuple[tuple[str, tuple[object, ...]], ...] = (
            (_PROMPT_TEXTS, (texts,)),
            (_TIMELINE_TURNS, (texts,)),
            (_DETAILS, (texts, audit, audit)),
            (_INTERACTIONS, (audit, audit)),
            (_LOOSE_AUDIT, (audit,)),
        )

        def due(conn: Conn) -> bool:
            return any(
                fetch_one(conn, f"SELECT 1 AS found {sql} LIMIT 1", params) is not None
                for sql, params in kinds
            )

        return await self._db.read(due, on_thread=True)

    async def prune(self, rules: RetentionRules, *, holder: str = "gateway") -> PruneCounts | None:
        """Prune in batches until a batch finds nothing; None when another host holds the
        lease (PostgreSQL: it prunes). Between batches the writer is free for live work."""
        shared = self._db.dialect.backend is Backend.POSTGRESQL
        if shared and not await self._db.write(lambda conn: _take_lease(conn, holder)):
            return None
        pruned = PruneCounts()
        try:
            while True:
                texts, audit = self._cutoffs(rules)
                one = functools.partial(
                    _prune_batch, texts=texts, audit=audit, batch=rules.batch, holder=holder
                )
                batch = await self._db.write(functools.partial(one, shared=shared), on_thread=True)
                if batch is None:  # the lease was lost (it lapsed): another host goes on
                    return pruned
                pruned += batch
                if batch.total == 0:
                    return pruned
                await asyncio.sleep(0)  # the live sessions' calls queued meanwhile go first
        finally:
            if shared:
                await self._db.write(lambda conn: _give_lease_back(conn, holder))


def _take_lease(conn: Conn, holder: str) -> bool:
    row = fetch_one(
        conn,
        "INSERT INTO leases AS l (name, holder, fence, expires_at)"
        " VALUES (?, ?, 1, now() + make_interval(secs => ?))"
        " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, fence = l.fence + 1,"
        " expires_at = excluded.expires_at WHERE l.expires_at < now() RETURNING fence",
        (LEASE, holder, LEASE_SECONDS),
    )
    return row is not None


def _renew_lease(conn: Conn, holder: str) -> bool:
    renewed = conn.execute(
        "UPDATE leases SET expires_at = now() + make_interval(secs => ?)"
        " WHERE name = ? AND holder = ? AND expires_at >= now()",
        (LEASE_SECONDS, LEASE, holder),
    )
    return renewed.rowcount == 1


def _give_lease_back(conn: Conn, holder: str) -> None:
    conn.execute(
        "UPDATE leases SET expires_at = now() - make_interval(secs => 1)"
        " WHERE name = ? AND holder = ?",
        (LEASE, holder),
    )


def _prune_batch(
    conn: Conn, *, texts: str, audit: str, batch: int, holder: str, shared: bool
) -> PruneCounts | None:
    """One transaction: at most ``batch`` rows of each kind."""
    if shared and not _renew_lease(conn, holder):
        return None
    gone = _prune_interactions(conn, audit, batch)
    return PruneCounts(
        prompt_texts=_prune_prompt_texts(conn, texts, batch),
        timeline_texts=_prune_timeline_texts(conn, texts, batch),
        # while whole requests go, the details of those that stay wait: finding them means
        # passing over every request still to go (a scan per batch on a big ledger)
        request_details=_prune_details(conn, texts, audit, batch) if gone < batch else 0,
        interactions=gone,
        audit_entries=_prune_loose_audit(conn, audit, batch),
    )


def _prune_prompt_texts(conn: Conn, before: str, batch: int) -> int:
    # the references to the files sent with it go with the text (issue 32); the files
    # themselves are in the inbox of the session's work dir, the agent's to keep or delete
    done = conn.execute(
        "UPDATE prompts SET text = '', attachments_json = '[]', files_card_why = NULL"
        f" WHERE id IN (SELECT id {_PROMPT_TEXTS} LIMIT ?)",
        (before, batch),
    )
    return done.rowcount


def _prune_timeline_texts(conn: Conn, before: str, batch: int) -> int:
    found = fetch_all(conn, f"SELECT t.id {_TIMELINE_TURNS} LIMIT ?", (before, batch))
    turns = [row["id"] for row in found]
    for chunk in _chunks(turns):
        conn.execute(f"DELETE FROM timeline_text WHERE turn_id IN ({_marks(chunk)})", tuple(chunk))
    return len(turns)


def _prune_details(conn: Conn, before: str, audit: str, batch: int) -> int:
    rows = fetch_all(
        conn,
        f"{SELECT_INTERACTION} WHERE i.id IN (SELECT i.id {_DETAILS} LIMIT ?)",
        (before, audit, audit, batch),
    )
    for row in rows:
        kept_hash = interaction_from_row(row).content_hash  # the hash of the whole content
        conn.execute(
            "UPDATE interactions SET detail_json = NULL, pruned_hash = ? WHERE id = ?",
            (kept_hash, row["id"]),
        )
    return len(rows)


def _prune_interactions(conn: Conn, before: str, batch: int) -> int:
    ids = [
        row["id"]
        for row in fetch_all(conn, f"SELECT i.id {_INTERACTIONS} LIMIT ?", (before, before, batch))
    ]
    for chunk in _chunks(ids):
        for statement in _INTERACTION_CHILDREN:
            conn.execute(statement.format(ids=_marks(chunk)), tuple(chunk))
    return len(ids)


def _prune_loose_audit(conn: Conn, before: str, batch: int) -> int:
    done = conn.execute(
        f"DELETE FROM audit WHERE id IN (SELECT a.id {_LOOSE_AUDIT} LIMIT ?)", (before, batch)
    )
    return done.rowcount


def _chunks(ids: list[object]) -> list[list[object]]:
    return [ids[i : i + _IN_CHUNK] for i in range(0, len(ids), _IN_CHUNK)]


def _marks(chunk: Sequence[object]) -> str:
    return ", ".join("?" * len(chunk))
