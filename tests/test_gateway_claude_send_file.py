"""send_file with the real Claude Code: the gateway's MCP server comes in ``--mcp-config``,
its tool pre-allowed, so the model's call reaches the gateway with no card of Claude's; the
file is sent to the chat, and the model reads the result."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from tests.claude_env import ClaudeHome
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.test_gateway_claude import claude_config

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
TOOL = "mcp__agent-gateway__send_file"


def said(request: fm.ModelRequest) -> str:
    result = request.tool_result()
    assert result is not None
    return f"The tool said: {result[0]}"


async def test_claude_sends_a_picture_with_no_card_of_its_own(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    (claude_home.workspace / "chart.png").write_bytes(PNG)
    fake_anthropic.enqueue(
        [fm.tool_use(TOOL, {"path": "chart.png", "caption": "the chart"}), fm.text(said)]
    )
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the chart")
        reply = await gw.text_where(lambda text: text.endswith("to the chat"))
        # the turn shows the tool's line, then what the model read
        assert reply.endswith(
            "✓ mcp__agent-gateway__send_file\n\n"
            "The tool said: sent chart.png (72 bytes) to the chat"
        )
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content, f.media_type, f.caption) for f in files] == [
            ("chart.png", PNG, "image/png", "the chart")
        ]
        assert not gw.cards()  # neither Claude's card nor the gateway's
    assert TOOL in fake_anthropic.model_requests()[0].tool_names


async def test_claude_reads_why_a_link_out_of_the_work_dir_is_refused(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the chat\n")
    (claude_home.workspace / "notes.txt").symlink_to(secret)
    fake_anthropic.enqueue([fm.tool_use(TOOL, {"path": "notes.txt"}), fm.text(said)])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the notes")
        reply = await gw.text_where(lambda text: text.endswith("can be sent"))
        assert (
            "The tool said: not sent: notes.txt is outside this session's working directory"
            in reply
        )
        assert not [m for m in gw.memory.messages(ROOM) if m.file is not None]
