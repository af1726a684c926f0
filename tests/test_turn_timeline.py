"""A turn as people read it on two platforms at once (the memory platform and the console),
with an agent the test moves by hand (tests/puppet_launcher.py): the text after a card is a
message after it, the turn is kept in the ledger in the order it happened, each platform is
told when a turn starts and ends, and each platform goes at its own pace, a 429 storm on one
holding back nothing on the other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from gateway.domain import ConversationRef, TurnStatus
from gateway.events import Warning
from gateway.platform import PlatformLimits
from gateway.session_record import SessionRecord
from gateway.timeline import EntryKind
from platforms.console.platform import ConsolePlatform
from platforms.memory.platform import MemoryPlatform
from tests.console_harness import ConsoleRunning, console_gateway, plain_config
from tests.gateway_harness import ALICE, ROOM
from tests.puppet_launcher import PuppetAgent, PuppetLauncher
from tests.store_helpers import approval

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
PROMPTLY = 2.5  # seconds: far less than the storm's retry-after


@pytest.fixture
def puppet() -> PuppetLauncher:
    return PuppetLauncher()


async def started(
    tmp_path: Path, puppet: PuppetLauncher, memory: MemoryPlatform | None = None
) -> AsyncIterator[ConsoleRunning]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = plain_config(tmp_path / "data", work)
    async with console_gateway(config, launcher=puppet, memory=memory) as running:
        yield running


@pytest.fixture
async def running(tmp_path: Path, puppet: PuppetLauncher) -> AsyncIterator[ConsoleRunning]:
    async for running in started(tmp_path, puppet):
        yield running


async def prompt(running: ConsoleRunning, puppet: PuppetLauncher, text: str) -> PuppetAgent:
    await running.memory.say(ROOM, ALICE, text)
    agent, got = await puppet.prompt()
    assert got == text
    return agent


async def session_of(running: ConsoleRunning) -> SessionRecord:
    session = await running.gateway.store.sessions.lookup(ROOM)
    assert session is not None
    return session


def console_room(running: ConsoleRunning, session: SessionRecord) -> ConversationRef:
    return running.console.mirror_conversation(session)


def console_texts(console: ConsolePlatform, conversation: ConversationRef) -> list[str]:
    return [m.text for m in console.feed.messages([conversation]) if m.text is not None]


async def on_console(console: ConsolePlatform, probe: Callable[[], T | None], deadline: float) -> T:
    """Wait until ``probe()`` holds, looking again whenever the console is told something."""
    async with asyncio.timeout(deadline):
        while True:
            seen = console.changes.count
            value = probe()
            if value is not None and value is not False:
                return value
            await console.changes.wait_past(seen)


def shown(memory: MemoryPlatform) -> list[str]:
    """The conversation as the memory platform shows it: texts, and "card" for a card."""
    return ["card" if m.card is not None else (m.text or "") for m in memory.messages(ROOM)]


async def ask_and_go_on(running: ConsoleRunning, agent: PuppetAgent) -> None:
    """A turn that says something, runs a command that waits for a card, then goes on."""
    agent.start_turn()
    agent.say("m1", "I will ", "look around.")
    agent.run_tool("c1", "ls -la")
    agent.ask(approval("puppet:1"))
    await running.memory.wait_for(lambda: running.memory.cards(ROOM) or None)
    agent.run_tool("c1", "ls -la", done=True)
    agent.say("m2", "Three files.")
    agent.complete()
    await running.memory.wait_for(lambda: any("Three files." in t for t in shown(running.memory)))


async def test_what_the_agent_says_after_a_card_is_a_message_after_it(
    running: ConsoleRunning, puppet: PuppetLauncher
) -> None:
    agent = await prompt(running, puppet, "look around")
    await ask_and_go_on(running, agent)
    # the command's line stays where it started (before the card), marked done there
    assert shown(running.memory) == ["I will look around.\n\n✓ `ls -la`", "card", "Three files."]
    session = await session_of(running)
    texts = await on_console(
        running.console,
        lambda: (t := console_texts(running.console, console_room(running, session)))[1:] and t,
        PROMPTLY,
    )
    assert texts == ["I will look around.\n\n✓ `ls -la`", "Three files."]


async def test_a_turn_is_kept_in_the_ledger_in_the_order_it_happened(
    running: ConsoleRunning, puppet: PuppetLauncher
) -> None:
    agent = await prompt(running, puppet, "look around")
    await ask_and_go_on(running, agent)
    await running.memory.wait_for(lambda: "ended completed" in running.memory.turn_signals(ROOM))
    session = await session_of(running)
    [turn] = await running.gateway.store.timeline.of_session(session.id)
    [card] = await running.gateway.store.interactions.list_recent(session_id=session.id)
    assert turn.prompt is not None and turn.prompt.text == "look around"
    assert turn.turn.status is TurnStatus.COMPLETED
    assert [(e.kind, e.text, e.interaction_id) for e in turn.entries] == [
        (EntryKind.TEXT, "I will look around.", None),
        (EntryKind.TOOL, "✓ `ls -la`", None),
        (EntryKind.INTERACTION, "", card.id),
        (EntryKind.TEXT, "Three files.", None),
    ]
    assert [e.seq for e in turn.entries] == [0, 1, 2, 3]
    assert turn.entries[2].at >= card.created_at


async def test_platforms_are_told_when_a_turn_starts_and_when_it_ends(
    running: ConsoleRunning, puppet: PuppetLauncher
) -> None:
    memory = running.memory
    agent = await prompt(running, puppet, "first")
    agent.start_turn()
    await memory.wait_for(lambda: memory.turn_signals(ROOM) == ["started"])
    agent.say("m1", "Hello", " there.")
    agent.complete()
    await memory.wait_for(lambda: memory.turn_signals(ROOM) == ["started", "ended completed"])
    [began, ended] = memory.turns
    assert began.texts == ()  # told before any text
    assert ended.status is TurnStatus.COMPLETED and ended.texts == ("Hello there.",)  # final

    agent = await prompt(running, puppet, "work a while")
    agent.start_turn()
    agent.say("m2", "Working")
    await memory.wait_for(lambda: "Working" in memory.texts(ROOM) or None)
    await memory.say(ROOM, ALICE, "/stop")
    await memory.wait_for(lambda: "ended interrupted" in memory.turn_signals(ROOM))

    await memory.say(ROOM, ALICE, "crash")
    await memory.say(ROOM, ALICE, "/resume")  # /stop paused the queue
    agent, _ = await puppet.prompt()
    agent.start_turn()
    agent.crash()
    await memory.wait_for(lambda: "ended failed" in memory.turn_signals(ROOM))
    assert memory.turn_signals(ROOM) == [
        "started",
        "ended completed",
        "started",
        "ended interrupted",
        "started",
        "ended failed",
    ]


async def test_a_platform_in_a_429_storm_holds_back_no_other_platform(
    running: ConsoleRunning, puppet: PuppetLauncher
) -> None:
    memory, console = running.memory, running.console
    agent = await prompt(running, puppet, "first")
    mirror = console_room(running, await session_of(running))
    memory.rate_limited = 5.0  # every text refused: retry after 5 s
    agent.start_turn()
    agent.say("m1", "one")
    await on_console(console, lambda: console_texts(console, mirror) == ["one"], PROMPTLY)
    agent.say("m1", " two")
    await on_console(console, lambda: console_texts(console, mirror) == ["one two"], PROMPTLY)
    agent.emit(Warning(message="the disk is nearly full"))
    notice = "⚠ the disk is nearly full"
    await on_console(console, lambda: notice in console_texts(console, mirror), PROMPTLY)
    agent.complete()
    # the next turn is not held up by the storming platform's end of the last one
    agent = await prompt(running, puppet, "second")
    agent.start_turn()
    agent.say("m2", "three")
    await on_console(console, lambda: "three" in console_texts(console, mirror), PROMPTLY)
    agent.complete()
    assert memory.texts(ROOM) == [] and memory.too_many  # nothing got through the storm

    memory.rate_limited = None  # the storm ends: everything arrives, in order, exact
    await memory.wait_for(lambda: memory.turn_signals(ROOM).count("ended completed") == 2, 30)
    assert memory.texts(ROOM) == ["one two", notice, "three"]
    assert [t.texts for t in memory.turns if t.status is not None] == [
        ("one two", notice),
        ("one two", notice, "three"),
    ]


async def test_each_platform_streams_at_its_own_pace(
    tmp_path: Path, puppet: PuppetLauncher
) -> None:
    slow = MemoryPlatform(limits=PlatformLimits(min_edit_interval_seconds=60.0))
    async for running in started(tmp_path, puppet, memory=slow):
        await streams_at_its_own_pace(running, puppet, slow)


async def streams_at_its_own_pace(
    running: ConsoleRunning, puppet: PuppetLauncher, slow: MemoryPlatform
) -> None:
    console = running.console  # an edit every 0.25 s
    agent = await prompt(running, puppet, "go")
    mirror = console_room(running, await session_of(running))

    def console_shows(text: str) -> Callable[[], bool]:
        return lambda: console_texts(console, mirror) == [text]

    agent.start_turn()
    agent.say("m1", "one")
    await on_console(console, console_shows("one"), PROMPTLY)
    await slow.wait_for(lambda: slow.texts(ROOM) == ["one"], PROMPTLY)
    agent.say("m1", " two")
    await on_console(console, console_shows("one two"), PROMPTLY)
    agent.say("m1", " three")
    await on_console(console, console_shows("one two three"), PROMPTLY)
    assert slow.texts(ROOM) == ["one"]  # its next edit is a minute away
    agent.complete()  # the final text goes at once
    await slow.wait_for(lambda: slow.texts(ROOM) == ["one two three"], PROMPTLY)
