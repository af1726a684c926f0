"""End to end: a chat message reaches the real codex app-server, its approval becomes a card,
a click goes back through the request's own id exactly once, and the ledger records it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.gateway_harness import ALICE, ROOM, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]


async def test_command_approval_round_trip(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        labels = [action.label for action in shown.card.actions]
        assert labels == [
            "Allow once",
            "Always allow commands like this",
            "Deny",
            "Deny and stop the turn",
        ]
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done." in text)
        assert (codex_home.workspace / "hello.txt").exists()
