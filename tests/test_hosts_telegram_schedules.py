"""A config file's schedule on two hosts sharing one PostgreSQL ledger, one bot in a Telegram
forum (issue 35): it gets one topic, at its first run, whichever host claims its runs, and two
hosts opening it at the same moment keep one (a compare-and-set on its ``own_thread``; the
spare is closed). The scheduler's clock is the clock file the environment names."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.clock import CLOCK_FILE_ENVIRONMENT, FileClock
from tests.pg_cluster import PgCluster
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, GROUP, GROUP_ID
from tests.telegram_hosts_harness import Host, through, two_telegram_hosts

pytestmark = pytest.mark.timeout(120)

START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
FORUM = f'groups = {{ "{GROUP_ID}" = "all" }}'
NIGHTLY = f"""
[[projects.demo.schedule]]
name = "nightly"
cron = "0 0 * * *"
time_zone = "UTC"
text = "check the nightly build"
channel = "telegram:#{GROUP_ID}"
creator = "telegram:111"
"""
RUN = "echo: check the nightly build"


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileClock:
    made = FileClock(tmp_path / "clock")
    made.set(START)
    monkeypatch.setenv(CLOCK_FILE_ENVIRONMENT, str(made.path))  # the gateways' clock seam
    return made


async def ticks(hosts: tuple[Host, Host]) -> None:
    """Both hosts' schedulers make a pass at the same time."""
    passes = []
    for host in hosts:
        assert host.gateway.scheduler is not None
        passes.append(host.gateway.scheduler.tick())
    await asyncio.gather(*passes)


async def both_see_the_forum(fake: FakeTelegram, a: Host, b: Host) -> None:
    """Each host learns the group is a forum from an update it takes (as in production)."""
    for host, text in ((a, "hello from a"), (b, "hello from b")):
        await through(host).say(ALICE, text, chat=GROUP)
        await fake.wait_for(
            lambda t=text: any(f"echo: {t}" == m.text for m in fake.bot_messages(GROUP_ID))
        )


async def test_a_config_schedule_gets_one_topic_whichever_host_runs_it(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster, clock: FileClock
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with two_telegram_hosts(
        fake_telegram, tmp_path, pg_database.dsn, NIGHTLY, FORUM, requests={}
    ) as (a, b):
        await both_see_the_forum(fake_telegram, a, b)
        for runs, day in enumerate((28, 29), start=1):
            clock.set(datetime(2026, 3, day, 0, 0, tzinfo=UTC))
            await ticks((a, b))
            [topic] = fake_telegram.topics[GROUP_ID]
            await fake_telegram.wait_for(
                lambda r=runs, t=topic: (
                    [m.text for m in fake_telegram.bot_messages(GROUP_ID, t)].count(RUN) == r
                    or None
                )
            )
        texts = [m.text for m in fake_telegram.bot_messages(GROUP_ID, topic)]
        assert texts.count("⏰ scheduled: check the nightly build") == 2
        assert len(fake_telegram.calls_to("createForumTopic")) == 1
        [schedule] = await a.gateway.store.schedules.of_project("demo")
        assert schedule.conversation.thread == str(topic)


async def test_two_hosts_opening_its_topic_at_once_keep_one_and_close_the_other(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster, clock: FileClock
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with two_telegram_hosts(
        fake_telegram, tmp_path, pg_database.dsn, NIGHTLY, FORUM, requests={}
    ) as (a, b):
        await both_see_the_forum(fake_telegram, a, b)
        [schedule] = await a.gateway.store.schedules.of_project("demo")
        assert schedule.own_thread is None
        # two runs started at one moment on two hosts (a dead host's run taken over while
        # the next is claimed): both read the schedule with no thread
        placed = await asyncio.gather(
            a.gateway.control._configured_thread(schedule),
            b.gateway.control._configured_thread(schedule),
        )
        assert len(fake_telegram.topics[GROUP_ID]) == 2  # both opened one
        kept = placed[0].conversation
        assert placed[1].conversation == kept and kept.thread is not None
        spare = set(fake_telegram.topics[GROUP_ID]) - {int(kept.thread)}
        assert fake_telegram.closed_topics[GROUP_ID] == spare
        [stored] = await b.gateway.store.schedules.of_project("demo")
        assert stored.conversation == kept
        opened = await a.gateway.store.audit.entries(event="schedule.thread_opened")
        assert len(opened) == 1
