"""A message typed in a thread while a card there waits for a decision, on Slack with the
scripted agent: the first is told in full that it is queued and not a decision, the next
ones get a reaction (✍, ``reactions.add``), which notifies nobody, instead of a reply; an app
without the reactions:write scope gets the short reply instead."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from platforms.slack.platform import QUEUED_REACTION, SLACK_LIMITS
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import BOT_USER_ID, SCOPES, FakeSlack, Posted
from tests.slack_harness import ALICE, GENERAL, OnSlack, on_slack, read, slack_config

pytestmark = pytest.mark.timeout(60)

QUEUED_TEXT = "✍ Queued for the agent."


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def app_texts(slack: OnSlack, thread: str) -> list[str]:
    """The app's messages in the thread without buttons, as read."""
    return [
        read(m.seen)
        for m in slack.fake.replies(GENERAL, thread)
        if m.from_bot and not m.labels and not m.blocks
    ]


async def card_and_first_notice(slack: OnSlack) -> tuple[Posted, Posted]:
    said = await slack.mention(ALICE, "approve")
    card = await slack.card(GENERAL, said.ts)
    await slack.fake.say(ALICE, GENERAL, "also check the tests", thread_ts=said.ts)
    await slack.fake.wait_for(
        lambda: any(t.startswith("Queued as a message") for t in app_texts(slack, said.ts))
    )
    return said, card


async def test_a_message_queued_behind_a_card_gets_a_reaction_not_a_reply(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said, card = await card_and_first_notice(slack)
        more = await fake.say(ALICE, GENERAL, "and the docs", thread_ts=said.ts)
        await fake.wait_for(lambda: more.reactions)
        assert more.reactions == {QUEUED_REACTION: [BOT_USER_ID]}
        assert QUEUED_REACTION == "writing_hand"  # ✍, as on Telegram
        await slack.click(ALICE, card, "Allow once")
        await fake.wait_for(lambda: not card.labels)
        texts = app_texts(slack, said.ts)
    assert len([t for t in texts if t.startswith("Queued as a message")]) == 1
    assert QUEUED_TEXT not in texts
    assert more.reactions == {QUEUED_REACTION: [BOT_USER_ID]}  # "noted" stays true once it ran
    assert fake.refused == []


async def test_without_reactions_write_the_queued_mark_is_a_short_reply(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "work").mkdir()
    caplog.set_level(logging.WARNING, logger="platforms.slack.platform")
    async with FakeSlack(scopes=SCOPES - {"reactions:write"}) as fake:
        config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
        launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
        async with on_slack(config, fake, launcher) as slack:
            said, _ = await card_and_first_notice(slack)
            for text in ("and the docs", "and the changelog"):
                await fake.say(ALICE, GENERAL, text, thread_ts=said.ts)
            await fake.wait_for(lambda: app_texts(slack, said.ts).count(QUEUED_TEXT) == 2)
        assert fake.refused.count(("reactions.add", "missing_scope")) == 1  # not asked again
    said_in_log = [r.getMessage() for r in caplog.records if "reactions:write" in r.getMessage()]
    assert len(said_in_log) == 1, said_in_log


async def test_the_notice_names_the_command_as_a_thread_takes_it_and_that_decides(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """Slack runs no slash command in a thread: the notice says "@app /approve ID" with the
    app's real mention (``<@U…>``, read as its name) and the request's own id, never
    ``/agent approve``; written in the thread as said, it decides the card."""
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said, card = await card_and_first_notice(slack)
        [notice] = [t for t in app_texts(slack, said.ts) if t.startswith("Queued as a message")]
        found = re.search(
            rf"or <@{BOT_USER_ID}> /approve (\w+), <@{BOT_USER_ID}> /deny \1\.$", notice
        )
        assert found is not None, notice
        assert "/agent" not in notice
        await slack.mention(ALICE, f"/approve {found[1]}", thread_ts=said.ts)
        await fake.wait_for(lambda: not card.labels)
        assert "by @alice" in read(card.seen)  # decided by the command, once
    assert fake.refused == []
