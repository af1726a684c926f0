"""A channel Slack rate-limits holds up only its own cards (issue 36): the real Codex
app-server against the fake model, the fake Slack answering every write in one channel 429
(Retry-After 5 s) while another channel is paced as ever. The card in the other channel
settles at once; the held one settles once its channel is let go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_slack import FakeSlack, Posted
from tests.slack_harness import ALICE, BOB, GENERAL, on_slack, read, slack_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

OTHER = "C0OTHER"
RETRY_AFTER = 5


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.add_channel(OTHER, "other", members={ALICE.id, BOB.id})
        yield fake


def settled(card: Posted) -> bool:
    """The card as it ends: its buttons gone, the decision written to the agent."""
    return not card.labels and "sent to the agent" in card.seen


async def test_a_card_in_another_channel_settles_while_a_rate_limited_channel_waits(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue(
        (shell("touch alice.txt", escalated=True), message("Done for Alice.")),
        (shell("touch bob.txt", escalated=True), message("Done for Bob.")),
    )
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create alice.txt")
        alice_card = await slack.card(GENERAL, said.ts)
        asked = await slack.mention(BOB, "please create bob.txt", channel=OTHER)
        bob_card = await slack.card(OTHER, asked.ts)

        fake_slack.hold(GENERAL, retry_after=RETRY_AFTER)
        try:
            # (its ephemeral answer is a write in GENERAL too: held with the card)
            await fake_slack.click(ALICE, alice_card, "Allow once")
            await fake_slack.wait_for(
                lambda: any(m == "chat.update" and c == GENERAL for m, c, _ in fake_slack.too_many)
            )
            await slack.click(BOB, bob_card, "Allow once")
            # GENERAL refuses every write until let go: Bob's card did not wait for Alice's
            await fake_slack.wait_for(lambda: settled(bob_card))
            assert "by @bob" in read(bob_card.seen)
            assert alice_card.labels  # still the card as it was asked
            assert GENERAL in {c.channel for c in slack.gateway.broker.refreshing()}
        finally:
            fake_slack.release(GENERAL)
        await fake_slack.wait_for(lambda: settled(alice_card), 8 * RETRY_AFTER)
        assert "by @alice" in read(alice_card.seen)
        while slack.gateway.broker.refreshing():  # each lane ends once its cards are drawn
            await slack.gateway.broker.refreshed()
    assert all(channel != OTHER for _, channel, _ in fake_slack.too_many)
