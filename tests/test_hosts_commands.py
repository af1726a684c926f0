"""Every chat command works whichever host receives it (issue 19): two hosts on one ledger
(the real PostgreSQL cluster), project "pa" run by host a, its commands received by host b.
/approve is decided by b and written by a; /status and /pending are answered by b from the
ledger; /stop, /new, /resume and /grants are requests b writes in the ledger, which wake a,
which carries each out once and answers as it answers a command typed to it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from gateway.config.model import Config
from gateway.domain import Decision, Scope
from tests.gateway_flows import WHEN, session_of, settles
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A, both_running, host_gateway, memory_of, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS, open_card
from tests.scripted_launcher import ScriptedLauncher

DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'
STOPPED = rf"Stopped by Alice at {WHEN} before anyone answered · nothing was sent to the agent"


async def said_by(host: Running, text: str) -> str:
    """``text`` said, then what ``host`` answered in ON_A (its first text there)."""
    before = len(host.memory.texts(ON_A))
    await host.memory.say(ON_A, ALICE, text)
    return await host.wait_for(lambda: next(iter(host.memory.texts(ON_A)[before:]), None))


async def insert_request(dsn: str, session_id: str, kind: str) -> None:
    """A request row as a receiver writes it (store.requests), whatever its owner's state."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO session_requests (session_id, kind, args, actor_platform,"
            " actor_user_id, actor_display, platform, space, channel, thread, by_host,"
            " requested_at) VALUES (%s, %s, '', %s, %s, %s, %s, %s, %s, %s, 'b', %s)",
            (
                session_id,
                kind,
                ALICE.platform,
                ALICE.user_id,
                ALICE.display,
                ON_A.platform,
                ON_A.space or "",
                ON_A.channel,
                ON_A.thread or "",
                "2026-12-02T00:00:00+00:00",
            ),
        )


async def test_a_stop_received_by_another_host_stops_the_turn_once(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")
        await a.memory.say(ON_A, ALICE, "queued behind it")
        await b.memory.say(ON_A, ALICE, "/stop")
        notice = "⏹ Stopped by Alice. 1 earlier message is held: /resume runs it, /clear drops it;"
        await a.text_where(lambda text: text.startswith(notice), ON_A)
        record = await settles(a, asked, STOPPED)
        assert record.resolution is not None and record.resolution.by == ALICE.key()
        assert on_a.received == [] and on_b.received == []
        assert b.memory.messages() == []  # b said nothing: a's notice is the one answer
        session = await session_of(a, ON_A)
        assert await a.gateway.store.requests.waiting(host="a") == []  # taken
        # nothing runs now: a second /stop through b is answered by b at once, as locally
        said = await said_by(b, "/stop")
        assert said.startswith("Nothing is running. 1 earlier message is held")
        # /resume through b: a runs what was held
        said = await said_by(b, "/resume")
        assert said == "▶ Resumed: 1 held message runs next, in order."
        await a.text_where(lambda text: text == "echo: queued behind it", ON_A)
        stops = [t for t in a.memory.texts(ON_A) if t.startswith("⏹")]
        assert len(stops) == 1  # stopped once
        assert b.gateway.existing_runner(session.id) is None  # b ran nothing


async def test_status_and_pending_on_another_host_name_its_host_and_the_request(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")
        session = await session_of(a, ON_A)
        status = await said_by(b, "/status")
        lines = status.splitlines()
        assert lines[0] == f"Session {session.id} · project pa · codex-app-server · host a"
        assert lines[1] == "State: waiting for approval"
        assert "Agent: scripted 1, running" in lines
        assert "Tokens: counted by host a, which runs the agent" in lines
        waiting = f"  · {asked.interaction.id}: Run ls? [pending, shown]"
        assert waiting in lines
        pending = await said_by(b, "/pending")
        assert pending == f"Open requests:\n{waiting}"
        # the owner's own answer names its host too, with what it counted itself
        own = await said_by(a, "/status")
        assert own.splitlines()[0].endswith(" · host a")
        assert b.gateway.existing_runner(session.id) is None


async def test_approve_received_by_another_host_is_written_once_by_the_owner(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")
        said = await said_by(b, f"/approve {asked.interaction.id}")
        assert said == "Approved. Host a, which runs the agent, sends it on."
        await settles(a, asked, DELIVERED)
        assert on_a.received == [Decision(action_id="accept")]
        again = await said_by(b, f"/approve {asked.interaction.id}")
        assert again.startswith("Already decided by Alice: ")
        await a.text_where(lambda text: text.startswith("Thanks: "), ON_A)
        assert on_a.received == [Decision(action_id="accept")]  # written once
        assert on_b.received == []


async def test_new_and_grants_received_by_another_host_are_carried_out_by_the_owner(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        await a.memory.say(ON_A, ALICE, "hi")
        await a.text_where(lambda text: text == "echo: hi", ON_A)
        first = await session_of(a, ON_A)
        runner_task = a.gateway._runner_tasks[first.id]
        # /grants: read where the agent runs, answered by a
        await b.memory.say(ON_A, ALICE, "/grants")
        await a.text_where(lambda text: text == "Grants in force: none.", ON_A)
        # /new NAME: the session closes in the ledger and the named one is made (b answers),
        # a ends its agent
        said = await said_by(b, "/new after")
        assert said == "A new session “after” starts with your next message."
        done, _ = await asyncio.wait({runner_task}, timeout=a.deadline)  # a's runner ends
        assert done == {runner_task}
        assert a.gateway.existing_runner(first.id) is None
        epoch = await a.gateway.store.sessions.get_epoch(first.id, first.current_epoch or 1)
        assert epoch is not None and not epoch.is_live
        await b.memory.say(ON_A, ALICE, "again")
        await a.text_where(lambda text: text == "echo: again", ON_A)
        second = await session_of(a, ON_A)
        assert second.id != first.id and second.host == "a" and second.name == "after"
        assert [t for t in b.memory.texts(ON_A)] == [said]  # b said only its answer to /new


async def test_a_request_left_for_a_host_that_restarts_is_dropped_not_carried_out(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a = ScriptedLauncher(REQUESTS)
    async with host_gateway(config, tmp_path, "a", on_a) as gateway_a:
        a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
        await a.memory.say(ON_A, ALICE, "hi")
        await a.text_where(lambda text: text == "echo: hi", ON_A)
        session = await session_of(a, ON_A)
    # what another host wrote just before a stopped, which a never took
    await insert_request(pg_database.dsn, session.id, "grants")
    async with host_gateway(config, tmp_path, "a", ScriptedLauncher(REQUESTS)) as gateway_a:
        a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
        dropped = (
            "Host a restarted before it took /grants from Alice: it was not carried out; "
            "send it again."
        )
        await a.text_where(lambda text: text == dropped, ON_A)
        assert await gateway_a.store.requests.waiting(host="a") == []
        assert not any(t.startswith("Grants in force") for t in a.memory.texts(ON_A))


async def test_commands_for_a_stopped_host_are_answered_at_once_and_its_requests_dropped(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=3.0)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        await open_card(a, ON_A, "approve")
        session = await session_of(a, ON_A)
        lease = a.gateway.host_lease
        assert lease is not None
        lease.pause()  # a is frozen: b reaps it once its lease lapsed
        await b.wait_for(
            lambda: next((t for t in b.memory.texts(ON_A) if "Host a stopped" in t), None)
        )
        assert a.gateway.fenced
        # nothing is left for a to take later: b says at once what cannot be done
        down = "Host a, which runs this session, is not answering the ledger"
        assert await said_by(b, "/stop") == f"{down}: nothing was stopped."
        assert await said_by(b, "/grants") == f"{down}: /grants was not taken."
        assert await b.gateway.store.requests.waiting(host="a") == []
        # a message is answered at once too, with what becomes of it
        assert await said_by(b, "still there?") == (
            f"{down}: your message is kept in the queue. Once host a is back, /resume runs it."
        )
        # a request written just before a stopped (here: by hand, a frozen) is dropped by
        # the reaper, and the person told
        await insert_request(pg_database.dsn, session.id, "grants")
        await b.gateway.control.reap("a")
        dropped = (
            "Host a stopped before it took /grants from Alice: it was not carried out; "
            "send it again."
        )
        await b.wait_for(lambda: next((t for t in b.memory.texts(ON_A) if t == dropped), None))
        assert await b.gateway.store.requests.waiting(host="a") == []
        lease.resume()
        await a.gateway.started_over.wait()
        assert not any(t.startswith("Grants in force") for t in a.memory.texts(ON_A))
        await a.memory.say(ON_A, ALICE, "/resume")  # as the answer said
        await a.text_where(lambda text: text == "echo: still there?", ON_A)


async def test_a_revoke_from_the_console_of_another_host_is_carried_out_by_the_owner(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """The console's revoke button on host b (``Control.revoke``, what its page calls) for a
    session host a runs: b lists the grant a's agent holds, and a revokes it where it lives
    (its agent process), never b on a's behalf."""
    config = two_hosts(tmp_path, pg_database.dsn)
    ended = asyncio.Event()

    async def on_stop() -> None:
        ended.set()

    on_a, on_b = ScriptedLauncher(REQUESTS, on_stop=on_stop), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        asked = await open_card(a, ON_A, "approve")
        [for_session] = [x.token for x in asked.first.actions if x.scope is Scope.SESSION]
        assert (await b.memory.click(ON_A, ALICE, for_session)).accepted
        await settles(a, asked, r".* · sent to the agent · done")
        session = await session_of(a, ON_A)
        [line] = await b.gateway.control.grants.listing(session)  # b sees a's agent's grant
        assert line.then == "confirm"

        said = await b.gateway.control.revoke(session, f"{line.id} confirm", ALICE, ON_A)

        assert said.startswith("Sent to host a, which runs this session")
        await ended.wait()  # a ended its agent: the grant lived there
        told = await a.text_where(lambda t: t.startswith(f"Grant {line.id} revoked"), ON_A)
        assert "agent process" in told
        entry = await a.gateway.store.grants.get(line.id)
        assert entry is not None and entry.revoked is not None
        assert await b.gateway.control.grants.listing(session) == []


async def test_status_says_when_the_hosts_run_different_configs_until_each_reloads(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """Issue 37: each host records the hash of the config it runs; /status says when the
    live hosts' differ (an approver added on one host only), and no longer once the other
    host reloads the same config."""
    config = two_hosts(tmp_path, pg_database.dsn)
    wider = with_approvers(config, ["alice", "bob"])
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with (
        host_gateway(config, tmp_path, "a", on_a) as gateway_a,
        host_gateway(wider, tmp_path, "b", on_b) as gateway_b,
    ):
        a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
        await open_card(a, ON_A, "approve")  # a session, with a request waiting
        status = await said_by(a, "/status")
        assert (
            "Config: host b runs another config than host a: change it on every host, then "
            "reload each (docs/operations.md)"
        ) in status.splitlines()
        assert await gateway_b.reload(config) == ["projects.pa.auth"]  # a's config
        status = await said_by(a, "/status")
        assert not any(line.startswith("Config:") for line in status.splitlines())
        [reloaded] = await gateway_a.store.audit.entries(event="config.reloaded")
        assert reloaded.details["host"] == "b" and reloaded.details["changed"] == [
            "projects.pa.auth"
        ]


def with_approvers(config: Config, people: list[str]) -> Config:
    project = config.projects["pa"]
    auth = project.auth["memory"].model_copy(
        update={"allow_from": tuple(people), "approvers": tuple(people)}
    )
    projects = {**config.projects, "pa": project.model_copy(update={"auth": {"memory": auth}})}
    return config.model_copy(update={"projects": projects})
