"""Issue 29, "each fact once": what the fake platforms recorded of a Codex command card, from
the real Codex app-server, on Telegram, Slack and Discord (one run each), and the console's
card as the page draws it.

- The content hash is behind "details" (a Telegram spoiler, a Slack context element of its
  own, a Discord field, the console's ``<details>``), never on the status line of a card
  nobody votes on, and never in the notification: Slack's ``text`` says what is asked and of
  whom.
- The decision's time is an instant each reader sees in their own zone: Telegram's
  ``date_time`` entity (its UTC text the fallback), Slack's ``<!date^…>``, Discord's embed
  ``timestamp`` (the footer has no fixed time), the console's ``<time datetime>``.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.codex_requests import open_command_approval
from gateway.domain import Actor, Decision
from gateway.interactions.machine import (
    DecisionFact,
    DeliveryFact,
    DeliveryOutcome,
    InteractionState,
)
from gateway.wording import clock_time
from tests.codex_env import CodexHome
from tests.discord_gateway import card_in, discord_gateway_config, on_discord
from tests.servers.fake_discord import ALICE as DISCORD_ALICE
from tests.servers.fake_discord import BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_slack import FakeSlack
from tests.servers.fake_telegram import FakeTelegram
from tests.slack_harness import ALICE as SLACK_ALICE
from tests.slack_harness import BOB as SLACK_BOB
from tests.slack_harness import GENERAL, on_slack, read, slack_config
from tests.telegram_harness import ALICE as TELEGRAM_ALICE
from tests.telegram_harness import codex_telegram_config, on_telegram
from tests.test_card_surfaces import console_text, interaction

HASH = re.compile(r"content hash [0-9a-f]{10}")


def asking(fake_model: FakeResponses) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))


def around(before: float, unix: int) -> None:
    """``unix`` is the decision's instant: after the click was made, not in the future."""
    assert int(before) <= unix <= time.time() + 1, (before, unix)


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(120)
async def test_telegram_hash_in_a_spoiler_and_the_time_a_date_time_entity(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    asking(fake_model)
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(TELEGRAM_ALICE, "please create hello.txt")
        card = await tg.card(TELEGRAM_ALICE.id)
        # the status line says where it stands, once; the hash is a spoiler under it
        [status] = card.entities_of("italic")
        assert status == "Waiting for a decision"
        [hashed] = card.entities_of("spoiler")
        assert HASH.fullmatch(hashed), card.text
        assert card.text.count("content hash") == 1
        before = time.time()
        await tg.press(TELEGRAM_ALICE, card, "Allow once")
        await tg.fake.wait_for(lambda: card.markup is None and "done" in card.text)
    # the decision's time: a date_time entity, its UTC text the visible fallback
    [entity] = [e for e in card.entities if e["type"] == "date_time"]
    around(before, entity["unix_time"])
    assert entity["date_time_format"] == "t"
    shown = clock_time(datetime.fromtimestamp(entity["unix_time"], UTC))
    assert card.entities_of("date_time") == [shown]
    assert f"by @alice at {shown} · sent to the agent" in card.text
    assert card.entities_of("spoiler") == [hashed]  # the same hash, still a detail


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(120)
async def test_slack_notification_says_what_and_whom_and_the_time_is_slack_date(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    asking(fake_model)
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(SLACK_ALICE, "please create hello.txt")
        card = await slack.card(GENERAL, said.ts)
        # the phone's notification: what is asked and of whom; no hash, no "Waiting for"
        first = card.versions[0].text
        assert "touch hello.txt" in first and first.startswith("Run a command: "), first
        assert first.endswith(f"waiting for <@{SLACK_ALICE.id}> <@{SLACK_BOB.id}>"), first
        assert "content hash" not in first and "Waiting for" not in first
        [context] = [b for b in card.blocks if b["type"] == "context"]
        status, details = (element["text"] for element in context["elements"])
        assert status == "Waiting for a decision"
        assert re.fullmatch(r"Details: content hash [0-9a-f]{10}", details)
        before = time.time()
        await slack.click(SLACK_ALICE, card, "Allow once")
        await slack.fake.wait_for(lambda: not card.labels and "done" in card.seen)
    [context] = [b for b in card.blocks if b["type"] == "context"]
    status, after = (element["text"] for element in context["elements"])
    assert after == details  # the hash: a detail still, the same
    date = re.search(r"<!date\^(\d+)\^\{date_short_pretty\} \{time\}\|(\d\d:\d\d UTC)>", status)
    assert date is not None, status
    around(before, int(date[1]))
    assert date[2] == clock_time(datetime.fromtimestamp(int(date[1]), UTC))
    assert read(status).startswith(f'Approved ("Allow once") by @alice at {date[2]} · ')


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(120)
async def test_discord_hash_a_field_and_the_time_the_embed_timestamp(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_discord: FakeDiscord,
    tmp_path: Path,
) -> None:
    asking(fake_model)
    config = discord_gateway_config(fake_discord, codex_home, codex_bin, tmp_path / "data")
    async with on_discord(config):
        said = await fake_discord.say(
            DISCORD_ALICE,
            fake_discord.general,
            f"<@{BOT.id}> please create hello.txt",
            mentions=(BOT,),
        )
        card = await card_in(fake_discord, said.id)
        [embed] = card.embeds
        assert embed["footer"]["text"] == "Waiting for a decision"
        [details] = [f for f in embed["fields"] if f["name"] == "Details"]
        assert HASH.fullmatch(details["value"])
        assert "timestamp" not in embed  # nothing decided yet: no time to show
        before = time.time()
        await fake_discord.click(DISCORD_ALICE, card, "Allow once")
        await fake_discord.wait_for(
            lambda: not card.labels and "done" in card.embeds[0]["footer"]["text"]
        )
    [embed] = card.embeds
    footer = embed["footer"]["text"]
    assert footer.startswith('Approved ("Allow once") by @alice · sent to the agent'), footer
    assert "UTC" not in footer  # no fixed time: the timestamp beside it is the reader's
    around(before, int(datetime.fromisoformat(embed["timestamp"]).timestamp()))
    assert [f for f in embed["fields"] if f["name"] == "Details"] == [details]


def test_console_time_element_and_hash_in_details() -> None:
    """The console's card: the decision's time a <time datetime> (the page's script shows it
    in the browser's zone; UTC without script), the hash folded under "Details"."""
    request = open_command_approval(
        "rpc:1", {"itemId": "c1", "command": "touch hello.txt", "cwd": "/w", "reason": "why"}
    ).request
    at = datetime(2026, 12, 1, 9, 16, 37, tzinfo=UTC)
    you = Actor(platform="console", user_id="you", display="You")
    decided = interaction(
        request,
        content_hash="5a0426e840" + "0" * 54,
        state=InteractionState.DELIVERED,
        decision=DecisionFact(decision=Decision(action_id=request.actions[0].id), actor=you, at=at),
        delivery=DeliveryFact(outcome=DeliveryOutcome.OK, at=at),
    )
    html, text = console_text(decided)
    status = re.search(r'<p class="status">(.*?)</p>', html)
    assert status is not None
    assert '<time datetime="2026-12-01T09:16:37+00:00">09:16 UTC</time>' in status[1]
    assert "content hash" not in status[1]
    details = '<details class="hash"><summary>Details</summary>content hash 5a0426e840</details>'
    assert details in html
    assert text.count("content hash") == 1
