"""Which way of pacing Slack calls keeps the app free of 429s and shows the final text soonest.

    python -m bench.slack_pacing [--seconds 20] [--threads 3] [--json]

The same calls, shaped like a gateway's (in each of ``threads`` threads of one channel: a
turn's message posted, then edited every half second with the whole text so far, a card
posted at 2.5 s, a notice at 4.2 s, the card edited after a decision at 6 s), are made
against the tests' fake Slack (which answers 429 + Retry-After past one post a second per
channel and 50 ``chat.update`` a minute for the workspace, as Slack does) three ways:

- ``retry``: plain slack-sdk calls; a 429 is waited out (Retry-After) and tried again;
- ``sdk_retry_handler``: slack-sdk's own ``AsyncRateLimitErrorRetryHandler`` (5 retries);
- ``outbox``: the Slack platform's outbox (platforms/slack/outbox.py: a lane per channel,
  one ``chat.update`` budget for the workspace, cards first, a waiting edit replaced by the
  newer one).

Reported for each: 429s received, calls that failed, ``chat.update`` calls per minute that
Slack took, and the time until every thread's message showed its exact final text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bench.figures import Figure
from platforms.outbox import Priority
from platforms.slack.outbox import SlackOutbox
from tests.servers.fake_slack import ALICE, BOT_TOKEN, FakeSlack

NAME = "slack_pacing"
CHANNEL = "C0GENERAL"
EDIT_EVERY = 0.5
BLOCKS: list[dict[str, Any]] = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "Run `ls`?"}},
    {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Allow once"},
                "value": "a1:x",
                "action_id": "gw.act.0",
            }
        ],
    },
]

Call = Callable[[], Awaitable[Any]]
Runner = Callable[[Priority, Call, str, str | None], Awaitable[Any]]


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
    client: AsyncWebClient, run: Runner, thread: int, root: str, seconds: float
) -> tuple[int, str]:
    """Make one thread's calls at their times; (failed calls, the final text)."""
    start = time.monotonic()
    ts: dict[str, str] = {}
    failed = 0
    pending: list[asyncio.Task[None]] = []
    final = text_at(thread, int(seconds / EDIT_EVERY))

    async def one(what: str, priority: Priority) -> None:
        nonlocal failed
        try:
            if what in ("stream", "card", "notice"):

                async def post() -> Any:
                    return await client.chat_postMessage(
                        channel=CHANNEL,
                        thread_ts=root,
                        text=text_at(thread, 0) if what == "stream" else what,
                        blocks=BLOCKS if what == "card" else None,
                    )

                sent = await run(priority, post, "chat.postMessage", None)
                ts[what] = str(sent["ts"])
                return
            target = ts.get("card" if what == "decided" else "stream")
            if target is None:
                failed += 1
                return
            text = "Decided" if what == "decided" else text_at(thread, int(what.split()[1]))

            async def edit() -> Any:
                return await client.chat_update(channel=CHANNEL, ts=target, text=text)

            await run(priority, edit, "chat.update", f"{what.split()[0]} {target}")
        except SlackApiError:
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
    async with FakeSlack() as fake:
        roots = [fake.seed(ALICE, CHANNEL, f"thread {n}").ts for n in range(threads)]
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url, timeout=120)
        if way == "sdk_retry_handler":
            client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=5))

        async def plain(priority: Priority, call: Call, method: str, key: str | None) -> Any:
            return await call()

        async def retrying(priority: Priority, call: Call, method: str, key: str | None) -> Any:
            for _ in range(10):
                try:
                    return await call()
                except SlackApiError as exc:
                    if exc.response.status_code != 429:
                        raise
                    await asyncio.sleep(float(exc.response.headers.get("Retry-After", 1)))
            return await call()

        start = time.monotonic()
        async with asyncio.TaskGroup() as tasks:
            runner: Runner = retrying if way == "retry" else plain
            outbox: SlackOutbox | None = None
            if way == "outbox":
                outbox = SlackOutbox(tasks)

                async def paced(
                    priority: Priority, call: Call, method: str, key: str | None
                ) -> Any:
                    assert outbox is not None
                    return await outbox.run(CHANNEL, priority, call, key=key, method=method)

                runner = paced
            results = await asyncio.gather(
                *(run_thread(client, runner, n, roots[n], seconds) for n in range(threads))
            )
            finals = [final for _, final in results]

            def shown() -> bool:
                streams = [
                    next(m for m in fake.replies(CHANNEL, root) if m.from_bot) for root in roots
                ]
                return all(m.text == final for m, final in zip(streams, finals, strict=True))

            failed = sum(failed for failed, _ in results)
            try:
                await fake.wait_for(shown, 90)  # a way that has not shown it by then never will
                final_after: float | None = time.monotonic() - start
            except TimeoutError:
                final_after = None
            took = time.monotonic() - start
            if outbox is not None:
                outbox.close()
        updates = len(fake.calls_to("chat.update")) - sum(
            1 for method, _, _ in fake.too_many if method == "chat.update"
        )
        return {
            "way": way,
            "429s": len(fake.too_many),
            "failed": failed,
            "updates_per_min": round(60 * updates / took, 1),
            "final_after_s": None if final_after is None else round(final_after, 1),
        }


async def main_async(seconds: float, threads: int) -> list[Figure]:
    figures = []
    for way in ("retry", "sdk_retry_handler", "outbox"):
        found = await measure(way, seconds, threads)
        final = (
            f"exact final text after {found['final_after_s']} s"
            if found["final_after_s"] is not None
            else "final text NEVER shown"
        )
        value = (
            f"{found['429s']} 429s, {found['failed']} failed, "
            f"{found['updates_per_min']} chat.update/min, {final}"
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
