"""send_file on Discord with the real Codex: the file is a multipart attachment in the
session's thread, its caption the message's text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says, discord_gateway_config, on_discord
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses
from tests.test_telegram_send_file import PNG, send_file_turn

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_the_file_is_attached_in_the_session_s_thread(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png", "the chart"))  # type: ignore[arg-type]
    async with on_discord(discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")):
        said = await fake.say(
            ALICE, fake.general, f"<@{BOT.id}> send me the chart", mentions=(BOT,)
        )
        await bot_says(fake, said.id, "(72 bytes) to the chat")
        thread = fake.channels[said.id]
        [attached] = [m for m in fake.bot_messages(thread) if m.attachments]
        assert attached.content == "the chart"
        [file] = attached.attachments
        # the fake keeps an attachment's bytes as text (undecodable bytes replaced)
        assert (file["filename"], file["size"]) == ("chart.png", len(PNG))
        assert file["content"] == PNG.decode("utf-8", "replace")
