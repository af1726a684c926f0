"""Scheduled work on the fake Bot API with the real python-telegram-bot (issue 35), the
scripted agent (tests/scripted_launcher.py) and the scheduler's clock in a file the test sets
(gateway/clock.py).

Telegram does not say a person's time zone: a schedule reads its times in the zone of the
person's ``[people.NAME]`` table, else the project's, else UTC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.clock import FileClock
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.servers.telegram_people import Person
from tests.telegram_harness import (
    ALICE,
    BOB,
    GROUP,
    GROUP_ID,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = pytest.mark.timeout(120)

START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # 21:00 in Tokyo, 13:00 in Berlin
PEOPLE = """
[people.alice]
accounts = ["telegram:111"]
time_zone = "Asia/Tokyo"
"""


@asynccontextmanager
async def scheduled(
    fake: FakeTelegram, tmp_path: Path, *, telegram: str = "", project: str = ""
) -> AsyncIterator[tuple[OnTelegram, FileClock]]:
    (tmp_path / "work").mkdir()
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    config = telegram_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=telegram,
        project=project,
        policy=PEOPLE,
    )
    async with on_telegram(
        config, fake, ScriptedLauncher(REQUESTS), schedule_clock=clock
    ) as running:
        yield running, clock


async def answer(
    tg: OnTelegram,
    person: Person,
    text: str,
    starts: str,
    *,
    chat: dict[str, object] | None = None,
    thread: int | None = None,
) -> Sent:
    """``person`` says ``text`` (in their private chat unless ``chat``); the bot's next
    message there that starts with ``starts``."""
    chat_id = int(str(chat["id"])) if chat is not None else person.id

    def there() -> list[Sent]:
        return [m for m in tg.fake.bot_messages(chat_id) if m.thread == thread]

    before = len(there())
    await tg.say(person, text, chat=chat, thread=thread)
    return await tg.fake.wait_for(
        lambda: next((m for m in there()[before:] if m.text.startswith(starts)), None), 30.0
    )


async def echoed(tg: OnTelegram, topic: int, text: str, times: int) -> None:
    """Wait until the bot said ``text`` ``times`` times in the forum's ``topic``."""
    await tg.fake.wait_for(lambda: tg.texts(GROUP_ID, topic).count(text) == times or None)


async def tick(tg: OnTelegram, clock: FileClock, moment: datetime) -> None:
    """Move the scheduler's clock to ``moment`` and let it make one pass."""
    clock.set(moment)
    assert tg.gateway.scheduler is not None
    await tg.gateway.scheduler.tick()


async def test_at_reads_the_time_in_the_zone_of_the_persons_people_table(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scheduled(fake_telegram, tmp_path) as (tg, clock):
        made = await answer(tg, ALICE, "/at 09:00 check the nightly build", "⏰ Schedule")
        assert made.text.splitlines()[0] == (
            "⏰ Schedule S1 made: once, 2026-03-28 09:00 JST (00:00 UTC)."
        )
        # Bob has no zone of his own, and the project none: UTC
        bobs = await answer(tg, BOB, "/at 09:00 tidy the branches", "⏰ Schedule")
        assert bobs.text.splitlines()[0] == ("⏰ Schedule S2 made: once, 2026-03-28 09:00 UTC.")
        listed = await answer(tg, ALICE, "/schedules", "⏰ Schedule S1")
        assert "S1: once (Asia/Tokyo) · next 2026-03-28 09:00 JST (00:00 UTC)" in listed.text

        await tick(tg, clock, datetime(2026, 3, 27, 23, 59, tzinfo=UTC))  # 08:59 in Tokyo
        assert "⏰ scheduled: check the nightly build" not in tg.texts(ALICE.id)
        await tick(tg, clock, datetime(2026, 3, 28, 0, 0, tzinfo=UTC))  # 09:00 in Tokyo
        await tg.bot_message(ALICE.id, lambda m: m.text == "⏰ scheduled: check the nightly build")
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: check the nightly build")
        assert "⏰ scheduled: tidy the branches" not in tg.texts(BOB.id)


FORUM = f'groups = {{ "{GROUP_ID}" = "all" }}'


async def test_a_schedule_made_in_a_forum_gets_its_own_topic_where_every_run_speaks(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with scheduled(fake_telegram, tmp_path, telegram=FORUM) as (tg, clock):
        launcher = tg.launcher
        assert isinstance(launcher, ScriptedLauncher)
        await answer(tg, ALICE, "hello general", "echo: hello general", chat=GROUP)
        await launcher.turn_over.wait()
        mine = (await answer(tg, ALICE, "/status", "Session ", chat=GROUP)).text.split()[1]

        made = await answer(
            tg, ALICE, "/every 0 9 * * * check the nightly build", "⏰ Schedule", chat=GROUP
        )
        [(topic, title)] = fake_telegram.topics[GROUP_ID].items()
        assert title == "⏰ S1: check the nightly build"
        assert made.text.splitlines()[0] == (
            "⏰ Schedule S1 made: every 0 9 * * * (Asia/Tokyo), next run"
            " 2026-03-28 09:00 JST (00:00 UTC)."
        )
        assert made.text.splitlines()[2] == (
            f"Its runs speak in a thread of its own: https://t.me/c/1234567890/{topic}"
        )
        assert tg.texts(GROUP_ID, topic) == [
            "⏰ Schedule S1's runs speak here, each in a fresh session: what its agent asks"
            " waits here for the project's approvers."
        ]

        # two runs, one topic: each says "⏰ scheduled" there, and runs there
        for runs, day in enumerate((28, 29), start=1):
            launcher.turn_over.clear()
            await tick(tg, clock, datetime(2026, 3, day, 0, 0, tzinfo=UTC))
            await echoed(tg, topic, "echo: check the nightly build", runs)
            await launcher.turn_over.wait()
        assert (
            tg.texts(GROUP_ID, topic)[1:]
            == [
                "⏰ scheduled: check the nightly build",
                "echo: check the nightly build",
            ]
            * 2
        )
        assert list(fake_telegram.topics[GROUP_ID]) == [topic]
        general = [m.text for m in fake_telegram.bot_messages(GROUP_ID) if m.thread is None]
        assert made.text in general  # which names the text each run gives the agent
        assert not [t for t in general if "check the nightly build" in t and t != made.text]

        # the General topic's session is still the one Alice works in
        await answer(tg, ALICE, "still mine", "echo: still mine", chat=GROUP)
        status = await answer(tg, ALICE, "/status", "Session ", chat=GROUP)
        assert status.text.split()[1] == mine
        [schedule] = await tg.gateway.store.schedules.of_project("demo")
        assert schedule.conversation.thread == str(topic)
        moved = await tg.gateway.store.audit.entries(event="schedule.thread_opened")
        assert [entry.actor for entry in moved] == ["telegram:111"]


async def test_where_the_bot_may_not_open_topics_the_schedule_speaks_where_it_was_made(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scheduled(fake_telegram, tmp_path, telegram=FORUM) as (tg, clock):
        made = await answer(
            tg, ALICE, "/at 09:00 check the nightly build", "⏰ Schedule", chat=GROUP
        )
        assert made.text.splitlines()[2] == (
            "Its runs speak here: I may not open topics in this group (make the bot an admin"
            " with “Manage topics” to give each schedule a topic of its own)."
        )
        assert not fake_telegram.topics.get(GROUP_ID)
        [schedule] = await tg.gateway.store.schedules.of_project("demo")
        assert schedule.conversation.thread is None
        await tick(tg, clock, datetime(2026, 3, 28, 0, 0, tzinfo=UTC))
        await tg.bot_message(
            GROUP_ID, lambda m: m.text == "echo: check the nightly build" and m.thread is None
        )


async def test_in_a_private_chat_a_run_gives_the_chat_back_to_the_persons_session(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scheduled(fake_telegram, tmp_path) as (tg, clock):
        launcher = tg.launcher
        assert isinstance(launcher, ScriptedLauncher)
        await answer(tg, ALICE, "hello", "echo: hello")
        await launcher.turn_over.wait()
        mine = (await answer(tg, ALICE, "/status", "Session ")).text.split()[1]
        await answer(tg, ALICE, "/at 09:00 check the nightly build", "⏰ Schedule")
        await tick(tg, clock, datetime(2026, 3, 28, 0, 0, tzinfo=UTC))
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: check the nightly build")
        back = await tg.bot_message(ALICE.id, lambda m: "run is over" in m.text)
        assert back.text.startswith(
            "⏰ Schedule S1's run is over: this conversation is back to the session it showed"
            f" before ({mine})."
        )
        shown = tg.texts(ALICE.id)  # said once the run's last words are
        assert shown.index("echo: check the nightly build") < shown.index(back.text)
        await answer(tg, ALICE, "and mine", "echo: and mine")
        status = await answer(tg, ALICE, "/status", "Session ")
        assert status.text.split()[1] == mine


NIGHTLY = f"""
[[projects.demo.schedule]]
name = "nightly"
cron = "0 0 * * *"
time_zone = "UTC"
text = "check the nightly build"
channel = "telegram:#{GROUP_ID}"
creator = "telegram:111"
"""


@asynccontextmanager
async def configured(
    fake: FakeTelegram, tmp_path: Path, clock: FileClock, *, project: str
) -> AsyncIterator[OnTelegram]:
    """A gateway on ``tmp_path``'s ledger (started again by each call: a restart), with
    ``project`` in ``[projects.demo]`` (its config file's schedules)."""
    (tmp_path / "work").mkdir(exist_ok=True)
    config = telegram_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=FORUM,
        project=project,
        policy=PEOPLE,
    )
    async with on_telegram(config, fake, ScriptedLauncher(REQUESTS), schedule_clock=clock) as tg:
        yield tg


async def test_a_config_schedule_gets_one_topic_at_its_first_run_kept_across_a_restart(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.register_chat(GROUP)  # the bot is in the group, where no one spoke yet
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    async with configured(fake_telegram, tmp_path, clock, project=NIGHTLY) as tg:
        assert not fake_telegram.topics.get(GROUP_ID)  # none before its first run
        await tick(tg, clock, datetime(2026, 3, 28, 0, 0, tzinfo=UTC))
        [(topic, title)] = fake_telegram.topics[GROUP_ID].items()
        assert title == "⏰ nightly: check the nightly build"
        await echoed(tg, topic, "echo: check the nightly build", 1)
        assert tg.texts(GROUP_ID, topic) == [
            "⏰ Schedule nightly's runs speak here, each in a fresh session: what its agent"
            " asks waits here for the project's approvers.",
            "⏰ scheduled: check the nightly build",
            "echo: check the nightly build",
        ]
        opened = await tg.gateway.store.audit.entries(event="schedule.thread_opened")
        assert [entry.actor for entry in opened] == ["config"]
    # a restart: the start-up sync compares the file's conversation, and keeps the topic
    async with configured(fake_telegram, tmp_path, clock, project=NIGHTLY) as tg:
        [schedule] = await tg.gateway.store.schedules.of_project("demo")
        assert schedule.conversation.thread == str(topic)
        assert schedule.home.thread is None  # the conversation the file names
        await tick(tg, clock, datetime(2026, 3, 29, 0, 0, tzinfo=UTC))
        await echoed(tg, topic, "echo: check the nightly build", 2)
        runs = [text for text in tg.texts(GROUP_ID, topic) if "nightly build" in text]
        assert (
            runs == ["⏰ scheduled: check the nightly build", "echo: check the nightly build"] * 2
        )
        assert list(fake_telegram.topics[GROUP_ID]) == [topic]
        general = [m.text for m in fake_telegram.bot_messages(GROUP_ID) if m.thread is None]
        assert not [text for text in general if "check the nightly build" in text]
    # the entry leaves the file: said in its topic, which is closed
    async with configured(fake_telegram, tmp_path, clock, project="") as tg:
        await tg.bot_message(
            GROUP_ID,
            lambda m: (
                m.text == "⏰ Schedule nightly deleted by the config file: no more runs come."
            ),
            thread=topic,
        )
        await fake_telegram.wait_for(lambda: topic in fake_telegram.closed_topics[GROUP_ID] or None)
        assert await tg.gateway.store.schedules.of_project("demo") == []


async def test_a_config_schedule_the_bot_may_not_give_a_topic_is_not_asked_one_at_each_run(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    """Refused a topic (the bot may not manage the forum's topics), the config file's
    schedule runs in the conversation the file names, and its next runs do not ask again."""
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    async with configured(fake_telegram, tmp_path, clock, project=NIGHTLY) as tg:
        await answer(tg, ALICE, "hello general", "echo: hello general", chat=GROUP)
        for night, runs in ((28, 1), (29, 2)):
            await tick(tg, clock, datetime(2026, 3, night, 0, 0, tzinfo=UTC))

            def ran(runs: int = runs) -> bool | None:
                return tg.texts(GROUP_ID).count("echo: check the nightly build") == runs or None

            await fake_telegram.wait_for(ran)
        assert len(fake_telegram.calls_to("createForumTopic")) == 1
        assert not fake_telegram.topics.get(GROUP_ID)


async def test_a_schedule_deleted_says_so_in_its_topic_which_is_closed(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with scheduled(fake_telegram, tmp_path, telegram=FORUM) as (tg, _):
        await answer(
            tg, ALICE, "/every 0 9 * * * check the nightly build", "⏰ Schedule", chat=GROUP
        )
        [topic] = fake_telegram.topics[GROUP_ID]
        gone = await answer(tg, ALICE, "/unschedule S1", "Schedule S1", chat=GROUP)
        assert gone.text == "Schedule S1 deleted: it runs no more."
        said = await tg.bot_message(
            GROUP_ID, lambda m: m.text.startswith("⏰ Schedule S1 deleted"), thread=topic
        )
        assert said.text == "⏰ Schedule S1 deleted by @alice: no more runs come."
        assert fake_telegram.closed_topics[GROUP_ID] == {topic}


async def test_a_deleted_schedules_topic_is_left_open_where_the_bot_may_not_close_it(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with scheduled(fake_telegram, tmp_path, telegram=FORUM) as (tg, _):
        await answer(
            tg, ALICE, "/every 0 9 * * * check the nightly build", "⏰ Schedule", chat=GROUP
        )
        [topic] = fake_telegram.topics[GROUP_ID]
        fake_telegram.make_admin(GROUP_ID, can_manage_topics=False)
        gone = await answer(tg, ALICE, "/unschedule S1", "Schedule S1", chat=GROUP)
        assert gone.text == "Schedule S1 deleted: it runs no more."
        said = await tg.bot_message(
            GROUP_ID, lambda m: m.text.startswith("⏰ Schedule S1 deleted"), thread=topic
        )
        assert said.text == "⏰ Schedule S1 deleted by @alice: no more runs come."
        assert fake_telegram.calls_to("closeForumTopic")  # asked, refused: left open
        assert fake_telegram.closed_topics[GROUP_ID] == set()
