"""A tool's line once its turn is over, through the whole gateway with an agent the test
moves by hand (tests/puppet_launcher.py): a tool still shown running when the agent dies or
the turn ends is shown ended, in plain words, on every platform and in the ledger, so that a
page drawn after a restart says the same; nothing keeps its running mark "▸"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.domain import TurnStatus
from gateway.timeline import EntryKind
from tests.console_harness import ConsoleRunning, console_gateway, plain_config
from tests.gateway_harness import ALICE, ROOM
from tests.puppet_launcher import PuppetAgent, PuppetLauncher

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def puppet() -> PuppetLauncher:
    return PuppetLauncher()


@pytest.fixture
async def running(tmp_path: Path, puppet: PuppetLauncher) -> AsyncIterator[ConsoleRunning]:
    work = tmp_path / "work"
    work.mkdir()
    async with console_gateway(plain_config(tmp_path / "data", work), launcher=puppet) as gw:
        yield gw


async def running_tool(running: ConsoleRunning, puppet: PuppetLauncher) -> PuppetAgent:
    """A turn whose command has started and not ended, shown running."""
    await running.memory.say(ROOM, ALICE, "build it")
    agent, _ = await puppet.prompt()
    agent.start_turn()
    agent.say("m1", "Building.")
    agent.run_tool("c1", "make build")
    await running.memory.wait_for(
        lambda: any("▸ `make build`" in t for t in running.memory.texts(ROOM)) or None
    )
    return agent


async def tool_lines(running: ConsoleRunning) -> list[str]:
    session = await running.gateway.store.sessions.lookup(ROOM)
    assert session is not None
    turns = await running.gateway.store.timeline.of_session(session.id)
    return [e.text for turn in turns for e in turn.entries if e.kind is EntryKind.TOOL]


async def test_a_tool_running_when_the_agent_dies_is_shown_stopped(
    running: ConsoleRunning, puppet: PuppetLauncher
) -> None:
    agent = await running_tool(running, puppet)
    agent.crash()
    ended = "✗ `make build` (stopped: the agent process ended)"
    said = await running.memory.wait_for(
        lambda: next((t for t in running.memory.texts(ROOM) if ended in t), None)
    )
    assert said == f"Building.\n\n{ended}"
    assert not any("▸" in text for text in running.memory.texts(ROOM))
    assert await tool_lines(running) == [ended]  # what a page reads after a restart


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (TurnStatus.INTERRUPTED, "stopped: the turn was interrupted"),
        (TurnStatus.FAILED, "stopped: the turn failed"),
        (TurnStatus.COMPLETED, "not finished when the turn ended"),
    ],
)
async def test_a_tool_running_when_its_turn_ends_is_shown_ended(
    running: ConsoleRunning, puppet: PuppetLauncher, status: TurnStatus, words: str
) -> None:
    agent = await running_tool(running, puppet)
    agent.complete(status)
    ended = f"✗ `make build` ({words})"
    await running.memory.wait_for(
        lambda: f"ended {status.value}" in running.memory.turn_signals(ROOM) or None
    )
    assert any(ended in text for text in running.memory.texts(ROOM))
    assert not any("▸" in text for text in running.memory.texts(ROOM))
    assert await tool_lines(running) == [ended]
