"""Which way of pacing Telegram calls keeps the bot free of 429s: a measurement.

    python -m bench.telegram_pacing [--seconds 8] [--json]

The same burst of calls, shaped like a gateway's (a turn message edited once a second, a
card and a notice in between, the card edited after a decision; in a private chat and in a
group at once), is made against the fake Bot API of the tests (which answers 429 past one
message a second per chat, 20 a minute per group, 30 a second per bot) three ways:

- ``retry``: plain calls; a 429 becomes RateLimited and is retried after ``retry_after``
  (the core's ``with_rate_limit``);
- ``aioratelimiter``: python-telegram-bot's AIORateLimiter (max_retries=5);
- ``outbox``: the Telegram platform's paced per-chat outbox (platforms/outbox.py with
  Telegram's limits and errors, platforms/telegram/outbox.py).

Reported: 429s received, calls that failed, and when the last call was done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import RetryAfter, TelegramError
from telegram.ext import AIORateLimiter, ExtBot

from bench.figures import Figure
from platforms.outbox import Priority
from platforms.telegram.outbox import TelegramOutbox, retry_seconds
from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import Person, group_chat, private_chat

NAME = "telegram_pacing"
PERSON = Person(111, "Alice", "alice")
CHATS = (private_chat(PERSON), group_chat(-100555, "Team"))
KEYBOARD = InlineKeyboardMarkup([[InlineKeyboardButton("Allow once", callback_data="a1:x")]])

Call = Callable[[], Awaitable[Any]]
Runner = Callable[[int, Priority, Call], Awaitable[Any]]


def schedule(bot: Bot, chat_id: int, seconds: int) -> list[tuple[float, Priority, str]]:
    """(when, priority, what) for one chat; ``what`` is resolved by :func:`run_schedule`."""
    plan: list[tuple[float, Priority, str]] = [(0.0, Priority.TEXT, "stream")]
    plan += [(float(t), Priority.STREAM, f"edit {t}") for t in range(1, seconds + 1)]
    plan += [(2.5, Priority.CARD, "card"), (4.2, Priority.TEXT, "notice")]
    plan += [(6.0, Priority.CARD, "decided")]
    return sorted(plan)


async def run_schedule(bot: Bot, run: Runner, chat_id: int, seconds: int) -> tuple[int, float]:
    """Make one chat's calls at their times; (failed calls, seconds until the last was done)."""
    start = time.monotonic()
    ids: dict[str, int] = {}
    failed = 0
    pending: list[asyncio.Task[None]] = []

    async def one(what: str, priority: Priority) -> None:
        nonlocal failed
        try:
            if what in ("stream", "card", "notice"):
                markup = KEYBOARD if what == "card" else None
                sent = await run(
                    chat_id, priority, lambda: bot.send_message(chat_id, what, reply_markup=markup)
                )
                ids[what] = sent.message_id
            else:
                target = ids.get("card" if what == "decided" else "stream")
                if target is None:
                    failed += 1
                    return
                await run(
                    chat_id,
                    priority,
                    lambda: bot.edit_message_text(what, chat_id=chat_id, message_id=target),
                )
        except TelegramError:
            failed += 1

    for at, priority, what in schedule(bot, chat_id, seconds):
        await asyncio.sleep(max(0.0, start + at - time.monotonic()))  # the workload's clock
        if what.startswith("edit") or what == "decided":
            pending.append(asyncio.create_task(one(what, priority)))
        else:
            await one(what, priority)
    await asyncio.gather(*pending)
    return failed, time.monotonic() - start


async def plain(chat_id: int, priority: Priority, call: Call) -> Any:
    return await call()


async def retrying(chat_id: int, priority: Priority, call: Call) -> Any:
    for _ in range(10):
        try:
            return await call()
        except RetryAfter as exc:
            await asyncio.sleep(retry_seconds(exc))  # what with_rate_limit does
    raise TelegramError("gave up after 10 tries")


async def measure(way: str, seconds: int) -> dict[str, Any]:
    async with FakeTelegram() as fake:
        for chat in CHATS:
            fake.register_chat(chat)
        fake.private_open.add(PERSON.id)
        base = f"{fake.base_url}/bot"
        bot: Bot = (
            ExtBot(TOKEN, base_url=base, rate_limiter=AIORateLimiter(max_retries=5))
            if way == "aioratelimiter"
            else Bot(TOKEN, base_url=base)
        )
        async with bot, asyncio.TaskGroup() as tasks:
            runner: Runner = retrying if way == "retry" else plain
            if way == "outbox":
                outbox = TelegramOutbox(tasks)
                runner = outbox.run
            results = await asyncio.gather(
                *(run_schedule(bot, runner, int(chat["id"]), seconds) for chat in CHATS)
            )
        return {
            "way": way,
            "429s": len(fake.too_many),
            "failed": sum(failed for failed, _ in results),
            "done_after_s": round(max(took for _, took in results), 2),
        }


async def main_async(seconds: int) -> list[Figure]:
    figures = []
    for way in ("retry", "aioratelimiter", "outbox"):
        found = await measure(way, seconds)
        value = f"{found['429s']} 429s, {found['failed']} failed, done in {found['done_after_s']} s"
        figures.append(
            Figure(benchmark=NAME, name=way, value=value, target="0 429s", met=found["429s"] == 0)
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(main_async(args.seconds))
    if args.json:
        print(json.dumps([f.to_json() for f in figures]))
    else:
        for figure in figures:
            print(figure.line())


if __name__ == "__main__":
    main()
