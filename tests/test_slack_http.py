"""Slack in HTTP mode (bolt's web_app on the gateway's own aiohttp runner: every request's
signature checked), and the app manifest a new user pastes into Slack's app page."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from platforms.slack.manifest import BOT_EVENTS, manifest
from platforms.slack.platform import SLACK_LIMITS
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack, Pacing
from tests.slack_harness import ALICE, DEADLINE, GENERAL, on_slack, read, slack_config
from tests.test_platform_registry import ROOT

pytestmark = pytest.mark.timeout(60)
SECRET = "a-fake-signing-secret"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(pacing=Pacing(event_retry_delays=(0.0, 0.0, 0.0))) as fake:
        yield fake


async def test_http_mode_takes_signed_posts_only_and_a_click_decides(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = slack_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        slack=f'mode = "http"\nsigning_secret = "{SECRET}"\n',
    )
    launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    url = f"http://127.0.0.1:{port}/slack/events"
    async with on_slack(config, fake, launcher, http_socket=listening) as slack:
        async with asyncio.timeout(DEADLINE):
            await slack.slack.receiving()
        assert not await fake.use_request_url(url, "not-the-secret")
        assert await fake.use_request_url(url, SECRET)
        said = await slack.mention(ALICE, "approve")
        card = await slack.card(GENERAL, said.ts)
        answer = await slack.click(ALICE, card, "Allow once")
        assert read(answer.text).startswith("Approved")
        await fake.wait_for(lambda: not card.labels and "Approved" in card.seen)

        fake.signing_secret = "rotated-elsewhere"  # a forger's signature
        forged = await fake.say(ALICE, GENERAL, "<@U0BOT> approve 2")
        delivery = [d for d in fake.delivered("message") if d.payload["event"]["ts"] == forged.ts]
        await delivery[0].settled()
        assert delivery[0].state == "failed"
        assert {a.status for a in delivery[0].attempts} == {401}
    assert [d.action_id for d in launcher.received] == ["accept"]
    assert fake.replies(GENERAL, forged.ts) == []


def test_the_manifest_asks_for_what_the_platform_uses() -> None:
    socket_mode = manifest()
    assert socket_mode["settings"]["socket_mode_enabled"] is True
    assert socket_mode["settings"]["interactivity"]["is_enabled"] is True
    assert set(socket_mode["settings"]["event_subscriptions"]["bot_events"]) == set(BOT_EVENTS)
    assert {"chat:write", "commands", "files:write", "im:write"} <= set(
        socket_mode["oauth_config"]["scopes"]["bot"]
    )
    http = manifest(request_url="https://gw.example.com/slack/events")
    assert http["settings"]["socket_mode_enabled"] is False
    assert http["settings"]["event_subscriptions"]["request_url"].endswith("/slack/events")

    done = subprocess.run(
        [sys.executable, "-m", "gateway", "slack-manifest", "--command", "/gw"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    printed = json.loads(done.stdout)
    assert printed["features"]["slash_commands"][0]["command"] == "/gw"
