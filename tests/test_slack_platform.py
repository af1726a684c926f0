"""The Slack platform through the gateway, with the scripted agent: a mention starts a session
in its thread, the card is approved by a click acked at once, the clicker is told in an
ephemeral and the card is edited for everyone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from platforms.slack.platform import SLACK_LIMITS
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import BOT_TOKEN, FakeSlack
from tests.slack_harness import ALICE, CAROL, GENERAL, on_slack, read, slack_config

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_a_mention_gets_a_card_in_its_thread_and_a_click_decides(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "approve")
        card = await slack.card(GENERAL, said.ts)
        assert card.thread_ts == said.ts
        assert card.labels == ["Allow once", "Allow for session", "Deny", "Deny and stop"]
        refused = await slack.click(CAROL, card, "Allow once")
        assert read(refused.text) == "You may not decide this request."
        answer = await slack.click(ALICE, card, "Allow once")
        assert read(answer.text).startswith("Approved")
        await fake.wait_for(lambda: not card.labels and "Approved" in card.seen)
        assert [d.action_id for d in launcher.received] == ["accept"]
        assert fake.ephemerals(ALICE, GENERAL) == [answer]  # only the clicker saw it
        for delivery in fake.delivered("block_actions"):
            await delivery.settled()  # the ack may come after the ephemeral it led to
            assert delivery.state == "acked"


async def test_after_a_disconnect_with_a_card_pending_a_click_still_decides(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "approve")
        card = await slack.card(GENERAL, said.ts)
        await fake.disconnect()
        await fake.wait_for(lambda: fake.connections_opened == 2 and fake.connected == 1)
        answer = await slack.click(ALICE, card, "Deny")
        assert read(answer.text).startswith("Denied")
        await fake.wait_for(lambda: not card.labels and "Denied" in card.seen)
    assert [d.action_id for d in launcher.received] == ["decline"]


async def test_a_card_edit_slack_refuses_for_good_is_tried_once(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "approve")
        card = await slack.card(GENERAL, said.ts)
        fake.lock(card)
        await slack.click(ALICE, card, "Allow once")
        await fake.wait_for(lambda: ("chat.update", "cant_update_message") in fake.refused)
        await fake.wait_for(lambda: launcher.received)
    assert fake.refused.count(("chat.update", "cant_update_message")) == 1
    assert card.labels  # Slack kept the old card: nothing more could be done there


def test_the_sdk_loggers_stay_at_warning(fake: FakeSlack, tmp_path: Path) -> None:
    import logging

    from platforms.slack.config import SlackConfig
    from platforms.slack.platform import SlackPlatform

    for name in ("slack_sdk", "slack_bolt"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    settings = config.platforms.get("slack", SlackConfig)
    assert settings is not None
    SlackPlatform(settings)
    assert all(
        logging.getLogger(name).getEffectiveLevel() >= logging.WARNING
        for name in ("slack_sdk", "slack_bolt")
    )


async def test_a_persons_own_session_is_shown_in_their_dm_opened_by_conversations_open(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(
        fake, tmp_path / "data", work_dir=tmp_path / "work", project='scope = "user"'
    )
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    async with on_slack(config, fake, launcher) as slack:
        said = await slack.mention(ALICE, "approve")
        in_thread = await slack.card(GENERAL, said.ts)
        # Alice's DM is not her user id: the platform asked Slack for it
        assert [p.get("users") for p in fake.calls_to("conversations.open")] == [ALICE.id]
        dm = fake.dm(ALICE)
        in_dm = await fake.wait_for(
            lambda: next((m for m in fake.messages(dm.id) if m.from_bot and m.labels), None)
        )
        assert in_dm.labels == in_thread.labels
        answer = await slack.click(ALICE, in_dm, "Allow once")
        assert read(answer.text).startswith("Approved")
        for copy in (in_dm, in_thread):  # every copy edited: decided, no buttons
            await fake.wait_for(lambda c=copy: not c.labels and "Approved" in c.seen)
        assert [d.action_id for d in launcher.received] == ["accept"]
    assert ("conversations.open", "missing_scope") not in fake.refused


async def test_without_im_write_the_session_is_shown_where_it_started_only(
    tmp_path: Path,
) -> None:
    from tests.servers.fake_slack import SCOPES

    (tmp_path / "work").mkdir()
    async with FakeSlack(scopes=SCOPES - {"im:write"}) as fake:
        config = slack_config(
            fake, tmp_path / "data", work_dir=tmp_path / "work", project='scope = "user"'
        )
        launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
        async with on_slack(config, fake, launcher) as slack:
            said = await slack.mention(ALICE, "approve")
            card = await slack.card(GENERAL, said.ts)
            assert ("conversations.open", "missing_scope") in fake.refused
            await slack.click(ALICE, card, "Allow once")
            await fake.wait_for(lambda: not card.labels and "Approved" in card.seen)


async def test_a_refusal_for_good_is_said_once_per_channel_and_its_card_copy_is_failed(
    fake: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3
    from contextlib import closing

    from gateway.store.store import DATABASE_FILE

    (tmp_path / "work").mkdir()
    fake.add_channel("C0OTHER", "other", members={ALICE.id})
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    caplog.set_level("ERROR", logger="platforms.slack.outbox")
    async with on_slack(config, fake, launcher) as slack:
        for n, (channel, prompt) in enumerate(
            ((GENERAL, "approve"), (GENERAL, "approve 2"), ("C0OTHER", "approve 3")), 1
        ):
            said = await slack.mention(ALICE, prompt, channel=channel)
            card = await slack.card(channel, said.ts)
            fake.lock(card)  # Slack will not let the app edit it any more
            await slack.click(ALICE, card, "Allow once")
            await fake.wait_for(
                lambda n=n: fake.refused.count(("chat.update", "cant_update_message")) == n
            )
            await fake.wait_for(lambda n=n: len(launcher.received) == n)
        async with asyncio.timeout(30):  # each look is a read of the ledger, answered
            while len(await slack.gateway.store.cards.list_failed()) < 3:
                pass
    said = [r.getMessage() for r in caplog.records if "cant_update_message" in r.getMessage()]
    assert len(said) == 2, said  # once in each channel, not once per card nor per process
    assert "channel C0GENERAL" in said[0] and "channel C0OTHER" in said[1]
    assert fake.refused.count(("chat.update", "cant_update_message")) == 3  # never retried
    with closing(sqlite3.connect(tmp_path / "data" / DATABASE_FILE)) as ledger:
        copies = ledger.execute("SELECT channel, state, error FROM interaction_messages").fetchall()
    assert len(copies) == 3
    assert all(
        state == "failed" and "cant_update_message" in error for _, state, error in copies
    ), copies


async def test_a_start_with_the_token_in_slack_bot_token_logs_no_warning(
    fake: FakeSlack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The documented setup (the bot token in SLACK_BOT_TOKEN) starts without a warning: bolt
    read the variable and said the token was unused, at every start, with nothing to do."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    caplog.set_level(logging.WARNING)
    (tmp_path / "work").mkdir()
    config = slack_config(fake, tmp_path / "data", work_dir=tmp_path / "work")
    async with on_slack(config, fake, ScriptedLauncher(requests_for(SLACK_LIMITS))) as slack:
        said = await slack.mention(ALICE, "approve")
        await slack.card(GENERAL, said.ts)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [], warned
