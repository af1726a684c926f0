"""send_file with the real ``codex exec``: the server given as ``-c mcp_servers...`` (its
token passed through ``env_vars``, not in the argv), pre-approved, so the file reaches the
chat with no question asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.gateway_harness import ALICE, ROOM, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses
from tests.test_gateway_codex_exec import _git_repo
from tests.test_telegram_send_file import PNG, send_file_turn

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


async def test_codex_exec_sends_a_picture(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    _git_repo(codex_home.workspace)
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png", "the chart"))  # type: ignore[arg-type]
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", agent="codex-exec")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the chart")
        reply = await gw.text_where(lambda text: text.endswith("to the chat"))
        assert reply.endswith("The tool said: sent chart.png (72 bytes) to the chat")
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content, f.caption) for f in files] == [("chart.png", PNG, "the chart")]
        assert not gw.cards()
