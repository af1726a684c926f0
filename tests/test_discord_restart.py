"""``python -m gateway run`` killed (SIGKILL) with a card on screen and a modal open, then
started again on the same ledger: the card is edited to say the request can no longer be
answered, a click on it (a screen not yet redrawn) is told it "belongs to an agent process
that has ended", and the open modal's submit is answered within its 3 s."""

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
from tests.discord_gateway import card_in, discord_gateway_config_text, seen
from tests.harness.driver import end_leftover_agents
from tests.servers.fake_discord import ALICE, BOT, Channel, FakeDiscord, Interaction
from tests.servers.fake_responses import FakeResponses, message, request_user_input, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

DEADLINE = 30.0
COLOR = {
    "id": "color",
    "header": "Color",
    "question": "Which color should I use?",
    "options": [{"label": "Red", "description": "red"}, {"label": "Blue", "description": "b"}],
}


@asynccontextmanager
async def gateway_process(config: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m gateway run`` on ``config``, yielded once it runs; interrupted (if still
    alive) on the way out."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "run", "--config", str(config)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        async with asyncio.timeout(DEADLINE):
            assert process.stderr is not None
            while b"agent-gateway running" not in await process.stderr.readline():
                pass  # connected to Discord (ready) and recovered: it takes messages now
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert process.stderr is not None
            await process.stderr.read()
            await process.wait()


async def until_shown(fake: FakeDiscord, thread: Channel) -> None:
    """Ask /pending until the gateway says the thread's card is shown: its ledger then knows
    which message shows it (what the next gateway's edit needs)."""
    while True:
        seen_before = len(fake.bot_messages(thread))
        await fake.slash(ALICE, thread, "pending")
        reply = await fake.wait_for(
            lambda seen_before=seen_before: next(
                (
                    m
                    for m in fake.bot_messages(thread)[seen_before:]
                    if "Open requests" in m.content
                ),
                None,
            ),
            DEADLINE,
        )
        if "shown" in reply.content and "NOT SEEN" not in reply.content:
            return


async def test_a_killed_gateways_card_and_open_modal_are_answered_by_the_next_one(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue(
        (shell("touch never.txt", escalated=True), message("Done.")),
        (request_user_input([COLOR]), message("Painted.")),
    )
    data_dir = tmp_path / "data"
    async with FakeDiscord() as fake:
        config = tmp_path / "gateway.toml"
        text = discord_gateway_config_text(
            fake,
            codex_home,
            codex_bin,
            data_dir,
            features=("default_mode_request_user_input",),
        )
        config.write_text(text, encoding="utf-8")
        try:
            async with gateway_process(config) as first:
                said = await fake.say(
                    ALICE, fake.general, f"<@{BOT.id}> create never.txt", mentions=(BOT,)
                )
                card = await card_in(fake, said.id)
                allow = card.button("Allow once")["custom_id"]
                await until_shown(fake, fake.channels[said.id])
                asked = await fake.say(
                    ALICE, fake.general, f"<@{BOT.id}> paint it", mentions=(BOT,)
                )
                form = await card_in(fake, asked.id)
                await until_shown(fake, fake.channels[asked.id])
                opened: Interaction = await fake.click(ALICE, form, "Answer…")
                await fake.wait_for(lambda: opened.modal, DEADLINE)
                first.kill()  # a crash: nothing is cleaned up, the agent is left running
                await first.wait()
            assert card.labels and form.labels, "a killed gateway edits nothing"

            async with gateway_process(config):
                await fake.wait_for(
                    lambda: not card.labels and "before anyone answered" in seen(card), DEADLINE
                )
                click = await fake.forge(
                    ALICE,
                    fake.channels[said.id],
                    {"custom_id": allow, "component_type": 2},
                    message=card,
                )
                await fake.wait_for(lambda: click.followups, DEADLINE)
                assert click.followups[0].content == (
                    "This request belongs to an agent process that has ended."
                )
                submitted = await fake.submit(ALICE, opened, {"q0": "1"})
                await fake.wait_for(lambda: submitted.followups, DEADLINE)
                assert submitted.callback_type == 5  # answered within its 3 s
                assert submitted.followups[0].content == (
                    "This request belongs to an agent process that has ended."
                )
                await fake.wait_for(
                    lambda: not form.labels and "before anyone answered" in seen(form), DEADLINE
                )
        finally:
            await end_leftover_agents(data_dir)
    assert not (codex_home.workspace / "never.txt").exists()
