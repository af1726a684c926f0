"""``python -m bench.hosts``: three gateway host processes, many sessions, every approval once.

Three gateway processes (tests/harness/gateway_proc.py: the real engine, the memory
platform) share one PostgreSQL ledger on a throwaway cluster (tests/pg_cluster.py, a Unix
socket). Each host runs its project's ``--sessions`` sessions, with the scripted agents in
its own process (tests/scripted_launcher.py, ``--scripted-approvals``: an agent process per
session would measure 300 interpreters starting, not the gateway). In every session, all at
once, ``--approvals`` prompts are said in turn on the owning host, each asks one approval,
and each card is clicked on *another* host (the receiver decides, the ledger's NOTIFY wakes
the owner, the owner writes to its agent and edits the card); the next prompt follows once
the card says "sent to the agent".

Reported: the wall time from the first prompt to the last card settled; click -> card
settled p50/p99 (what the person sees: decided on one host, written by another, the card
edited); per host the decisions its agents were written (agent-side, counted in the host
process) and its peak RSS (``VmHWM`` of /proc/<pid>/status); in the ledger the decisions
and "ok" deliveries per interaction. Exactly once: every count equals sessions x approvals
and no interaction has two decisions or two deliveries; anything else raises.
It needs PostgreSQL (``scripts/setup.sh`` installs it); ``python -m bench --only hosts``
runs it in the suite's table.

Fixed offered loads and saturation (issue 36), instead of the run above:

    python -m bench.hosts --rate 20 --rate 50 [--seconds 10] [--sessions 20]
    python -m bench.hosts --saturation 10,20,50 [--approvals 5]

``--rate R`` is an open loop: on each host an approval arrives every 1/R s, whether or not
the earlier ones are done, and takes a free session of the host's ``--sessions`` (each
session's first approval, which starts its agent, is taken before the clock starts and not
measured); reported per load: click -> owner's card settled p50/p99 (target at 20/s: p50
under 100 ms, p99 under 1 s), arrival -> settled (with the arrivals that found every session
busy) and the throughput done. ``--saturation`` runs the closed loop above at each number of
busy sessions per host: throughput that should grow with sessions until the CPU is spent.
Each run gets three fresh host processes on the one cluster; its counts are its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.figures import Figure, emit
from gateway.config.ledger_url import PgTarget
from tests.harness.driver import (
    GatewayProcess,
    Shown,
    gateway_process,
    room,
    scripted_project,
    write_config,
)
from tests.pg_cluster import bench_ledger

HOSTS = ("h0", "h1", "h2")
Slot = tuple[int, Iterator[int], set[str]]  # a session of an open-loop run: thread, numbers, cards
DEADLINE_S = 600.0  # a whole run; each wait of the driver has its own (60 s)


@dataclass(frozen=True, kw_only=True)
class Result:
    hosts: int
    sessions: int  # per host
    approvals: int  # per session
    wall_s: float
    latencies_ms: list[float]  # click -> card settled, every approval
    received: dict[str, int]  # host -> decisions its agents were written
    peak_rss_mb: dict[str, float]  # host -> VmHWM
    decisions: int  # rows in the ledger
    deliveries_ok: int

    @property
    def expected(self) -> int:
        return self.hosts * self.sessions * self.approvals


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


@contextlib.asynccontextmanager
async def three_hosts(
    root: Path, dsn: str, approvals: int
) -> AsyncIterator[dict[str, GatewayProcess]]:
    projects = [
        scripted_project(f"p{n}", "normal", root / f"work-{host}", channel=f"c{n}")
        for n, host in enumerate(HOSTS)
    ]
    config = write_config(
        root / "hosts.toml",
        root / "data",
        projects,
        store=PgTarget(url=dsn),
        hosts={f"p{n}": host for n, host in enumerate(HOSTS)},
    )
    async with contextlib.AsyncExitStack() as stack:
        running = {}
        for host in HOSTS:
            running[host] = await stack.enter_async_context(
                gateway_process(
                    config,
                    root / "logs",
                    host=host,
                    data_dir=root / f"data-{host}",
                    scripted_approvals=approvals,
                )
            )
        yield running


async def one_approval(
    running: dict[str, GatewayProcess], owner: int, thread: int, n: int, seen: set[str]
) -> float:
    """Say approval ``n``'s prompt in session ``thread`` of the owner, click its card on
    another host, wait until the owner's card says it was sent; the click -> settled time
    (ms). ``seen``: the cards of this session already taken."""
    gw = running[HOSTS[owner]]
    where = room(f"c{owner}", thread=f"t{thread}")
    await gw.say(where, "alice", f"approve{n}")

    def new_card() -> Shown | None:
        for shown in gw.shown(where):
            card = shown.card
            if card is not None and shown.id not in seen and card["actions"]:
                return shown
        return None

    card = await gw.wait_for(new_card, what=f"card {n} of {where.thread}")
    seen.add(card.id)
    assert card.card is not None
    allow = card.card["actions"][0]
    receiver = running[HOSTS[(owner + 1 + n % 2) % len(HOSTS)]]  # never the owner
    start = time.perf_counter()
    ack = await receiver.click(where, "alice", allow["token"])
    if not ack["accepted"]:
        raise RuntimeError(f"approval {n} of {where.thread} refused: {ack['text']}")

    def settled(card_id: str = card.id) -> bool:
        shown = gw.messages.get(card_id)
        return shown is not None and "sent to the agent" in (
            (shown.card or {}).get("status_line") or ""
        )

    await gw.wait_for(settled, what=f"card {n} of {where.thread} settled")
    return (time.perf_counter() - start) * 1000


async def one_session(
    running: dict[str, GatewayProcess], owner: int, thread: int, approvals: int
) -> list[float]:
    """``approvals`` approvals in a row in one session (the next once the last settled)."""
    seen: set[str] = set()
    return [await one_approval(running, owner, thread, n, seen) for n in range(approvals)]


def ledger_counts(dsn: str) -> tuple[int, int, int]:
    """Decisions, "ok" deliveries, and interactions with more than one of either."""
    with psycopg.connect(dsn) as conn:
        decisions = conn.execute("SELECT count(*) FROM decisions").fetchone()
        ok = conn.execute("SELECT count(*) FROM deliveries WHERE outcome = 'ok'").fetchone()
        twice = conn.execute(
            "SELECT count(*) FROM ("
            " SELECT interaction_id FROM decisions GROUP BY interaction_id HAVING count(*) > 1"
            " UNION ALL"
            " SELECT interaction_id FROM deliveries GROUP BY interaction_id HAVING count(*) > 1"
            ") AS doubled"
        ).fetchone()
    assert decisions is not None and ok is not None and twice is not None
    return int(decisions[0]), int(ok[0]), int(twice[0])


def counts_before(dsn: str) -> tuple[int, int, int]:
    """:func:`ledger_counts` of the runs before on the same cluster (none: no tables yet)."""
    try:
        return ledger_counts(dsn)
    except psycopg.errors.UndefinedTable:
        return 0, 0, 0


async def measure(root: Path, dsn: str, sessions: int, approvals: int) -> Result:
    decisions_before, ok_before, _ = counts_before(dsn)
    async with asyncio.timeout(DEADLINE_S), three_hosts(root, dsn, approvals) as running:
        start = time.perf_counter()
        found = await asyncio.gather(
            *(
                one_session(running, owner, thread, approvals)
                for thread in range(sessions)
                for owner in range(len(HOSTS))
            )
        )
        wall = time.perf_counter() - start
        received = {
            host: int((await gw.command("received"))["received"]) for host, gw in running.items()
        }
        rss = {host: peak_rss_mb(gw.pid) for host, gw in running.items()}
    decisions, ok, twice = ledger_counts(dsn)
    decisions, ok = decisions - decisions_before, ok - ok_before
    result = Result(
        hosts=len(HOSTS),
        sessions=sessions,
        approvals=approvals,
        wall_s=wall,
        latencies_ms=sorted(t for times in found for t in times),
        received=received,
        peak_rss_mb=rss,
        decisions=decisions,
        deliveries_ok=ok,
    )
    per_host = sessions * approvals
    if twice or decisions != result.expected or ok != result.expected:
        raise RuntimeError(f"not exactly once: {decisions} decisions, {ok} deliveries, {twice}")
    if any(count != per_host for count in received.values()):
        raise RuntimeError(f"agent-side answers {received}, expected {per_host} on each host")
    return result


def figures(result: Result) -> list[Figure]:
    q = statistics.quantiles(result.latencies_ms, n=100)
    size = f"{result.hosts} hosts x {result.sessions} sessions x {result.approvals} approvals"
    total = result.expected
    rss = ", ".join(f"{host} {mb:.0f} MB" for host, mb in result.peak_rss_mb.items())
    return [
        Figure(
            benchmark="hosts",
            name=f"{size}: wall time",
            value=f"{result.wall_s:.1f} s ({total / result.wall_s:.0f} approvals/s)",
        ),
        Figure(
            benchmark="hosts",
            name="click on another host -> owner's card settled",
            value=f"p50 {q[49]:.0f} ms, p99 {q[98]:.0f} ms (n={len(result.latencies_ms)})",
        ),
        Figure(
            benchmark="hosts",
            name="approvals delivered exactly once",
            value=f"{sum(result.received.values())}/{total} at the agents,"
            f" ledger {result.decisions} decisions / {result.deliveries_ok} ok deliveries",
            target="all",
            met=True,  # measure() raises otherwise
        ),
        Figure(benchmark="hosts", name="peak RSS per host process (VmHWM)", value=rss),
    ]


@dataclass(frozen=True, kw_only=True)
class Offered:
    """An open-loop run: approvals arrive at ``rate`` a second on each host, whether or not
    the earlier ones are done (each takes a free session of its host's ``sessions``)."""

    rate: float  # offered, per host
    seconds: float
    sessions: int  # per host
    click_ms: list[float]  # click on another host -> owner's card settled
    arrival_ms: list[float]  # the approval's arrival (its prompt due) -> owner's card settled
    waited: int  # arrivals that found every session of their host busy
    done_s: float  # from the first arrival to the last card settled

    @property
    def offered(self) -> int:
        return len(self.click_ms)


async def measure_offered(
    root: Path, dsn: str, *, sessions: int, rate: float, seconds: float
) -> Offered:
    """``rate`` approvals a second on each host for ``seconds`` (open loop: each arrives on
    time, a prompt said in a free session of its host, its card clicked on another host at
    once). Each session first takes one approval unmeasured (its agent started)."""
    per_host = max(1, round(rate * seconds))
    decisions_before, ok_before, _ = counts_before(dsn)
    async with (
        asyncio.timeout(DEADLINE_S),
        three_hosts(root, dsn, per_host + 1) as running,
    ):
        slots: list[list[Slot]] = [
            [(thread, itertools.count(1), set()) for thread in range(sessions)] for _ in HOSTS
        ]
        await asyncio.gather(  # each session's agent started, its first approval unmeasured
            *(
                one_approval(running, owner, thread, 0, seen)
                for owner, mine in enumerate(slots)
                for thread, _, seen in mine
            )
        )
        pools: list[asyncio.Queue[Slot]] = []
        for mine in slots:
            pool: asyncio.Queue[Slot] = asyncio.Queue()
            for slot in mine:
                pool.put_nowait(slot)
            pools.append(pool)
        loop = asyncio.get_running_loop()
        click: list[float] = []
        arrival: list[float] = []
        waited = 0

        async def arrive(owner: int, due: float) -> None:
            nonlocal waited
            await asyncio.sleep(max(0.0, due - loop.time()))  # open loop: its own time
            pool = pools[owner]
            if pool.empty():
                waited += 1
            thread, numbers, seen = await pool.get()
            try:
                click.append(await one_approval(running, owner, thread, next(numbers), seen))
                arrival.append((loop.time() - due) * 1000)
            finally:
                pool.put_nowait((thread, numbers, seen))

        start = loop.time() + 0.1
        spread = 1 / (rate * len(HOSTS))  # the hosts' arrivals interleaved
        await asyncio.gather(
            *(
                arrive(owner, start + k / rate + owner * spread)
                for k in range(per_host)
                for owner in range(len(HOSTS))
            )
        )
        done = loop.time() - start
        received = [int((await gw.command("received"))["received"]) for gw in running.values()]
    decisions, ok, twice = ledger_counts(dsn)
    expected = len(HOSTS) * (per_host + sessions)
    if twice or decisions - decisions_before != expected or ok - ok_before != expected:
        raise RuntimeError(f"not exactly once: {decisions} decisions, {ok} deliveries, {twice}")
    if any(count != per_host + sessions for count in received):
        raise RuntimeError(f"agent-side answers {received}, expected {per_host + sessions} each")
    return Offered(
        rate=rate,
        seconds=seconds,
        sessions=sessions,
        click_ms=sorted(click),
        arrival_ms=sorted(arrival),
        waited=waited,
        done_s=done,
    )


def offered_figures(result: Offered) -> list[Figure]:
    c = statistics.quantiles(result.click_ms, n=100)
    a = statistics.quantiles(result.arrival_ms, n=100)
    where = f"{result.rate:g} approvals/s per host offered ({result.sessions} sessions each)"
    return [
        Figure(
            benchmark="hosts",
            name=f"{where}: click on another host -> owner's card settled",
            value=f"p50 {c[49]:.0f} ms, p99 {c[98]:.0f} ms (n={result.offered})",
            target="p50 < 100 ms, p99 < 1000 ms at 20/s",
            met=(c[49] < 100 and c[98] < 1000) if result.rate <= 20 else None,
        ),
        Figure(
            benchmark="hosts",
            name=f"{where}: arrival -> owner's card settled",
            value=(
                f"p50 {a[49]:.0f} ms, p99 {a[98]:.0f} ms;"
                f" {result.waited} of {result.offered} waited for a free session"
            ),
        ),
        Figure(
            benchmark="hosts",
            name=f"{where}: done",
            value=(
                f"{result.offered} approvals in {result.done_s:.1f} s"
                f" ({result.offered / result.done_s:.0f}/s for the {len(HOSTS)} hosts,"
                f" {len(HOSTS) * result.rate:g}/s offered)"
            ),
        ),
    ]


def saturation_figure(result: Result) -> Figure:
    q = statistics.quantiles(result.latencies_ms, n=100)
    return Figure(
        benchmark="hosts",
        name=f"saturation: {result.sessions} busy sessions per host",
        value=(
            f"{result.expected / result.wall_s:.0f} approvals/s for {result.hosts} hosts"
            f" ({result.expected / result.wall_s / result.hosts:.1f} per host);"
            f" click -> settled p50 {q[49]:.0f} ms, p99 {q[98]:.0f} ms"
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__)
    parser.add_argument("--sessions", type=int, default=100, help="per host")
    parser.add_argument("--approvals", type=int, default=5, help="per session")
    parser.add_argument(
        "--rate",
        type=float,
        action="append",
        help="open loop: approvals a second offered per host (repeat for several loads)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="of arrivals, with --rate")
    parser.add_argument(
        "--saturation",
        type=lambda text: [int(n) for n in text.split(",")],
        help="closed loop at each of these busy sessions per host, e.g. 10,20,50",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rate or args.saturation:
        emit(_loads(parser, args), as_json=args.json)
        return
    with bench_ledger("bench-3hosts-", parser.error) as (root, dsn):
        result = asyncio.run(measure(root, dsn, args.sessions, args.approvals))
    if args.json:
        print(json.dumps([item.to_json() for item in figures(result)]))
        return
    q = statistics.quantiles(result.latencies_ms, n=100)
    total = result.expected
    print(
        f"{result.hosts} hosts x {result.sessions} sessions x {result.approvals} approvals"
        f" = {total}: wall {result.wall_s:.1f} s ({total / result.wall_s:.0f} approvals/s)"
    )
    print(f"click -> card settled (across hosts): p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms")
    print(
        f"exactly once: {result.decisions} decisions, {result.deliveries_ok} deliveries,"
        f" agent-side {sum(result.received.values())} ({result.received})"
    )
    for host, mb in result.peak_rss_mb.items():
        print(f"peak RSS {host}: {mb:.0f} MiB")


def _loads(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Figure]:
    """The open-loop runs (``--rate``) and the closed-loop ones (``--saturation``), one
    cluster, three fresh host processes for each run."""
    found: list[Figure] = []
    with bench_ledger("bench-3hosts-", parser.error) as (root, dsn):
        for n, rate in enumerate(args.rate or ()):
            offered = asyncio.run(
                measure_offered(
                    root / f"rate{n}", dsn, sessions=args.sessions, rate=rate, seconds=args.seconds
                )
            )
            found += offered_figures(offered)
        for sessions in args.saturation or ():
            result = asyncio.run(measure(root / f"sat{sessions}", dsn, sessions, args.approvals))
            found.append(saturation_figure(result))
    return found


if __name__ == "__main__":
    main()
