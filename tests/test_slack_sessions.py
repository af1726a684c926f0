"""``/sessions`` and ``/switch`` on the fake Slack (issue 31), with the scripted
agent (tests/scripted_launcher.py) and the real slack_sdk: sessions follow threads there, so
``@app /switch N`` in one thread answers with a link to the other session's thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack, Posted
from tests.slack_harness import ALICE, GENERAL, OnSlack, on_slack, read, slack_config

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


async def answered_in_thread(slack: OnSlack, text: str) -> Posted:
    said = await slack.mention(ALICE, text)
    await slack.fake.wait_for(
        lambda: next(
            (m for m in slack.fake.replies(GENERAL, said.ts) if f"echo: {text}" in read(m.text)),
            None,
        ),
        30.0,
    )
    return said


async def command_answer(slack: OnSlack, thread: Posted, text: str, starts: str) -> str:
    """What the app answers ``@app text`` with in the session's thread, as a person reads it
    (Slack does not tell the app which thread a slash command comes from)."""
    await slack.mention(ALICE, text, thread_ts=thread.ts)

    def find() -> str | None:
        shown = [read(m.text) for m in slack.fake.replies(GENERAL, thread.ts) if m.from_bot]
        return next((t for t in shown if t.startswith(starts)), None)

    return await slack.fake.wait_for(find, 30.0)


async def test_agent_switch_links_to_the_sessions_thread(fake: FakeSlack, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    async with on_slack(config, fake, ScriptedLauncher(REQUESTS)) as slack:
        first = await answered_in_thread(slack, "first task")
        second = await answered_in_thread(slack, "second task")
        listing = (await command_answer(slack, second, "/sessions", "Sessions")).splitlines()
        assert listing[0] == "Sessions 1 to 2 of 2, newest first:"
        assert "listed only" not in "\n".join(listing)
        switched = await command_answer(slack, second, "/switch 2", "Session ")
        link = f"https://slack.com/archives/{GENERAL}/p{first.ts.replace('.', '')}"
        assert link in switched and switched.endswith("Nothing was changed here.")
