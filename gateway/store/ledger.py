"""Interactions and their three facts: decision, delivery, resolution (DESIGN.md).

Every move goes through :func:`gateway.interactions.machine.transition` inside one transaction and
bumps ``version`` with a compare-and-set (``UPDATE ... WHERE id = ? AND version = ?``), so
even a second process writing the same file cannot make two moves from one state. Events
that reach an interaction already ended are races, not errors: they are audited and come
back as an ignored :class:`~gateway.interactions.machine.Transition`.

Facts are kept apart: ``decisions`` (one row at most: who, what, when; secret answers
redacted), ``deliveries`` (append-only: every write, failed write, or "nothing written"),
``resolutions`` (one row: how it ended, by whom, when). A delivery that really happened is
recorded even when it arrives after the interaction ended (a write that crossed a
withdrawal): the fact is kept, the state is not changed.
"""

from __future__ import annotations

from dataclasses import replace

from gateway.domain import (
    Actor,
    Decision,
    Effect,
    InteractionOrigin,
    InteractionRequest,
    InteractionState,
    Resolution,
    Scope,
)
from gateway.errors import AlreadyDecided, StoreError, UnknownInteraction, VersionMoved
from gateway.interactions.machine import (
    DecisionFact,
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    InteractionEvent,
    ResolutionFact,
    Transition,
    event_for_agent_close,
    new_short_id,
    transition,
    validate_decision,
)
from gateway.store import codec
from gateway.store.cards import add_bound_copies_sent
from gateway.store.database import Conn, Database, Reader, fetch_all, fetch_one, parse_time
from gateway.store.dialect import FOR_UPDATE, FOR_UPDATE_OF_E
from gateway.store.interaction_rows import (
    IS_CLOSED,
    IS_LIVE,
    SELECT_FOR_CARDS,
    SELECT_INTERACTION,
    actor_from_row,
    for_cards_from_row,
    interaction_by_native_key,
    interaction_by_native_key_sent,
    interaction_from_row,
    locked_for_cards,
    new_interaction,
    require_interaction,
)
from gateway.store.records import (
    CardCopy,
    CardSession,
    CardsRead,
    Grant,
    InteractionUpdate,
    Opened,
)
from gateway.store.sessions import SESSION_COLUMNS_OF_S, session_from_row

__all__ = ["InteractionLedger"]

_RESOLVING_EVENTS = frozenset(
    {
        InteractionEvent.CONFIRM,
        InteractionEvent.WITHDRAW,
        InteractionEvent.SUPERSEDE,
        InteractionEvent.STOP,
        InteractionEvent.EXPIRE,
    }
)
_SKIPPED_BECAUSE = {
    InteractionEvent.WITHDRAW: "not written: the agent withdrew the request first",
    InteractionEvent.SUPERSEDE: "not written: the request was superseded first",
    InteractionEvent.STOP: "not written: the turn was stopped first",
    InteractionEvent.EPOCH_ENDED: "not written: the runtime ended first",
}
_WRITE_NOT_KNOWN = (
    "whether the answer was written to the agent before the gateway stopped is not known"
)


class InteractionLedger:
    """``store.interactions``: the durable interactions and every move they make."""

    def __init__(self, db: Database, *, views: Reader | None = None) -> None:
        self._db = db
        self._views: Reader = views or db  # the reads people look at (store.readers)

    async def create(
        self,
        session_id: str,
        epoch: int,
        request: InteractionRequest,
        *,
        turn_id: int | None = None,
    ) -> Opened:
        """Record an agent's request as a PENDING interaction (version 1) with a new id.

        Idempotent on (session, epoch, native key): the same native request seen again
        returns the first interaction (``created=False``, audited). An empty
        ``request.native_key`` marks a plan the gateway originated: stored as NULL, never
        deduplicated. Refused for an epoch that is not live.
        """
        return await self._db.write(
            lambda conn: self._create(conn, session_id, epoch, request, turn_id)
        )

    async def create_with_copies(
        self,
        session_id: str,
        epoch: int,
        request: InteractionRequest,
        *,
        turn_id: int | None = None,
    ) -> Opened:
        """``create``, and when the interaction is new a pending card copy (``cards.add``)
        for every conversation bound to the session (``sessions.list_bindings``), all in
        one transaction: ``Opened.copies`` holds them, in binding order (empty when
        ``created`` is False)."""

        def create(conn: Conn) -> Opened:
            opened = self._create(conn, session_id, epoch, request, turn_id)
            if not opened.created:
                return opened
            added = add_bound_copies_sent(conn, opened.interaction.id, session_id, self._db.now())
            return replace(opened, copies=tuple(added()))

        return await self._db.write(create)

    def _create(
        self,
        conn: Conn,
        session_id: str,
        epoch: int,
        request: InteractionRequest,
        turn_id: int | None,
    ) -> Opened:
        """The interaction opened (or found again), read with the epoch's lock and the
        earlier request: the reads are sent together, then the insert (on PostgreSQL one
        wait each). The session is read with the epoch's lock (the cards' name and project:
        ``Opened.session``)."""
        native_key = request.native_key or None
        locked = conn.execute(
            f"SELECT e.ended_at, {SESSION_COLUMNS_OF_S} FROM runtime_epochs e"
            " JOIN sessions s ON s.id = e.session_id"
            f" WHERE e.session_id = ? AND e.epoch = ?{FOR_UPDATE_OF_E}",
            (session_id, epoch),
        )
        found = (
            None
            if native_key is None
            else interaction_by_native_key_sent(conn, session_id, epoch, native_key)
        )
        epoch_row = locked.fetchone()
        earlier = None if found is None else found()
        # a setting change (issue 31) is a person's request, not the process's: it may be
        # asked while no agent runs (after a restart, an idle end) and is kept with the last
        if epoch_row is None or (
            epoch_row["ended_at"] is not None and request.origin is not InteractionOrigin.SETTING
        ):
            raise StoreError(f"epoch {epoch} of session {session_id} is not live")
        if earlier is not None:
            self._db.audit(
                conn,
                "interaction.duplicate_request",
                actor="agent",
                session_id=session_id,
                interaction_id=earlier.id,
            )
            return Opened(interaction=earlier, created=False)
        interaction = self._insert(conn, session_id, epoch, request, turn_id)
        self._db.audit(
            conn,
            "interaction.opened",
            actor="agent",
            session_id=session_id,
            interaction_id=interaction.id,
            details={"kind": request.kind.value},
        )
        return Opened(interaction=interaction, created=True, session=session_from_row(epoch_row))

    def _insert(
        self,
        conn: Conn,
        session_id: str,
        epoch: int,
        request: InteractionRequest,
        turn_id: int | None,
    ) -> Interaction:
        """The new interaction's row inserted. What it holds is what was just written (a new
        row has no facts, no votes): built from the same texts, not read back."""
        now = self._db.now()
        detail_json = codec.encode_detail(request.detail)
        actions_json = codec.encode_actions(request.actions)
        questions_json = codec.encode_questions(request.questions)
        for _ in range(5):  # a 50-bit id collides about never; retry rather than assume
            interaction_id = new_short_id()
            insert = conn.execute(
                "INSERT INTO interactions (id, session_id, runtime_epoch, turn_id,"
                " native_key, kind, title, summary, detail_json, actions_json,"
                " questions_json, state, version, created_at, updated_at, origin)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 1, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                (
                    interaction_id,
                    session_id,
                    epoch,
                    turn_id,
                    request.native_key or None,
                    request.kind.value,
                    request.title,
                    request.summary,
                    detail_json,
                    actions_json,
                    questions_json,
                    now,
                    now,
                    request.origin.value,
                ),
            )
            if insert.fetchone() is None:  # the id is taken (an error would stop the
                continue  # transaction on PG)
            return new_interaction(
                interaction_id,
                session_id=session_id,
                epoch=epoch,
                turn_id=turn_id,
                request=request,
                texts=(detail_json, actions_json, questions_json),
                now=now,
            )
        raise StoreError("could not draw an unused interaction id")

    async def get(self, interaction_id: str) -> Interaction | None:
        def get(conn: Conn) -> Interaction | None:
            row = fetch_one(conn, f"{SELECT_INTERACTION} WHERE i.id = ?", (interaction_id,))
            return None if row is None else interaction_from_row(row)

        return await self._db.read(get, one_statement=True)

    async def get_with_copies(
        self, interaction_id: str
    ) -> tuple[Interaction | None, list[CardCopy]]:
        """``get`` and ``cards.list_for`` in one read (one SELECT)."""
        interaction, copies, _ = await self._db.read(
            lambda conn: _for_cards(conn, interaction_id), one_statement=True
        )
        return interaction, copies

    async def get_for_cards(
        self, interaction_id: str
    ) -> tuple[Interaction | None, list[CardCopy], CardSession | None]:
        """``get_with_copies`` and what the cards show of the interaction's session (its
        name and project) in one SELECT: what drawing its cards needs."""
        return await self._db.read(
            lambda conn: _for_cards(conn, interaction_id), one_statement=True
        )

    async def get_by_native_key(
        self, session_id: str, epoch: int, native_key: str
    ) -> Interaction | None:
        return await self._db.read(
            lambda conn: interaction_by_native_key(conn, session_id, epoch, native_key),
            one_statement=True,
        )

    async def list_open(self, session_id: str | None = None) -> list[Interaction]:
        """Live interactions (pending, decided, delivered), oldest first."""
        return await self._db.read(lambda conn: _open(conn, session_id), one_statement=True)

    async def list_pending_view(self, session_id: str | None = None) -> list[Interaction]:
        """``list_open`` for people to look at (``/pending``, the console): on a reader, as
        committed when the read began, never waiting behind a write."""
        return await self._views.read(lambda conn: _open(conn, session_id), one_statement=True)

    async def list_open_and_closed(
        self, *, closed_limit: int
    ) -> tuple[list[Interaction], list[Interaction]]:
        """``list_open()`` and the newest ``closed_limit`` interactions no longer live (newest
        first), in one read: one that closes meanwhile is in one of the lists, never both."""

        def list_both(conn: Conn) -> tuple[list[Interaction], list[Interaction]]:
            rows = fetch_all(
                conn,
                f"{SELECT_INTERACTION} WHERE {IS_CLOSED}"
                " ORDER BY i.created_at DESC, i.id DESC LIMIT ?",
                (closed_limit,),
            )
            return _open(conn, None), [interaction_from_row(row) for row in rows]

        return await self._views.read(list_both)

    async def list_recent(
        self, *, limit: int = 20, session_id: str | None = None
    ) -> list[Interaction]:
        """The newest interactions in any state, newest first."""

        def list_recent(conn: Conn) -> list[Interaction]:
            rows = fetch_all(
                conn,
                f"{SELECT_INTERACTION} WHERE (CAST(? AS TEXT) IS NULL OR i.session_id = ?)"
                " ORDER BY i.created_at DESC, i.id DESC LIMIT ?",
                (session_id, session_id, limit),
            )
            return [interaction_from_row(row) for row in rows]

        return await self._views.read(list_recent)

    async def decide(
        self,
        interaction_id: str,
        *,
        expected_version: int,
        actor: Actor,
        decision: Decision,
        sealed: str | None = None,
    ) -> Interaction:
        """Commit a person's decision: PENDING → DECIDED as a compare-and-set on version.

        Call it before writing anything to the agent; then deliver the ``decision`` you
        passed (the returned record holds secret answers redacted) and call
        :meth:`record_delivery`. Authorization is the caller's job; the actor is recorded.

        Raises UnknownInteraction, InvalidDecision (the decision does not fit, or
        ``expected_version`` is not the pending version), or AlreadyDecided naming who
        decided first or how the interaction ended (the attempt is audited). A choice of
        scope "session" or "always" that allows is recorded as a grant, and audited.

        ``sealed``: the decision's secret answers sealed for the host that runs the session
        (gateway/store/sealing.py), kept in ``sealed_answers`` in the same transaction until
        :meth:`record_delivery`, or any other end of the interaction, deletes it.
        """

        def decide(conn: Conn) -> Interaction | AlreadyDecided:
            current = require_interaction(conn, interaction_id, lock=True)
            validate_decision(current, decision)
            if current.state is InteractionState.PENDING:
                if current.version != expected_version:
                    raise VersionMoved(
                        f"interaction {interaction_id} is at version {current.version}, "
                        f"not {expected_version}: look at it again"
                    )
                decided = self.decide_in(conn, current, actor, decision)
                if sealed is not None:
                    conn.execute(
                        "INSERT INTO sealed_answers (interaction_id, sealed, sealed_at)"
                        " VALUES (?, ?, ?)",
                        (interaction_id, sealed, self._db.now()),
                    )
                return decided
            rejection = already_decided(current)
            self._db.audit(
                conn,
                "interaction.decision_rejected",
                actor=actor,
                session_id=current.session_id,
                interaction_id=interaction_id,
                details={"state": current.state.value, "decided_by": rejection.decided_by},
            )
            return rejection

        outcome = await self._db.write(decide)
        if isinstance(outcome, AlreadyDecided):
            raise outcome  # after the commit: the rejected attempt stays audited
        return outcome

    def decide_in(
        self,
        conn: Conn,
        current: Interaction,
        actor: Actor,
        decision: Decision,
        *,
        surface: str | None = None,
    ) -> Interaction:
        """Inside a write transaction that holds the request's lock (``current`` was read
        with it): PENDING → DECIDED, a compare-and-set on ``current.version``, and the
        decision recorded (with the content hash ``current`` shows)."""
        moved = transition(current.state, InteractionEvent.DECIDE)
        now = self._db.now()
        cursor = conn.execute(
            "UPDATE interactions SET state = ?, version = version + 1, updated_at = ?"
            " WHERE id = ? AND version = ? AND state = 'pending'",
            (moved.after.value, now, current.id, current.version),
        )
        fact = self._record_decision(conn, current, actor, decision, surface=surface)
        # the set's count read once the facts are sent too (one wait on PostgreSQL, and the
        # COMMIT goes after it: a connection cut until then leaves nothing committed, and
        # the call is run again). Under the lock the set matches: a miss rolls back whole
        if cursor.rowcount != 1:
            raise StoreError(f"interaction {current.id} was changed by another writer")
        return replace(
            current,
            state=moved.after,
            version=current.version + 1,
            updated_at=parse_time(now),
            decision=fact,
        )

    def _record_decision(
        self,
        conn: Conn,
        current: Interaction,
        actor: Actor,
        decision: Decision,
        *,
        surface: str | None = None,
    ) -> DecisionFact:
        """The decision's rows written; returns the fact as a read of them would."""
        stored = codec.redact_secret_answers(decision, current.questions)
        now = self._db.now()
        answers_json = codec.encode_answers(stored.answers)
        conn.execute(
            "INSERT INTO decisions (interaction_id, actor_platform, actor_user_id,"
            " actor_display, action_id, answers_json, message, decided_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                current.id,
                actor.platform,
                actor.user_id,
                actor.display,
                stored.action_id,
                answers_json,
                stored.message,
                now,
            ),
        )
        self._db.audit(
            conn,
            "interaction.decided",
            actor=actor,
            session_id=current.session_id,
            interaction_id=current.id,
            details={
                "action_id": decision.action_id,
                "answered": sorted(decision.answers),
                # what was decided on, and where (issue 17: nothing approved unseen)
                "content_hash": current.content_hash,
                "surface": surface,
            },
        )
        fact = DecisionFact(
            actor=actor,
            decision=Decision(
                action_id=stored.action_id,
                answers=codec.decode_answers(answers_json),
                message=stored.message,
            ),
            at=parse_time(now),
        )
        action = current.action(decision.action_id) if decision.action_id else None
        if action and action.effect is Effect.ALLOW and action.scope in _GRANT_SCOPES:
            # the rule it adds, whole, where the label (short, for a button) does not say it
            named = f"{action.label} `{action.rule}`" if action.rule else action.label
            description = f"{named}: {current.title}"
            conn.execute(
                "INSERT INTO grants (session_id, interaction_id, action_id, scope, description,"
                " actor_platform, actor_user_id, actor_display, granted_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    current.session_id,
                    current.id,
                    action.id,
                    action.scope.value,
                    description,
                    actor.platform,
                    actor.user_id,
                    actor.display,
                    now,
                ),
            )
            self._db.audit(
                conn,
                "grant",
                actor=actor,
                session_id=current.session_id,
                interaction_id=current.id,
                details={"scope": action.scope.value, "description": description},
            )
        return fact

    async def record_delivery(
        self, interaction_id: str, *, ok: bool, error: str | None = None
    ) -> InteractionUpdate:
        """Record the write of the answer (or of "timed out" after EXPIRE) to the agent.

        ``error``: why a write failed; with ``ok``, what a delivery the gateway carried out
        itself became (a send_file call's "sent …" / "not sent: why"), for the card.
        ``ok``: DECIDED → DELIVERED; a failed write keeps DECIDED with the failure recorded
        (nothing resends it: the card says how to go on, see cards.undelivered). On an interaction
        that already ended the fact is still recorded, the state kept, the race audited.
        Raises IllegalTransition on a PENDING interaction (nothing was decided).
        """
        event = InteractionEvent.DELIVER if ok else InteractionEvent.DELIVERY_FAILED
        outcome = DeliveryOutcome.OK if ok else DeliveryOutcome.FAILED

        def record_delivery(conn: Conn) -> InteractionUpdate:
            found = locked_for_cards(conn, "i.id = ?", (interaction_id,))
            if found is None:
                raise UnknownInteraction(interaction_id)
            current, cards = found
            if ok and (
                current.state is InteractionState.DELIVERED
                or (current.delivery is not None and current.delivery.outcome is outcome)
            ):
                # the one write recorded already (the codec writes a decision once: a second
                # attempt is AlreadyAnswered): the owner's click path and its sweep crossing,
                # which a host's pool of connections lets happen (issue 36), even after the
                # agent's close has ended the request (a second "ok" row would count the
                # one write twice)
                return InteractionUpdate(
                    interaction=current,
                    transition=Transition(
                        event=event, before=current.state, after=current.state, ignored=True
                    ),
                    cards=cards,
                )
            moved = transition(current.state, event)
            delivered = self._insert_delivery(conn, interaction_id, outcome, error)
            # _apply deletes a sealed answer here, in the transaction that records its write
            update = self._apply(
                conn,
                current,
                moved,
                by="gateway",
                note=error or "",
                delivered=delivered,
                cards=cards,
            )
            if not moved.ignored:
                return update
            # a fact recorded after the end (a record cut, made again by the next sweep): the
            # state stays, but the cards, which show the facts, are drawn again
            conn.execute(
                "UPDATE interactions SET version = version + 1, updated_at = ? WHERE id = ?",
                (self._db.now(), interaction_id),
            )
            return replace(update, interaction=require_interaction(conn, interaction_id))

        return await self._db.write(record_delivery)

    async def sealed_answers(self, interaction_id: str) -> str | None:
        """The secret answers another host sealed for this interaction's owner, or None."""

        def sealed(conn: Conn) -> str | None:
            row = conn.execute(
                "SELECT sealed FROM sealed_answers WHERE interaction_id = ?", (interaction_id,)
            ).fetchone()
            return None if row is None else str(row["sealed"])

        return await self._db.read(sealed)

    async def resolve(
        self, interaction_id: str, event: InteractionEvent, *, by: str, note: str = ""
    ) -> InteractionUpdate:
        """Apply CONFIRM, WITHDRAW, SUPERSEDE or EXPIRE; ``by`` says who ("agent",
        "gateway", an actor key). Prefer :meth:`close_from_agent` for an agent's close."""
        if event not in _RESOLVING_EVENTS:
            raise ValueError(f"{event} is not a resolving event; see decide/record_delivery")

        def resolve(conn: Conn) -> InteractionUpdate:
            current = require_interaction(conn, interaction_id, lock=True)
            return self._apply(conn, current, transition(current.state, event), by, note)

        return await self._db.write(resolve)

    async def expire(
        self,
        interaction_id: str,
        *,
        expected_version: int,
        outcome: str,
        not_written: str | None = None,
    ) -> InteractionUpdate | None:
        """The expiry policy fired: PENDING → EXPIRED as a compare-and-set on version, like
        a decision, so that of a person's decision and the expiry in the same instant
        exactly one wins. None (nothing changed) when the interaction is no longer pending
        at ``expected_version``: it was decided, or ended, first.

        ``outcome`` ("deny", "deny and stop") is what the gateway writes next, kept as the
        resolution's note; the caller records that write with :meth:`record_delivery`.
        ``not_written``: nothing will be written, recorded now as a skipped delivery with
        this reason.
        """

        def expire(conn: Conn) -> InteractionUpdate | None:
            current = require_interaction(conn, interaction_id, lock=True)
            if current.state is not InteractionState.PENDING or current.version != expected_version:
                return None
            moved = transition(current.state, InteractionEvent.EXPIRE)
            delivered = None
            if not_written is not None:
                delivered = self._insert_delivery(
                    conn, interaction_id, DeliveryOutcome.SKIPPED, not_written
                )
            self._db.audit(
                conn,
                "interaction.expired",
                actor="gateway",
                session_id=current.session_id,
                interaction_id=interaction_id,
                details={"outcome": outcome, "written": not_written is None},
            )
            return self._apply(conn, current, moved, "gateway", outcome, delivered=delivered)

        return await self._db.write(expire)

    async def close_from_agent(
        self,
        session_id: str,
        epoch: int,
        native_key: str,
        *,
        how: Resolution,
        stopped_by: Actor | None = None,
    ) -> InteractionUpdate | None:
        """The agent closed its request (``InteractionClosed``): confirm or withdraw it,
        choosing the event from the state in the same transaction. None (audited) when no
        interaction has that native key in that epoch. ``stopped_by``: a person's /stop is
        under way, so a withdrawal is theirs (STOP, by them), not the agent's."""

        def close(conn: Conn) -> InteractionUpdate | None:
            found = locked_for_cards(
                conn,
                "i.session_id = ? AND i.runtime_epoch = ? AND i.native_key = ?",
                (session_id, epoch, native_key),
            )
            if found is None:
                self._db.audit(
                    conn,
                    "interaction.unknown_close",
                    actor="agent",
                    session_id=session_id,
                    details={"epoch": epoch, "how": how.value},
                )
                return None
            current, cards = found
            event = event_for_agent_close(current.state, how, stopped=stopped_by is not None)
            moved = transition(current.state, event)
            if event is InteractionEvent.STOP and stopped_by is not None:
                by, note = stopped_by.key(), str(stopped_by)
            else:
                by, note = "agent", f"agent: {how.value}"
            return self._apply(conn, current, moved, by, note, cards=cards)

        return await self._db.write(close)

    async def orphan_epoch(
        self,
        session_id: str,
        epoch: int,
        *,
        runtime_outlives_gateway: bool = False,
        gateway_restarted: bool = False,
        note: str = "runtime ended",
        keep: frozenset[str] = frozenset(),
    ) -> list[InteractionUpdate]:
        """End every live interaction of the epoch: ORPHANED, or UNKNOWN for an answer
        delivered to a runtime that outlives the gateway; and record, for every EXPIRED one
        whose "timed out" write has no delivery fact, a delivery whose outcome is unknown
        (``note`` says why). Returns the ones moved, whose cards must now be edited.

        ``gateway_restarted``: the gateway process that wrote this epoch's answers died. A
        decision it committed but never recorded a write for may have reached the agent in
        its last moment, so no "not written" delivery is recorded for it: its delivery stays
        unknown, and the note says so.

        ``keep``: native keys a runtime that outlives the gateway still lists (a reattached
        server): those interactions stay as they are."""

        def orphan(conn: Conn) -> list[InteractionUpdate]:
            conn.execute(  # the epoch's row first, as create and end_epoch lock it
                f"SELECT 1 FROM runtime_epochs WHERE session_id = ? AND epoch = ?{FOR_UPDATE}",
                (session_id, epoch),
            )
            rows = fetch_all(
                conn,
                f"{SELECT_INTERACTION} WHERE i.session_id = ? AND i.runtime_epoch = ?"
                f" AND ({IS_LIVE} OR (i.state = 'expired' AND NOT EXISTS"
                " (SELECT 1 FROM deliveries d WHERE d.interaction_id = i.id)))"
                " ORDER BY i.created_at, i.id",
                (session_id, epoch),
            )
            updates = []
            for current in (interaction_from_row(row) for row in rows):
                if current.native_key is not None and current.native_key in keep:
                    continue
                if current.origin is InteractionOrigin.SETTING:
                    continue  # a person's request, not the process's: it outlives it
                delivered = None
                if current.state is InteractionState.EXPIRED:
                    delivered = self._insert_delivery(
                        conn, current.id, DeliveryOutcome.UNKNOWN, note
                    )
                moved = transition(
                    current.state,
                    InteractionEvent.EPOCH_ENDED,
                    runtime_outlives_gateway=runtime_outlives_gateway,
                )
                unrecorded = (
                    gateway_restarted
                    and current.state is InteractionState.DECIDED
                    and current.delivery is None
                )
                updates.append(
                    self._apply(
                        conn,
                        current,
                        moved,
                        "gateway",
                        f"{note}; {_WRITE_NOT_KNOWN}" if unrecorded else note,
                        record_skipped=not unrecorded,
                        delivered=delivered,
                    )
                )
            return updates

        return await self._db.write(orphan)

    async def list_grants(self, session_id: str) -> list[Grant]:
        """Standing permissions given in the session, oldest first (for /status)."""
        rows = await self._db.read(
            lambda conn: fetch_all(
                conn,
                "SELECT id, session_id, interaction_id, action_id, scope, description,"
                " actor_platform, actor_user_id, actor_display, granted_at"
                " FROM grants WHERE session_id = ? ORDER BY id",
                (session_id,),
            ),
            one_statement=True,
        )
        return [
            Grant(
                id=row["id"],
                session_id=row["session_id"],
                interaction_id=row["interaction_id"],
                action_id=row["action_id"],
                scope=Scope(row["scope"]),
                description=row["description"],
                actor=actor_from_row(row),
                granted_at=parse_time(row["granted_at"]),
            )
            for row in rows
        ]

    def _apply(
        self,
        conn: Conn,
        current: Interaction,
        moved: Transition,
        by: str,
        note: str,
        *,
        record_skipped: bool = True,
        delivered: DeliveryFact | None = None,
        cards: CardsRead | None = None,
    ) -> InteractionUpdate:
        """Write one transition (already looked up) with its facts, or audit an ignored one.
        ``record_skipped=False``: a move that skips the delivery records no "skipped" fact
        (whether the answer was written is not known). ``delivered``: the delivery the
        caller recorded in this transaction, the latest one now. ``cards``: the copies read
        with ``current`` (``locked_for_cards``), returned with the update.

        The moved interaction is ``current`` with what this call wrote, not read back:
        ``current`` was read whole under the row's lock (``require_interaction``), or, read
        without it, the compare-and-set on its version fails if anything changed it since
        (every writer of facts bumps the version in the same transaction)."""
        if moved.ignored:
            self._db.audit(
                conn,
                "interaction.event_ignored",
                actor=by,
                session_id=current.session_id,
                interaction_id=current.id,
                details={"event": moved.event.value, "state": current.state.value},
            )
            return InteractionUpdate(interaction=current, transition=moved, cards=cards)
        now = self._db.now()
        # the compare-and-set and the facts are sent together, and the set's count is read
        # once (one wait on PostgreSQL): a set that matched no row raises, which rolls the
        # whole transaction back, facts included
        cursor = conn.execute(
            "UPDATE interactions SET state = ?, version = version + 1, updated_at = ?"
            " WHERE id = ? AND version = ?",
            (moved.after.value, now, current.id, current.version),
        )
        _drop_sealed(conn, current)
        if moved.skips_delivery and record_skipped:
            reason = _SKIPPED_BECAUSE.get(moved.event, "not written")
            delivered = self._insert_delivery(conn, current.id, DeliveryOutcome.SKIPPED, reason)
        resolved = None
        if moved.resolution is not None:
            conn.execute(
                "INSERT INTO resolutions (interaction_id, how, by, note, at)"
                " VALUES (?, ?, ?, ?, ?)",
                (current.id, moved.resolution.value, by, note, now),
            )
            resolved = ResolutionFact(how=moved.resolution, at=parse_time(now), by=by, note=note)
        if cursor.rowcount == 0:
            raise StoreError(f"interaction {current.id} was changed by another writer")
        after = replace(
            current,
            state=moved.after,
            version=current.version + 1,
            updated_at=parse_time(now),
            delivery=delivered or current.delivery,
            resolution=resolved or current.resolution,
        )
        return InteractionUpdate(interaction=after, transition=moved, cards=cards)

    def _insert_delivery(
        self,
        conn: Conn,
        interaction_id: str,
        outcome: DeliveryOutcome,
        error: str | None,
    ) -> DeliveryFact:
        """The delivery recorded; returns it as the interaction's latest (a read's)."""
        now = self._db.now()
        conn.execute(
            "INSERT INTO deliveries (interaction_id, outcome, error, at) VALUES (?, ?, ?, ?)",
            (interaction_id, outcome.value, error, now),
        )
        return DeliveryFact(outcome=outcome, at=parse_time(now), error=error)


_GRANT_SCOPES = (Scope.SESSION, Scope.ALWAYS)


def already_decided(current: Interaction) -> AlreadyDecided:
    if current.decision is not None:
        decided_by = str(current.decision.actor)
    elif current.resolution is not None:
        decided_by = current.resolution.by
    else:
        decided_by = "someone"
    return AlreadyDecided(current.id, decided_by, current.state.value)


def _for_cards(
    conn: Conn, interaction_id: str
) -> tuple[Interaction | None, list[CardCopy], CardSession | None]:
    row = fetch_one(conn, f"{SELECT_FOR_CARDS} WHERE i.id = ?", (interaction_id,))
    return (None, [], None) if row is None else for_cards_from_row(row)


def _open(conn: Conn, session_id: str | None) -> list[Interaction]:
    rows = fetch_all(
        conn,
        f"{SELECT_INTERACTION} WHERE {IS_LIVE}"
        " AND (CAST(? AS TEXT) IS NULL OR i.session_id = ?)"
        " ORDER BY i.created_at, i.id",
        (session_id, session_id),
    )
    return [interaction_from_row(row) for row in rows]


def _drop_sealed(conn: Conn, current: Interaction) -> None:
    """Delete the sealed secret answers of a decided interaction that moves on (written,
    failed, orphaned, closed): only a DECIDED interaction with a secret question may have
    them (``Broker.decide`` seals the answers to those; Ledger.decide keeps them)."""
    if current.state is InteractionState.DECIDED and any(q.secret for q in current.questions):
        conn.execute("DELETE FROM sealed_answers WHERE interaction_id = ?", (current.id,))
