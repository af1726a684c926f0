"""Votes under a policy rule that asks for N people (issue 17, the two-person rule).

A vote is a ``votes`` row, one per person and interaction (who, which action, when, on which
card copy, the content hash they saw). Casting one bumps the interaction's version, so every
copy of its card is drawn again with the tally; the vote that reaches N commits the decision
in the same transaction, by the ledger's own compare-and-set (:meth:`InteractionLedger.
decide_in`), so two people casting the last vote at once still make one decision and one
write. Votes stay as audit whatever becomes of the request; they never carry over to another.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.domain import Actor, Decision, InteractionState
from gateway.errors import AlreadyDecided
from gateway.interactions.machine import Interaction, validate_decision
from gateway.interactions.policy import Requirement, Tally, Vote, tally
from gateway.store.database import Conn, Database
from gateway.store.interaction_rows import require_interaction
from gateway.store.ledger import InteractionLedger, already_decided

__all__ = ["VoteLedger", "VoteOutcome"]


@dataclass(frozen=True, kw_only=True, slots=True)
class VoteOutcome:
    interaction: Interaction  # as it stands after the vote (DECIDED when it decided)
    tally: Tally
    counted: bool  # False: the person's standing vote was already this one
    decision: Decision | None  # the decision this vote committed, to be written to the agent


def standing_votes(interaction: Interaction) -> list[Vote]:
    return [
        Vote(person=v.person, display=str(v.actor), action_id=v.action_id)
        for v in interaction.votes
    ]


class VoteLedger:
    def __init__(self, db: Database, interactions: InteractionLedger) -> None:
        self._db = db
        self._interactions = interactions

    async def cast(
        self,
        interaction_id: str,
        *,
        person: str,
        actor: Actor,
        action_id: str,
        requirement: Requirement,
        surface: str,
    ) -> VoteOutcome:
        """Record ``person``'s vote for ``action_id`` (replacing their earlier one) and, if
        the votes now decide, commit that decision with this voter as its actor.

        Raises AlreadyDecided (audited) when the interaction is no longer pending, and
        InvalidDecision when the action is not one it offers.
        """

        def cast(conn: Conn) -> VoteOutcome | AlreadyDecided:
            current = require_interaction(conn, interaction_id, lock=True)
            validate_decision(current, Decision(action_id=action_id))
            if current.state is not InteractionState.PENDING:
                rejection = already_decided(current)
                self._db.audit(
                    conn,
                    "vote.rejected",
                    actor=actor,
                    session_id=current.session_id,
                    interaction_id=interaction_id,
                    details={"state": current.state.value, "action_id": action_id},
                )
                return rejection
            standing = next((v for v in current.votes if v.person == person), None)
            if standing is not None and standing.action_id == action_id:
                return VoteOutcome(
                    interaction=current,
                    tally=tally(standing_votes(current), current.actions, requirement),
                    counted=False,
                    decision=None,
                )
            now = self._db.now()
            conn.execute(
                "INSERT INTO votes (interaction_id, person, actor_platform, actor_user_id,"
                " actor_display, action_id, needed, surface, content_hash, voted_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (interaction_id, person) DO UPDATE SET"
                " actor_platform = excluded.actor_platform,"
                " actor_user_id = excluded.actor_user_id,"
                " actor_display = excluded.actor_display, action_id = excluded.action_id,"
                " needed = excluded.needed, surface = excluded.surface,"
                " content_hash = excluded.content_hash, voted_at = excluded.voted_at,"
                " withdrawn_at = NULL",
                (
                    interaction_id,
                    person,
                    actor.platform,
                    actor.user_id,
                    actor.display,
                    action_id,
                    requirement.approvals,
                    surface,
                    current.content_hash,
                    now,
                ),
            )
            self._bump(conn, interaction_id)
            self._db.audit(
                conn,
                "vote.cast",
                actor=actor,
                session_id=current.session_id,
                interaction_id=interaction_id,
                details={
                    "person": person,
                    "action_id": action_id,
                    "surface": surface,
                    "content_hash": current.content_hash,
                },
            )
            after = require_interaction(conn, interaction_id)
            counted = tally(standing_votes(after), after.actions, requirement)
            if counted.decided_action is None:
                return VoteOutcome(interaction=after, tally=counted, counted=True, decision=None)
            decision = Decision(action_id=counted.decided_action)
            decided = self._interactions.decide_in(conn, after, actor, decision, surface=surface)
            return VoteOutcome(interaction=decided, tally=counted, counted=True, decision=decision)

        outcome = await self._db.write(cast)
        if isinstance(outcome, AlreadyDecided):
            raise outcome  # after the commit: the rejected vote stays audited
        return outcome

    async def withdraw(self, interaction_id: str, *, person: str, actor: Actor) -> Interaction:
        """Withdraw ``person``'s standing vote while the interaction is pending (the row
        stays, marked withdrawn). Raises AlreadyDecided once it is not pending; a person with
        no standing vote changes nothing."""

        def withdraw(conn: Conn) -> Interaction | AlreadyDecided:
            current = require_interaction(conn, interaction_id, lock=True)
            if current.state is not InteractionState.PENDING:
                return already_decided(current)
            cursor = conn.execute(
                "UPDATE votes SET withdrawn_at = ? WHERE interaction_id = ? AND person = ?"
                " AND withdrawn_at IS NULL",
                (self._db.now(), interaction_id, person),
            )
            if cursor.rowcount == 0:
                return current
            self._bump(conn, interaction_id)
            self._db.audit(
                conn,
                "vote.withdrawn",
                actor=actor,
                session_id=current.session_id,
                interaction_id=interaction_id,
                details={"person": person},
            )
            return require_interaction(conn, interaction_id)

        outcome = await self._db.write(withdraw)
        if isinstance(outcome, AlreadyDecided):
            raise outcome
        return outcome

    async def all_votes(self, interaction_id: str) -> list[tuple[str, str, bool]]:
        """Every vote ever cast on the interaction, withdrawn ones too (the audit):
        (person, action id, withdrawn)."""

        def read(conn: Conn) -> list[tuple[str, str, bool]]:
            rows = conn.execute(
                "SELECT person, action_id, withdrawn_at FROM votes WHERE interaction_id = ?"
                " ORDER BY voted_at, person",
                (interaction_id,),
            ).fetchall()
            return [
                (row["person"], row["action_id"], row["withdrawn_at"] is not None) for row in rows
            ]

        return await self._db.read(read)

    def _bump(self, conn: Conn, interaction_id: str) -> None:
        conn.execute(
            "UPDATE interactions SET version = version + 1, updated_at = ?"
            " WHERE id = ? AND state = 'pending'",
            (self._db.now(), interaction_id),
        )
