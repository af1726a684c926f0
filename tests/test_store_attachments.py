"""The prompt queue keeps the files sent with a prompt (issue 32, migration 19), on SQLite and
PostgreSQL: in the order sent, across a restart while held, and once for a message delivered
twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.attachments import InboundAttachment
from gateway.config.ledger_url import PgTarget
from gateway.store.records import EnqueueOutcome, FilesChoice, PromptState
from tests.store_backends import open_store
from tests.store_helpers import ALICE, TELEGRAM, SteppingClock, running_session

pytestmark = pytest.mark.timeout(60)

PHOTO = InboundAttachment(
    name="screen.jpg", reference="AgACAgQAAxkBAAIB", size=48_213, declared_type="image/jpeg"
)
PDF = InboundAttachment(name="../../report.pdf", reference="BQACAgQAAxkBAAIC", size=None)


async def test_a_held_prompt_keeps_its_files_across_a_restart_and_is_queued_once(
    tmp_path: Path, ledger: PgTarget | None
) -> None:
    data_dir = tmp_path / "data"
    async with open_store(ledger, data_dir, clock=SteppingClock()) as store:
        session, _ = await running_session(store)
        queued = await store.prompts.enqueue(
            session.id,
            conversation=TELEGRAM,
            platform_message_id="m1",
            author=ALICE,
            text="why is this broken?",
            max_depth=10,
            attachments=(PHOTO, PDF),
        )
        assert queued.outcome is EnqueueOutcome.QUEUED and queued.prompt is not None
        assert queued.prompt.attachments == (PHOTO, PDF)
        plain = await store.prompts.enqueue(
            session.id,
            conversation=TELEGRAM,
            platform_message_id="m2",
            author=ALICE,
            text="and this",
            max_depth=10,
        )
        assert plain.prompt is not None and plain.prompt.attachments == ()
    async with open_store(ledger, data_dir, clock=SteppingClock()) as store:
        assert await store.prompts.recover_after_restart() == [session.id]
        [held, _] = await store.prompts.list_held(session.id)
        assert (held.text, held.attachments) == ("why is this broken?", (PHOTO, PDF))
        again = await store.prompts.enqueue(  # the platform delivers the message again
            session.id,
            conversation=TELEGRAM,
            platform_message_id="m1",
            author=ALICE,
            text="why is this broken?",
            max_depth=10,
            attachments=(PHOTO, PDF),
        )
        assert again.outcome is EnqueueOutcome.DUPLICATE
        assert again.prompt is not None and again.prompt.id == held.id
        assert len(await store.prompts.list_queued(session.id)) == 2
        await store.prompts.resume(session.id)
        claimed = await store.prompts.claim_next(session.id)
        assert claimed is not None and claimed.attachments == (PHOTO, PDF)


async def test_a_prompt_whose_files_failed_waits_across_a_restart_and_is_chosen_once(
    tmp_path: Path, ledger: PgTarget | None
) -> None:
    """Migration 23: the waiting prompt is none of the queue's (not held by a restart, not
    released by /resume, not cleared); a choice is a compare-and-set on its round."""
    data_dir = tmp_path / "data"
    async with open_store(ledger, data_dir, clock=SteppingClock()) as store:
        session, _ = await running_session(store)
        await store.prompts.enqueue(
            session.id,
            conversation=TELEGRAM,
            platform_message_id="m1",
            author=ALICE,
            text="why is this broken?",
            max_depth=10,
            attachments=(PHOTO, PDF),
        )
        claimed = await store.prompts.claim_next(session.id)
        assert claimed is not None
        waiting = await store.prompts.wait_for_files_choice(
            claimed.id, why="502 three times", again=True
        )
        assert waiting.state is PromptState.INTERRUPTED
        assert (waiting.files_choice, waiting.files_round) == (FilesChoice.WAITING, 1)
    async with open_store(ledger, data_dir, clock=SteppingClock()) as store:
        assert await store.prompts.recover_after_restart() == []
        assert await store.prompts.resume(session.id) == 0
        assert await store.prompts.clear(session.id) == 0
        assert await store.prompts.claim_next(session.id) is None
        stale = await store.prompts.choose_for_files(
            claimed.id, files_round=0, choice=FilesChoice.WITHOUT, actor=ALICE
        )
        assert stale is None
        chosen = await store.prompts.choose_for_files(
            claimed.id, files_round=1, choice=FilesChoice.WITHOUT, actor=ALICE
        )
        assert chosen is not None and chosen.state is PromptState.QUEUED
        second = await store.prompts.choose_for_files(
            claimed.id, files_round=1, choice=FilesChoice.DROPPED, actor=ALICE
        )
        assert second is None
        again = await store.prompts.claim_next(session.id)
        assert again is not None and again.id == claimed.id
        assert again.files_choice is FilesChoice.WITHOUT and again.attachments == (PHOTO, PDF)
        events = [e.event for e in await store.audit.entries(session_id=session.id)]
    assert events.count("prompt.files_failed") == 1
    assert events.count("prompt.files_choice") == 1
