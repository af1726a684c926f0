"""What a click is checked against, read in one view of the ledger.

A click, a form or a pre-check (``Inbox.may_answer``) is judged by the pure checks of
``gateway.action_tokens`` on: the interaction, its session, where its card is shown, whether
the clicked conversation is bound to that session, and whether the interaction's runtime
epoch is still live. :meth:`ClickViews.view` reads all of them in one trip, three SELECTs.
The same reads run on the writer's connection (``store.clicks``, what a decision is checked
against) or on the read-only one (``store.peek``, which answers while the writer is busy).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.domain import ConversationRef
from gateway.interactions.machine import Interaction
from gateway.session_record import SessionRecord
from gateway.store.cards import copies_for_sent
from gateway.store.database import Conn, Reader, conversation_params, fetch_one
from gateway.store.interaction_rows import SELECT_INTERACTION, interaction_from_row
from gateway.store.records import CardCopy, EpochRecord
from gateway.store.sessions import click_context_sent, session_of

__all__ = ["ClickView", "ClickViews"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ClickView:
    interaction: Interaction
    session: SessionRecord | None
    copies: tuple[CardCopy, ...]  # every copy of the interaction's card
    bound_here: bool  # the clicked conversation is bound to the interaction's session
    epoch: EpochRecord | None  # the interaction's runtime epoch

    def shown_in(self, conversation: ConversationRef) -> bool:
        """The card is shown in ``conversation``, or that conversation shows its session."""
        if any(copy.conversation == conversation for copy in self.copies):
            return True
        return self.bound_here


class ClickViews:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def view(self, interaction_id: str, conversation: ConversationRef) -> ClickView | None:
        """The interaction as a click from ``conversation`` sees it; None if there is none."""

        def read(conn: Conn) -> ClickView | None:
            # every SELECT is sent before any is read (one wait on PostgreSQL): the session,
            # the epoch and the binding are found by the interaction's id, in one
            found = conn.execute(f"{SELECT_INTERACTION} WHERE i.id = ?", (interaction_id,))
            context = click_context_sent(conn, interaction_id, conversation)
            copies = copies_for_sent(conn, interaction_id)
            row = found.fetchone()
            if row is None:
                return None
            session, epoch, bound_here = context()
            return ClickView(
                interaction=interaction_from_row(row),
                session=session,
                copies=tuple(copies()),
                bound_here=bound_here,
                epoch=epoch,
            )

        return await self._reader.read(read)

    async def bound(self, conversation: ConversationRef) -> SessionRecord | None:
        """The session ``conversation`` is bound to (closed or not), or None."""
        return await self._reader.read(
            lambda conn: session_of(conn, conversation), one_statement=True
        )

    async def has_open_session(self, conversation: ConversationRef) -> bool:
        """Whether ``conversation`` is bound to a session that is not closed."""

        def read(conn: Conn) -> bool:
            row = fetch_one(
                conn,
                "SELECT 1 FROM conversations c JOIN sessions s ON s.id = c.session_id"
                " WHERE c.platform = ? AND c.space = ? AND c.channel = ? AND c.thread = ?"
                " AND s.closed_at IS NULL",
                conversation_params(conversation),
            )
            return row is not None

        return await self._reader.read(read, one_statement=True)
