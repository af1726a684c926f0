"""A whole gateway for a benchmark: the real engine, ledger, launcher, adapter and codec, one
benchmark platform, and the scripted bench agent (bench/agents/codex_bench_agent.py).

    async with bench_gateway(root, "memory") as gw:
        await gw.platform.say(gw.platform.room(0), gw.platform.person, "approve 5 a")
        seen = await gw.platform.next_card(gw.platform.room(0))
    stamps = read_stamps(gw.stamp_dir)       # what the agents recorded, once they have ended
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.launch import ConfiguredLauncher
from bench.bench_platform import BenchPlatform, CardSeen
from bench.platforms import PLATFORMS
from gateway.cards import CodeBlock
from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.model import Config
from gateway.domain import Action, Command, Effect, InteractionKind, InteractionState
from gateway.interactions.machine import Interaction
from gateway.sessions.engine import Gateway
from platforms.registry import parse_config

if TYPE_CHECKING:
    from gateway.config.ledger_url import PgTarget

__all__ = [
    "AGENT",
    "AGENTS",
    "BenchGateway",
    "Stamped",
    "allow_token",
    "bench_config",
    "bench_gateway",
    "count_ok_deliveries",
    "read_stamps",
    "stamped",
]

AGENT = Path(__file__).resolve().parent / "agents" / "codex_bench_agent.py"
BENCH_HOST = "bench"  # the one host of a bench on a PostgreSQL ledger
# --agent NAME -> (the project's agent kind, the scripted bench agent that plays it)
AGENTS = {
    "codex": ("codex-app-server", AGENT),
    "acp": ("acp", Path(__file__).resolve().parent / "agents" / "acp_bench_agent.py"),
    "opencode": (
        "opencode",
        Path(__file__).resolve().parent / "agents" / "opencode_bench_agent.py",
    ),
}
_STAMP = re.compile(r"^bench (\S+) (\d+) t=(\d+)$")


def policy_rules(count: int, person: str) -> str:
    """``count`` ``[[projects.bench.policy]]`` rules, every one of them walked for each
    request (first match wins, and only the last matches the bench agent's commands): command
    prefixes and regexes, path globs and hosts that never match, then one rule asking the
    bench's person (one approval: a click still decides)."""
    kinds = (
        'kind = "command"\ncommand_prefix = "deploy-{n} "',
        'command_regex = "^(terraform|kubectl)-{n} (apply|delete)"',
        'kind = "file_change"\npath_glob = "infra/{n}/*.tf"',
        'kind = "network"\nhost = "*.internal-{n}.example.com"',
    )
    rules = [
        "[[projects.bench.policy]]\n"
        + kinds[n % len(kinds)].format(n=n)
        + '\naction = "deny"\nmessage = "not here"'
        for n in range(count - 1)
    ]
    if count:
        rules.append(
            f'[[projects.bench.policy]]\ncommand_prefix = "bench "\napprovers = [{person}]'
        )
    return "\n\n".join(rules)


def bench_rules_config(rules: int) -> Config:
    """A config with only the bench's ``rules`` (no platform started): for timing the walk."""
    text = f"""
[gateway]
data_dir = "/nonexistent/bench-data"

[projects.bench]
work_dir = "/nonexistent/bench-work"
agent = "codex-app-server"

[projects.bench.auth.memory]
allow_from = ["p"]
approvers = ["p"]

[platforms.memory]

{policy_rules(rules, json.dumps("memory:p"))}
"""
    return parse_config(text, "bench.toml")


def bench_interaction() -> Interaction:
    """A request shaped like the bench agent's: a command approval."""
    now = datetime.now(UTC)
    return Interaction(
        id="bench",
        session_id="bench",
        runtime_epoch=1,
        turn_id=None,
        native_key="rpc:1",
        kind=InteractionKind.APPROVAL,
        title="Run a command",
        summary="",
        detail=Command(command=f"bench measured 1 t={time.monotonic_ns()}", cwd="/"),
        actions=(Action(id="accept", label="Allow once", effect=Effect.ALLOW),),
        questions=(),
        state=InteractionState.PENDING,
        version=1,
        created_at=now,
        updated_at=now,
    )


def bench_config(
    root: Path,
    platform: BenchPlatform,
    agent: str = "codex",
    *,
    rules: int = 0,
    store: str | None = None,
) -> Config:
    """One project run by the bench agent of ``agent`` (:data:`AGENTS`); the platform's
    person may talk and decide; ``rules`` policy rules in force (:func:`policy_rules`);
    ``store`` a PostgreSQL URL for the ledger (None: SQLite in the data dir)."""
    kind, script = AGENTS[agent]
    work, data, stamps = root / "work", root / "data", root / "stamps"
    for folder in (work, stamps):
        folder.mkdir(parents=True, exist_ok=True)
    person = json.dumps(platform.person.user_id)
    shared = ""
    if store is not None:  # a PostgreSQL ledger: one host, and the hosts' key file
        key = root / "hmac.key"
        if not key.exists():
            key.write_bytes(os.urandom(HMAC_KEY_BYTES))
            key.chmod(0o600)
        shared = f"store = {json.dumps(store)}\nhmac_key_file = {json.dumps(str(key))}"
    text = f"""
[gateway]
data_dir = {json.dumps(str(data))}
queue_depth = 100
stop_grace_seconds = 5
{shared}

[projects.bench]
work_dir = {json.dumps(str(work))}
agent = "{kind}"
{"" if store is None else f'host = "{BENCH_HOST}"'}
argv = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]

[projects.bench.agent_options.env]
BENCH_STAMP_DIR = {json.dumps(str(stamps))}

[projects.bench.auth.{platform.person.platform}]
allow_from = [{person}]
approvers = [{person}]

[platforms.{platform.name}]
{platform.config_table()}

{policy_rules(rules, json.dumps(f"{platform.person.platform}:{platform.person.user_id}"))}
"""
    return parse_config(text, "bench.toml")


@dataclass
class BenchGateway:
    gateway: Gateway
    platform: BenchPlatform
    stamp_dir: Path
    ledger: Path | PgTarget  # the SQLite file, or the PostgreSQL database


@asynccontextmanager
async def bench_gateway(
    root: Path,
    platform_name: str = "memory",
    *,
    handshake_timeout: float = 120.0,
    agent: str = "codex",
    rules: int = 0,
    store: str | None = None,
) -> AsyncIterator[BenchGateway]:
    async with PLATFORMS[platform_name]() as platform:
        config = bench_config(root, platform, agent, rules=rules, store=store)
        launcher = ConfiguredLauncher(env_source={}, handshake_timeout=handshake_timeout)
        async with Gateway(
            config, platforms={platform.name: platform.platform}, launcher=launcher, host=BENCH_HOST
        ) as gateway:
            target = config.gateway.ledger_target()
            ledger = target if target is not None else gateway.store.path
            assert ledger is not None  # SQLite: the file
            yield BenchGateway(
                gateway=gateway,
                platform=platform,
                stamp_dir=root / "stamps",
                ledger=ledger,
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class Stamped:
    """A card of the bench agent: which request it shows and when the agent wrote it."""

    tag: str
    k: int
    sent_ns: int


def stamped(seen: CardSeen) -> Stamped:
    """The stamp the bench agent wrote into the command of the request the card shows."""
    for block in seen.card.blocks:
        if isinstance(block, CodeBlock):
            match = _STAMP.match(block.code.strip())
            if match:
                return Stamped(tag=match[1], k=int(match[2]), sent_ns=int(match[3]))
    raise ValueError(f"no bench stamp on the card {seen.card.title!r}")


def allow_token(seen: CardSeen) -> str:
    """The token of the card's first button that allows."""
    for action in seen.card.actions:
        if action.effect is Effect.ALLOW:
            return action.token
    raise ValueError(f"no allow button on the card {seen.card.title!r}")


def read_stamps(stamp_dir: Path) -> list[dict[str, Any]]:
    """Everything the bench agents recorded (read once they have ended)."""
    records: list[dict[str, Any]] = []
    for path in sorted(stamp_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            records += [json.loads(line) for line in lines if line.strip()]
    return records


def count_ok_deliveries(ledger: Path | PgTarget) -> dict[str, int]:
    """interaction id -> how many successful deliveries the ledger recorded for it."""
    sql = (
        "SELECT i.id, count(d.id) FROM interactions i"
        " LEFT JOIN deliveries d ON d.interaction_id = i.id AND d.outcome = 'ok'"
        " GROUP BY i.id"
    )
    if isinstance(ledger, Path):
        with closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as conn:
            rows = conn.execute(sql).fetchall()
    else:
        import psycopg

        with psycopg.connect(ledger.url, password=ledger.password) as pg:
            rows = pg.execute(sql).fetchall()
    return {str(row[0]): int(row[1]) for row in rows}
