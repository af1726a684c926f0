"""Form drafts in the ledger (issue 19, design point 8): a person's answers in progress,
written by one host and read by another, secret answers sealed; on both backends."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.ledger_url import PgTarget
from gateway.domain import Actor, Answer, Decision
from gateway.errors import SealBroken
from gateway.store.sealing import Sealer
from gateway.store.store import Store
from platforms.form_drafts import Draft, decode_draft, encode_draft
from tests.store_backends import open_store
from tests.store_helpers import ALICE, SteppingClock, question_form, running_session

SECRET = "s3cret-" + os.urandom(8).hex()
KEY = os.urandom(HMAC_KEY_BYTES)
BOB = Actor(platform="memory", user_id="bob", display="Bob")


def _draft() -> Draft:
    return Draft(
        actor=ALICE,
        step=1,
        chosen={0: (1,)},
        other={0: "and staging"},
        secret={1: Answer(other=SECRET)},
        prompt='[111,9,1,-100,5,"-100",null]',  # a platform's note of its prompt
    )


def test_a_draft_read_on_another_host_is_the_same_and_its_secret_is_sealed() -> None:
    payload = encode_draft(_draft(), Sealer(KEY), "i1")
    assert SECRET not in payload
    assert decode_draft(payload, Sealer(KEY), "i1") == _draft()
    with pytest.raises(SealBroken):
        decode_draft(payload, Sealer(os.urandom(HMAC_KEY_BYTES)), "i1")
    with pytest.raises(SealBroken):
        decode_draft(payload, Sealer(KEY), "i2")  # another request's row
    plain = Draft(actor=BOB, chosen={0: (0, 1)})
    assert decode_draft(encode_draft(plain, Sealer(KEY), "i1"), Sealer(KEY), "i1") == plain


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


@pytest.fixture
async def store(
    tmp_path: Path, ledger: PgTarget | None, clock: SteppingClock
) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=clock) as opened:
        yield opened


async def test_a_draft_is_read_while_its_request_is_pending_and_before_it_expires(
    store: Store, clock: SteppingClock, tmp_path: Path
) -> None:
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, question_form())
    interaction_id = opened.interaction.id
    payload = encode_draft(_draft(), Sealer(KEY), interaction_id)
    later = clock.now + timedelta(hours=1)
    await store.form_drafts.save(interaction_id, ALICE.key(), payload, expires_at=later)
    assert await store.form_drafts.load(interaction_id, ALICE.key()) == payload
    assert await store.form_drafts.load(interaction_id, BOB.key()) is None
    # a newer draft replaces the person's
    await store.form_drafts.save(interaction_id, ALICE.key(), "{}", expires_at=later)
    assert await store.form_drafts.load(interaction_id, ALICE.key()) == "{}"
    await store.form_drafts.drop(interaction_id, ALICE.key())
    assert await store.form_drafts.load(interaction_id, ALICE.key()) is None
    # expired: not read, then purged
    await store.form_drafts.save(
        interaction_id, BOB.key(), payload, expires_at=clock.now + timedelta(seconds=2)
    )
    clock.now += timedelta(seconds=10)
    assert await store.form_drafts.load(interaction_id, BOB.key()) is None
    assert await store.form_drafts.purge() == 1
    # decided: no draft shows any more, and the purge deletes them
    await store.form_drafts.save(interaction_id, BOB.key(), payload, expires_at=later)
    await store.interactions.decide(
        interaction_id,
        expected_version=opened.interaction.version,
        actor=ALICE,
        decision=Decision(
            answers={"env": Answer(option_ids=("prod",)), "token": Answer(other="x")}
        ),
    )
    assert await store.form_drafts.load(interaction_id, BOB.key()) is None
    assert await store.form_drafts.purge() == 1
    assert await store.form_drafts.purge() == 0
    if store.path is not None:  # SQLite: the file and its WAL never held the clear text
        for stored in store.path.parent.iterdir():
            if stored.is_file():
                assert SECRET.encode() not in stored.read_bytes(), stored.name
