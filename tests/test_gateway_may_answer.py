"""The pre-check a platform makes before it opens a form (``Inbox.may_answer``), and
``Inbox.has_session``: answered from the ledger's read-only connection, even while a long
write holds the writer.

Slack's ``trigger_id`` dies 3 s after a click and a Discord modal must be the first response:
the answer must come within 2 s whatever the writer is doing. The writer is held here through
the store's own seam (``store.writer.write``: a transaction that stays open on the database
thread until the test lets it go), and the reader the same way (``store.reader.read``).
Everything else is the whole gateway on the memory platform with the scripted agent.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from gateway.action_tokens import ActionToken, encode_token
from gateway.cards import QuestionForm
from gateway.config.hmac_key import load_or_create_hmac_key
from gateway.config.model import Config
from gateway.domain import ConversationRef, InteractionState
from gateway.platform import Ack
from gateway.sessions.decisions import MAY_ANSWER_SECONDS, MAY_ANSWER_TRY_AGAIN
from gateway.sessions.engine import Gateway
from gateway.store.store import Store
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.gateway_flows import CAROL, ELSEWHERE, ROOM_T2, Asked, session_of
from tests.gateway_harness import ALICE, MALLORY, ROOM, Running
from tests.scripted_gateway import REQUESTS, open_card
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(60)

NOT_VALID = "This button is not valid."
NOT_YOURS = "You may not decide this request."


def config(tmp_path: Path) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice", "bob", "carol"]
approvers = ["alice", "bob"]

[platforms.memory]
"""
    return parse_config(text, "test.toml")


@asynccontextmanager
async def gateway(tmp_path: Path) -> AsyncIterator[Running]:
    memory = MemoryPlatform()
    launcher = ScriptedLauncher(REQUESTS)
    async with Gateway(config(tmp_path), platforms={"memory": memory}, launcher=launcher) as gw:
        yield Running(gateway=gw, memory=memory)


def form_of(asked: Asked) -> QuestionForm:
    assert asked.first.form is not None
    return asked.first.form


def submit_token(asked: Asked) -> str:
    return form_of(asked).submit_token


class Blocker:
    """A function for a database thread: it does ``work``, wakes the test (``running``),
    then waits until released (at most 30 s, so that no thread is left blocked)."""

    def __init__(self, work: Callable[[sqlite3.Connection], object] = lambda conn: None) -> None:
        self._loop = asyncio.get_running_loop()
        self._work = work
        self._released = threading.Event()
        self.running = asyncio.Event()

    def __call__(self, conn: sqlite3.Connection) -> None:
        self._work(conn)
        self._loop.call_soon_threadsafe(self.running.set)
        self._released.wait(timeout=30)

    def release(self) -> None:
        self._released.set()


@asynccontextmanager
async def held(blocker: Blocker, on_thread: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    """``blocker`` running on its database thread for the length of the block."""
    task = asyncio.ensure_future(on_thread)
    try:
        async with asyncio.timeout(10):
            await blocker.running.wait()
        yield task
    finally:
        blocker.release()
        await task


def writer_held(store: Store) -> AbstractAsyncContextManager[asyncio.Task[None]]:
    """A write transaction kept open on the writer's thread (an audit row inserted, not yet
    committed) for the length of the block, as a long write is run there; the task that
    awaits it."""
    blocker = Blocker(lambda conn: store.writer.audit(conn, "test.long_write"))
    return held(blocker, store.writer.write(blocker, on_thread=True))


async def test_may_answer_answers_and_refuses_while_a_long_write_holds_the_writer(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as gw:
        asked = await open_card(gw, ROOM, "ask")
        token = submit_token(asked)
        key = load_or_create_hmac_key(tmp_path / "data")
        other_epoch = encode_token(
            key, ActionToken.for_submit(asked.interaction.id, asked.interaction.runtime_epoch + 1)
        )
        cases = [
            (ALICE, ROOM, token, Ack(text="", accepted=True)),
            (ALICE, ROOM, "not a token", Ack(text=NOT_VALID, accepted=False)),
            (
                ALICE,
                ROOM,
                token[:-1] + ("A" if token[-1] != "A" else "B"),
                Ack(text=NOT_VALID, accepted=False),
            ),
            (
                ALICE,
                ROOM_T2,
                token,
                Ack(text="This request does not belong to this conversation.", accepted=False),
            ),
            (MALLORY, ROOM, token, Ack(text="You may not use this project here.", accepted=False)),
            (CAROL, ROOM, token, Ack(text=NOT_YOURS, accepted=False)),
            (
                ALICE,
                ROOM,
                other_epoch,
                Ack(
                    text="This request belongs to an agent process that has ended.", accepted=False
                ),
            ),
        ]
        async with writer_held(gw.gateway.store) as held:
            for actor, conversation, text, expected in cases:
                async with asyncio.timeout(MAY_ANSWER_SECONDS + 1):
                    ack = await gw.memory.open_form(conversation, actor, text)
                assert ack == expected, (actor.user_id, conversation.thread, text)
            assert not held.done()  # every answer came while the writer was busy
        # no decision: the request still waits for one
        record = await gw.gateway.store.interactions.get(asked.interaction.id)
        assert record is not None and record.state is InteractionState.PENDING
        assert record.decision is None and asked.shown.edits == 0
        # once decided, the form is no longer open for anyone
        blue = form_of(asked).questions[0].option_tokens[1]
        assert (await gw.memory.click(ROOM, ALICE, blue)).accepted
        refused = await gw.memory.open_form(ROOM, ALICE, token)
        assert not refused.accepted and refused.text.startswith("Already decided by Alice: ")
    # every refusal was audited (after its answer, through the writer), none was lost
    async with Store.open(tmp_path / "data") as store:
        audited = await store.audit.entries(event="click.rejected")
    assert [(e.actor, e.details["reason"]) for e in reversed(audited)] == [
        ("memory:alice", "malformed"),
        ("memory:alice", "forged"),
        ("memory:alice", "foreign"),
        ("memory:mallory", "not_allowed"),
        ("memory:carol", "not_approver"),
        ("memory:alice", "stale"),
        ("memory:alice", "not_open"),
    ]


async def test_may_answer_asks_to_try_again_when_the_ledger_cannot_answer_in_time(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as gw:
        asked = await open_card(gw, ROOM, "ask")
        store = gw.gateway.store
        blocker = Blocker()
        async with held(blocker, store.reader.read(blocker)):
            async with asyncio.timeout(MAY_ANSWER_SECONDS + 5):
                ack = await gw.memory.open_form(ROOM, ALICE, submit_token(asked))
            assert ack == Ack(text=MAY_ANSWER_TRY_AGAIN, accepted=False)
        # the reader is free again: the next press is answered
        assert (await gw.memory.open_form(ROOM, ALICE, submit_token(asked))).accepted


async def test_has_session_says_whether_a_conversation_shows_an_open_session(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as gw:
        await open_card(gw, ROOM, "ask")
        session = await session_of(gw, ROOM)
        async with writer_held(gw.gateway.store):
            async with asyncio.timeout(MAY_ANSWER_SECONDS):  # not behind the writer
                assert await gw.gateway.has_session(ROOM)
                assert not await gw.gateway.has_session(ELSEWHERE)
                lone = ConversationRef(platform="memory", space=None, channel="lone")
                assert not await gw.gateway.has_session(lone)
        await gw.gateway.store.sessions.close(session.id, reason="test")
        assert not await gw.gateway.has_session(ROOM)
