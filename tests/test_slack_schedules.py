"""Scheduled work on the fake Slack with the real slack_sdk (issue 35): a schedule a person
makes there reads its times in their Slack time zone (``users.info``'s ``tz``), which wins
over the project's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack
from tests.slack_harness import ALICE, on_slack, slack_config
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
