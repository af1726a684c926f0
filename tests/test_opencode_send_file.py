"""send_file with the real OpenCode server: the gateway's MCP server comes in
``OPENCODE_CONFIG_CONTENT`` (merged over its config files), its tool allowed in the
permission table, so the call reaches the gateway with no card of OpenCode's."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.servers.fake_chat_completions as fc
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.opencode_env import OpenCodeHome
from tests.servers.fake_chat_completions import FakeChatCompletions
from tests.test_gateway_opencode import opencode_config
from tests.test_telegram_send_file import PNG

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]

TOOL = "agent-gateway_send_file"


async def test_opencode_sends_a_picture_with_no_card_of_its_own(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    (opencode_home.workspace / "chart.png").write_bytes(PNG)
    call = fc.Reply(tool=(TOOL, {"path": "chart.png", "caption": "the chart"}))
    fake_chat.enqueue(
        [lambda request: call, fc.text(lambda r: f"The tool said: {r.tool_result()}")]
    )
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the chart")
        try:
            reply = await gw.text_where(lambda text: text.endswith("to the chat"))
        finally:
            print("TEXTS", gw.memory.texts(ROOM), "CARDS", gw.cards())
            for r in fake_chat.requests:
                print(
                    "TOOLS",
                    sorted(
                        t.get("function", {}).get("name", "") for t in r.body.get("tools") or []
                    ),
                )
        assert reply.endswith("The tool said: sent chart.png (72 bytes) to the chat")
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content) for f in files] == [("chart.png", PNG)]
        assert not gw.cards()
