"""Moving from SQLite to PostgreSQL (issue 37), as docs/operations.md tells it: the gateway
stopped, ``store`` (and the key's file) added to the config, ``agent-gateway move-ledger``,
then the gateway started again, on the real cluster. Nothing is lost: every interaction
(the one still waiting among them), every audit entry, with the same ids; the gateway on
PostgreSQL goes on from there (new rows take ids past the moved ones). A second move into
the now used ledger is refused, and so is a move while a gateway runs on the data dir."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from gateway.config.model import Config
from gateway.domain import AgentKind, ConversationRef
from gateway.sessions.engine import Gateway
from gateway.store.store import Store
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE, Running
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS, open_card, scripted_gateway
from tests.scripted_launcher import ScriptedLauncher

ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'
HOST = "h1"


def config_text(tmp_path: Path, store: str | None) -> str:
    data = tmp_path / "data"
    moved = (
        ""
        if store is None
        else f"store = {json.dumps(store)}\nhmac_key_file = {json.dumps(str(data / 'hmac.key'))}"
    )
    return f"""
[gateway]
data_dir = {json.dumps(str(data))}
stop_grace_seconds = 5
{moved}

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"
{"" if store is None else f'host = "{HOST}"'}

[projects.demo.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
"""


async def move_ledger(config: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "move-ledger", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def what_it_holds(config: Config) -> tuple[list[tuple[str, str]], list[int]]:
    async with Store.open(
        config.gateway.data_dir, postgresql=config.gateway.ledger_target()
    ) as store:
        live, closed = await store.interactions.list_open_and_closed(closed_limit=100)
        audit = await store.audit.entries(limit=1000)
    rows = sorted((i.id, i.state.value) for i in [*live, *closed])
    return rows, sorted(entry.id for entry in audit)


async def test_a_sqlite_ledger_moves_to_postgresql_whole(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    (tmp_path / "work").mkdir()
    on_sqlite = parse_config(config_text(tmp_path, None), "gateway.toml")
    async with scripted_gateway(on_sqlite) as (gw, _):
        decided = await open_card(gw, ROOM, "approve")
        ack = await gw.memory.click(ROOM, ALICE, decided.token("Approve"))
        assert ack.accepted, ack.text
        await settles(gw, decided, DELIVERED)
        waiting = await open_card(gw, ROOM, "ask")  # still waiting when it stops
    # an agent server that outlives the gateway (an attached OpenCode) asks on: a request
    # still pending in the ledger when it moves
    async with Store.open(on_sqlite.gateway.data_dir) as store:
        session = await store.sessions.create(
            project="demo", agent_kind=AgentKind.OPENCODE, initiator=ALICE
        )
        epoch = await store.sessions.begin_epoch(
            session.id, pid=None, pgid=None, process_start_time=None
        )
        pending = await store.interactions.create(session.id, epoch, REQUESTS["approve"])
    before = await what_it_holds(on_sqlite)
    assert (waiting.interaction.id, "orphaned") in before[0]  # ended with its agent
    assert (pending.interaction.id, "pending") in before[0], before[0]

    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path, pg_database.dsn))
    code, out = await move_ledger(config)
    assert code == 0, out
    assert out.startswith("Moved ") and "start it again" in out
    on_postgresql = parse_config(config.read_text(), str(config))
    assert await what_it_holds(on_postgresql) == before  # the same rows, the same ids

    memory = MemoryPlatform(adopt_unknown=True, id_prefix="pg-")
    launcher = ScriptedLauncher(REQUESTS)
    async with Gateway(
        on_postgresql, platforms={"memory": memory}, launcher=launcher, host=HOST
    ) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        again = await open_card(gw, ROOM, "approve")  # the session goes on, new ids
        assert again.interaction.id not in [i for i, _ in before[0]]
        code, out = await move_ledger(config)  # a gateway runs on the data dir: refused
        assert code == 2 and "in use" in out, out
    code, out = await move_ledger(config)
    assert code == 2 and "the PostgreSQL ledger is not empty" in out, out
    after = await what_it_holds(on_postgresql)
    assert max(after[1]) > max(before[1])
