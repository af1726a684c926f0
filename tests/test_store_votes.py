"""The votes table: one vote per person, the vote that reaches N decides in its own
transaction, votes stay as audit and never carry over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import Actor, Decision, InteractionState
from gateway.errors import AlreadyDecided, VersionMoved
from gateway.interactions.content_hash import content_hash
from gateway.interactions.policy import Requirement
from gateway.store.store import Store
from tests.store_backends import open_store
from tests.store_helpers import SteppingClock, approval, running_session

TWO = Requirement(approvals=2)
ALICE = Actor(platform="slack", user_id="U1", display="alice")
ALICE_PHONE = Actor(platform="telegram", user_id="42", display="alice")
BOB = Actor(platform="slack", user_id="U2", display="bob")
CAROL = Actor(platform="slack", user_id="U3", display="carol")


@pytest.fixture
async def store(tmp_path: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=SteppingClock()) as opened:
        yield opened


async def pending(store: Store) -> str:
    session, epoch = await running_session(store)
    return (await store.interactions.create(session.id, epoch, approval())).interaction.id


async def test_a_vote_bumps_the_version_and_the_second_decides(store: Store) -> None:
    interaction_id = await pending(store)
    first = await store.votes.cast(
        interaction_id,
        person="alice",
        actor=ALICE,
        action_id="accept",
        requirement=TWO,
        surface="slack:T1:C1:1",
    )
    assert first.decision is None and first.counted
    assert first.interaction.state is InteractionState.PENDING
    assert first.interaction.version == 2  # every card copy is drawn again
    assert [(v.person, v.action_id) for v in first.interaction.votes] == [("alice", "accept")]
    assert first.interaction.votes[0].content_hash == first.interaction.content_hash
    assert first.tally.line(first.interaction.actions) == "1 of 2: alice approved"
    second = await store.votes.cast(
        interaction_id,
        person="bob",
        actor=BOB,
        action_id="accept",
        requirement=TWO,
        surface="slack:T1:C1:1",
    )
    decided = second.interaction
    assert second.decision is not None and second.decision.action_id == "accept"
    assert decided.state is InteractionState.DECIDED
    assert decided.decision is not None and decided.decision.actor == BOB


async def test_the_same_person_twice_counts_once(store: Store) -> None:
    interaction_id = await pending(store)
    for actor in (ALICE, ALICE, ALICE_PHONE):  # again, and from their other account
        outcome = await store.votes.cast(
            interaction_id,
            person="alice",
            actor=actor,
            action_id="accept",
            requirement=TWO,
            surface="x",
        )
        assert outcome.decision is None
    interaction = await store.interactions.get(interaction_id)
    assert interaction is not None and interaction.state is InteractionState.PENDING
    assert len(interaction.votes) == 1


async def test_different_allow_actions_never_add_up_and_a_deny_decides(store: Store) -> None:
    interaction_id = await pending(store)
    await store.votes.cast(
        interaction_id,
        person="alice",
        actor=ALICE,
        action_id="accept",
        requirement=TWO,
        surface="x",
    )
    other = await store.votes.cast(
        interaction_id,
        person="bob",
        actor=BOB,
        action_id="acceptForSession",
        requirement=TWO,
        surface="x",
    )
    assert other.decision is None
    deny = await store.votes.cast(
        interaction_id,
        person="carol",
        actor=CAROL,
        action_id="decline",
        requirement=TWO,
        surface="x",
    )
    assert deny.decision is not None and deny.decision.action_id == "decline"
    with pytest.raises(AlreadyDecided):
        await store.votes.cast(
            interaction_id,
            person="dave",
            actor=CAROL,
            action_id="accept",
            requirement=TWO,
            surface="x",
        )


async def test_last_votes_at_once_make_one_decision(store: Store) -> None:
    interaction_id = await pending(store)
    await store.votes.cast(
        interaction_id,
        person="alice",
        actor=ALICE,
        action_id="accept",
        requirement=TWO,
        surface="x",
    )
    results = await asyncio.gather(
        *(
            store.votes.cast(
                interaction_id,
                person=p,
                actor=a,
                action_id="accept",
                requirement=TWO,
                surface="x",
            )
            for p, a in (("bob", BOB), ("carol", CAROL))
        ),
        return_exceptions=True,
    )
    decided = [r for r in results if not isinstance(r, BaseException) and r.decision]
    refused = [r for r in results if isinstance(r, AlreadyDecided)]
    assert len(decided) == 1 and len(refused) == 1


async def test_withdrawn_votes_stay_as_audit_and_a_stale_version_is_typed(store: Store) -> None:
    interaction_id = await pending(store)
    cast = await store.votes.cast(
        interaction_id,
        person="alice",
        actor=ALICE,
        action_id="accept",
        requirement=TWO,
        surface="x",
    )
    after = await store.votes.withdraw(interaction_id, person="alice", actor=ALICE)
    assert after.votes == () and after.version == cast.interaction.version + 1
    assert await store.votes.all_votes(interaction_id) == [("alice", "accept", True)]
    with pytest.raises(VersionMoved):  # the desk reads again and retries on this
        await store.interactions.decide(
            interaction_id, expected_version=1, actor=BOB, decision=Decision(action_id="accept")
        )
    # a new request starts with no votes: nothing carries over
    fresh = await store.interactions.get(await pending(store))
    assert fresh is not None and fresh.votes == ()


async def test_the_content_hash_is_the_stored_request_and_recorded_with_the_decision(
    store: Store,
) -> None:
    interaction_id = await pending(store)
    interaction = await store.interactions.get(interaction_id)
    assert interaction is not None and len(interaction.content_hash) == 64
    assert interaction.content_hash != content_hash(
        kind="approval", title="", summary="", detail_json="", actions_json="", questions_json=""
    )
    await store.interactions.decide(
        interaction_id, expected_version=1, actor=BOB, decision=Decision(action_id="accept")
    )

    [decided] = await store.audit.entries(
        event="interaction.decided", interaction_id=interaction_id
    )
    assert decided.details["content_hash"] == interaction.content_hash
