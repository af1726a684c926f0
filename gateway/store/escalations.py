"""Escalations in the ledger (issue 17): the card copies a request gained when nobody
answered in time, and the audit entry ``interaction.escalated`` that says so.

One transaction: the request is still PENDING and was never escalated, its new copies are
added (pending: the broker sends them) and the entry is written. A restart reads the entry
and never escalates again; the copies are recovered like any other copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.domain import ConversationRef, InteractionState
from gateway.store.cards import add_copy, copies_for
from gateway.store.database import Conn, Database, fetch_one
from gateway.store.interaction_rows import require_interaction
from gateway.store.records import CardCopy

__all__ = ["ESCALATED", "Escalations"]

ESCALATED = "interaction.escalated"


def _escalated(conn: Conn, interaction_id: str) -> bool:
    row = fetch_one(
        conn,
        "SELECT 1 FROM audit WHERE event = ? AND interaction_id = ? LIMIT 1",
        (ESCALATED, interaction_id),
    )
    return row is not None


class Escalations:
    """``store.escalations``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def escalated(self, interaction_id: str) -> bool:
        return await self._db.read(
            lambda conn: _escalated(conn, interaction_id), one_statement=True
        )

    async def record(
        self,
        interaction_id: str,
        conversations: Sequence[ConversationRef],
        *,
        after_seconds: float,
        asked: Sequence[str],
    ) -> list[CardCopy] | None:
        """Add a card copy in each of ``conversations`` (those it has none in) and record
        the escalation; ``asked`` names the accounts and channels, as the notice does.
        None: not PENDING any more, or already escalated (nothing is written)."""

        def record(conn: Conn) -> list[CardCopy] | None:
            current = require_interaction(conn, interaction_id)
            if current.state is not InteractionState.PENDING or _escalated(conn, interaction_id):
                return None
            shown = {copy.conversation for copy in copies_for(conn, interaction_id)}
            added = [
                add_copy(conn, interaction_id, conversation, now=self._db.now())
                for conversation in dict.fromkeys(conversations)
                if conversation not in shown
            ]
            self._db.audit(
                conn,
                ESCALATED,
                actor="gateway",
                session_id=current.session_id,
                interaction_id=interaction_id,
                details={
                    "after_seconds": after_seconds,
                    "asked": list(asked),
                    "copies": [copy.conversation.key() for copy in added],
                },
            )
            return added

        return await self._db.write(record)
