"""send_file through the real codex-acp: the gateway's MCP server given in ``mcpServers`` on
``session/new``; the model finds the tool (tool_search) and the file reaches the chat.

Not yet as the issue wants: ACP's ``mcpServers`` has no approval setting, and codex-acp 0.16
asks ``session/request_permission`` before it calls an MCP tool, so the person sees the
agent's card first (docs/decisions.md, branch sendfile33). This test holds that down: it
fails once codex-acp stops asking, which is when the test should say "no card"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome, make_codex_home
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.servers.fake_responses import FakeResponses
from tests.test_acp_real import acp_config
from tests.test_telegram_send_file import PNG, send_file_turn

pytestmark = [pytest.mark.real_agent("codex-acp"), pytest.mark.timeout(120)]


@pytest.fixture
def home(fake_model: FakeResponses) -> Iterator[CodexHome]:
    with make_codex_home(fake_model.base_url) as made:
        yield made


async def test_codex_acp_sends_a_picture(
    codex_acp_bin: str, home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    (home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png", "the chart"))  # type: ignore[arg-type]
    async with running_gateway(acp_config(codex_acp_bin, home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the chart")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        assert 'run tool "send_file"' in shown.card.summary  # codex-acp's own question
        assert not [m for m in gw.memory.messages(ROOM) if m.file is not None]
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)  # "Allow"
        assert ack.accepted, ack.text
        told = await gw.text_where(lambda text: text.endswith("(72 bytes) to the chat"))
        assert told.endswith("The tool said: sent chart.png (72 bytes) to the chat")
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content, f.caption) for f in files] == [("chart.png", PNG, "the chart")]
