"""A thread Discord rate-limits holds up only its own cards (issue 36): the real Codex
app-server against the fake model, the fake Discord answering every write in one thread 429
(retry_after 5 s) while another thread is paced as ever. The card in the other thread
settles at once; the held one settles once its thread is let go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import card_in, discord_gateway_config, on_discord, seen
from tests.servers.discord_records import Sent
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

RETRY_AFTER = 5.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def settled(card: Sent) -> bool:
    """The card as it ends: its buttons gone, the decision written to the agent."""
    return not card.labels and "sent to the agent" in seen(card)


async def test_a_card_in_another_thread_settles_while_a_rate_limited_thread_waits(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue(
        (shell("touch first.txt", escalated=True), message("Done first.")),
        (shell("touch second.txt", escalated=True), message("Done second.")),
    )
    config = discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")
    async with on_discord(config) as running:
        said = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> please create first.txt", mentions=(BOT,)
        )
        first = await card_in(fake, said.id)
        again = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> please create second.txt", mentions=(BOT,)
        )
        second = await card_in(fake, again.id)

        fake.hold(said.id, retry_after=RETRY_AFTER)
        try:
            await fake.click(ALICE, first, "Allow once")
            await fake.wait_for(
                lambda: any(m == "PATCH" and said.id in path for m, path, _ in fake.too_many)
            )
            await fake.click(ALICE, second, "Allow once")
            # the first thread refuses every write until let go: this card did not wait
            await fake.wait_for(lambda: settled(second))
            assert first.labels  # still the card as it was asked
            assert said.id in {c.thread or c.channel for c in running.broker.refreshing()}
        finally:
            fake.release(said.id)
        await fake.wait_for(lambda: settled(first), 8 * RETRY_AFTER)
        while running.broker.refreshing():  # each lane ends once its cards are drawn
            await running.broker.refreshed()
    assert not any(again.id in path for _, path, _ in fake.too_many)
