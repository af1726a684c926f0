"""A steer the agent refuses falls back to the queue, and runs once (issue 31), through the
whole gateway with an agent the test moves by hand (tests/puppet_launcher.py): the refusal
of a real Codex (a turn that ended between the message and its ``turn/steer``) cannot be
timed from outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.events import SteerRefused, SteerTaken
from gateway.sessions.engine import Gateway
from gateway.store.records import PromptState
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, ROOM
from tests.puppet_launcher import PuppetLauncher
from tests.store_helpers import approval

pytestmark = pytest.mark.timeout(60)


def _config(tmp_path: Path) -> str:
    work = tmp_path / "work"
    work.mkdir()
    return f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
busy_input = "steer"

[projects.demo.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
"""


async def test_a_refused_steer_is_queued_again_and_runs_as_the_next_turn_once(
    tmp_path: Path,
) -> None:
    puppet = PuppetLauncher(steers=True)
    memory = MemoryPlatform()
    config = parse_config(_config(tmp_path), "test.toml")
    async with Gateway(config, platforms={"memory": memory}, launcher=puppet) as gateway:
        await memory.say(ROOM, ALICE, "first")
        agent, text = await puppet.prompt()
        assert text == "first"
        agent.start_turn()  # the runner has the turn since it sent the prompt
        await memory.say(ROOM, ALICE, "second")
        steer = await puppet.steered()
        assert steer.text == "second"
        agent.emit(SteerRefused(key=steer.key, reason="the turn had ended"))
        await memory.wait_for(
            lambda: any("did not take your message" in t for t in memory.texts(ROOM)) or None
        )
        agent.complete()
        agent, text = await puppet.prompt()
        assert text == "second"  # queued again, at its place: the next turn
        agent.start_turn()
        await memory.say(ROOM, ALICE, "third")
        steer = await puppet.steered()
        assert steer.text == "third"
        agent.emit(SteerTaken(key=steer.key))
        await memory.wait_for(
            lambda: any("Sent into the running turn" in t for t in memory.texts(ROOM)) or None
        )
        agent.complete()
        # the turn's end seen before the next message (sent into a turn ending meanwhile,
        # it would be a steer the agent refuses: the first half of this test)
        await memory.wait_for(
            lambda: memory.turn_signals(ROOM).count("ended completed") == 2 or None
        )
        await memory.say(ROOM, ALICE, "fourth")
        agent, text = await puppet.prompt()
        assert text == "fourth"  # "third" went into the turn: never a turn of its own
        states = [await gateway.store.prompts.get(n) for n in range(1, 4)]
        assert [(p.text, p.state) for p in states if p is not None] == [
            ("first", PromptState.DONE),
            ("second", PromptState.DONE),
            ("third", PromptState.DONE),  # taken by the turn
        ]
        agent.complete()


async def test_compact_where_the_agent_does_not_compact_changes_nothing(tmp_path: Path) -> None:
    puppet = PuppetLauncher()  # an agent without the compact capability
    memory = MemoryPlatform()
    config = parse_config(_config(tmp_path), "test.toml")
    async with Gateway(config, platforms={"memory": memory}, launcher=puppet):
        await memory.say(ROOM, ALICE, "/compact")
        await memory.wait_for(lambda: any("No session here yet" in t for t in memory.texts(ROOM)))
        await memory.say(ROOM, ALICE, "first")
        agent, _ = await puppet.prompt()
        agent.complete()
        await memory.say(ROOM, ALICE, "/compact")
        said = await memory.wait_for(
            lambda: next((t for t in memory.texts(ROOM) if "/compact is not" in t), None)
        )
        assert said == "/compact is not offered by this agent (codex-app-server): nothing changed."
        await memory.say(ROOM, ALICE, "second")
        agent, text = await puppet.prompt()
        assert text == "second"  # no compaction turn came first
        agent.complete()


async def test_the_button_moves_nothing_while_a_card_of_the_turn_waits(tmp_path: Path) -> None:
    puppet = PuppetLauncher(steers=True)
    memory = MemoryPlatform()
    text = _config(tmp_path).replace('busy_input = "steer"', 'busy_input = "queue"')
    config = parse_config(text, "test.toml")
    async with Gateway(config, platforms={"memory": memory}, launcher=puppet):
        await memory.say(ROOM, ALICE, "first")
        agent, _ = await puppet.prompt()
        agent.start_turn()
        await memory.say(ROOM, ALICE, "yes, approve")
        notice = await memory.wait_for(
            lambda: next(
                (c.card for c in memory.cards(ROOM) if c.card and "Queued" in c.card.title), None
            )
        )
        agent.ask(approval("rpc:1"))  # a card of the turn opens after the notice
        await memory.wait_for(
            lambda: next(
                (c for c in memory.cards(ROOM) if c.card and c.card.title == "Run ls?"), None
            )
        )
        ack = await memory.click(ROOM, ALICE, notice.actions[0].token)
        assert not ack.accepted
        assert "waits for a decision" in ack.text
        agent.complete()  # the request is withdrawn with the turn; the message runs next
        agent, text = await puppet.prompt()
        assert text == "yes, approve"
        agent.complete()
