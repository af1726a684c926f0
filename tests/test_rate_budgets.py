"""Rate budgets a bot's hosts share through the ledger (issue 19, design point 7;
gateway/store/rate_buckets.py), on the real PostgreSQL cluster (tests/pg_cluster.py).

Two :class:`LedgerRates` on one database are two hosts. The first tests ask the budget
itself (what it answers, never by waiting for a window to pass); the others send through two
Telegram outboxes to the fake Telegram (tests/servers/fake_telegram.py), which answers 429
to a chat that gets more than one message a second, as Telegram does; through two Slack
outboxes to the fake Slack (one ``chat.postMessage`` a second per channel); and through two
Discord platforms to the fake Discord (five edits per five seconds per channel).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from slack_sdk.web.async_client import AsyncWebClient
from telegram import Bot
from telegram.error import RetryAfter

from bench import shared_rates as shared_rates_bench
from gateway.app.cli import shared_rates
from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.ledger_url import PgTarget
from gateway.config.model import Config
from gateway.domain import ConversationRef
from gateway.platform import Platform, connected
from gateway.rate_budget import ALONE, Bucket, RateBudget, SharedRates, Ticket, bot_key
from gateway.store.rate_buckets import LedgerRates
from gateway.store.store import Store
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from platforms.outbox import Priority
from platforms.registry import parse_config
from platforms.slack.outbox import SlackOutbox
from platforms.telegram.config import TelegramConfig
from platforms.telegram.outbox import TelegramOutbox
from platforms.telegram.platform import TelegramPlatform
from tests.pg_cluster import PgCluster
from tests.servers.fake_discord import APP_ID, FakeDiscord
from tests.servers.fake_discord import TOKEN as DISCORD_TOKEN
from tests.servers.fake_slack import BOT_TOKEN, BOT_USER_ID, FakeSlack
from tests.servers.fake_telegram import TOKEN, FakeTelegram

GENERAL = "C0GENERAL"  # the fake Slack's channel
CHAT = 1001  # a private chat: one message a second
CHAT_BUCKET = Bucket(key=f"lane:{CHAT}:0", calls=1, seconds=1.05)
BOT_BUCKET = Bucket(key="shared:0", calls=28, seconds=1.05)
HOLD = f"hold:{CHAT}"


@pytest.fixture
async def target(tmp_path: Path, pg_database: PgCluster) -> PgTarget:
    target = PgTarget(url=pg_database.dsn)
    async with Store.open(tmp_path, postgresql=target):
        pass  # the migrations
    return target


@pytest.fixture
async def hosts(target: PgTarget) -> AsyncIterator[tuple[LedgerRates, LedgerRates]]:
    async with LedgerRates(target) as a, LedgerRates(target) as b:
        yield a, b


async def test_a_token_taken_on_one_host_is_gone_for_the_other(
    hosts: tuple[LedgerRates, LedgerRates],
) -> None:
    a, b = hosts
    budget_a, budget_b = a.budget("telegram", "bot"), b.budget("telegram", "bot")
    ticket = await budget_a.take([CHAT_BUCKET, BOT_BUCKET], HOLD)
    assert isinstance(ticket, Ticket)
    # in flight on a: a second at least (from a's return, which is now at the earliest)
    assert await budget_b.take([CHAT_BUCKET, BOT_BUCKET], HOLD) == CHAT_BUCKET.seconds
    budget_a.returned(ticket)
    await a.flush()
    # returned: the chat's second counts from then
    wait = await budget_b.take([CHAT_BUCKET, BOT_BUCKET], HOLD)
    assert isinstance(wait, float) and 0.5 < wait <= 1.05
    # another chat of the same bot is free; the bot's bucket had one call of 28
    other = Bucket(key="lane:1002:0", calls=1, seconds=1.05)
    assert isinstance(await budget_b.take([other, BOT_BUCKET], "hold:1002"), Ticket)
    # another bot, another budget
    assert isinstance(await b.budget("telegram", "bot2").take([CHAT_BUCKET], HOLD), Ticket)


async def test_a_host_that_died_with_a_call_in_flight_holds_the_chat_no_longer_than_its_lease(
    target: PgTarget,
) -> None:
    """A host's marks lapse within its lease (``in_flight_cap``): the host that reaps it,
    which edits its cards in the same chats, waits a window past that at most, not the
    15 s a call may stay in flight."""
    lease = 0.4
    async with LedgerRates(target, in_flight_cap=lease) as dead, LedgerRates(target) as reaper:
        assert isinstance(await dead.budget("telegram", "bot").take([CHAT_BUCKET], HOLD), Ticket)
        # the host dies here: its call never returns
        budget = reaper.budget("telegram", "bot")
        waits: list[float] = []
        while not isinstance(answer := await budget.take([CHAT_BUCKET], HOLD), Ticket):
            waits.append(answer)
            assert len(waits) <= 3, waits  # 15 s of whole windows otherwise
            await asyncio.sleep(answer)  # as the outbox does: the wait the ledger answered
        assert sum(waits) <= lease + 2 * CHAT_BUCKET.seconds, waits


async def test_a_return_rides_in_the_next_take_of_its_host(
    hosts: tuple[LedgerRates, LedgerRates],
) -> None:
    a, b = hosts
    budget_a, budget_b = a.budget("telegram", "bot"), b.budget("telegram", "bot")
    other = Bucket(key="lane:1002:0", calls=1, seconds=1.05)
    assert isinstance(await budget_a.take([other], "hold:1002"), Ticket)  # rows, connection
    ticket = await budget_a.take([CHAT_BUCKET], HOLD)
    assert isinstance(ticket, Ticket)
    budget_a.returned(ticket)
    assert isinstance(
        await budget_a.take([Bucket(key="lane:1003:0", calls=1, seconds=1.05)], "hold:1003"), Ticket
    )
    assert (a.carried, a.trips["return"]) == (1, 0)
    # b sees the chat's call returned (a window from then), not in flight (a whole window)
    wait = await budget_b.take([CHAT_BUCKET], HOLD)
    assert isinstance(wait, float) and 0.5 < wait < CHAT_BUCKET.seconds


async def test_all_or_nothing_a_full_bucket_takes_no_token_of_the_others(
    hosts: tuple[LedgerRates, LedgerRates],
) -> None:
    a, b = hosts
    budget_a, budget_b = a.budget("telegram", "bot"), b.budget("telegram", "bot")
    assert isinstance(await budget_a.take([CHAT_BUCKET], HOLD), Ticket)
    two = Bucket(key="shared:0", calls=2, seconds=1.05)
    assert isinstance(await budget_b.take([two], "hold:x"), Ticket)
    # the chat is full: nothing of the bot's two is spent by this take
    assert isinstance(await budget_b.take([CHAT_BUCKET, two], HOLD), float)
    assert isinstance(await budget_b.take([two], "hold:y"), Ticket)
    assert isinstance(await budget_b.take([two], "hold:z"), float)


async def test_a_429_on_one_host_holds_the_lane_on_the_other(
    hosts: tuple[LedgerRates, LedgerRates],
) -> None:
    a, b = hosts
    budget_a, budget_b = a.budget("telegram", "bot"), b.budget("telegram", "bot")
    ticket = await budget_a.take([CHAT_BUCKET], HOLD)
    assert isinstance(ticket, Ticket)
    budget_a.returned(ticket, retry_after=3.0)
    await a.flush()
    # the chat's window would let a call go in a second; the 429 says three
    wait = await budget_b.take([], HOLD)  # a chat action: no window of the chat counts it
    assert isinstance(wait, float) and 2.5 < wait <= 3.0
    assert isinstance(await budget_b.take([], "hold:1002"), Ticket)  # not another chat


async def test_a_purge_deletes_only_the_rows_idle_that_long(
    hosts: tuple[LedgerRates, LedgerRates],
) -> None:
    a, b = hosts
    budget = a.budget("telegram", "bot")
    ticket = await budget.take([CHAT_BUCKET], HOLD)
    assert isinstance(ticket, Ticket)
    budget.returned(ticket)
    await a.flush()
    await b.purge()  # an hour idle: none
    wait = await budget.take([CHAT_BUCKET], HOLD)
    assert isinstance(wait, float) and wait > 0.5  # the window is still there
    made = a.trips["make"]
    await b.purge(idle=-1.0)  # idle since a second from now: every row
    assert isinstance(await budget.take([CHAT_BUCKET], HOLD), Ticket)  # made again, free
    assert a.trips["make"] == 2 * made  # its two rows were gone: made again as the first time


async def test_the_ledger_gone_leaves_the_host_its_own_pace(
    target: PgTarget, caplog: pytest.LogCaptureFixture
) -> None:
    gone = PgTarget(url=target.url.replace(target.url.rsplit("/", 1)[1], "no_such_db"))
    async with LedgerRates(gone) as rates:
        budget = rates.budget("telegram", "bot")
        for _ in range(3):  # each goes at once, by this host's windows alone
            assert await budget.take([CHAT_BUCKET], HOLD) == Ticket(keys=(), hold_key=HOLD)
    said = [r.getMessage() for r in caplog.records if "rate budgets" in r.getMessage()]
    assert len(said) == 1 and "this host's own pace alone" in said[0]


# --- two hosts sending to one chat through the fake Telegram --------------------------------


Send = Callable[[str], Awaitable[Any]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        fake.register_chat({"id": CHAT, "type": "private", "first_name": "Ann"})
        fake.private_open.add(CHAT)
        yield fake


async def two_hosts(
    fake: FakeTelegram,
    budgets: tuple[RateBudget, RateBudget],
    body: Callable[[Send, Send], Awaitable[None]],
    refused: asyncio.Event | None = None,
) -> None:
    """Two Telegram outboxes with a bot each (two hosts, one token), whose sends are given
    to ``body``; ``refused`` is set when a send is answered 429."""
    refused = refused or asyncio.Event()
    base = f"{fake.base_url}/bot"
    async with (
        Bot(TOKEN, base_url=base) as bot_a,
        Bot(TOKEN, base_url=base) as bot_b,
        asyncio.TaskGroup() as tasks,
    ):
        outbox_a = TelegramOutbox(tasks, budget=budgets[0])
        outbox_b = TelegramOutbox(tasks, budget=budgets[1])

        def sender(outbox: TelegramOutbox, bot: Bot) -> Send:
            async def send(text: str) -> Any:
                async def call() -> Any:
                    try:
                        return await bot.send_message(CHAT, text)
                    except RetryAfter:
                        # the outbox hands the 429 to its budget before it waits again
                        refused.set()
                        raise

                return await outbox.run(CHAT, Priority.TEXT, call, method="sendMessage")

            return send

        try:
            await body(sender(outbox_a, bot_a), sender(outbox_b, bot_b))
        finally:
            outbox_a.close()
            outbox_b.close()


def arrivals(fake: FakeTelegram) -> list[float]:
    return [at for at, method, chat, refused in fake.paced if chat == CHAT and not refused]


async def test_alone_each_host_spends_the_chats_budget_and_telegram_says_429(
    fake: FakeTelegram,
) -> None:
    """What the shared budget is for: two hosts each pacing alone."""

    async def body(send_a: Send, send_b: Send) -> None:
        await asyncio.gather(send_a("a"), send_b("b"))

    await two_hosts(fake, (ALONE, ALONE), body)
    assert len(fake.too_many) == 1
    assert [m.text for m in fake.bot_messages(CHAT)] in (["a", "b"], ["b", "a"])


async def test_two_hosts_take_turns_in_one_chat_without_a_429(
    fake: FakeTelegram, hosts: tuple[LedgerRates, LedgerRates]
) -> None:
    a, b = hosts
    bot = bot_key(TOKEN)

    async def body(send_a: Send, send_b: Send) -> None:
        await asyncio.gather(
            *(send(f"{who}{n}") for n in range(3) for who, send in (("a", send_a), ("b", send_b)))
        )

    await two_hosts(fake, (a.budget("telegram", bot), b.budget("telegram", bot)), body)
    assert fake.too_many == []
    texts = sorted(m.text for m in fake.bot_messages(CHAT))
    assert texts == ["a0", "a1", "a2", "b0", "b1", "b2"]
    times = arrivals(fake)
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times))


async def test_a_429_one_host_gets_makes_the_other_wait_it_too(
    fake: FakeTelegram, hosts: tuple[LedgerRates, LedgerRates]
) -> None:
    a, b = hosts
    bot = bot_key(TOKEN)
    refused = asyncio.Event()
    sent_b = False

    async def body(send_a: Send, send_b: Send) -> None:
        nonlocal sent_b
        fake.refuse_next(retry_after=3)
        first = asyncio.ensure_future(send_a("a"))
        await refused.wait()  # a's budget was told of the 429 as its call failed
        await a.flush()  # and wrote it for every host
        sent_b = True
        await asyncio.gather(first, send_b("b"))

    await two_hosts(fake, (a.budget("telegram", bot), b.budget("telegram", bot)), body, refused)
    assert sent_b
    assert len(fake.too_many) == 1  # only the one the fake was told to give
    refused_at = next(at for at, _, _, seconds in fake.paced if seconds)
    assert all(at >= refused_at + 2.9 for at in arrivals(fake))
    assert sorted(m.text for m in fake.bot_messages(CHAT)) == ["a", "b"]


async def test_the_bench_runs_and_the_shared_budget_has_no_429(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    runs = await shared_rates_bench.main_async(pg_database.dsn, tmp_path, chats=2, messages=2)
    assert [(run.way, run.too_many) for run in runs[:2]] == [
        ("1 host, budget in the ledger", 0),
        ("2 hosts, budget in the ledger", 0),
    ]
    assert all(run.trips["take"] == run.sends for run in runs[:2])


# --- the same on Slack: chat.postMessage about one a second per channel ---------------------


async def test_two_hosts_take_turns_in_one_slack_channel_without_a_429(
    target: PgTarget,
) -> None:
    async def post_from_two_hosts(budgets: tuple[RateBudget, RateBudget], each: int) -> FakeSlack:
        async with FakeSlack() as fake, asyncio.TaskGroup() as tasks:
            outboxes = [SlackOutbox(tasks, budget=budget) for budget in budgets]
            clients = [AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url) for _ in budgets]
            try:
                await asyncio.gather(
                    *(
                        outbox.run(
                            GENERAL,
                            Priority.TEXT,
                            partial(client.chat_postMessage, channel=GENERAL, text=f"{n}"),
                            method="chat.postMessage",
                        )
                        for n in range(each)
                        for outbox, client in zip(outboxes, clients, strict=True)
                    )
                )
            finally:
                for outbox in outboxes:
                    outbox.close()
            return fake

    alone = await post_from_two_hosts((ALONE, ALONE), each=1)
    assert alone.too_many  # what each host alone does to the channel's budget
    async with LedgerRates(target) as a, LedgerRates(target) as b:
        bot = bot_key(BOT_TOKEN)
        shared = await post_from_two_hosts((a.budget("slack", bot), b.budget("slack", bot)), each=2)
    assert shared.too_many == []
    assert len([m for m in shared.messages(GENERAL) if m.user == BOT_USER_ID]) == 4


# --- chosen at start: `agent-gateway run` with a shared ledger -----------------------------


def telegram_config(tmp_path: Path, fake: FakeTelegram, store: str) -> Config:
    """A project on host "a", a PostgreSQL ``store``, and Telegram."""
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return parse_config(
        f"""
[gateway]
data_dir = "{tmp_path / "data"}"
store = "{store}"
hmac_key_file = "{key}"

[projects.p]
work_dir = "{work}"
agent = "codex-app-server"
host = "a"

[projects.p.auth.telegram]
allow_from = [{CHAT}]

[platforms.telegram]
token = "{TOKEN}"
base_url = "{fake.base_url}"
""",
        "rates.toml",
    )


async def test_run_with_a_shared_ledger_paces_each_hosts_telegram_by_the_bots_budget(
    tmp_path: Path, target: PgTarget, fake: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake, target.url)
    settings = config.platforms.get("telegram", TelegramConfig)
    assert settings is not None
    hosts: list[dict[str, Platform]] = [{"telegram": TelegramPlatform(settings)} for _ in "ab"]
    chat = ConversationRef(platform="telegram", space=None, channel=str(CHAT))
    async with contextlib.AsyncExitStack() as stack:
        for platforms in hosts:  # as _run: the budgets, then the platforms connected
            await stack.enter_async_context(shared_rates(config, platforms))
            await stack.enter_async_context(connected(platforms))
        await asyncio.gather(
            *(
                platforms["telegram"].send_text(chat, f"{host}{n}")
                for n in range(2)
                for host, platforms in zip("ab", hosts, strict=True)
            )
        )
    assert fake.too_many == []
    assert sorted(m.text for m in fake.bot_messages(CHAT)) == ["a0", "a1", "b0", "b1"]


# --- the same on Discord: 5 messages or edits per 5 s per channel ---------------------------


async def test_two_hosts_share_a_discord_channels_edits_without_a_429(target: PgTarget) -> None:
    """Each host posts a message and edits it four times, one after the other: ten calls in
    one channel, whose edits the fake Discord allows five per five seconds."""

    async def edit_from_two_hosts(rates: list[SharedRates | None]) -> FakeDiscord:
        async with FakeDiscord() as fake, contextlib.AsyncExitStack() as stack:
            settings = DiscordConfig(
                token=SecretStr(DISCORD_TOKEN),
                application_id=APP_ID,
                channels=(fake.general.id,),
                api_base_url=fake.api_base,
                gateway_url=fake.gateway_url,
            )
            platforms = [DiscordPlatform(settings) for _ in rates]
            for platform, shared in zip(platforms, rates, strict=True):
                if shared is not None:
                    platform.share_rates(shared)
                await stack.enter_async_context(platform)
            channel = ConversationRef(platform="discord", space=None, channel=fake.general.id)

            async def post_and_edit(platform: DiscordPlatform, host: str) -> None:
                ref = await platform.send_text(channel, f"{host} 0")
                for n in range(1, 5):
                    await platform.edit_text(ref, f"{host} {n}")

            hosts = zip(platforms, "ab", strict=True)
            await asyncio.gather(*(post_and_edit(platform, host) for platform, host in hosts))
            return fake

    alone = await edit_from_two_hosts([None, None])
    assert alone.too_many  # each host alone spends the channel's five edits
    async with LedgerRates(target) as a, LedgerRates(target) as b:
        shared = await edit_from_two_hosts([a, b])
    assert shared.too_many == []
    assert sorted(m.content for m in shared.messages(shared.general)) == ["a 4", "b 4"]
