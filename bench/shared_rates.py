"""``python -m bench.shared_rates``: a bot's rate budget shared by its hosts, on Telegram.

Hosts (Telegram outboxes, a python-telegram-bot ``Bot`` each, one token) send ``--messages``
messages to each of ``--chats`` private chats of the fake Telegram (one message a second per
chat, 30 a second per bot, 429 past them), all queued at once:

- one host, its budget in the ledger (gateway/store/rate_buckets.py);
- two hosts, the same messages split between them, the budget in the ledger;
- two hosts, each pacing alone (what several hosts did before the shared budget).

Figures: the 429s Telegram answered, the sends a second, the ledger trips per send (takes,
takes answered "wait", the batched returns, a bucket's row made), and the take's round trip
(p50/p99). The ledger is a throwaway PostgreSQL cluster on a Unix socket
(tests/pg_cluster.py). Not in ``python -m bench``: it needs PostgreSQL, which
``scripts/setup.sh`` installs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from telegram import Bot

from bench.figures import Figure, Latency
from gateway.config.ledger_url import PgTarget
from gateway.rate_budget import ALONE, Bucket, RateBudget, Ticket
from gateway.store.rate_buckets import LedgerRates
from gateway.store.store import Store
from platforms.outbox import Priority
from platforms.telegram.outbox import TelegramOutbox
from tests.pg_cluster import bench_ledger
from tests.servers.fake_telegram import TOKEN, FakeTelegram

NAME = "shared_rates"
FIRST_CHAT = 5001
_runs = itertools.count(1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    way: str
    sends: int
    too_many: int
    seconds: float
    trips: Counter[str]
    takes_ns: list[int]

    @property
    def per_second(self) -> float:
        return self.sends / self.seconds


class _Timed:
    """A budget whose takes are timed (the round trip a send waits before it goes)."""

    def __init__(self, budget: RateBudget, takes_ns: list[int]) -> None:
        self._budget = budget
        self._takes_ns = takes_ns

    async def take(self, buckets: Sequence[Bucket], hold_key: str) -> Ticket | float:
        start = time.perf_counter_ns()
        taken = await self._budget.take(buckets, hold_key)
        self._takes_ns.append(time.perf_counter_ns() - start)
        return taken

    def returned(self, ticket: Ticket, *, retry_after: float | None = None) -> None:
        self._budget.returned(ticket, retry_after=retry_after)


async def measure(target: PgTarget, *, hosts: int, shared: bool, chats: int, messages: int) -> Run:
    bot_name = f"bench-{next(_runs)}"  # a budget of its own: nothing left of another run
    chat_ids = [FIRST_CHAT + n for n in range(chats)]
    takes_ns: list[int] = []
    async with FakeTelegram() as fake, contextlib.AsyncExitStack() as stack:
        for chat in chat_ids:
            fake.register_chat({"id": chat, "type": "private", "first_name": f"p{chat}"})
            fake.private_open.add(chat)
        rates = [
            await stack.enter_async_context(LedgerRates(target)) if shared else None
            for _ in range(hosts)
        ]
        bots = [
            await stack.enter_async_context(Bot(TOKEN, base_url=f"{fake.base_url}/bot"))
            for _ in range(hosts)
        ]
        start = time.perf_counter()
        async with asyncio.TaskGroup() as tasks:
            outboxes = [
                TelegramOutbox(
                    tasks,
                    budget=ALONE if r is None else _Timed(r.budget("telegram", bot_name), takes_ns),
                )
                for r in rates
            ]
            sends = [
                outboxes[n % hosts].run(
                    chat,
                    Priority.TEXT,
                    partial(bots[n % hosts].send_message, chat, f"m{n}"),
                    method="sendMessage",
                )
                for chat in chat_ids
                for n in range(messages)
            ]
            await asyncio.gather(*sends)
            seconds = time.perf_counter() - start
            for outbox in outboxes:
                outbox.close()
        for r in rates:
            if r is not None:
                await r.flush()
        trips = sum((r.trips for r in rates if r is not None), Counter[str]())
        way = f"{hosts} host{'s' if hosts > 1 else ''}, " + (
            "budget in the ledger" if shared else "each alone"
        )
        return Run(
            way=way,
            sends=len(sends),
            too_many=len(fake.too_many),
            seconds=seconds,
            trips=trips,
            takes_ns=takes_ns,
        )


async def main_async(dsn: str, root: Path, chats: int, messages: int) -> list[Run]:
    target = PgTarget(url=dsn)
    async with Store.open(root, postgresql=target):
        pass  # the migrations
    runs = []
    for hosts, shared in ((1, True), (2, True), (2, False)):
        runs.append(
            await measure(target, hosts=hosts, shared=shared, chats=chats, messages=messages)
        )
    return runs


def figures(runs: Sequence[Run]) -> list[Figure]:
    out = []
    for run in runs:
        value = (
            f"{run.too_many} 429s, {run.sends} sends in {run.seconds:.1f} s"
            f" ({run.per_second:.1f}/s)"
        )
        if run.takes_ns:
            kinds = ", ".join(
                f"{kind} {n / run.sends:.2f}" for kind, n in sorted(run.trips.items())
            )
            value += (
                f", {run.trips.total() / run.sends:.2f} trips/send ({kinds}),"
                f" take {Latency.of_ns(run.takes_ns).text()}"
            )
        shared = "ledger" in run.way
        out.append(
            Figure(
                benchmark=NAME,
                name=run.way,
                value=value,
                target="0 429s" if shared else "",
                met=run.too_many == 0 if shared else None,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.shared_rates", description=__doc__)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--messages", type=int, default=8, help="per chat, all hosts together")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with bench_ledger("bench-rates-", parser.error) as (root, dsn):
        found = figures(asyncio.run(main_async(dsn, root, args.chats, args.messages)))
    if args.json:
        print(json.dumps([f.to_json() for f in found]))
    else:
        for figure in found:
            print(figure.line())


if __name__ == "__main__":
    main()
