"""Commands from any host, with real processes (issue 19): three `agent-gateway run --host
NAME` processes on one Slack app (the fake Slack, Socket Mode) and one PostgreSQL ledger,
project pa on host a; the test says which host's connection each message reaches. A /stop
received by c stops a's turn once, said by a alone; /status received by c is answered by c
from the ledger, naming host a and the request that waited."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.pg_cluster import PgCluster
from tests.servers.fake_slack import ALICE, BOT_USER_ID, FakeSlack
from tests.slack_harness import GENERAL, read
from tests.slack_hosts_harness import replies_saying, slack_hosts

pytestmark = pytest.mark.timeout(180)

DEADLINE = 60.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(seed=19) as fake:
        yield fake


def posted_by(fake: FakeSlack, thread: str) -> list[str | None]:
    """Which host posted each message of the app in ``thread`` (in order)."""
    return [
        caller
        for params, caller in fake.calls_with_callers("chat.postMessage")
        if params.get("thread_ts") == thread
    ]


async def test_stop_and_status_received_by_another_host_process(
    fake: FakeSlack, pg_database: PgCluster, tmp_path: Path
) -> None:
    async with slack_hosts(tmp_path, fake, pg_database.dsn) as hosts:
        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> approve", to=hosts["a"].connection)
        card = await fake.wait_for(
            lambda: next((m for m in fake.replies(GENERAL, said.ts) if m.labels), None), DEADLINE
        )
        # /status through c: answered by c from the ledger
        await fake.say(
            ALICE, GENERAL, f"<@{BOT_USER_ID}> /status", thread_ts=said.ts, to=hosts["c"].connection
        )
        [status] = await fake.wait_for(
            lambda: replies_saying(fake, said.ts, r"· host a\b"), DEADLINE
        )
        text = read(status.seen)
        assert "State: waiting for approval" in text
        assert "Tokens: counted by host a, which runs the agent" in text
        assert re.search(r": .*\[pending, shown\]", text), text
        assert posted_by(fake, said.ts)[-1] == "c"
        # /stop through c: a's turn ends, said once, by a
        await fake.say(
            ALICE, GENERAL, f"<@{BOT_USER_ID}> /stop", thread_ts=said.ts, to=hosts["c"].connection
        )
        await fake.wait_for(lambda: replies_saying(fake, said.ts, "^⏹ Stopped by"), DEADLINE)
        await fake.wait_for(lambda: not card.labels and "Stopped by" in card.seen, DEADLINE)
        # a message after it runs (one queue): a second notice would have come before it
        await fake.say(
            ALICE,
            GENERAL,
            f"<@{BOT_USER_ID}> and then",
            thread_ts=said.ts,
            to=hosts["b"].connection,
        )
        await fake.wait_for(lambda: replies_saying(fake, said.ts, "echo: and then"), DEADLINE)
        assert len(replies_saying(fake, said.ts, "^⏹")) == 1  # stopped once
        callers = posted_by(fake, said.ts)
        assert callers.count("c") == 1  # c's one message: its answer to /status
        assert {c for c in callers if c != "c"} == {"a"}
