"""A gateway killed (SIGKILL) with a card on a phone's screen: the next gateway ends the agent
the dead one left, and edits the card to say the request can no longer be answered."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.harness.driver import end_leftover_agents
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.servers.telegram_people import callback_update, message_update, private_chat
from tests.telegram_harness import ALICE, DEADLINE, telegram_config_text

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@asynccontextmanager
async def gateway_process(config: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m gateway run`` on ``config``; interrupted (if still alive) on the way out."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "run", "--config", str(config)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert process.stderr is not None
            await process.stderr.read()
            await process.wait()


async def until_shown(fake: FakeTelegram) -> None:
    """Ask /pending until the gateway says the card is shown: its ledger then knows which
    message shows it (what the next gateway's edit needs)."""
    while True:
        seen = len(fake.bot_messages(ALICE.id))
        await fake.push(message_update(fake, private_chat(ALICE), ALICE, "/pending"))
        reply = await fake.wait_for(
            lambda seen=seen: next(
                (m for m in fake.bot_messages(ALICE.id)[seen:] if "Open requests" in m.text),
                None,
            ),
            DEADLINE,
        )
        if "shown]" in reply.text:
            return


async def test_a_card_on_screen_when_the_gateway_is_killed_is_edited_by_the_next_one(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("touch never.txt", escalated=True), message("Done.")))
    data_dir = tmp_path / "data"
    async with FakeTelegram() as fake:
        config = tmp_path / "gateway.toml"
        text = telegram_config_text(
            fake, data_dir, work_dir=codex_home.workspace, codex_bin=codex_bin, home=codex_home
        )
        config.write_text(text, encoding="utf-8")
        try:
            async with gateway_process(config) as first:
                await fake.wait_for(lambda: fake.commands, DEADLINE)
                await fake.push(
                    message_update(fake, private_chat(ALICE), ALICE, "please create never.txt")
                )
                card: Sent = await fake.wait_for(
                    lambda: next((m for m in fake.bot_messages(ALICE.id) if m.buttons), None),
                    DEADLINE,
                )
                allow = card.button("Allow once")["callback_data"]
                await until_shown(fake)
                first.kill()  # a crash: nothing is cleaned up, the agent is left running
                await first.wait()
            assert card.buttons, "a killed gateway edits nothing"

            fake.commands = []
            async with gateway_process(config):
                await fake.wait_for(
                    lambda: card.markup is None and "before anyone answered" in card.text
                )
                notice = await fake.wait_for(
                    lambda: next(
                        (m for m in fake.bot_messages(ALICE.id) if m.text.startswith("↻")),
                        None,
                    )
                )
                # one short line, a reply to the card, which says the rest: it notifies, and
                # the card's edit carries the detail
                assert notice.reply_to == card.message_id
                assert notice.text.startswith("↻ The gateway restarted: the card of "), notice
                assert "no answer can reach it" not in notice.text
                query_id, click = callback_update(fake, ALICE, card, allow)
                await fake.push(click)
                answer = await fake.wait_for(
                    lambda: next(
                        (a for a in fake.answers if a["callback_query_id"] == query_id), None
                    )
                )
                assert answer["text"] == "This request belongs to an agent process that has ended."
        finally:
            await end_leftover_agents(data_dir)
    assert not (codex_home.workspace / "never.txt").exists()
