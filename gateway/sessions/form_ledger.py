"""Form drafts in the shared ledger (issue 19, design point 8): what a platform's forms read
and write when several hosts share one ledger (gateway/platform.py ``FormLedger``).

A form's next click may reach a host that did not send its card: that host finds the card
by the message clicked (its copy in the ledger) and draws it as the broker does, and each
person's answers in progress are a row of ``form_drafts`` (store/form_drafts.py), the
payload the platform's (platforms/form_drafts.py ``encode_draft``, secret answers sealed
with :attr:`sealer`). A draft lives :data:`DRAFT_KEPT` after its person's last change, and
only while its request is pending; the expiry loops purge the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from gateway.action_tokens import verify_token
from gateway.cards import Card
from gateway.domain import ConversationRef, InteractionState
from gateway.errors import TokenRejected
from gateway.platform import Platform
from gateway.store.sealing import Sealer
from gateway.store.store import Store

__all__ = ["DRAFT_KEPT", "SharedFormLedger"]

# an untouched draft of a request still pending is dropped after this (each change renews it)
DRAFT_KEPT = timedelta(hours=24)


class SharedFormLedger:
    """``FormLedger`` on the gateway's store; ``render`` is the broker's (the card as a
    platform shows it)."""

    def __init__(
        self,
        store: Store,
        platforms: Mapping[str, Platform],
        key: bytes,
        *,
        render: Callable[..., Card],
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._platforms = platforms
        self._key = key
        self._render = render
        self._clock = clock
        self._sealer = Sealer(key)

    @property
    def sealer(self) -> Sealer:
        return self._sealer

    def interaction_of(self, submit_token: str) -> str | None:
        try:
            return verify_token(self._key, submit_token).interaction_id
        except TokenRejected:
            return None

    async def card_at(self, conversation: ConversationRef, interaction_id: str) -> Card | None:
        card = await self.card_now(conversation, interaction_id)
        return card if card is not None and card.form is not None else None

    async def card_now(self, conversation: ConversationRef, interaction_id: str) -> Card | None:
        platform = self._platforms.get(conversation.platform)
        if platform is None:
            return None
        interaction, copies = await self._store.interactions.get_with_copies(interaction_id)
        if interaction is None or conversation.key() not in {
            copy.conversation.key() for copy in copies
        }:
            return None
        card: Card = self._render(interaction, platform)
        if interaction.state is not InteractionState.PENDING and card.form is not None:
            return None  # never a form for a request no longer pending
        return card

    async def load_draft(self, interaction_id: str, person: str) -> str | None:
        return await self._store.form_drafts.load(interaction_id, person)

    async def save_draft(self, interaction_id: str, person: str, payload: str) -> None:
        until = self._clock() + DRAFT_KEPT
        await self._store.form_drafts.save(interaction_id, person, payload, expires_at=until)

    async def drop_draft(self, interaction_id: str, person: str) -> None:
        await self._store.form_drafts.drop(interaction_id, person)
