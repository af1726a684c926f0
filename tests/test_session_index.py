"""The ledger's side of ``/sessions``, ``/switch`` and ``/name`` (issue 31) on both
backends: a project's sessions newest activity first, where each was shown or talked to,
whether a turn runs and how many requests wait; a session's name; a closed one reopened."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import AgentKind, ConversationRef
from gateway.store.store import Store
from tests.store_backends import open_store
from tests.store_helpers import ALICE, SteppingClock, approval

ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
DM = ConversationRef(platform="memory", space=None, channel="dm-alice")


@pytest.fixture
async def store(tmp_path: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=SteppingClock()) as opened:
        yield opened


async def test_a_projects_sessions_newest_activity_first_with_where_and_what_waits(
    store: Store,
) -> None:
    old = await store.sessions.create(project="demo", agent_kind=AgentKind.CODEX_APP_SERVER)
    quiet = await store.sessions.create(project="demo", agent_kind=AgentKind.CODEX_APP_SERVER)
    await store.sessions.create(project="other", agent_kind=AgentKind.CODEX_APP_SERVER)
    await store.sessions.bind(DM, quiet.id)
    # the older session is talked to last, in the room, and asks something
    await store.prompts.enqueue(
        old.id,
        conversation=ROOM,
        platform_message_id="m1",
        author=ALICE,
        text="hello",
        max_depth=10,
    )
    epoch = await store.sessions.begin_epoch(old.id, pid=None, pgid=None, process_start_time=None)
    turn = await store.turns.start(old.id, epoch)
    await store.interactions.create(old.id, epoch, approval(), turn_id=turn.id)
    await store.sessions.close(old.id, reason="/new")
    await store.sessions.set_name(old.id, "release")

    summaries = await store.session_index.of_project("demo")
    assert [s.session.id for s in summaries] == [old.id, quiet.id]
    first, second = summaries
    assert first.session.name == "release" and first.session.is_closed
    assert first.conversations == (ROOM,) and first.turn_running and first.waiting == 1
    assert first.last_activity > second.last_activity
    assert second.conversations == (DM,) and not second.turn_running and second.waiting == 0
    assert second.last_activity == quiet.created_at

    reopened = await store.sessions.reopen(old.id)
    assert not reopened.is_closed and reopened.close_reason is None
    assert reopened.name == "release"
