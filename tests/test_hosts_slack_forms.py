"""A Slack form answered through a host that did not send its card (issue 19, design point
8): Socket Mode gives each event to one connection, so the "Answer…" click and the modal's
submit may reach any host. Two gateway hosts on the real PostgreSQL cluster, each with the
real Slack platform connected to the fake Slack, which gives every event to the newest
connection (host b); the project runs on host a, which sends the card."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.domain import Answer
from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.form_drafts import LedgerForms
from platforms.registry import parse_config
from platforms.slack.config import SlackConfig
from platforms.slack.platform import SLACK_LIMITS, SlackPlatform
from tests.pg_cluster import PgCluster
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import FakeSlack
from tests.slack_harness import ALICE, GENERAL, OnSlack, slack_config_text

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@asynccontextmanager
async def two_slack_hosts(
    fake: FakeSlack, tmp_path: Path, dsn: str
) -> AsyncIterator[tuple[tuple[OnSlack, ScriptedLauncher], tuple[OnSlack, ScriptedLauncher]]]:
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    (tmp_path / "work").mkdir()
    text = slack_config_text(fake, tmp_path / "data", work_dir=tmp_path / "work")
    shared = f"[gateway]\nstore = {json.dumps(dsn)}\nhmac_key_file = {json.dumps(str(key))}\n"
    text = text.replace("[gateway]\n", shared, 1)
    text = text.replace("[projects.demo]\n", '[projects.demo]\nhost = "a"\n', 1)
    config = parse_config(text, "hosts-slack.toml")
    settings = config.platforms.get("slack", SlackConfig)
    assert settings is not None
    hosts = []
    async with AsyncExitStack() as stack:
        for number, name in enumerate("ab", start=1):
            slack = SlackPlatform(settings, limits=SLACK_LIMITS)
            await stack.enter_async_context(connected({"slack": slack}))
            launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
            gateway = await stack.enter_async_context(
                Gateway(
                    config,
                    platforms={"slack": slack},
                    launcher=launcher,
                    data_dir=tmp_path / f"data-{name}",
                    host=name,
                )
            )
            await fake.wait_for(lambda n=number: fake.connected >= n or None)  # type: ignore[misc]
            hosts.append((OnSlack(gateway=gateway, slack=slack, fake=fake), launcher))
        yield hosts[0], hosts[1]


async def test_a_form_opened_and_submitted_through_the_host_that_did_not_send_its_card(
    fake: FakeSlack, tmp_path: Path, pg_database: PgCluster
) -> None:
    async with two_slack_hosts(fake, tmp_path, pg_database.dsn) as ((a, on_a), (b, on_b)):
        said = await a.mention(ALICE, "form")  # to b (the newest connection), run by a
        card = await a.card(GENERAL, said.ts)
        assert b.slack.forms.peek((GENERAL, card.ts)) is None  # b never had the card
        await fake.click(ALICE, card, "Answer…")  # to b
        modal = await fake.wait_for(lambda: fake.modals(ALICE))
        assert isinstance(b.slack.forms, LedgerForms)
        assert b.slack.forms.peek((GENERAL, card.ts)) is not None  # drawn from the ledger
        assert [m.title for m in modal] == ["The agent asks"]
        sent = await fake.submit(ALICE, {"Env": "Green", "Langs": ["Red", "Blue"], "Note": "hi"})
        assert sent is not None
        await sent.settled()
        await fake.wait_for(lambda: not card.labels and "Answered" in card.seen)
        await fake.wait_for(lambda: on_a.received or None)
        assert [d.answers for d in on_a.received] == [
            {
                "env": Answer(option_ids=("green",)),
                "langs": Answer(option_ids=("red", "blue")),
                "note": Answer(other="hi"),
            }
        ]
        assert on_b.received == []
