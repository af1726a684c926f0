"""``/sessions`` and ``/switch`` on the fake Discord with the real Codex app-server (issue
31): sessions follow threads there, so ``/switch`` to the session of another thread answers
with that thread's link, and changes nothing here; both commands are application commands."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from platforms.registry import parse_config
from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says, discord_gateway_config_text, on_discord
from tests.servers.fake_discord import ALICE, BOT, Channel, FakeDiscord, Sent
from tests.servers.fake_responses import FakeResponses, message

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def answer_to(
    fake: FakeDiscord, thread: Channel, command: str, starts: str, text: str = ""
) -> Sent:
    """The bot's message in ``thread`` that answers the application command ``command``
    (it starts with ``starts``; a turn's end line may come in between)."""
    before = len(fake.bot_messages(thread))
    option = {"sessions": "page", "switch": "session", "name": "name"}.get(command, "text")
    await fake.slash(ALICE, thread, command, {option: text} if text else None)
    return await fake.wait_for(
        lambda: next(
            (m for m in fake.bot_messages(thread)[before:] if m.content.startswith(starts)), None
        )
    )


async def test_switch_to_another_threads_session_links_to_its_thread(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    text = discord_gateway_config_text(fake, codex_home, codex_bin, tmp_path / "data")
    approver = f"allow_from = {json.dumps([ALICE.id])}"
    config = parse_config(text.replace(approver, f"{approver}\napprovers = [{ALICE.id!r}]"), "t")
    fake_model.enqueue([message("One.")], [message("Two.")])
    async with on_discord(config):
        first = await fake.say(ALICE, fake.general, f"<@{BOT.id}> first task", mentions=(BOT,))
        await bot_says(fake, first.id, "One.")
        second = await fake.say(ALICE, fake.general, f"<@{BOT.id}> second task", mentions=(BOT,))
        await bot_says(fake, second.id, "Two.")
        here = fake.channels[second.id]
        listing = (await answer_to(fake, here, "sessions", "Sessions")).content.splitlines()
        assert listing[0] == "Sessions 1 to 2 of 2, newest first:"
        assert listing[1].endswith(" · current here")
        assert "listed only" not in listing[2]  # another thread of this channel
        switched = await answer_to(fake, here, "switch", "Session ", "2")
        link = f"https://discord.com/channels/{fake.general.guild_id}/{first.id}"
        assert link in switched.content
        assert "Nothing was changed here." in switched.content
