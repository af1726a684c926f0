"""What a move of an interaction returns is what the ledger then holds, field for field.

Issue 36: a write no longer reads the whole request back (its votes subquery, its facts'
joins) where it need not. On SQLite the writer's lock makes the locked read whole, so a
move returns that read with what the move wrote; a new request is built from the texts
inserted; on PostgreSQL the moves still read back (a row lock that waited returns the
facts' joins as they were). Either way, each result must equal a fresh read of the row,
on both backends (``ledger`` runs each test on SQLite and on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import Answer, ConversationRef, Decision, Resolution
from gateway.interactions.machine import Interaction, InteractionEvent
from gateway.store.store import Store
from tests.store_backends import open_store
from tests.store_helpers import (
    ALICE,
    SLACK,
    TELEGRAM,
    SteppingClock,
    approval,
    question_form,
    running_session,
)


@pytest.fixture
async def store(tmp_path: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=SteppingClock()) as opened:
        yield opened


async def as_stored(store: Store, returned: Interaction) -> Interaction:
    stored = await store.interactions.get(returned.id)
    assert stored == returned
    return returned


async def test_a_request_decided_written_and_answered(store: Store) -> None:
    session, epoch = await running_session(store)
    opened = await store.interactions.create_with_copies(session.id, epoch, approval("k:1"))
    pending = await as_stored(store, opened.interaction)
    assert opened.session is not None and opened.session.id == session.id
    # a standing grant: the decision's rows and the grant's, in one transaction
    decided = await store.interactions.decide(
        pending.id,
        expected_version=1,
        actor=ALICE,
        decision=Decision(action_id="acceptForSession", message="go"),
    )
    await as_stored(store, decided)
    assert decided.decision is not None and decided.decision.decision.message == "go"
    delivered = await store.interactions.record_delivery(pending.id, ok=True)
    await as_stored(store, delivered.interaction)
    closed = await store.interactions.close_from_agent(
        session.id, epoch, "k:1", how=Resolution.ANSWERED
    )
    assert closed is not None
    final = await as_stored(store, closed.interaction)
    assert final.version == 4 and final.resolution is not None


async def test_a_failed_write_then_a_withdrawal(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval("k:2"))).interaction
    await store.interactions.decide(
        pending.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    failed = await store.interactions.record_delivery(pending.id, ok=False, error="broken pipe")
    assert failed.interaction.delivery is not None
    await as_stored(store, failed.interaction)
    withdrawn = await store.interactions.resolve(
        pending.id, InteractionEvent.WITHDRAW, by="agent", note="gone"
    )
    await as_stored(store, withdrawn.interaction)
    # a fact after the end: the state kept, the card's facts drawn again
    late = await store.interactions.record_delivery(pending.id, ok=True)
    await as_stored(store, late.interaction)


async def test_an_expiry_with_nothing_written_and_an_orphaned_epoch(store: Store) -> None:
    session, epoch = await running_session(store)
    first = (await store.interactions.create(session.id, epoch, approval("k:3"))).interaction
    second = (await store.interactions.create(session.id, epoch, approval("k:4"))).interaction
    third = (await store.interactions.create(session.id, epoch, approval("k:5"))).interaction
    expired = await store.interactions.expire(
        first.id, expected_version=1, outcome="deny", not_written="the agent is gone"
    )
    assert expired is not None and expired.interaction.delivery is not None
    await as_stored(store, expired.interaction)
    decided = await store.interactions.decide(
        second.id, expected_version=1, actor=ALICE, decision=Decision(action_id="decline")
    )
    await as_stored(store, decided)
    # expired, its "timed out" write never recorded: the orphaning records it as unknown
    timed_out = await store.interactions.expire(third.id, expected_version=1, outcome="deny")
    assert timed_out is not None
    await as_stored(store, timed_out.interaction)
    orphaned = await store.interactions.orphan_epoch(session.id, epoch, gateway_restarted=True)
    assert [update.interaction.id for update in orphaned] == [second.id, third.id]
    for update in orphaned:
        await as_stored(store, update.interaction)


async def test_a_secret_answer_is_returned_redacted_as_stored(store: Store) -> None:
    session, epoch = await running_session(store)
    form = (await store.interactions.create(session.id, epoch, question_form())).interaction
    await as_stored(store, form)
    decided = await store.interactions.decide(
        form.id,
        expected_version=1,
        actor=ALICE,
        decision=Decision(
            answers={"env": Answer(option_ids=("prod",)), "token": Answer(other="ghp_secret")}
        ),
    )
    await as_stored(store, decided)
    assert "ghp_secret" not in repr(decided)


async def test_a_card_s_copies_read_with_the_request_are_the_copies_listed_alone(
    store: Store,
) -> None:
    """The click's view and the cards' reads take a request's copies in its own statement
    (a JSON column): each copy as ``cards.list_for`` reads it, a conversation without a
    space or a thread (a DM) included, in the order they were made."""
    session, epoch = await running_session(store)
    await store.sessions.bind(TELEGRAM, session.id)
    opened = await store.interactions.create_with_copies(session.id, epoch, approval("k:9"))
    dm = ConversationRef(platform="memory", space=None, channel="carol", thread=None)
    await store.cards.add(opened.interaction.id, dm)
    await store.cards.add(opened.interaction.id, SLACK)
    listed = await store.cards.list_for(opened.interaction.id)
    assert [copy.conversation for copy in listed] == [TELEGRAM, dm, SLACK]
    _, copies, shown = await store.interactions.get_for_cards(opened.interaction.id)
    assert copies == listed
    assert shown is not None and shown.project == session.project
    _, with_copies = await store.interactions.get_with_copies(opened.interaction.id)
    assert with_copies == listed
    view = await store.clicks.view(opened.interaction.id, dm)
    assert view is not None and list(view.copies) == listed
    assert view.shown_in(dm) and not view.bound_here  # shown there, not bound there
    assert view.session == await store.sessions.get(session.id)
    assert view.epoch == await store.sessions.get_epoch(session.id, epoch)
    bound_view = await store.clicks.view(opened.interaction.id, TELEGRAM)
    assert bound_view is not None and bound_view.bound_here
