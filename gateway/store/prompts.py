"""The prompt queue (DESIGN.md, "Three channels"): persistent, ordered, bounded, idempotent.

A prompt moves ``queued → in_flight → done | interrupted``, or ``queued → dropped`` by
/clear. The first ending stays: a late "done" for a prompt whose runtime died is audited and
ignored. The same platform message (platform, conversation, message id) is never queued
twice, and past the configured depth nothing is queued and the caller is told.

A queued prompt given to the running turn instead (steering, gateway/sessions/steering.py)
moves ``queued → done`` when it is taken, before it is written, and back to ``queued`` only
when the agent refuses it (:meth:`PromptQueue.take_for_steering`).

A queued prompt may be *held* (/stop, a restart, an agent that failed to start): it keeps its
place among the held ones but is not sent until :meth:`PromptQueue.resume`, which puts the
held prompts, in their order, after every prompt queued since. A prompt queued while others
are held is not held: what a person types after /stop is what they want now, and runs next.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.attachments import InboundAttachment, attachments_from_json, attachments_to_json
from gateway.domain import Actor, ConversationRef
from gateway.errors import StoreError
from gateway.store.database import (
    Conn,
    Database,
    Reader,
    Row,
    conversation_from_row,
    conversation_params,
    fetch_all,
    fetch_one,
    parse_time,
)
from gateway.store.dialect import FOR_UPDATE
from gateway.store.records import (
    EnqueueOutcome,
    EnqueueResult,
    FilesCard,
    FilesChoice,
    PromptRecord,
    PromptState,
)
from gateway.store.sessions import ON_HOST

__all__ = ["PromptQueue", "hold_queue", "prompt_by_id"]

_COLUMNS = (
    "id, session_id, platform, space, channel, thread, platform_message_id, author_platform,"
    " author_user_id, author_display, text, state, position, created_at, updated_at, held, mode,"
    " attachments_json, files_choice, files_round, files_card_why, files_card_again,"
    " files_card_message"
)
_IDS_PER_QUERY = 500  # well under SQLite's limit of bound parameters
_FINAL = (PromptState.DONE, PromptState.INTERRUPTED, PromptState.DROPPED)


class PromptQueue:
    """``store.prompts``: each session's queue of chat messages for its agent."""

    def __init__(self, db: Database, *, views: Reader | None = None) -> None:
        self._db = db
        self._views: Reader = views or db  # reads that need not wait behind a write

    async def claimable(self, session_id: str) -> bool:
        """Whether :meth:`claim_next` would claim a prompt now (one queued, not held, none
        in flight): a read, on a reader, so that a runner woken with nothing to take (a
        NOTIFY of its own prompt come late, a turn's end with nothing queued) writes
        nothing (issue 36)."""
        row = await self._views.read(
            lambda conn: fetch_one(
                conn,
                "SELECT 1 AS found FROM prompts WHERE session_id = ? AND state = 'queued'"
                " AND held = 0 AND NOT EXISTS (SELECT 1 FROM prompts"
                "                 WHERE session_id = ? AND state = 'in_flight') LIMIT 1",
                (session_id, session_id),
            ),
            one_statement=True,
        )
        return row is not None

    async def enqueue(
        self,
        session_id: str,
        *,
        conversation: ConversationRef,
        platform_message_id: str,
        author: Actor,
        text: str,
        max_depth: int,
        mode: str | None = None,
        attachments: tuple[InboundAttachment, ...] = (),
        files_refused: str | None = None,
    ) -> EnqueueResult:
        """Queue a message with the files sent with it, unless it was queued before
        (DUPLICATE: the earlier prompt, files and all) or the queue holds ``max_depth``
        prompts already (FULL, audited). Never raises for either.

        ``files_refused``: why its files are refused already (their declared sizes, issue
        32): it is kept waiting for its author's choice, as a prompt whose files failed when
        its turn came (:meth:`wait_for_files_choice`), never queued to be sent."""
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        key = (*conversation_params(conversation), platform_message_id)

        def enqueue(conn: Conn) -> EnqueueResult:
            # the three reads are sent together (one wait on PostgreSQL): the session's lock
            # first, so the counts and the earlier prompt are read under it
            locked = conn.execute(
                f"SELECT closed_at FROM sessions WHERE id = ?{FOR_UPDATE}", (session_id,)
            )
            counted = conn.execute(
                "SELECT count(*) AS queued, coalesce(sum(held), 0) AS held FROM prompts"
                " WHERE session_id = ? AND state = 'queued'",
                (session_id,),
            )
            found = conn.execute(
                f"SELECT {_COLUMNS} FROM prompts WHERE platform = ? AND space = ?"
                " AND channel = ? AND thread = ? AND platform_message_id = ?",
                key,
            )
            session, counts, earlier = locked.fetchone(), counted.fetchone(), found.fetchone()
            if session is None or session["closed_at"] is not None:
                raise StoreError(f"session {session_id} is closed or unknown")
            held = int(counts["held"])
            if earlier is not None:
                prompt = _prompt_from_row(earlier)
                ahead = _queued_before(conn, prompt)
                return EnqueueResult(
                    outcome=EnqueueOutcome.DUPLICATE, prompt=prompt, ahead=ahead, held=held
                )
            depth = int(counts["queued"])
            if depth >= max_depth:
                self._db.audit(
                    conn,
                    "prompt.refused_full",
                    actor=author,
                    session_id=session_id,
                    details={"platform_message_id": platform_message_id, "depth": depth},
                )
                return EnqueueResult(
                    outcome=EnqueueOutcome.FULL, prompt=None, ahead=depth, held=held
                )
            now = self._db.now()
            inserted = fetch_one(
                conn,
                "INSERT INTO prompts (session_id, platform, space, channel, thread,"
                " platform_message_id, author_platform, author_user_id, author_display, text,"
                " mode, attachments_json, state, files_choice, files_round, files_card_why,"
                " position, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                " (SELECT coalesce(max(position), 0) + 1 FROM prompts WHERE session_id = ?),"
                f" ?, ?) RETURNING {_COLUMNS}",
                (
                    session_id,
                    *key,
                    author.platform,
                    author.user_id,
                    author.display,
                    text,
                    mode,
                    attachments_to_json(attachments),
                    "queued" if files_refused is None else "interrupted",
                    None if files_refused is None else FilesChoice.WAITING.value,
                    0 if files_refused is None else 1,
                    files_refused,  # its card offers no "Try again": refused, not failed
                    session_id,
                    now,
                    now,
                ),
            )
            assert inserted is not None
            prompt = _prompt_from_row(inserted)
            if files_refused is not None:
                self._db.audit(
                    conn,
                    "prompt.files_failed",
                    actor=author,
                    session_id=session_id,
                    details={"prompt_id": prompt.id, "round": 1, "why": files_refused},
                )
            return EnqueueResult(
                outcome=EnqueueOutcome.QUEUED, prompt=prompt, ahead=depth - held, held=held
            )

        return await self._db.write(enqueue)

    async def claim_next(self, session_id: str) -> PromptRecord | None:
        """Take the oldest queued prompt that is not held and mark it in flight, in one
        transaction.

        None when nothing but held prompts waits, or a prompt is already in flight (a new
        turn waits for the running one to end).
        """

        def claim_next(conn: Conn) -> PromptRecord | None:
            _lock_session(conn, session_id)
            # the choice and the claim in one statement, returning the claimed prompt (one
            # wait on PostgreSQL, the session's lock sent before it)
            row = fetch_one(
                conn,
                "UPDATE prompts SET state = 'in_flight', updated_at = ?"
                " WHERE id = (SELECT id FROM prompts WHERE session_id = ? AND state = 'queued'"
                " AND held = 0"
                " AND NOT EXISTS (SELECT 1 FROM prompts"
                "                 WHERE session_id = ? AND state = 'in_flight')"
                f" ORDER BY position LIMIT 1) RETURNING {_COLUMNS}",
                (self._db.now(), session_id, session_id),
            )
            return None if row is None else _prompt_from_row(row)

        return await self._db.write(claim_next)

    async def in_flight(self, session_id: str) -> PromptRecord | None:
        """The session's prompt in flight, if one is (what a claim whose answer was lost
        took, read back)."""
        return await self._db.read(
            lambda conn: _optional_prompt(
                fetch_one(
                    conn,
                    f"SELECT {_COLUMNS} FROM prompts WHERE session_id = ? AND state = 'in_flight'",
                    (session_id,),
                )
            ),
            one_statement=True,
        )

    async def mark_done(self, prompt_id: int) -> PromptRecord:
        return await self._finish(prompt_id, PromptState.DONE)

    async def mark_interrupted(self, prompt_id: int) -> PromptRecord:
        return await self._finish(prompt_id, PromptState.INTERRUPTED)

    async def release(self, prompt_id: int) -> None:
        """Put a claimed prompt back at its place in the queue: nothing was sent yet (its
        turn could not start because the runtime ended in between)."""
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE prompts SET state = 'queued', updated_at = ?"
                " WHERE id = ? AND state = 'in_flight'",
                (self._db.now(), prompt_id),
            )
        )

    async def take_for_steering(self, prompt_id: int, *, turn_id: int) -> PromptRecord | None:
        """Take a queued prompt (not held) to give to the running turn ``turn_id``: it is
        marked done at once, before it is written, so that it can never also be claimed as
        a turn of its own (at most once, as a prompt in flight at a restart). None when it
        is no longer queued (claimed, steered, cleared) or is held. Audited."""

        def take(conn: Conn) -> PromptRecord | None:
            row = fetch_one(
                conn,
                "UPDATE prompts SET state = 'done', updated_at = ?"
                " WHERE id = ? AND state = 'queued' AND held = 0"
                f" RETURNING {_COLUMNS}",
                (self._db.now(), prompt_id),
            )
            if row is None:
                return None
            prompt = _prompt_from_row(row)
            self._db.audit(
                conn,
                "prompt.steered",
                actor=prompt.author,
                session_id=prompt.session_id,
                details={"prompt_id": prompt_id, "turn_id": turn_id},
            )
            return prompt

        return await self._db.write(take)

    async def return_unsteered(self, prompt_id: int, *, reason: str) -> bool:
        """The agent refused a prompt taken for steering: nothing of it was taken, so it is
        queued again at its place (it runs as a turn of its own). False if it was not a
        steered prompt. Audited."""

        def give_back(conn: Conn) -> bool:
            row = fetch_one(
                conn,
                "UPDATE prompts SET state = 'queued', updated_at = ?"
                " WHERE id = ? AND state = 'done' RETURNING session_id",
                (self._db.now(), prompt_id),
            )
            if row is None:
                return False
            self._db.audit(
                conn,
                "prompt.steer_refused",
                session_id=row["session_id"],
                details={"prompt_id": prompt_id, "reason": reason},
            )
            return True

        return await self._db.write(give_back)

    async def wait_for_files_choice(self, prompt_id: int, *, why: str, again: bool) -> PromptRecord:
        """The prompt in flight whose files failed (issue 32) waits for its author's choice:
        interrupted (never claimed, held, resumed or recovered as a queued prompt is, so a
        restart keeps it as it is), its files kept, its round counted (an earlier offer's
        buttons are stale). Audited."""

        def wait(conn: Conn) -> PromptRecord:
            row = fetch_one(
                conn,
                "UPDATE prompts SET state = 'interrupted', files_choice = 'waiting',"
                " files_round = files_round + 1, files_card_why = ?, files_card_again = ?,"
                " files_card_message = NULL, updated_at = ?"
                f" WHERE id = ? AND state = 'in_flight' RETURNING {_COLUMNS}",
                (why, int(again), self._db.now(), prompt_id),
            )
            if row is None:
                raise StoreError(f"prompt {prompt_id} is not in flight")
            prompt = _prompt_from_row(row)
            self._db.audit(
                conn,
                "prompt.files_failed",
                session_id=prompt.session_id,
                details={"prompt_id": prompt_id, "round": prompt.files_round, "why": why},
            )
            return prompt

        return await self._db.write(wait)

    async def files_card_shown(self, prompt_id: int, *, files_round: int, message_id: str) -> bool:
        """The card of the prompt's offer in ``files_round`` is shown as ``message_id``: kept,
        so that whichever host takes the press edits it (False: a newer offer came since)."""

        def shown(conn: Conn) -> bool:
            done = conn.execute(
                "UPDATE prompts SET files_card_message = ? WHERE id = ? AND files_round = ?",
                (message_id, prompt_id, files_round),
            )
            return done.rowcount == 1

        return await self._db.write(shown)

    async def files_cards_unshown(
        self, *, host: str | None = None, platform: str | None = None
    ) -> list[PromptRecord]:
        """The prompts waiting for their author's files choice whose card no platform showed
        yet (of the sessions on ``host``, in ``platform``'s conversations; None: any)."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM prompts WHERE state = 'interrupted'"
                " AND files_choice = 'waiting' AND files_card_message IS NULL"
                " AND files_card_why IS NOT NULL"
                " AND (CAST(? AS TEXT) IS NULL OR platform = ?)"
                f" AND session_id IN (SELECT id FROM sessions WHERE {ON_HOST}) ORDER BY id",
                (platform, platform, host, host),
            ),
            one_statement=True,
        )
        return [_prompt_from_row(row) for row in rows]

    async def choose_for_files(
        self, prompt_id: int, *, files_round: int, choice: FilesChoice, actor: Actor
    ) -> PromptRecord | None:
        """The author's choice on a prompt waiting for one (issue 32), by compare-and-set:
        WITHOUT and AGAIN queue it again at its own place (it runs next), DROPPED drops it.
        None when it no longer waits in that round (chosen already, or an earlier offer's
        button): nothing changes. Audited."""
        if choice is FilesChoice.WAITING:
            raise ValueError("waiting is not a choice")
        state = PromptState.DROPPED if choice is FilesChoice.DROPPED else PromptState.QUEUED

        def choose(conn: Conn) -> PromptRecord | None:
            row = fetch_one(
                conn,
                "UPDATE prompts SET state = ?, held = 0, files_choice = ?, updated_at = ?"
                " WHERE id = ? AND state = 'interrupted' AND files_choice = 'waiting'"
                f" AND files_round = ? RETURNING {_COLUMNS}",
                (state.value, choice.value, self._db.now(), prompt_id, files_round),
            )
            if row is None:
                return None
            prompt = _prompt_from_row(row)
            self._db.audit(
                conn,
                "prompt.files_choice",
                actor=actor,
                session_id=prompt.session_id,
                details={"prompt_id": prompt_id, "round": files_round, "choice": choice},
            )
            return prompt

        return await self._db.write(choose)

    async def _finish(self, prompt_id: int, state: PromptState) -> PromptRecord:
        def finish(conn: Conn) -> PromptRecord:
            # the prompt in flight finished, and returned as written (one wait on
            # PostgreSQL); no row: it was not in flight, and is read to say why
            finished = fetch_one(
                conn,
                "UPDATE prompts SET state = ?, updated_at = ?"
                f" WHERE id = ? AND state = 'in_flight' RETURNING {_COLUMNS}",
                (state.value, self._db.now(), prompt_id),
            )
            if finished is not None:
                return _prompt_from_row(finished)
            prompt = _prompt(conn, prompt_id)
            if prompt.state in _FINAL:
                if prompt.state is not state:
                    self._db.audit(
                        conn,
                        "prompt.late_end_ignored",
                        session_id=prompt.session_id,
                        details={"prompt_id": prompt_id, "state": state, "kept": prompt.state},
                    )
                return prompt
            raise StoreError(f"prompt {prompt_id} is {prompt.state}, not in flight")

        return await self._db.write(finish)

    async def get(self, prompt_id: int) -> PromptRecord | None:
        row = await self._db.read(
            lambda conn: fetch_one(
                conn, f"SELECT {_COLUMNS} FROM prompts WHERE id = ?", (prompt_id,)
            ),
            one_statement=True,
        )
        return None if row is None else _prompt_from_row(row)

    async def first_texts(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The text of each session's first prompt (the first words a person said to it,
        whatever became of the prompt), keyed by session id; a session without one is left
        out. One read, whatever the number of sessions: how the console titles sessions."""
        ids = list(dict.fromkeys(session_ids))

        def read(conn: Conn) -> dict[str, str]:
            found: dict[str, str] = {}
            for at in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[at : at + _IDS_PER_QUERY]
                marks = ", ".join("?" * len(chunk))
                rows = fetch_all(
                    conn,
                    "SELECT p.session_id, p.text FROM prompts p JOIN (SELECT min(id) AS id"
                    f" FROM prompts WHERE session_id IN ({marks}) GROUP BY session_id) f"
                    " ON p.id = f.id",
                    tuple(chunk),
                )
                found.update((row["session_id"], row["text"]) for row in rows)
            return found

        return await self._db.read(read) if ids else {}

    async def list_queued(self, session_id: str) -> list[PromptRecord]:
        """What waits, in the order it will be sent."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM prompts WHERE session_id = ? AND state = 'queued'"
                " ORDER BY position",
                (session_id,),
            ),
            one_statement=True,
        )
        return [_prompt_from_row(row) for row in rows]

    async def waiting_for_files(self, session_id: str) -> list[PromptRecord]:
        """The prompts whose files did not come that wait for their author's choice."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM prompts WHERE session_id = ? AND state = 'interrupted'"
                " AND files_choice = 'waiting' ORDER BY position",
                (session_id,),
            ),
            one_statement=True,
        )
        return [_prompt_from_row(row) for row in rows]

    async def list_held(self, session_id: str) -> list[PromptRecord]:
        """The prompts held by /stop or a restart, in the order /resume sends them."""
        return [p for p in await self.list_queued(session_id) if p.held]

    async def hold(self, session_id: str, *, reason: str) -> int:
        """Hold every prompt queued now (/stop, a restart, a failed start): none is sent
        until :meth:`resume`; a prompt queued later is not held. Returns how many are held
        (those held before included)."""

        def hold(conn: Conn) -> int:
            return _hold(self._db, conn, session_id, reason)

        return await self._db.write(hold)

    async def resume(self, session_id: str) -> int:
        """Release the held prompts: they are sent in their order, after every prompt queued
        since they were held (what was typed after /stop runs first). Returns how many."""

        def resume(conn: Conn) -> int:
            cursor = conn.execute(
                "UPDATE sessions SET queue_paused = 0, queue_pause_reason = NULL WHERE id = ?",
                (session_id,),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"no session {session_id}")
            rows = fetch_all(
                conn,
                "SELECT id FROM prompts WHERE session_id = ? AND state = 'queued' AND held = 1"
                " ORDER BY position",
                (session_id,),
            )
            last = fetch_one(
                conn,
                "SELECT coalesce(max(position), 0) AS last FROM prompts WHERE session_id = ?",
                (session_id,),
            )
            after = 0 if last is None else int(last["last"])
            now = self._db.now()
            for offset, row in enumerate(rows, start=1):
                conn.execute(
                    "UPDATE prompts SET held = 0, position = ?, updated_at = ? WHERE id = ?",
                    (after + offset, now, row["id"]),
                )
            return len(rows)

        return await self._db.write(resume)

    async def clear(self, session_id: str, *, actor: Actor | None = None) -> int:
        """Drop every queued prompt, held or not (recorded as dropped, audited); return how
        many. Nothing is held any more."""

        def clear(conn: Conn) -> int:
            _lock_session(conn, session_id)
            rows = fetch_all(
                conn,
                "SELECT id FROM prompts WHERE session_id = ? AND state = 'queued'",
                (session_id,),
            )
            ids = [row["id"] for row in rows]
            conn.execute(
                "UPDATE prompts SET state = 'dropped', held = 0, updated_at = ?"
                " WHERE session_id = ? AND state = 'queued'",
                (self._db.now(), session_id),
            )
            conn.execute(
                "UPDATE sessions SET queue_paused = 0, queue_pause_reason = NULL WHERE id = ?",
                (session_id,),
            )
            self._db.audit(
                conn, "queue.cleared", actor=actor, session_id=session_id, details={"ids": ids}
            )
            return len(ids)

        return await self._db.write(clear)

    async def waiting_sessions(self, *, host: str | None = None) -> list[str]:
        """The sessions (of ``host``, if given) with a queued prompt that is not held: what
        a host's runners must take, found again when a wake-up was lost."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                "SELECT DISTINCT session_id FROM prompts WHERE state = 'queued' AND held = 0"
                f" AND session_id IN (SELECT id FROM sessions WHERE {ON_HOST})"
                " ORDER BY session_id",
                (host, host),
            ),
            one_statement=True,
        )
        return [row["session_id"] for row in rows]

    async def recover_after_restart(self, *, host: str | None = None) -> list[str]:
        """At start-up: every prompt left in flight is interrupted (never resent), and every
        prompt still queued is held until a person sends /resume (a new message runs first).
        ``host``: only the prompts of that host's sessions (another host's queue is its own
        business); None: every one (a ledger no other host shares).

        Returns the ids of the sessions that hold prompts.
        """
        now = self._db.now()
        mine = f"session_id IN (SELECT id FROM sessions WHERE {ON_HOST})"

        def recover(conn: Conn) -> list[str]:
            conn.execute(
                "UPDATE prompts SET state = 'interrupted', updated_at = ?"
                f" WHERE state = 'in_flight' AND {mine}",
                (now, host, host),
            )
            rows = fetch_all(
                conn,
                f"SELECT DISTINCT session_id FROM prompts WHERE state = 'queued' AND {mine}"
                " ORDER BY session_id",
                (host, host),
            )
            held = [row["session_id"] for row in rows]
            for session_id in held:
                _hold(self._db, conn, session_id, "the gateway restarted")
                self._db.audit(conn, "queue.held_after_restart", session_id=session_id)
            return held

        return await self._db.write(recover)


def _lock_session(conn: Conn, session_id: str) -> None:
    """Lock the session's row first: the queue's writes read positions, then write on them
    (on PostgreSQL another host's enqueue, claim or clear waits; hold and resume lock it by
    their UPDATE of the row, their first statement)."""
    conn.execute(f"SELECT id FROM sessions WHERE id = ?{FOR_UPDATE}", (session_id,))


def hold_queue(db: Database, conn: Conn, session_id: str, reason: str) -> int:
    """:meth:`PromptQueue.hold` inside the caller's transaction (a /stop passed to another
    host holds the queue in the transaction that writes its request)."""
    return _hold(db, conn, session_id, reason)


def _hold(db: Database, conn: Conn, session_id: str, reason: str) -> int:
    cursor = conn.execute(
        "UPDATE sessions SET queue_paused = 1, queue_pause_reason = ? WHERE id = ?",
        (reason, session_id),
    )
    if cursor.rowcount == 0:
        raise StoreError(f"no session {session_id}")
    conn.execute(
        "UPDATE prompts SET held = 1, updated_at = ?"
        " WHERE session_id = ? AND state = 'queued' AND held = 0",
        (db.now(), session_id),
    )
    held = _count_held(conn, session_id)
    if not held:  # nothing to hold: nothing is said to be held
        conn.execute(
            "UPDATE sessions SET queue_paused = 0, queue_pause_reason = NULL WHERE id = ?",
            (session_id,),
        )
    return held


def _count_held(conn: Conn, session_id: str) -> int:
    row = fetch_one(
        conn,
        "SELECT count(*) AS n FROM prompts WHERE session_id = ? AND state = 'queued' AND held = 1",
        (session_id,),
    )
    return 0 if row is None else int(row["n"])


def _queued_before(conn: Conn, prompt: PromptRecord) -> int:
    if prompt.state is not PromptState.QUEUED:
        return 0
    row = fetch_one(
        conn,
        "SELECT count(*) AS n FROM prompts WHERE session_id = ? AND state = 'queued'"
        " AND held = 0 AND position < ?",
        (prompt.session_id, prompt.position),
    )
    return 0 if row is None else int(row["n"])


def _prompt(conn: Conn, prompt_id: int) -> PromptRecord:
    row = fetch_one(conn, f"SELECT {_COLUMNS} FROM prompts WHERE id = ?", (prompt_id,))
    if row is None:
        raise StoreError(f"no prompt {prompt_id}")
    return _prompt_from_row(row)


def prompt_by_id(conn: Conn, prompt_id: int) -> PromptRecord | None:
    """A prompt, read inside another module's transaction (None if there is none)."""
    row = fetch_one(conn, f"SELECT {_COLUMNS} FROM prompts WHERE id = ?", (prompt_id,))
    return None if row is None else _prompt_from_row(row)


def _prompt_from_row(row: Row) -> PromptRecord:
    return PromptRecord(
        id=row["id"],
        session_id=row["session_id"],
        conversation=conversation_from_row(row),
        platform_message_id=row["platform_message_id"],
        author=Actor(
            platform=row["author_platform"],
            user_id=row["author_user_id"],
            display=row["author_display"],
        ),
        text=row["text"],
        state=PromptState(row["state"]),
        position=row["position"],
        created_at=parse_time(row["created_at"]),
        updated_at=parse_time(row["updated_at"]),
        held=bool(row["held"]),
        mode=row["mode"],
        attachments=attachments_from_json(row["attachments_json"]),
        files_choice=FilesChoice(row["files_choice"]) if row["files_choice"] else None,
        files_round=row["files_round"],
        files_card=(
            None
            if row["files_card_why"] is None
            else FilesCard(
                why=row["files_card_why"],
                again=bool(row["files_card_again"]),
                message_id=row["files_card_message"],
            )
        ),
    )


def _optional_prompt(row: Row | None) -> PromptRecord | None:
    return None if row is None else _prompt_from_row(row)
