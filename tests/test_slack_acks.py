"""A Slack envelope is acked once its effect is committed to the ledger (issue 19: with
several hosts on one app, a host that dies before that lets Slack give it to another). The
whole gateway on the fake Slack with the scripted agent, its SQLite ledger held by another
connection (``LedgerLock``) so that the commit waits."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store.store import DATABASE_FILE
from platforms.slack.platform import SLACK_LIMITS
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack, Posted
from tests.slack_harness import (
    ALICE,
    DEADLINE,
    GENERAL,
    LedgerLock,
    OnSlack,
    on_slack,
    read,
    slack_config,
)

pytestmark = pytest.mark.timeout(60)
SECRET = "a-fake-signing-secret"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def echoes(slack: OnSlack, thread: str, text: str) -> list[Posted]:
    return [
        m
        for m in slack.fake.replies(GENERAL, thread)
        if m.from_bot and read(m.seen) == f"echo: {text}"
    ]


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_a_message_is_acked_once_queued_and_its_retry_past_3_s_is_taken_once(
    fake: FakeSlack, tmp_path: Path, mode: str
) -> None:
    """Socket Mode: the ack; HTTP: the response to Slack's POST (its retry carries
    ``X-Slack-Retry-Num``)."""
    (tmp_path / "work").mkdir()
    http = f'mode = "http"\nsigning_secret = "{SECRET}"\n' if mode == "http" else ""
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work", slack=http)
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    listening = None
    if mode == "http":
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
    async with on_slack(config, fake, launcher, http_socket=listening) as slack:
        if listening is not None:
            async with asyncio.timeout(DEADLINE):
                await slack.slack.receiving()
            url = f"http://127.0.0.1:{listening.getsockname()[1]}/slack/events"
            assert await fake.use_request_url(url, SECRET)
        said = await slack.mention(ALICE, "hello")  # the session and its thread
        await fake.wait_for(lambda: echoes(slack, said.ts, "hello"))
        lock = LedgerLock(tmp_path / "data" / DATABASE_FILE, 4.0)
        lock.start()
        await lock.taken.wait()
        before = len(fake.delivered("message"))
        await slack.mention(ALICE, "again", thread_ts=said.ts)
        [message] = [
            d for d in fake.delivered("message")[before:] if not d.payload["event"].get("bot_id")
        ]
        await message.settled()
        assert lock.releasing.is_set(), "acked before the ledger could take it"
        assert message.state == "acked"
        # not acked within Slack's 3 s: given again (the first's late ack counted late)
        assert [a.number for a in message.attempts] == [0, 1]
        if mode == "socket":
            await fake.wait_for(lambda: fake.late_acks)
        await fake.wait_for(lambda: echoes(slack, said.ts, "again"))
        # the ledger took the message once: one turn, one answer (a second would come
        # before the answer to the next message, queued behind it)
        await slack.mention(ALICE, "later", thread_ts=said.ts)
        await fake.wait_for(lambda: echoes(slack, said.ts, "later"))
        assert len(echoes(slack, said.ts, "again")) == 1


async def test_a_click_is_acked_once_its_decision_is_committed(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "approve")
        card = await slack.card(GENERAL, said.ts)
        lock = LedgerLock(tmp_path / "data" / DATABASE_FILE, 1.0)
        lock.start()
        await lock.taken.wait()
        click = await fake.click(ALICE, card, "Allow once")
        await click.settled()
        assert lock.releasing.is_set(), "acked before the decision could be committed"
        assert click.state == "acked" and len(click.attempts) == 1  # within Slack's 3 s
        assert fake.late_acks == []
        await fake.wait_for(lambda: not card.labels and "Approved" in card.seen)
        assert [d.action_id for d in launcher.received] == ["accept"]


async def test_a_message_being_taken_when_the_gateway_stops_is_acked_before_the_socket_closes(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        held = fake.hold_next("users.info")  # the message is being taken
        said = await slack.mention(ALICE, "hello")
        [message] = [d for d in fake.delivered("message") if d.payload["event"]["ts"] == said.ts]
        await held.reached.wait()
        stopping = asyncio.create_task(slack.slack.stop_input())
        await asyncio.sleep(0)  # a turn of the loop: the stop begins (no time waited)
        assert fake.connected == 1  # still open while the work is finished
        held.release()
        await stopping
        await message.settled()
        assert message.state == "acked" and len(message.attempts) == 1
        assert fake.connected == 0 and fake.late_acks == []
        await fake.wait_for(lambda: echoes(slack, said.ts, "hello"))
