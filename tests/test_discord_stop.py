"""Discord with the real Codex app-server: ``/stop`` run as a slash command in a session's
thread while its card waits stops the turn, once: the command is answered at once to its
person alone, the thread is told who stopped it, and the card loses its buttons and says
so (nothing was sent to the agent); the next message runs without /resume."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says, card_in, discord_gateway_config, on_discord, seen
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_stop_in_a_thread_stops_the_turn_and_the_card_says_so(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    fake_model.scenario = (message(lambda request: f"heard: {request.user_texts()[-1]}"),)
    async with on_discord(discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")):
        said = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> please create hello.txt", mentions=(BOT,)
        )
        card = await card_in(fake, said.id)  # in the thread made from the mention
        thread = fake.channels[said.id]
        assert card.labels

        stop = await fake.slash(ALICE, thread, "stop")
        await fake.wait_for(lambda: stop.callback is not None)
        assert stop.callback is not None and stop.callback["type"] == 4  # answered at once
        assert stop.callback["data"]["flags"] & 64  # ephemeral: its person alone
        notice = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(thread) if m.content.startswith("⏹")), None)
        )
        assert notice.content == "⏹ Stopped by @alice."
        await fake.wait_for(lambda: not card.labels and "Stopped by" in seen(card))
        [embed] = card.embeds
        # the time is the embed's timestamp, which Discord shows beside the footer in each
        # reader's own zone (a <t:…> in a footer would be shown as it is written)
        assert embed["footer"]["text"] == (
            "Stopped by @alice before anyone answered · nothing was sent to the agent"
        )
        stopped_at = datetime.fromisoformat(embed["timestamp"])
        assert abs(datetime.now(UTC) - stopped_at) < timedelta(minutes=2)

        # after /stop, a new mention in the thread runs at once: no /resume needed
        await fake.say(ALICE, thread, f"<@{BOT.id}> say hi instead", mentions=(BOT,))
        await bot_says(fake, thread.id, "say hi instead")
        stops = [m.content for m in fake.bot_messages(thread) if m.content.startswith("⏹")]
        assert stops == ["⏹ Stopped by @alice."]  # said once
    assert not (codex_home.workspace / "hello.txt").exists()
    assert fake.refused == []
