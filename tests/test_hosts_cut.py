"""Host b's connections to the ledger cut in the middle of a decision (issue 19): b reaches
PostgreSQL through a TCP proxy on loopback (tests/harness/pg_proxy.py) that the test cuts at
the COMMIT of one transaction, either before the COMMIT reaches the server (nothing
committed) or after (committed, and b never hears it). Host a reaches the cluster directly.
Whatever the cut, nothing is written twice (one decision row, the agent gets one answer),
and b goes on working after it (the next click works). A transaction cut before its COMMIT
was sent is run again at once on a new connection (gateway/store/database.py)."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from gateway.config.model import Config
from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE, Running
from tests.harness.pg_proxy import Cut, PgProxy
from tests.hosts_harness import ON_A, ON_B, host_gateway, memory_of, two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import open_card
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import approval

DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'
NO_ANSWER = "The ledger did not answer"
ASKS = {name: approval(f"cut:{name}", title="Run ls?") for name in ("first", "next")}
LEASE = 6.0  # the cut is one failed renew at most: retried on a new connection at once


def through(config: Config, dsn: str) -> Config:
    """``config`` with its ledger reached at ``dsn`` (the proxy)."""
    return config.model_copy(update={"gateway": config.gateway.model_copy(update={"store": dsn})})


def rows(dsn: str, table: str, interaction_id: str) -> int:
    """How many rows of ``table`` (decisions, deliveries) the interaction has."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {table} WHERE interaction_id = %s", (interaction_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("how", list(Cut), ids=lambda how: how.name.lower())
async def test_a_click_on_b_cut_at_its_commit_is_decided_once_and_b_goes_on(
    tmp_path: Path, pg_database: PgCluster, how: Cut
) -> None:
    """b receives the click on a's card; its decide's COMMIT is cut. Cut before the COMMIT
    was sent, nothing of it was written: b runs it again at once on a new connection, and the
    click is decided. Cut after, b answers that the ledger did not answer (it cannot know
    whether the decision was taken), never deciding again: a second click is "Already
    decided". Either way decided once and written once by a."""
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)
    on_a = ScriptedLauncher(ASKS)
    async with PgProxy(pg_database) as proxy:
        async with (
            host_gateway(config, tmp_path, "a", on_a) as gateway_a,
            host_gateway(through(config, proxy.dsn), tmp_path, "b", ScriptedLauncher({})) as gb,
        ):
            a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
            b = Running(gateway=gb, memory=memory_of(gb))
            asked = await open_card(a, ON_A, "first")
            cut = proxy.cut_at_commit("INSERT INTO decisions", how)
            ack = await b.memory.click(ON_A, ALICE, asked.token("Approve"))
            assert cut.is_set()
            if how is Cut.BEFORE_COMMIT:
                assert ack.accepted, ack.text
                assert ack.text == "Approved. Host a, which runs the agent, sends it on."
            else:
                assert not ack.accepted
                assert ack.text.startswith(NO_ANSWER)
            # every connection of b was cut, the idle ones too: a message works at once
            await b.memory.say(ON_A, ALICE, "hello")
            again = await b.memory.click(ON_A, ALICE, asked.token("Approve"))
            assert not again.accepted
            assert re.match(r"Already (decided|delivered|resolved) by Alice", again.text)
            await settles(a, asked, DELIVERED)
            await a.memory.wait_for(lambda: "echo: hello" in a.memory.texts(ON_A) or None)
            assert len(on_a.received) == 1
            assert rows(pg_database.dsn, "decisions", asked.interaction.id) == 1
            assert rows(pg_database.dsn, "deliveries", asked.interaction.id) == 1
            # b goes on: the next card of a, clicked on b, is decided and written once
            nxt = await open_card(a, ON_A, "next")
            ack = await b.memory.click(ON_A, ALICE, nxt.token("Approve"))
            assert ack.accepted, ack.text
            await settles(a, nxt, DELIVERED)
            assert len(on_a.received) == 2
            # the cut was ridden out: b's lease renewed on a new connection, never lost
            assert not gb.fenced and not gb.started_over.is_set()


@pytest.mark.parametrize("how", list(Cut), ids=lambda how: how.name.lower())
async def test_the_owner_cut_at_its_delivery_record_writes_once_and_goes_on(
    tmp_path: Path, pg_database: PgCluster, how: Cut
) -> None:
    """b runs the agent; a decides its card, b writes the answer and records the write,
    and that record's COMMIT is cut. The agent is written to once: the record, if lost,
    is made by b's next sweep (the codec knows the answer was sent), and b goes on."""
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)
    on_b = ScriptedLauncher(ASKS)
    async with PgProxy(pg_database) as proxy:
        async with (
            host_gateway(config, tmp_path, "a", ScriptedLauncher({})) as gateway_a,
            host_gateway(through(config, proxy.dsn), tmp_path, "b", on_b) as gb,
        ):
            a = Running(gateway=gateway_a, memory=memory_of(gateway_a))
            b = Running(gateway=gb, memory=memory_of(gb))
            asked = await open_card(b, ON_B, "first")
            cut = proxy.cut_at_commit("INSERT INTO deliveries", how)
            ack = await a.memory.click(ON_B, ALICE, asked.token("Approve"))
            assert ack.accepted, ack.text
            await cut.wait()
            await settles(b, asked, DELIVERED)
            assert len(on_b.received) == 1
            assert rows(pg_database.dsn, "decisions", asked.interaction.id) == 1
            assert rows(pg_database.dsn, "deliveries", asked.interaction.id) == 1
            nxt = await open_card(b, ON_B, "next")
            ack = await a.memory.click(ON_B, ALICE, nxt.token("Approve"))
            assert ack.accepted, ack.text
            await settles(b, nxt, DELIVERED)
            assert len(on_b.received) == 2
            assert not gb.fenced and not gb.started_over.is_set()
