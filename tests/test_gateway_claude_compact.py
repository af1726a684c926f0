"""/compact with the real Claude Code 2.1.197 through the whole gateway (issue 31): its own
compaction command, said when done; too early, it fails with Claude's own reason; after it,
the model reads the summary instead of the conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from tests.claude_env import ClaudeHome
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.test_gateway_claude import claude_config

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

CONTINUED = "continued from a previous conversation"


async def test_compact_runs_claudes_own_compaction_and_says_how_it_ended(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue(
        [fm.text("Hello there.")],
        [fm.text("Second.")],
        [fm.text("Third.")],
        [fm.text("The summary.")],
        [fm.text("After.")],
    )
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "hi")
        await gw.text_where(lambda text: "Hello there." in text)
        await gw.memory.say(ROOM, ALICE, "/compact")
        failed = await gw.text_where(lambda text: "compaction failed" in text)
        assert failed == "⚠ The compaction failed: Not enough messages to compact."
        for word, answer in (("more", "Second."), ("again", "Third.")):
            await gw.memory.say(ROOM, ALICE, word)
            await gw.text_where(lambda text, answer=answer: answer in text)
        await gw.memory.say(ROOM, ALICE, "/compact")
        await gw.text_where(lambda text: text.startswith("🗜 Compacted"))
        before = len(fake_anthropic.requests)
        await gw.memory.say(ROOM, ALICE, "and now?")
        await gw.wait_for(lambda: len(fake_anthropic.requests) > before or None)
        after = json.dumps(fake_anthropic.requests[before].body)
        assert CONTINUED in after  # the model reads the summary, not the conversation
