"""Secret answers sealed between hosts (issue 19, design point 4): a form submitted on one
host for a session another host runs reaches that host's agent whole, once, and the clear
text is nowhere at rest: not in the ledger's files, the logs, nor the audit export."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.ledger_url import PgTarget
from gateway.domain import Answer, Decision, InteractionState
from gateway.errors import SealBroken
from gateway.interactions.machine import DeliveryOutcome
from gateway.store.audit_export import audit_records, to_csv, to_jsonl
from gateway.store.codec import SECRET_MARKER
from gateway.store.sealing import Sealer
from gateway.store.store import Store
from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE
from tests.hosts_harness import ON_A, both_running, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.store_backends import open_store
from tests.store_helpers import SteppingClock, question_form, running_session

SECRET = "hunter2-" + os.urandom(8).hex()  # planted: it must be found only where it belongs
ANSWERS = {"env": Answer(option_ids=("prod",)), "token": Answer(other=SECRET)}
REQUESTS = {"deploy": question_form("scripted:deploy")}


# --- the seal ------------------------------------------------------------------------------


def test_a_sealed_answer_opens_with_the_same_key_for_the_same_interaction_only() -> None:
    key = os.urandom(HMAC_KEY_BYTES)
    sealed = Sealer(key).seal("i1", {"token": ANSWERS["token"]})
    assert SECRET not in sealed
    assert Sealer(key).open("i1", sealed) == {"token": ANSWERS["token"]}  # another host, one key
    with pytest.raises(SealBroken):
        Sealer(os.urandom(HMAC_KEY_BYTES)).open("i1", sealed)
    with pytest.raises(SealBroken):
        Sealer(key).open("i2", sealed)  # moved to another interaction's row
    tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    with pytest.raises(SealBroken):
        Sealer(key).open("i1", tampered)
    assert Sealer(key).seal("i1", {"token": ANSWERS["token"]}) != sealed  # a nonce per seal


# --- the ledger keeps it until the interaction moves on ----------------------------------


@pytest.fixture
async def store(tmp_path: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=SteppingClock()) as opened:
        yield opened


async def _decided_with_seal(store: Store) -> tuple[str, int, str]:
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, question_form())
    interaction_id = opened.interaction.id
    await store.interactions.decide(
        interaction_id,
        expected_version=1,
        actor=ALICE,
        decision=Decision(answers=ANSWERS),
        sealed="v1.sealed-text",
    )
    assert await store.interactions.sealed_answers(interaction_id) == "v1.sealed-text"
    return session.id, epoch, interaction_id


@pytest.mark.parametrize("ok", [True, False], ids=["written", "write-failed"])
async def test_the_delivery_record_deletes_the_sealed_answer(store: Store, ok: bool) -> None:
    _, _, interaction_id = await _decided_with_seal(store)
    await store.interactions.record_delivery(interaction_id, ok=ok, error=None if ok else "x")
    assert await store.interactions.sealed_answers(interaction_id) is None


async def test_an_orphaned_decision_drops_its_sealed_answer(store: Store) -> None:
    session_id, epoch, interaction_id = await _decided_with_seal(store)
    await store.interactions.orphan_epoch(session_id, epoch)
    after = await store.interactions.get(interaction_id)
    assert after is not None and after.state is InteractionState.ORPHANED
    assert await store.interactions.sealed_answers(interaction_id) is None


# --- two hosts on the real cluster ----------------------------------------------------------


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found


async def test_a_secret_answered_through_another_host_reaches_the_owners_agent_once(
    tmp_path: Path,
    pg_cluster: PgCluster,
    pg_database: PgCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    since = datetime.now(UTC)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "deploy")
        assert asked.first.form is not None
        on_a.writes.hold()  # a's write waits: the sealed row is seen before it is deleted
        token = asked.first.form.submit_token
        ack = await b.memory.submit(ON_A, ALICE, token, ANSWERS, private=True)
        assert ack.accepted, ack
        assert ack.text == "Answered. Host a, which runs the agent, sends it on."
        await on_a.writes.waiting.wait()
        sealed = await b.gateway.store.interactions.sealed_answers(asked.interaction.id)
        assert sealed is not None and SECRET not in sealed
        on_a.writes.release()
        decided = await settles(
            a, asked, rf"Answered by Alice at {WHEN} · sent to the agent · done"
        )
        assert decided.delivery is not None
        assert decided.delivery.outcome is DeliveryOutcome.OK
        assert on_a.received == [Decision(answers=ANSWERS)]  # whole, once
        assert on_b.received == []
        assert decided.decision is not None
        assert decided.decision.decision.answers["token"] == Answer(other=SECRET_MARKER)
        assert await a.gateway.store.interactions.sealed_answers(asked.interaction.id) is None
        again = await b.memory.submit(ON_A, ALICE, token, ANSWERS, private=True)
        assert not again.accepted
        assert on_a.received == [Decision(answers=ANSWERS)]
        records = await audit_records(a.gateway.store, since, None)
        assert records  # the export has the decision, without its secret
        exported = to_jsonl(records) + to_csv(records)
        shown = [repr(m.versions) for m in a.memory.messages() + b.memory.messages()]
    assert SECRET not in exported
    assert not any(SECRET in text for text in shown)
    assert SECRET not in caplog.text
    with psycopg.connect(pg_database.dsn, autocommit=True) as admin:
        admin.execute("CHECKPOINT")  # the tables' pages on disk, beside the WAL
    # the whole cluster (tables, WAL, the server's log) and both hosts' data dirs; the
    # question's text is there, so the search does read what the ledger wrote
    assert _files_holding(Path(pg_cluster.host), b"Paste the deploy token")
    assert _files_holding(Path(pg_cluster.host), SECRET.encode()) == []
    assert _files_holding(tmp_path, SECRET.encode()) == []


async def test_a_secret_sealed_under_another_key_is_not_written_and_the_card_says_so(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "deploy")
        # what a host with another hmac_key_file would commit
        alien = Sealer(os.urandom(HMAC_KEY_BYTES)).seal(asked.interaction.id, ANSWERS)
        await b.gateway.store.interactions.decide(
            asked.interaction.id,
            expected_version=asked.interaction.version,
            actor=ALICE,
            decision=Decision(answers=ANSWERS),
            sealed=alien,
        )
        decided = await settles(a, asked, rf"Answered by Alice at {WHEN} · .*hmac_key_file.*")
        assert decided.delivery is not None
        assert decided.delivery.outcome is DeliveryOutcome.FAILED
        assert on_a.received == []
        assert await a.gateway.store.interactions.sealed_answers(asked.interaction.id) is None
