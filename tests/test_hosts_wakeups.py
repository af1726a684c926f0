"""Any host receives, the owner acts (issue 19, design point 3): a decision committed on one
host for a session of another wakes that host (NOTIFY in the committing transaction), which
writes it to its agent once and edits its cards; the receiver writes to no agent. On the real
PostgreSQL cluster (tests/pg_cluster.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.config.ledger_url import PgTarget
from gateway.domain import AgentKind, Decision
from gateway.interactions.machine import DeliveryOutcome
from gateway.session_record import SessionRecord
from gateway.store.store import Store
from gateway.store.wakeups import listen_for_wakeups
from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE
from tests.hosts_harness import ON_A, both_running, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS, open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import approval

DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'


async def session_of_a(store: Store) -> tuple[SessionRecord, int]:
    """A session host a runs, its agent started."""
    session = await store.sessions.create(
        project="pa", agent_kind=AgentKind.CODEX_APP_SERVER, host="a"
    )
    epoch = await store.sessions.begin_epoch(
        session.id, pid=None, pgid=None, process_start_time=None
    )
    return session, epoch


async def accept(store: Store, interaction_id: str) -> None:
    """Alice allows the request, as a click on any host commits it."""
    await store.interactions.decide(
        interaction_id, expected_version=1, actor=ALICE, decision=Decision(action_id="accept")
    )


async def say_hi(store: Store, session_id: str) -> None:
    await store.prompts.enqueue(
        session_id,
        conversation=ON_A,
        platform_message_id="m1",
        author=ALICE,
        text="hi",
        max_depth=10,
    )


async def test_a_decision_wakes_the_host_of_its_session_on_commit(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    target = PgTarget(url=pg_database.dsn)
    woken: asyncio.Queue[str] = asyncio.Queue()
    listening = asyncio.Event()
    async with Store.open(tmp_path, postgresql=target) as store, asyncio.TaskGroup() as tasks:
        listener = tasks.create_task(
            listen_for_wakeups(target, "a", woken.put_nowait, listening=listening.set)
        )
        await listening.wait()
        session, epoch = await session_of_a(store)
        opened = await store.interactions.create(session.id, epoch, approval("wake:0"))
        assert woken.empty()  # a request wakes nobody: its host asked it
        await accept(store, opened.interaction.id)
        # the payload says what woke it: its runner delivers, and does not read its queue
        assert await woken.get() == f"decision:{session.id}"
        await say_hi(store, session.id)
        assert await woken.get() == f"prompt:{session.id}"  # its runner reads its queue only
        listener.cancel()


async def test_a_host_is_not_woken_by_a_decision_it_committed_itself(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """The click that committed a decision on its session's host writes it itself: the
    NOTIFY its commit sent comes back to it and is dropped (its sweep would run beside that
    write), while the same decision committed by another host's connection wakes it."""
    target = PgTarget(url=pg_database.dsn)
    woken: asyncio.Queue[str] = asyncio.Queue()
    listening = asyncio.Event()
    async with (
        Store.open(tmp_path / "a", postgresql=target) as here,
        Store.open(tmp_path / "b", postgresql=target) as elsewhere,
        asyncio.TaskGroup() as tasks,
    ):

        def needless(payload: str, sender: int) -> bool:
            return payload.startswith("decision:") and sender in here.writer.connection_ids()

        listener = tasks.create_task(
            listen_for_wakeups(
                target, "a", woken.put_nowait, listening=listening.set, needless=needless
            )
        )
        await listening.wait()
        session, epoch = await session_of_a(here)
        mine = await here.interactions.create(session.id, epoch, approval("wake:0"))
        theirs = await here.interactions.create(session.id, epoch, approval("wake:1"))
        for store, opened in ((here, mine), (elsewhere, theirs)):
            await accept(store, opened.interaction.id)
        # notifications come in commit order: the first one here is the other host's
        assert await woken.get() == f"decision:{session.id}"
        await say_hi(here, session.id)
        assert await woken.get() == f"prompt:{session.id}"  # and nothing came between
        listener.cancel()


async def test_a_click_received_by_another_host_is_written_once_by_the_owner(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")
        on_a.writes.hold()  # a's write waits: b's answer must not depend on it
        # the card's button, clicked where b receives it (one bot: the same conversation)
        ack = await b.memory.click(ON_A, ALICE, asked.token("Approve"))
        assert ack.accepted, ack
        assert ack.text == "Approved. Host a, which runs the agent, sends it on."
        await on_a.writes.waiting.wait()  # a was woken and writes it
        on_a.writes.release()
        decided = await settles(a, asked, DELIVERED)  # a's card, edited by a
        assert decided.delivery is not None
        assert decided.delivery.outcome is DeliveryOutcome.OK
        assert on_a.received == [Decision(action_id="accept")]
        assert on_b.received == []
        assert b.memory.messages() == []  # b sent and edited nothing
        # a second click, on either host, decides nothing more
        again = await b.memory.click(ON_A, ALICE, asked.token("Approve"))
        assert not again.accepted
        assert on_a.received == [Decision(action_id="accept")]


async def test_a_message_received_by_another_host_is_run_by_the_owner(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        # the first message of a conversation of a's project reaches b: b makes the session
        # (a's), queues the prompt; the ledger wakes a, which runs it and answers
        first = await b.memory.say(ON_A, ALICE, "hi")
        await a.text_where(lambda text: text == "echo: hi", ON_A)
        session = await b.gateway.store.sessions.lookup(ON_A)
        assert session is not None and session.host == "a"
        assert b.gateway.existing_runner(session.id) is None
        assert b.memory.messages() == []  # b said nothing: a answered
        # the same message delivered again, to a this time: queued once
        await a.memory.say(ON_A, ALICE, "hi", message_id=first)
        await b.memory.say(ON_A, ALICE, "again")
        await a.text_where(lambda text: text == "echo: again", ON_A)
        assert a.memory.texts(ON_A).count("echo: hi") == 1
        assert b.gateway.existing_runner(session.id) is None  # b started no agent
