"""Scheduled work on the fake Slack with the real slack_sdk (issue 35): a schedule a person
makes there reads its times in their Slack time zone (``users.info``'s ``tz``), which wins
over the project's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.clock import FileClock
from gateway.domain import ConversationRef
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import TEAM_ID, FakeSlack, Pacing
from tests.slack_harness import ALICE, GENERAL, OnSlack, on_slack, read, slack_config
from tests.test_slack_sessions import answered_in_thread, command_answer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


async def test_a_schedule_made_on_slack_reads_its_times_in_the_persons_zone(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    async with on_slack(config, fake, ScriptedLauncher(REQUESTS)) as slack:
        thread = await answered_in_thread(slack, "hello")
        made = await command_answer(
            slack, thread, "/every 0 9 * * 1-5 check CI", "⏰ Schedule S1 made"
        )
        assert made.startswith("⏰ Schedule S1 made: every 0 9 * * 1-5 (Europe/London), next run")
        [schedule] = await slack.gateway.store.schedules.of_project("demo")
        assert (schedule.zone, schedule.creator.user_id) == ("Europe/London", ALICE.id)
        asked = [params.get("user") for name, params in fake.calls if name == "users.info"]
        assert ALICE.id in asked


async def test_a_schedule_gets_a_thread_of_its_own_and_the_persons_thread_stays_theirs(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    clock = FileClock(tmp_path / "clock")
    clock.set(datetime(2026, 6, 1, 6, 0, tzinfo=UTC))  # 07:00 in London
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(REQUESTS)
    async with on_slack(config, fake, launcher, schedule_clock=clock) as slack:
        thread = await answered_in_thread(slack, "hello")
        await launcher.turn_over.wait()
        mine = ConversationRef(platform="slack", space=TEAM_ID, channel=GENERAL, thread=thread.ts)
        working = await slack.gateway.store.sessions.lookup(mine)
        assert working is not None
        made = await command_answer(slack, thread, "/every 0 9 * * * check CI", "⏰ Schedule")
        roots = [m for m in fake.messages(GENERAL) if m.from_bot]
        [root] = [m for m in roots if read(m.text) == "⏰ S1: check CI"]
        link = f"https://slack.com/archives/{GENERAL}/p{root.ts.replace('.', '')}"
        assert made.splitlines()[2] == f"Its runs speak in a thread of its own: {link}"

        def in_root() -> list[str]:
            return [read(m.text) for m in fake.replies(GENERAL, root.ts) if m.from_bot]

        assert in_root() == [
            "⏰ Schedule S1's runs speak here, each in a fresh session: what its agent asks"
            " waits here for the project's approvers."
        ]
        clock.set(datetime(2026, 6, 1, 8, 0, tzinfo=UTC))  # 09:00 in London
        assert slack.gateway.scheduler is not None
        await slack.gateway.scheduler.tick()
        await fake.wait_for(lambda: "echo: check CI" in in_root() or None, 30.0)
        assert in_root()[1] == "⏰ scheduled: check CI"
        # the person's thread shows their session still, and their next message goes there
        await slack.mention(ALICE, "and mine", thread_ts=thread.ts)
        await fake.wait_for(
            lambda: (
                any(read(m.text) == "echo: and mine" for m in fake.replies(GENERAL, thread.ts))
                or None
            ),
            30.0,
        )
        still = await slack.gateway.store.sessions.lookup(mine)
        assert still is not None and still.id == working.id
        theirs = [read(m.text) for m in fake.replies(GENERAL, thread.ts)]
        assert "⏰ scheduled: check CI" not in theirs and "echo: check CI" not in theirs
        # deleted from the person's thread: said in the schedule's, so its readers know
        gone = await command_answer(slack, thread, "/unschedule S1", "Schedule S1")
        assert gone == "Schedule S1 deleted: it runs no more."
        await fake.wait_for(
            lambda: in_root()[-1] == "⏰ Schedule S1 deleted by @alice: no more runs come." or None,
            30.0,
        )


NIGHTLY = f"""
[[projects.demo.schedule]]
name = "nightly"
cron = "0 0 * * *"
time_zone = "UTC"
text = "check CI"
channel = "slack:#{TEAM_ID}/{GENERAL}"
creator = "slack:{ALICE.id}"
"""


async def test_a_config_schedule_speaks_in_one_thread_across_a_restart_and_says_its_end(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    clock = FileClock(tmp_path / "clock")
    clock.set(datetime(2026, 6, 1, 6, 0, tzinfo=UTC))

    def started(project: str) -> AbstractAsyncContextManager[OnSlack]:
        config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work", project=project)
        return on_slack(config, fake, ScriptedLauncher(REQUESTS), schedule_clock=clock)

    def roots() -> list[str]:
        return [m.ts for m in fake.messages(GENERAL) if m.from_bot and "nightly" in read(m.text)]

    def in_root(ts: str) -> list[str]:
        return [read(m.text) for m in fake.replies(GENERAL, ts) if m.from_bot]

    for day in (2, 3):  # a run a day, the gateway started again between them
        async with started(NIGHTLY) as slack:
            clock.set(datetime(2026, 6, day, 0, 0, tzinfo=UTC))
            assert slack.gateway.scheduler is not None
            await slack.gateway.scheduler.tick()
            [root] = roots()
            await fake.wait_for(
                lambda r=root, d=day: in_root(r).count("echo: check CI") == d - 1 or None, 30.0
            )
    [top] = [m for m in fake.messages(GENERAL) if m.from_bot]
    assert read(top.text) == "⏰ nightly: check CI"
    runs = [text for text in in_root(root) if "check CI" in text]
    assert runs == ["⏰ scheduled: check CI", "echo: check CI"] * 2
    async with started("") as slack:  # the entry leaves the file: said in its thread
        await fake.wait_for(
            lambda: (
                "⏰ Schedule nightly deleted by the config file: no more runs come."
                in in_root(root)
                or None
            ),
            30.0,
        )
        assert roots() == [root]


async def test_a_press_answered_on_slack_spells_the_commands_it_names_as_slack_takes_them(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """A thread takes no slash command: a press's answer names ``/schedules`` as it is typed
    there ("@gateway /schedules"), as a reply to a typed command does."""
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    async with on_slack(config, fake, ScriptedLauncher(REQUESTS)) as slack:
        thread = await answered_in_thread(slack, "hello")
        await command_answer(slack, thread, "/every 0 9 * * 1-5 check CI", "⏰ Schedule S1 made")
        await command_answer(slack, thread, "/schedules", "Schedules of project demo")
        card = await slack.card(GENERAL, thread.ts, lambda m: "Pause" in m.labels)
        await command_answer(slack, thread, "/unschedule S1", "Schedule S1 deleted")
        answer = await slack.click(ALICE, card, "Pause")
    assert answer.text == "No schedule S1: @gateway /schedules lists this project's."


async def test_a_command_slack_delivers_again_runs_once(tmp_path: Path) -> None:
    """Slack delivers an event again when its ack is late (3 s; here 10 ms, and at once): a
    command's message, answered before its ack, is taken once, however often it comes."""
    (tmp_path / "work").mkdir()
    impatient = Pacing(ack_timeout=0.01, event_retry_delays=(0.0, 0.0, 0.0))
    async with FakeSlack(pacing=impatient) as fake:
        config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
        async with on_slack(config, fake, ScriptedLauncher(REQUESTS)) as slack:
            thread = await answered_in_thread(slack, "hello")
            await command_answer(slack, thread, "/every 0 9 * * 1-5 check CI", "⏰ Schedule S1")
            await command_answer(slack, thread, "/schedules", "Schedules of project demo")
            made = await slack.gateway.store.audit.entries(event="schedule.created")
            said = [read(m.text) for m in fake.replies(GENERAL, thread.ts) if m.from_bot]
        again = [d for d in fake.deliveries if d.type == "message" and len(d.attempts) > 1]
    assert again  # Slack did deliver messages again
    assert len(made) == 1
    assert len([text for text in said if text.startswith("⏰ Schedule S")]) == 1
