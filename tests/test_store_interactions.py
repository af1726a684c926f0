"""Interactions in the ledger: idempotent requests, CAS decisions, the three facts, races,
orphaned epochs, secrets kept out of the file, grants and card copies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import (
    Actor,
    Answer,
    Command,
    Decision,
    InteractionKind,
    InteractionRequest,
    InteractionState,
    Plan,
    Resolution,
    RunState,
    Scope,
)
from gateway.errors import (
    AlreadyDecided,
    IllegalTransition,
    InvalidDecision,
    StoreError,
    UnknownInteraction,
)
from gateway.interactions.machine import (
    DeliveryOutcome,
    Interaction,
    InteractionEvent,
    derive_run_state,
)
from gateway.store.codec import SECRET_MARKER
from gateway.store.database import Conn
from gateway.store.records import CopyState
from gateway.store.store import Store
from tests.store_backends import open_store
from tests.store_helpers import (
    ALICE,
    BOB,
    SLACK,
    TELEGRAM,
    SteppingClock,
    all_bytes,
    approval,
    question_form,
    running_session,
)

S = InteractionState


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def store(data_dir: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, data_dir, clock=SteppingClock()) as opened:
        yield opened


async def test_a_request_becomes_a_pending_interaction_with_its_own_id(store: Store) -> None:
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, approval("codex:0"))
    interaction = opened.interaction
    assert opened.created
    assert interaction.state is S.PENDING and interaction.version == 1
    assert interaction.id != "codex:0" and len(interaction.id) == 10
    assert interaction.native_key == "codex:0"
    assert interaction.detail == Command(command="ls -la", cwd="/srv/project", reason="look around")
    assert [a.id for a in interaction.actions] == ["accept", "acceptForSession", "decline"]
    assert interaction.actions[1].scope is Scope.SESSION
    assert await store.interactions.get(interaction.id) == interaction


async def test_a_duplicate_native_request_returns_the_first_one(store: Store) -> None:
    session, epoch = await running_session(store)
    first = await store.interactions.create(session.id, epoch, approval("codex:0"))
    again = await store.interactions.create(session.id, epoch, approval("codex:0"))
    assert not again.created and again.interaction.id == first.interaction.id
    assert [i.id for i in await store.interactions.list_open(session.id)] == [first.interaction.id]
    # codex request ids restart at 0 in a new process: a new epoch is a new request
    await store.sessions.end_epoch(session.id, epoch, exit_description="exited")
    await store.interactions.orphan_epoch(session.id, epoch)
    epoch2 = await store.sessions.begin_epoch(session.id, pid=5, pgid=5, process_start_time=1)
    fresh = await store.interactions.create(session.id, epoch2, approval("codex:0"))
    assert fresh.created and fresh.interaction.id != first.interaction.id


async def test_gateway_plans_without_a_native_key_are_each_their_own(store: Store) -> None:
    session, epoch = await running_session(store)
    plan = InteractionRequest(
        native_key="", kind=InteractionKind.PLAN, title="Plan", detail=Plan(markdown="1. a")
    )
    one = await store.interactions.create(session.id, epoch, plan)
    two = await store.interactions.create(session.id, epoch, plan)
    assert one.created and two.created and one.interaction.id != two.interaction.id
    assert one.interaction.native_key is None


async def test_no_interaction_for_an_ended_runtime(store: Store) -> None:
    session, epoch = await running_session(store)
    await store.sessions.end_epoch(session.id, epoch, exit_description="exited")
    with pytest.raises(StoreError, match="not live"):
        await store.interactions.create(session.id, epoch, approval())


async def test_concurrent_decisions_have_exactly_one_winner(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval())).interaction

    async def click(actor: Actor, action_id: str) -> Interaction | AlreadyDecided:
        try:
            return await store.interactions.decide(
                pending.id,
                expected_version=pending.version,
                actor=actor,
                decision=Decision(action_id=action_id),
            )
        except AlreadyDecided as lost:
            return lost

    results = await asyncio.gather(click(ALICE, "accept"), click(BOB, "decline"))
    lost = [r for r in results if isinstance(r, AlreadyDecided)]
    assert len(lost) == 1
    decided = await store.interactions.get(pending.id)
    assert decided is not None and decided.state is S.DECIDED and decided.version == 2
    assert decided.decision is not None
    assert lost[0].decided_by == str(decided.decision.actor)
    assert lost[0].state == "decided"
    assert f"by {decided.decision.actor}" in str(lost[0])
    [rejected] = await store.audit.entries(event="interaction.decision_rejected")
    assert rejected.interaction_id == pending.id
    assert rejected.actor != decided.decision.actor.key()


async def test_a_decision_that_does_not_fit_leaves_it_pending(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval())).interaction
    with pytest.raises(InvalidDecision, match="unknown action"):
        await store.interactions.decide(
            pending.id, expected_version=1, actor=ALICE, decision=Decision(action_id="yolo")
        )
    with pytest.raises(InvalidDecision, match="version 1, not 7"):
        await store.interactions.decide(
            pending.id, expected_version=7, actor=ALICE, decision=Decision(action_id="accept")
        )
    with pytest.raises(UnknownInteraction):
        await store.interactions.decide(
            "nope", expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
        )
    still = await store.interactions.get(pending.id)
    assert still is not None and still.state is S.PENDING and still.decision is None


async def test_answered_delivered_confirmed_are_three_facts(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval("codex:3"))).interaction
    decided = await store.interactions.decide(
        pending.id,
        expected_version=1,
        actor=ALICE,
        decision=Decision(action_id="accept", message="go"),
    )
    assert decided.state is S.DECIDED and decided.delivery is None
    delivered = await store.interactions.record_delivery(pending.id, ok=True)
    assert delivered.interaction.state is S.DELIVERED
    # the agent's serverRequest/resolved for that request
    closed = await store.interactions.close_from_agent(
        session.id, epoch, "codex:3", how=Resolution.ANSWERED
    )
    assert closed is not None
    final = closed.interaction
    assert final.state is S.RESOLVED and final.version == 4
    assert final.decision is not None and final.delivery is not None
    assert final.resolution is not None
    assert final.decision.actor == ALICE and final.decision.decision.action_id == "accept"
    assert final.decision.decision.message == "go"
    assert final.delivery.outcome is DeliveryOutcome.OK
    assert (final.resolution.how, final.resolution.by) == (Resolution.ANSWERED, "agent")
    assert final.decision.at < final.delivery.at < final.resolution.at
    assert await store.interactions.list_open(session.id) == []


async def test_the_one_write_recorded_twice_is_delivered_once(store: Store) -> None:
    """The owner's click path and its sweep may both record the write of one decision (the
    second's write was AlreadyAnswered: the agent got it once): the second record finds it
    delivered and changes nothing, where it used to be an illegal move."""
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval())).interaction
    await store.interactions.decide(
        pending.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    first = await store.interactions.record_delivery(pending.id, ok=True)
    second = await store.interactions.record_delivery(pending.id, ok=True)
    assert first.interaction.state is second.interaction.state is S.DELIVERED
    assert second.transition.ignored and second.interaction == first.interaction
    rows = await store.writer.read(
        lambda conn: conn.execute(
            "SELECT count(*) AS n FROM deliveries WHERE interaction_id = ?", (pending.id,)
        ).fetchone()["n"]
    )
    assert rows == 1
    # the agent's close may land between the two records: the second is still the same write
    await store.interactions.close_from_agent(session.id, epoch, "codex:0", how=Resolution.ANSWERED)
    third = await store.interactions.record_delivery(pending.id, ok=True)
    assert third.transition.ignored and third.interaction.state is S.RESOLVED
    rows = await store.writer.read(
        lambda conn: conn.execute(
            "SELECT count(*) AS n FROM deliveries WHERE interaction_id = ?", (pending.id,)
        ).fetchone()["n"]
    )
    assert rows == 1


async def test_a_failed_write_keeps_it_decided_and_says_why(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval())).interaction
    await store.interactions.decide(
        pending.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    failed = await store.interactions.record_delivery(pending.id, ok=False, error="broken pipe")
    assert failed.interaction.state is S.DECIDED
    assert failed.interaction.delivery is not None
    assert failed.interaction.delivery.outcome is DeliveryOutcome.FAILED
    assert failed.interaction.delivery.error == "broken pipe"


async def test_nothing_is_delivered_before_a_decision(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval())).interaction
    with pytest.raises(IllegalTransition):
        await store.interactions.record_delivery(pending.id, ok=True)
    still = await store.interactions.get(pending.id)
    assert still is not None and still.delivery is None and still.version == 1


async def test_withdrawn_after_the_decision_keeps_the_decision_and_writes_nothing(
    store: Store,
) -> None:
    session, epoch = await running_session(store)
    pending = (
        await store.interactions.create(session.id, epoch, approval("claude:r1"))
    ).interaction
    await store.interactions.decide(
        pending.id, expected_version=1, actor=BOB, decision=Decision(action_id="decline")
    )
    closed = await store.interactions.close_from_agent(
        session.id, epoch, "claude:r1", how=Resolution.CANCELLED_BY_AGENT
    )
    assert closed is not None
    cancelled = closed.interaction
    assert cancelled.state is S.CANCELLED
    assert cancelled.decision is not None and cancelled.decision.actor == BOB
    assert cancelled.delivery is not None and cancelled.delivery.outcome is DeliveryOutcome.SKIPPED
    assert cancelled.resolution is not None
    assert cancelled.resolution.how is Resolution.CANCELLED_BY_AGENT
    # a write that crossed the withdrawal is still a fact; the state stays, the race is audited
    late = await store.interactions.record_delivery(pending.id, ok=True)
    assert late.transition.ignored and late.interaction.state is S.CANCELLED
    after = await store.interactions.get(pending.id)
    assert after is not None and after.delivery is not None
    assert after.delivery.outcome is DeliveryOutcome.OK
    [ignored] = await store.audit.entries(event="interaction.event_ignored")
    assert ignored.details == {"event": "deliver", "state": "cancelled"}


async def test_expired_then_timed_out_written(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval())).interaction
    expired = await store.interactions.resolve(pending.id, InteractionEvent.EXPIRE, by="gateway")
    assert expired.interaction.state is S.EXPIRED
    assert expired.interaction.resolution is not None
    assert expired.interaction.resolution.how is Resolution.EXPIRED
    assert expired.interaction.decision is None  # nobody declined it
    written = await store.interactions.record_delivery(pending.id, ok=True)
    assert not written.transition.ignored
    assert written.interaction.delivery is not None
    assert written.interaction.delivery.outcome is DeliveryOutcome.OK
    with pytest.raises(AlreadyDecided, match="already expired"):
        await store.interactions.decide(
            pending.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
        )


async def test_events_after_the_end_are_audited_and_ignored(store: Store) -> None:
    session, epoch = await running_session(store)
    pending = (await store.interactions.create(session.id, epoch, approval("k"))).interaction
    await store.interactions.resolve(pending.id, InteractionEvent.WITHDRAW, by="agent")
    again = await store.interactions.close_from_agent(
        session.id, epoch, "k", how=Resolution.ANSWERED
    )
    assert again is not None and again.transition.ignored
    assert again.interaction.state is S.CANCELLED and again.interaction.version == 2
    assert (
        await store.interactions.close_from_agent(
            session.id, epoch, "never-seen", how=Resolution.ANSWERED
        )
        is None
    )
    events = [e.event for e in await store.audit.entries(session_id=session.id)]
    assert "interaction.event_ignored" in events and "interaction.unknown_close" in events


async def test_an_ended_epoch_orphans_what_was_live(store: Store) -> None:
    session, epoch = await running_session(store)
    create = store.interactions.create
    pending = (await create(session.id, epoch, approval("a"))).interaction
    decided = (await create(session.id, epoch, approval("b"))).interaction
    delivered = (await create(session.id, epoch, approval("c"))).interaction
    resolved = (await create(session.id, epoch, approval("d"))).interaction
    for item in (decided, delivered, resolved):
        await store.interactions.decide(
            item.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
        )
    for item in (delivered, resolved):
        await store.interactions.record_delivery(item.id, ok=True)
    await store.interactions.resolve(resolved.id, InteractionEvent.CONFIRM, by="agent")

    await store.sessions.end_epoch(session.id, epoch, exit_description="exited 1")
    moved = await store.interactions.orphan_epoch(session.id, epoch, note="agent exited 1")
    assert [u.interaction.id for u in moved] == [pending.id, decided.id, delivered.id]
    for update in moved:
        assert update.interaction.state is S.ORPHANED
        assert update.interaction.resolution is not None
        assert update.interaction.resolution.how is Resolution.ORPHANED
        assert update.interaction.resolution.note == "agent exited 1"
    outcomes = [u.interaction.delivery.outcome for u in moved if u.interaction.delivery]
    assert outcomes == [DeliveryOutcome.SKIPPED, DeliveryOutcome.SKIPPED, DeliveryOutcome.OK]
    untouched = await store.interactions.get(resolved.id)
    assert untouched is not None and untouched.state is S.RESOLVED
    assert await store.interactions.orphan_epoch(session.id, epoch) == []


async def test_a_runtime_that_outlives_the_gateway_leaves_delivered_ones_unknown(
    store: Store,
) -> None:
    session, epoch = await running_session(store)
    item = (await store.interactions.create(session.id, epoch, approval())).interaction
    await store.interactions.decide(
        item.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    await store.interactions.record_delivery(item.id, ok=True)
    [update] = await store.interactions.orphan_epoch(
        session.id, epoch, runtime_outlives_gateway=True
    )
    assert update.interaction.state is S.UNKNOWN
    assert update.interaction.resolution is not None
    assert update.interaction.resolution.how is Resolution.UNKNOWN


async def test_what_a_reattached_server_still_lists_is_kept_the_rest_orphaned(
    store: Store,
) -> None:
    session, epoch = await running_session(store)
    listed = (await store.interactions.create(session.id, epoch, approval("p:1"))).interaction
    gone = (await store.interactions.create(session.id, epoch, approval("p:2"))).interaction
    [update] = await store.interactions.orphan_epoch(
        session.id, epoch, runtime_outlives_gateway=True, keep=frozenset({"p:1", "p:9"})
    )
    assert update.interaction.id == gone.id and update.interaction.state is S.ORPHANED
    kept = await store.interactions.get(listed.id)
    assert kept is not None and kept == listed  # not a field moved: its cards stay as drawn


async def test_secret_answers_never_reach_the_database_file(store: Store, data_dir: Path) -> None:
    secret = "ghp_d3pl0y-t0k3n-that-must-not-leak"
    session, epoch = await running_session(store)
    form = (await store.interactions.create(session.id, epoch, question_form())).interaction
    decided = await store.interactions.decide(
        form.id,
        expected_version=1,
        actor=ALICE,
        decision=Decision(
            answers={"env": Answer(option_ids=("prod",)), "token": Answer(other=secret)}
        ),
    )
    assert decided.decision is not None
    answers = decided.decision.decision.answers
    assert answers["env"] == Answer(option_ids=("prod",))
    assert answers["token"] == Answer(other=SECRET_MARKER)
    assert secret.encode() not in await stored_bytes(store, data_dir)
    await store.interactions.record_delivery(form.id, ok=True)
    assert secret.encode() not in await stored_bytes(store, data_dir)


async def stored_bytes(store: Store, data_dir: Path) -> bytes:
    """SQLite: the database file, its WAL and shm; PostgreSQL: every row of every table."""
    if store.path is not None:
        return all_bytes(data_dir)

    def every_row(conn: Conn) -> bytes:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
        texts = [
            row["text"]
            for table in tables
            for row in conn.execute(
                f'SELECT row_to_json(t)::text AS text FROM "{table["table_name"]}" t'
            ).fetchall()
        ]
        return "\n".join(texts).encode()

    return await store.writer.read(every_row)


async def test_secret_answers_stay_out_after_checkpoint(data_dir: Path) -> None:
    secret = "correct horse battery staple"
    async with Store.open(data_dir) as store:
        session, epoch = await running_session(store)
        form = (await store.interactions.create(session.id, epoch, question_form())).interaction
        await store.interactions.decide(
            form.id,
            expected_version=1,
            actor=ALICE,
            decision=Decision(
                answers={"env": Answer(option_ids=("dev",)), "token": Answer(other=secret)}
            ),
        )
    # closed: the WAL is checkpointed into the database file, which still lacks it
    assert not (data_dir / "ledger.sqlite3-wal").exists()
    assert secret.encode() not in all_bytes(data_dir)


async def test_allowing_for_the_session_is_a_recorded_grant(store: Store) -> None:
    session, epoch = await running_session(store)
    once = (await store.interactions.create(session.id, epoch, approval("a"))).interaction
    wide = await store.interactions.create(session.id, epoch, approval("b", title="git push"))
    await store.interactions.decide(
        once.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    await store.interactions.decide(
        wide.interaction.id,
        expected_version=1,
        actor=BOB,
        decision=Decision(action_id="acceptForSession"),
    )
    [grant] = await store.interactions.list_grants(session.id)
    assert grant.interaction_id == wide.interaction.id and grant.scope is Scope.SESSION
    assert grant.actor == BOB and "git push" in grant.description
    [audited] = await store.audit.entries(event="grant")
    assert audited.actor == BOB.key() and audited.details["scope"] == "session"


async def test_run_state_follows_the_ledger(store: Store) -> None:
    session, epoch = await running_session(store)
    await store.interactions.create(session.id, epoch, question_form())
    live = await store.interactions.list_open(session.id)
    assert derive_run_state(live, turn_running=True) is RunState.WAITING_INPUT
    await store.interactions.create(session.id, epoch, approval())
    live = await store.interactions.list_open(session.id)
    assert derive_run_state(live, turn_running=True) is RunState.WAITING_APPROVAL


async def test_open_and_recently_closed_are_one_view(store: Store) -> None:
    session, epoch = await running_session(store)
    for key in ("codex:1", "codex:2"):
        await store.interactions.create(session.id, epoch, approval(key))
        await store.interactions.close_from_agent(session.id, epoch, key, how=Resolution.ANSWERED)
    waiting = (await store.interactions.create(session.id, epoch, approval("codex:3"))).interaction

    def ids(read: tuple[list[Interaction], list[Interaction]]) -> tuple[list[str], list[str]]:
        return [i.native_key for i in read[0]], [i.native_key for i in read[1]]

    assert ids(await store.interactions.list_open_and_closed(closed_limit=1)) == (
        ["codex:3"],
        ["codex:2"],  # the newest closed one
    )
    # read while it closes: open or closed, never both at once (the read runs on a reader,
    # store.readers, and shows what was committed when it began); closed once it returned
    during, _ = await asyncio.gather(
        store.interactions.list_open_and_closed(closed_limit=5),
        store.interactions.close_from_agent(session.id, epoch, "codex:3", how=Resolution.ANSWERED),
    )
    after = await store.interactions.list_open_and_closed(closed_limit=5)
    assert ids(during) in (
        (["codex:3"], ["codex:2", "codex:1"]),
        ([], ["codex:3", "codex:2", "codex:1"]),
    )
    assert ids(after) == ([], ["codex:3", "codex:2", "codex:1"])
    assert after[1][0].id == waiting.id and after[1][0].state is S.CANCELLED


async def test_every_copy_of_a_card_is_tracked(store: Store) -> None:
    session, epoch = await running_session(store)
    item = (await store.interactions.create(session.id, epoch, approval())).interaction
    telegram = await store.cards.add(item.id, TELEGRAM)
    slack = await store.cards.add(item.id, SLACK)
    assert await store.cards.add(item.id, TELEGRAM) == telegram  # one copy per conversation
    assert telegram.state is CopyState.PENDING and telegram.message_ref is None
    await store.cards.mark_sent(telegram.id, message_ref="msg:55", version=item.version)
    await store.cards.mark_failed(slack.id, error="429 rate limited")
    [failed] = await store.cards.list_failed()
    assert failed.conversation == SLACK and failed.message_ref is None
    assert failed.error == "429 rate limited"
    assert await store.cards.list_outdated() == []
    decided = await store.interactions.decide(
        item.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )
    [stale] = await store.cards.list_outdated()
    assert stale.id == telegram.id and stale.rendered_version == 1
    edited = await store.cards.mark_edited(telegram.id, version=decided.version)
    assert edited.state is CopyState.EDITED and edited.message_ref == "msg:55"
    assert await store.cards.list_outdated() == []
    assert [c.conversation for c in await store.cards.list_for(item.id)] == [TELEGRAM, SLACK]


async def test_recent_interactions_survive_a_restart(data_dir: Path) -> None:
    async with Store.open(data_dir) as store:
        session, epoch = await running_session(store)
        first = (await store.interactions.create(session.id, epoch, approval("a"))).interaction
        await store.interactions.decide(
            first.id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
        )
        second = (await store.interactions.create(session.id, epoch, question_form())).interaction
    async with Store.open(data_dir) as store:
        recent = await store.interactions.list_recent(limit=5)
        assert [i.id for i in recent] == [second.id, first.id]
        assert recent[1].decision is not None and recent[1].decision.actor == ALICE
        assert recent[0].questions[1].secret
