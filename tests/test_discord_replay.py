"""A message Discord gives again is taken once (issue 14: ``message_id`` is the snowflake),
end to end with the real Codex app-server: RECONNECT, then RESUME replays what was sent
while the client was away, among it the mention that started the session delivered a
second time. The new message runs; the old one is not run again (nor a second thread made)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says, discord_gateway_config, on_discord
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses, message

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_message_replayed_by_resume_is_taken_once(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.scenario = (message(lambda request: f"heard: {request.user_texts()[-1]}"),)
    async with on_discord(discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")):
        first = await fake.say(ALICE, fake.general, f"<@{BOT.id}> say one", mentions=(BOT,))
        await bot_says(fake, first.id, "say one")  # in the thread made from it
        thread = fake.channels[first.id]

        resumed = fake.resumed
        await fake.reconnect()  # what is dispatched now waits for the RESUME
        await fake.dispatch("MESSAGE_CREATE", first)  # the same message, given again
        await fake.say(ALICE, thread, f"<@{BOT.id}> say two", mentions=(BOT,))
        assert fake.resumed == resumed
        await fake.wait_for(lambda: fake.resumed > resumed)
        await bot_says(fake, thread.id, "say two")

        requests = fake_model.model_requests()
        assert len(requests) == 2  # one turn each: "say one" was not run again
        said = [t for t in requests[-1].user_texts() if not t.startswith("<environment")]
        assert said == ["say one", "say two"]  # the session's history, as the model reads it
        replies = [m.content for m in fake.bot_messages(thread) if "heard:" in m.content]
        assert len([r for r in replies if "say one" in r]) == 1, replies
        assert len([c for c in fake.channels.values() if c.parent_id]) == 1  # one thread
    # the replay asked for its thread again: "already made" (160004) names the same thread
    assert [code for _, _, code in fake.refused] == [160004]
