"""Several hosts on one PostgreSQL ledger (issue 19, design points 1-2): a session keeps the
host that made it, a host runs only its own projects, and a host's recovery covers only its
own epochs, queues and cards.

The ledger-level cases run on both backends (``ledger``: on SQLite every row's host is NULL,
"this machine", and nothing is filtered); the gateway-level case runs two Gateway objects,
hosts "a" and "b", on one database of the throwaway cluster (tests/pg_cluster.py), each with
its own data dir and memory platform, around the scripted agent."""

from __future__ import annotations

from pathlib import Path

from gateway.config.ledger_url import PgTarget
from gateway.domain import AgentKind, Decision, InteractionState
from gateway.store.records import PromptState
from gateway.store.store import Store
from tests.gateway_flows import WHEN, session_of, settles
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A, host_gateway, memory_of, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS, open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.store_backends import open_store
from tests.store_helpers import approval

DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'


async def test_live_epochs_and_held_queues_are_filtered_by_host(
    tmp_path: Path, ledger: PgTarget | None
) -> None:
    async with open_store(ledger, tmp_path) as store:
        mine = await store.sessions.create(
            project="pa", agent_kind=AgentKind.CODEX_APP_SERVER, host="a"
        )
        theirs = await store.sessions.create(
            project="pb", agent_kind=AgentKind.CODEX_APP_SERVER, host="b"
        )
        assert (mine.host, theirs.host) == ("a", "b")
        for session in (mine, theirs):
            await store.sessions.begin_epoch(
                session.id, pid=None, pgid=None, process_start_time=None
            )
            await store.prompts.enqueue(
                session.id,
                conversation=ON_A,
                platform_message_id=f"m-{session.id}",
                author=ALICE,
                text="waiting",
                max_depth=5,
            )
        assert [e.session_id for e in await store.sessions.live_epochs(host="b")] == [theirs.id]
        assert {e.session_id for e in await store.sessions.live_epochs()} == {mine.id, theirs.id}
        assert await store.prompts.recover_after_restart(host="b") == [theirs.id]
        [still] = await store.prompts.list_queued(mine.id)
        assert not still.held  # a's queue is a's business
        assert [s.id for s in await store.sessions.list_sessions(host="a")] == [mine.id]


async def test_sessions_made_before_hosts_are_adopted_by_their_projects_host(
    tmp_path: Path, ledger: PgTarget | None
) -> None:
    async with open_store(ledger, tmp_path) as store:
        old = await store.sessions.create(project="pa", agent_kind=AgentKind.CODEX_APP_SERVER)
        other = await store.sessions.create(project="pb", agent_kind=AgentKind.CODEX_APP_SERVER)
        assert old.host is None  # SQLite's rows stay so: "this machine"
        assert await store.sessions.adopt("a", ["pa"]) == 1
        assert await store.sessions.adopt("a", ["pa"]) == 0
        adopted, untouched = await store.sessions.get(old.id), await store.sessions.get(other.id)
        assert adopted is not None and adopted.host == "a"
        assert untouched is not None and untouched.host is None


async def test_a_hosts_restart_leaves_another_hosts_epoch_and_pending_card_untouched(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a = ScriptedLauncher(REQUESTS)
    async with host_gateway(config, tmp_path, "a", on_a) as gateway_a:
        memory_a = memory_of(gateway_a)
        a = Running(gateway=gateway_a, memory=memory_a)
        asked = await open_card(a, ON_A, "approve")
        session = await session_of(a, ON_A)
        assert session.host == "a"
        store = gateway_a.store
        [epoch_before] = await store.sessions.live_epochs(host="a")
        turn = await store.turns.running(session.id)
        assert turn is not None and turn.prompt_id is not None
        prompt = await store.prompts.get(turn.prompt_id)
        assert prompt is not None and prompt.state is PromptState.IN_FLIGHT
        # a session of b's that b's last process left running (it was SIGKILLed)
        left = await store.sessions.create(
            project="pb", agent_kind=AgentKind.CODEX_APP_SERVER, host="b"
        )
        left_epoch = await store.sessions.begin_epoch(
            left.id, pid=None, pgid=None, process_start_time=None
        )
        left_card = await store.interactions.create(left.id, left_epoch, approval("left:0"))
        edits_before = [shown.edits for shown in memory_a.messages()]

        async with host_gateway(config, tmp_path, "b", ScriptedLauncher(REQUESTS)) as gateway_b:
            # b's recovery ended b's leftover, and only it
            ended = await store.sessions.get_epoch(left.id, left_epoch)
            assert ended is not None and not ended.is_live
            gone = await store.interactions.get(left_card.interaction.id)
            assert gone is not None and gone.state is InteractionState.ORPHANED
            assert await store.sessions.live_epochs(host="a") == [epoch_before]
            pending = await store.interactions.get(asked.interaction.id)
            assert pending is not None
            assert pending.state is InteractionState.PENDING
            assert pending.version == asked.interaction.version
            kept = await store.prompts.get(prompt.id)
            assert kept is not None and kept.state is PromptState.IN_FLIGHT
            assert [shown.edits for shown in memory_a.messages()] == edits_before
            memory_b = memory_of(gateway_b)
            assert memory_b.cards() == []  # b draws no card of a's sessions
            # a command for a's project that reaches b is answered by b from the ledger,
            # naming the host that runs it; b runs nothing of it
            await memory_b.say(ON_A, ALICE, "/status")
            said = await memory_b.wait_for(lambda: next(iter(memory_b.texts(ON_A)), None))
            assert said.startswith(f"Session {session.id} · project pa · codex-app-server · host a")
            assert gateway_b.existing_runner(session.id) is None

        # a's agent still waits for its answer, and takes it
        ack = await memory_a.click(ON_A, ALICE, asked.token("Approve"))
        assert ack.accepted, ack
        await settles(a, asked, DELIVERED)
        assert on_a.received == [Decision(action_id="accept")]


async def test_a_project_moved_to_this_host_starts_a_new_session(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    target = config.gateway.ledger_target()
    async with Store.open(tmp_path / "seed", postgresql=target) as store:
        moved = await store.sessions.create(
            project="pa", agent_kind=AgentKind.CODEX_APP_SERVER, host="b"
        )
        await store.sessions.route(ON_A, moved.id)
        await store.sessions.bind(ON_A, moved.id)
    launcher = ScriptedLauncher(REQUESTS)
    async with host_gateway(config, tmp_path, "a", launcher) as gateway_a:
        memory_a = memory_of(gateway_a)
        a = Running(gateway=gateway_a, memory=memory_a)
        await memory_a.say(ON_A, ALICE, "hi")
        await a.text_where(lambda text: text == "echo: hi", ON_A)
        now = await session_of(a, ON_A)
        assert now.id != moved.id and now.host == "a"
        closed = await gateway_a.store.sessions.get(moved.id)
        assert closed is not None and closed.close_reason == "this project now runs on a"
