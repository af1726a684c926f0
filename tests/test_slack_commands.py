"""Commands on Slack, with the real Codex app-server: Slack has no slash commands in threads
and sends ``/agent stop`` from a channel without any thread, so in a channel the person alone
is told to write "@app /stop" in the session's thread, which stops that thread's turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_slack import BOT_USER_ID, FakeSlack, Posted
from tests.slack_harness import ALICE, BOB, GENERAL, OnSlack, on_slack, read, slack_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done; echo found"
STOPPING = "⏹ Stopped by"  # the one notice of a /stop, when the turn has ended


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def said_in(slack: OnSlack, thread: str, start: str) -> Posted | None:
    return next(
        (
            m
            for m in slack.fake.replies(GENERAL, thread)
            if m.from_bot and read(m.seen).startswith(start)
        ),
        None,
    )


async def test_a_command_in_a_channel_points_to_the_thread_where_a_mention_stops_the_turn(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell(WAIT_FOR_GO), message("Found it.")))
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "look for it")
        await fake_slack.wait_for(
            lambda: [m for m in fake_slack.replies(GENERAL, said.ts) if m.from_bot]
        )  # the command runs
        delivery = await fake_slack.slash(ALICE, GENERAL, "/agent", "stop")
        assert delivery is not None
        [hint] = await fake_slack.wait_for(lambda: fake_slack.ephemerals(ALICE, GENERAL))
        assert f"<@{BOT_USER_ID}> /stop" in hint.text  # the app's name, then the command
        assert "thread" in read(hint.text)
        assert fake_slack.ephemerals(BOB) == []  # only the person who typed it
        await delivery.settled()
        assert delivery.state == "acked"
        assert said_in(slack, said.ts, STOPPING) is None  # the channel is no session's place
        assert [m for m in fake_slack.messages(GENERAL) if m.from_bot] == []  # nothing public

        await slack.mention(ALICE, "/stop", thread_ts=said.ts)
        stopped = await fake_slack.wait_for(lambda: said_in(slack, said.ts, STOPPING))
        assert read(stopped.seen).startswith("⏹ Stopped by")
    assert not (codex_home.workspace / "go").exists()
    assert fake_slack.refused == []


async def test_help_in_a_channel_is_shown_to_its_person_with_the_thread_form(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_slack(config, fake_slack):
        await fake_slack.slash(ALICE, GENERAL, "/agent")
        [shown] = await fake_slack.wait_for(lambda: fake_slack.ephemerals(ALICE, GENERAL))
        assert read(shown.text).startswith("Commands:")
        assert f"<@{BOT_USER_ID}> /stop" in shown.text
        dm = fake_slack.dm(ALICE)
        await fake_slack.slash(ALICE, dm.id, "/agent", "status")
        # in a DM the command is the DM's: the gateway answers it there
        reply = await fake_slack.wait_for(
            lambda: [m for m in fake_slack.messages(dm.id) if m.from_bot]
        )
        assert read(reply[0].seen).startswith("No session here yet")
