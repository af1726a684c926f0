"""A gateway on a real PostgreSQL cluster whose database stops answering (issue 28): the
ledger's own backend frozen (SIGSTOP), and a peer frozen inside a transaction that holds one
session's row. The host's other sessions go on within the timeouts (a call given up at its
deadline runs again on a new connection; a lock not granted fails that call only), and the
frozen session goes on once the database answers again. Timeouts of a second or two, as
``[gateway] store_*_seconds`` set them.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from gateway.config.model import Config
from gateway.domain import ConversationRef
from gateway.errors import StoreError
from gateway.store.database import Conn
from tests.gateway_harness import ALICE, Running
from tests.hosts_harness import host_gateway, memory_of, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.test_store_timeouts import frozen

pytestmark = pytest.mark.timeout(120)

ONE = ConversationRef(platform="memory", space="team", channel="a", thread="one")
TWO = ConversationRef(platform="memory", space="team", channel="a", thread="two")


def quick(config: Config) -> Config:
    gateway = config.gateway.model_copy(
        update={
            "store_statement_seconds": 1.0,
            "store_lock_seconds": 0.5,
            "store_idle_in_transaction_seconds": 2.0,
            "store_connect_seconds": 2.0,
        }
    )
    return config.model_copy(update={"gateway": gateway})


def _backend_pid(conn: Conn) -> int:
    return int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])


async def echoed(host: Running, conversation: ConversationRef, text: str) -> None:
    await host.memory.say(conversation, ALICE, text)
    await host.text_where(lambda said: said == f"echo: {text}", conversation)


async def test_a_frozen_ledger_backend_is_given_up_and_every_session_goes_on(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = quick(two_hosts(tmp_path, pg_database.dsn))
    async with host_gateway(config, tmp_path, "a", ScriptedLauncher(REQUESTS)) as gateway:
        a = Running(gateway=gateway, memory=memory_of(gateway))
        await echoed(a, ONE, "hello")
        await echoed(a, TWO, "hello")
        store = gateway.store
        pid = await store.writer.read(_backend_pid)
        with frozen(pid):
            # every write of this host waits on that backend: given up at the deadline, run
            # again on a new connection, and the message is taken and answered
            await echoed(a, TWO, "still there?")
        assert await store.writer.read(_backend_pid) != pid  # replaced
        await echoed(a, ONE, "and you?")


async def test_a_peer_frozen_holding_one_sessions_row_stops_only_that_session(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    config = quick(two_hosts(tmp_path, pg_database.dsn))
    async with host_gateway(config, tmp_path, "a", ScriptedLauncher(REQUESTS)) as gateway:
        a = Running(gateway=gateway, memory=memory_of(gateway))
        await echoed(a, ONE, "hello")
        await echoed(a, TWO, "hello")
        held = await a.gateway.store.sessions.lookup_route(_route(a, ONE))
        assert held is not None
        async with await psycopg.AsyncConnection.connect(pg_database.dsn, autocommit=True) as peer:
            await peer.execute("BEGIN")
            await peer.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (held.id,))
            with frozen(peer.info.backend_pid):
                # that session's message is refused (the platform gives it again), said so
                with pytest.raises(StoreError, match="lock timeout"):
                    await a.memory.say(ONE, ALICE, "are you stuck?", message_id="stuck-1")
                # the other session goes on meanwhile
                await echoed(a, TWO, "not stuck")
            await peer.execute("ROLLBACK")
        # the database answers again: the message given again is taken, once
        await a.memory.say(ONE, ALICE, "are you stuck?", message_id="stuck-1")
        await a.text_where(lambda said: said == "echo: are you stuck?", ONE)


def _route(host: Running, conversation: ConversationRef) -> ConversationRef:
    from gateway.sessions.routing import route_key

    project = host.gateway.config.projects["pa"]
    return route_key(project.scope, conversation, ALICE)
