"""Claude Code's plans through the whole gateway (issue 16): a project in
``permission_mode = "plan"``, the agent's ``ExitPlanMode`` shown as a plan card with the plan's
Markdown, approved in the same process, sent back with the person's message, a typed "ok"
that is a prompt and never an approval, and a card orphaned by a restart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from adapters.launch import ConfiguredLauncher
from gateway.cards import Card, TextBlock
from gateway.config.model import Config
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.claude_env import ClaudeHome
from tests.gateway_harness import ALICE, ROOM, Running, running_gateway
from tests.servers.fake_anthropic import DONE

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

PLAN = "# Plan\n\n1. Create `hello.txt`\n2. Say **done**\n"


def plan_config(claude_bin: str, home: ClaudeHome, data_dir: Path) -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.notes]
work_dir = {json.dumps(str(home.workspace))}
agent = "claude-code"
argv = [{json.dumps(claude_bin)}]
permission_mode = "plan"

[projects.notes.agent_options.env]
{env}

[projects.notes.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
""",
        "claude-plans.toml",
    )


def is_plan_card(card: Card) -> bool:
    return bool(card.actions) and any(
        isinstance(block, TextBlock) and block.markdown and block.text == PLAN
        for block in card.blocks
    )


async def plan_card(gw: Running) -> Card:
    shown = await gw.card_where(is_plan_card)
    assert shown.card is not None
    return shown.card


async def test_a_plan_card_approved_continues_in_the_same_process(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.exit_plan_mode(PLAN), DONE])
    async with running_gateway(plan_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "/status")
        await gw.memory.say(ROOM, ALICE, "plan hello.txt")
        card = await plan_card(gw)
        labels = [action.label for action in card.actions]
        assert labels == ["Approve the plan", "Keep planning"]
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        epoch = session.current_epoch
        ack = await gw.memory.click(ROOM, ALICE, card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        await gw.card_where(lambda c: not c.actions and c.title == card.title)
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: "permission_mode = default" in text)
        assert status.startswith("Session ")
        assert re.search(r"Tokens: [\d,]+ in, [\d,]+ out · context [\d,]+ of 1,000,000", status)
        said = gw.memory.texts(ROOM)
        assert "Claude now runs in permission mode default (was plan)." in said
        assert not any("ExitPlanMode" in text for text in said)  # the card says it, once
        again = await gw.gateway.store.sessions.lookup(ROOM)
        assert again is not None and again.current_epoch == epoch  # the same process
    told = fake_anthropic.model_requests()[-1].tool_result()
    assert told is not None and "User has approved your plan" in told[0]


async def test_keep_planning_sends_the_persons_message_back(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.exit_plan_mode(PLAN), DONE])
    async with running_gateway(plan_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "plan hello.txt")
        card = await plan_card(gw)
        interaction_id = card.actions[1].token.split(":")[1]
        await gw.memory.say(ROOM, ALICE, f"/deny {interaction_id} use two files instead")
        await gw.text_where(lambda text: "Done. The tool said" in text)
        await gw.memory.say(ROOM, ALICE, "/status")
        await gw.text_where(lambda text: "permission_mode = plan" in text)
    told = fake_anthropic.model_requests()[-1].tool_result()
    assert told is not None and "use two files instead" in told[0]
    assert "approved" not in told[0]
    assert not (claude_home.workspace / "hello.txt").exists()


async def test_typed_ok_while_a_plan_card_waits_is_a_prompt_not_an_approval(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue(
        [fm.exit_plan_mode(PLAN), DONE],
        [fm.text(lambda request: f"You said: {request.prompts()[-1]}")],
    )
    async with running_gateway(plan_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "plan hello.txt")
        card = await plan_card(gw)
        await gw.memory.say(ROOM, ALICE, "ok")
        await gw.memory.say(ROOM, ALICE, "/pending")
        await gw.text_where(lambda text: "Approve the plan" in text)
        [shown] = [s for s in gw.cards() if s.card is not None and s.card.title == card.title]
        assert shown.card is not None and shown.card.actions  # still waiting for a decision
        assert not any(r.tool_result() for r in fake_anthropic.model_requests())
        ack = await gw.memory.click(ROOM, ALICE, card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        await gw.text_where(lambda text: text.startswith("You said: ok"))


async def test_a_plan_card_orphaned_by_a_restart_loses_its_buttons(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.exit_plan_mode(PLAN), DONE], [fm.text("Back again.")])
    config = plan_config(claude_bin, claude_home, tmp_path / "d")
    memory = MemoryPlatform()
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        await gw.memory.say(ROOM, ALICE, "plan hello.txt")
        card = await plan_card(gw)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        orphaned = await gw.card_where(lambda c: c.title == card.title and not c.actions)
        assert orphaned.card is not None
        late = await gw.memory.click(ROOM, ALICE, card.actions[0].token)
        assert not late.accepted
        await gw.memory.say(ROOM, ALICE, "hello again")
        await gw.text_where(lambda text: "Back again." in text)
    assert not (claude_home.workspace / "hello.txt").exists()
    told = [r.tool_result() for r in fake_anthropic.model_requests()]
    assert not any(t and "approved" in t[0] for t in told)


async def test_the_plan_command_in_a_claude_project_says_how_claude_plans(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    async with running_gateway(plan_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "/plan create hello.txt")
        said = await gw.text_where(lambda text: text.startswith("/plan works with Codex"))
        assert 'permission_mode = "plan"' in said and "was not sent" in said
    assert fake_anthropic.model_requests() == []
