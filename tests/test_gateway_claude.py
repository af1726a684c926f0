"""Claude Code through the whole gateway: a Bash approval as a card, allowed by a click; a
denial with a message the model reads; the permission mode in force shown in /status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from gateway.config import Config, parse_config
from tests.claude_env import ClaudeHome
from tests.gateway_harness import ALICE, ROOM, running_gateway

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

DONE = fm.text(lambda request: f"Done. The tool said: {request.tool_result()}")


def claude_config(claude_bin: str, home: ClaudeHome, data_dir: Path) -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.notes]
work_dir = {json.dumps(str(home.workspace))}
agent = "claude-code"
argv = [{json.dumps(claude_bin)}]

[projects.notes.agent_options.env]
{env}

[projects.notes.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
""",
        "claude.toml",
    )


async def test_bash_approval_allowed_by_a_click(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        labels = [action.label for action in shown.card.actions]
        assert labels[0] == "Allow once" and "Deny" in labels
        assert any("touch hello.txt" in getattr(b, "code", "") for b in shown.card.blocks)
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert (claude_home.workspace / "hello.txt").exists()
        await gw.card_where(lambda card: not card.actions and "done" in card.status_line)
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "permission_mode = default" in status


async def test_bash_denied_with_a_message_the_model_reads(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        interaction_id = shown.card.actions[0].token.split(":")[1] if shown.card else ""
        await gw.memory.say(ROOM, ALICE, f"/deny {interaction_id} not in this folder")
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert not (claude_home.workspace / "hello.txt").exists()
    told = fake_anthropic.model_requests()[-1].tool_result()
    assert told is not None and "not in this folder" in told[0]
