"""Which way of pacing Discord calls keeps the bot free of 429s and shows the final text soonest.

    python -m bench.discord_pacing [--seconds 20] [--threads 3] [--json]

The same calls, shaped like a gateway's (in each of ``threads`` threads: a turn's message
posted, then edited every half second with the whole text so far, a card posted at 2.5 s, a
notice at 4.2 s, the card edited after a decision at 6 s), are made against the tests' fake
Discord (``X-RateLimit-*`` on every answer, 429 + ``Via`` past 5 message edits per 5 s per
channel, as Discord does) two ways:

- ``discord.py``: plain discord.py calls; it paces each route's bucket by the headers and
  retries a 429 itself, but its buckets are FIFO: every edit waits its turn;
- ``outbox``: the Discord platform's outbox (platforms/discord/outbox.py: a lane per
  channel, cards first, a waiting edit replaced by the newer one) in front of discord.py.

Reported for each: 429s received, calls that failed, message edits per channel per 5 s that
Discord took, and the time until every thread's message showed its exact final text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import discord

from bench.figures import Figure
from platforms.discord.outbox import DiscordOutbox
from platforms.outbox import Priority
from tests.servers.fake_discord import ALICE, TOKEN, FakeDiscord

NAME = "discord_pacing"
EDIT_EVERY = 0.5

Call = Callable[[], Awaitable[Any]]
Runner = Callable[[str, Priority, Call, str | None], Awaitable[Any]]


def text_at(thread: int, step: int) -> str:
    """The turn's whole text after ``step`` edits (every edit shows more)."""
    return "\n".join(f"thread {thread}, part {n}" for n in range(step + 1))


def schedule(seconds: float) -> list[tuple[float, Priority, str]]:
    """(when, priority, what) for one thread."""
    steps = int(seconds / EDIT_EVERY)
    plan: list[tuple[float, Priority, str]] = [(0.0, Priority.TEXT, "stream")]
    plan += [(n * EDIT_EVERY, Priority.STREAM, f"edit {n}") for n in range(1, steps + 1)]
    plan += [(2.5, Priority.CARD, "card"), (4.2, Priority.TEXT, "notice")]
    plan += [(6.0, Priority.CARD, "decided")]
    return sorted(plan)


async def run_thread(
    client: discord.Client, run: Runner, thread: int, channel_id: str, seconds: float
) -> tuple[int, str]:
    """Make one thread's calls at their times; (failed calls, the final text)."""
    start = time.monotonic()
    channel = client.get_partial_messageable(int(channel_id))
    sent: dict[str, discord.Message] = {}
    failed = 0
    pending: list[asyncio.Task[None]] = []
    final = text_at(thread, int(seconds / EDIT_EVERY))

    async def one(what: str, priority: Priority) -> None:
        nonlocal failed
        try:
            if what in ("stream", "card", "notice"):
                embeds = [discord.Embed(title="Run `ls`?")] if what == "card" else []

                async def post() -> Any:
                    text = text_at(thread, 0) if what == "stream" else what
                    return await channel.send(text, embeds=embeds)

                sent[what] = await run(channel_id, priority, post, None)
                return
            target = sent.get("card" if what == "decided" else "stream")
            if target is None:
                failed += 1
                return
            text = "Decided" if what == "decided" else text_at(thread, int(what.split()[1]))

            async def edit() -> Any:
                return await target.edit(content=text)

            await run(channel_id, priority, edit, f"{what.split()[0]} {target.id}")
        except discord.HTTPException:
            failed += 1

    for at, priority, what in schedule(seconds):
        await asyncio.sleep(max(0.0, start + at - time.monotonic()))  # the workload's clock
        if what.startswith("edit") or what == "decided":
            pending.append(asyncio.create_task(one(what, priority)))
        else:
            await one(what, priority)
    await asyncio.gather(*pending)
    return failed, final


async def measure(way: str, seconds: float, threads: int) -> dict[str, Any]:
    async with FakeDiscord() as fake:
        undo = fake.redirect()
        client = discord.Client(intents=discord.Intents.none(), max_ratelimit_timeout=120)
        try:
            await client.login(TOKEN)
            ids = [fake.thread_of(ALICE, fake.general, f"thread {n}").id for n in range(threads)]

            async def plain(lane: str, priority: Priority, call: Call, key: str | None) -> Any:
                return await call()

            start = time.monotonic()
            async with asyncio.TaskGroup() as tasks:
                runner: Runner = plain
                outbox: DiscordOutbox | None = None
                if way == "outbox":
                    outbox = DiscordOutbox(tasks)

                    async def paced(
                        lane: str, priority: Priority, call: Call, key: str | None
                    ) -> Any:
                        assert outbox is not None
                        return await outbox.run(lane, priority, call, key=key)

                    runner = paced
                results = await asyncio.gather(
                    *(run_thread(client, runner, n, ids[n], seconds) for n in range(threads))
                )
                finals = [final for _, final in results]

                def shown() -> bool:
                    streams = [
                        next(m for m in fake.bot_messages(fake.channels[i]) if not m.embeds)
                        for i in ids
                    ]
                    return all(m.content == f for m, f in zip(streams, finals, strict=True))

                failed = sum(failed for failed, _ in results)
                try:
                    await fake.wait_for(shown, 90)  # not shown by then: never
                    final_after: float | None = time.monotonic() - start
                except TimeoutError:
                    final_after = None
                took = time.monotonic() - start
                if outbox is not None:
                    outbox.close()
        finally:
            await client.close()
            undo()
        edits = len(fake.calls_to("PATCH", "/messages/")) - sum(
            1 for method, path, _ in fake.too_many if method == "PATCH" and "/messages/" in path
        )
        return {
            "way": way,
            "429s": len(fake.too_many),
            "failed": failed,
            "edits_per_channel_per_5s": round(5 * edits / took / threads, 1),
            "final_after_s": None if final_after is None else round(final_after, 1),
        }


async def main_async(seconds: float, threads: int) -> list[Figure]:
    figures = []
    for way in ("discord.py", "outbox"):
        found = await measure(way, seconds, threads)
        final = (
            f"exact final text after {found['final_after_s']} s"
            if found["final_after_s"] is not None
            else "final text NEVER shown"
        )
        value = (
            f"{found['429s']} 429s, {found['failed']} failed, "
            f"{found['edits_per_channel_per_5s']} edits/channel/5 s, {final}"
        )
        figures.append(
            Figure(
                benchmark=NAME,
                name=way,
                value=value,
                target="0 429s, 0 failed",
                met=found["429s"] == 0 and found["failed"] == 0,
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(main_async(args.seconds, args.threads))
    if args.json:
        print(json.dumps([f.to_json() for f in figures]))
    else:
        for figure in figures:
            print(figure.line())


if __name__ == "__main__":
    main()
