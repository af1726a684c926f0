"""``/switch`` received by a host that does not run the project (issue 31 with issue 19's
hosts): two hosts on one ledger (the real PostgreSQL cluster), project "pa" run by host a,
the commands received by host b. b answers from the ledger; the session left is ended by a
(a request, as for /new), and the next message resumes the earlier session's native id on
a."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.gateway_flows import session_of
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import ON_A, both_running, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(90)


async def said_by(host: Running, text: str) -> str:
    """``text`` said, then what ``host`` answered in ON_A (its first text there)."""
    before = len(host.memory.texts(ON_A))
    await host.memory.say(ON_A, ALICE, text)
    return await host.wait_for(lambda: next(iter(host.memory.texts(ON_A)[before:]), None))


async def test_a_switch_received_by_another_host_is_carried_out_by_the_owner(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn)
    on_a, on_b = ScriptedLauncher(REQUESTS), ScriptedLauncher(REQUESTS)
    async with both_running(config, tmp_path, on_a, on_b) as (a, b):
        await a.memory.say(ON_A, ALICE, "hi")
        await a.text_where(lambda text: text == "echo: hi", ON_A)
        first = await session_of(a, ON_A)
        assert await said_by(b, "/new") == "A new session starts with your next message."
        await b.memory.say(ON_A, ALICE, "again")
        await a.text_where(lambda text: text == "echo: again", ON_A)
        second = await session_of(a, ON_A)
        runner_task = a.gateway._runner_tasks[second.id]
        switched = await said_by(b, f"/switch {first.id}")
        assert switched.startswith(f"↪ Switched to session {first.id} (project pa")
        done, _ = await asyncio.wait({runner_task}, timeout=a.deadline)  # a ends the one left
        assert done == {runner_task}
        await b.memory.say(ON_A, ALICE, "back")
        await a.text_where(lambda text: text == "echo: back", ON_A)
        assert (await session_of(a, ON_A)).id == first.id
        assert on_a.resumed[-1] == first.native_session_id
        assert on_b.resumed == []  # b runs nothing of "pa"
