"""What Slack refuses for good (an archived channel, a revoked token, a message it will no
longer edit), through the gateway with the scripted agent: said once in the log and at the
top of the web console, never retried, the card copy marked failed."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store.records import CardCopy, CopyState
from platforms.console.config import ConsoleConfig
from platforms.console.platform import ConsolePlatform
from platforms.slack.platform import SLACK_LIMITS
from tests.console_harness import client
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack
from tests.slack_harness import ALICE, GENERAL, OnSlack, on_slack, slack_config

pytestmark = pytest.mark.timeout(60)

WITH_CONSOLE = """
[projects.demo.auth.local]
allow_from = ["alice"]
approvers = ["alice"]
"""


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def console_page(console: ConsolePlatform) -> str:
    async with client() as http, http.get(console.login_url) as response:
        assert response.status == 200
        return await response.text()


def problems_shown(page: str) -> list[str]:
    found = re.search(r'<section class="problems" role="alert"[^>]*>(.*?)</section>', page, re.S)
    if found is None:
        return []
    return [re.sub(r"<[^>]+>", "", item) for item in re.findall(r"<li>(.*?)</li>", found[1])]


async def failed_copies(slack: OnSlack, count: int) -> list[CardCopy]:
    """The ledger's failed card copies, once there are ``count`` (each look is a read of the
    ledger, answered: no sleeping)."""
    async with asyncio.timeout(30):
        while len(failed := await slack.gateway.store.cards.list_failed()) < count:
            pass
    return failed


async def test_an_archived_channel_is_said_once_in_the_log_and_on_the_console(
    fake: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        project=WITH_CONSOLE,
        slack='\n[platforms.console]\nidentity = "local:alice"\n',
    )
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None
    console = ConsolePlatform(settings, announce=io.StringIO())
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    caplog.set_level(logging.ERROR, logger="platforms.slack.outbox")
    async with on_slack(config, fake, launcher, console=console) as slack:
        assert problems_shown(await console_page(console)) == []
        said = await slack.mention(ALICE, "approve")
        card = await slack.card(GENERAL, said.ts)
        fake.archive(GENERAL)
        # the clicker's answer, the card's edit, the turn's text: all refused
        await fake.click(ALICE, card, "Allow once")
        await fake.wait_for(lambda: launcher.received)
        await fake.wait_for(lambda: ("chat.update", "is_archived") in fake.refused)
        failed = await failed_copies(slack, 1)
        shown = problems_shown(await console_page(console))
    said_in_log = [r.getMessage() for r in caplog.records if "is_archived" in r.getMessage()]
    assert len(said_in_log) == 1, said_in_log
    assert f"in channel {GENERAL} for good (is_archived)" in said_in_log[0]
    assert len([r for r in fake.refused if r[1] == "is_archived"]) > 1  # said once for all
    assert said_in_log[0].endswith("the channel is archived.")
    assert len(shown) == 1 and shown[0].endswith(said_in_log[0]), shown  # after its time
    assert card.labels  # Slack kept the card as it was: nothing more could be done there
    assert all(c.state is CopyState.FAILED and "is_archived" in (c.error or "") for c in failed)


async def test_a_card_copy_refused_for_good_is_not_offered_again_when_slack_is_back(
    fake: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "work").mkdir()
    fake.add_channel("C0OTHER", "other", members={ALICE.id})
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    caplog.set_level(logging.INFO, logger="gateway.sessions.engine")
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "approve")
        locked = await slack.card(GENERAL, said.ts)
        fake.lock(locked)  # Slack will never let the app edit this message
        await fake.click(ALICE, locked, "Allow once")
        await fake.wait_for(lambda: ("chat.update", "cant_update_message") in fake.refused)
        elsewhere = await slack.mention(ALICE, "approve", channel="C0OTHER")
        archived = await slack.card("C0OTHER", elsewhere.ts)
        fake.archive("C0OTHER")  # nor post nor edit anything there
        await fake.click(ALICE, archived, "Deny")
        await fake.wait_for(lambda: ("chat.update", "is_archived") in fake.refused)
        await failed_copies(slack, 2)
        asked = len(fake.calls_to("chat.update"))
        # what the platform says once Slack answers again after an outage
        await slack.gateway.on_platform_back("slack")
        assert await slack.gateway.broker.resend_failed() == 0
        assert len(fake.calls_to("chat.update")) == asked  # neither was asked again
        assert len(await slack.gateway.store.cards.list_failed()) == 2  # still failed
    assert [r for r in caplog.records if "is back" in r.getMessage()] == []  # no resend said
    assert locked.labels and archived.labels  # as Slack kept them
