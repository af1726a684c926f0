"""What a click is checked against, read in one view of the ledger.

A click, a form or a pre-check (``Inbox.may_answer``) is judged by the pure checks of
``gateway.action_tokens`` on: the interaction, its session, where its card is shown, whether
the clicked conversation is bound to that session, and whether the interaction's runtime
epoch is still live. :meth:`ClickViews.view` reads all of them in one SELECT.
The same reads run on the writer's connection (``store.clicks``, what a decision is checked
against) or on the read-only one (``store.peek``, which answers while the writer is busy).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.domain import ConversationRef
from gateway.interactions.machine import Interaction
from gateway.session_record import SessionRecord
from gateway.store.cards import COPIES_JSON, copies_from_json
from gateway.store.database import Conn, Reader, by_name, conversation_params, fetch_one
from gateway.store.interaction_rows import interaction_from_row, select_interaction_with
from gateway.store.records import CardCopy, EpochRecord
from gateway.store.sessions import SESSION_AND_EPOCH_AS, session_and_epoch_from_row, session_of

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


# everything a click is judged by, one statement (consistent in itself: no transaction)
_VIEW = (
    select_interaction_with(
        f"{SESSION_AND_EPOCH_AS},"
        " EXISTS (SELECT 1 FROM conversations c WHERE c.session_id = i.session_id"
        " AND c.platform = ? AND c.space = ? AND c.channel = ? AND c.thread = ?) AS bound_here,"
        f" {COPIES_JSON}",
        "LEFT JOIN sessions n ON n.id = i.session_id\n"
        "LEFT JOIN runtime_epochs e ON e.session_id = i.session_id AND e.epoch = i.runtime_epoch\n",
    )
    + "WHERE i.id = ?"
)


class ClickViews:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def view(self, interaction_id: str, conversation: ConversationRef) -> ClickView | None:
        """The interaction as a click from ``conversation`` sees it; None if there is none."""

        def read(conn: Conn) -> ClickView | None:
            found = fetch_one(conn, _VIEW, (*conversation_params(conversation), interaction_id))
            if found is None:
                return None
            row = by_name(found)
            session, epoch = session_and_epoch_from_row(row)
            interaction = interaction_from_row(row)
            return ClickView(
                interaction=interaction,
                session=session,
                copies=tuple(copies_from_json(row["copies_json"])),
                bound_here=bool(row["bound_here"]),
                epoch=epoch,
            )

        return await self._reader.read(read, one_statement=True)

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
