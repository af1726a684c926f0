"""/stop, what a person types after it, and chat text beside a waiting card, through the whole
gateway on the memory platform, with an agent the test moves by hand (tests/puppet_launcher.py).

- /stop is said once, when the turn has ended, naming who stopped it; a card it withdrew says
  that person stopped it (not "cancelled by the agent").
- After /stop a new message runs next; the messages queued before it are held, in order,
  with a one-line note, until /resume (which runs them after the new one) or /clear. The same
  after a restart.
- "Queued as a message for the agent, not as a decision" is said once per card; after that
  a message gets a mark. A reply to a waiting card always gets the whole notice, and the card
  again under it, whose buttons decide the same request, once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from gateway.cards import Card
from gateway.config.model import Config
from gateway.domain import InteractionState, Resolution
from gateway.interactions.machine import DeliveryOutcome, Interaction
from gateway.session_record import SessionRecord
from gateway.sessions.engine import Gateway
from gateway.store.records import PromptRecord, PromptState
from platforms.memory.platform import MemoryPlatform, Rendered
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, BOB, ROOM
from tests.puppet_launcher import PuppetAgent, PuppetLauncher
from tests.store_helpers import approval

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
WHEN = r"\d\d:\d\d UTC"  # how a status line writes a time (gateway/wording.py)


def memory_config(tmp_path: Path) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice", "bob"]
approvers = ["alice", "bob"]

[platforms.memory]
"""
    return parse_config(text, "test.toml")


_starts = iter(range(1, 1000))


@asynccontextmanager
async def running(
    tmp_path: Path, puppet: PuppetLauncher
) -> AsyncIterator[tuple[Gateway, MemoryPlatform]]:
    # each start has its own message ids, and edits the cards an earlier start sent
    memory = MemoryPlatform(adopt_unknown=True, id_prefix=f"start{next(_starts)}-")
    config = memory_config(tmp_path)
    async with Gateway(config, platforms={"memory": memory}, launcher=puppet) as gateway:
        yield gateway, memory


async def prompted(puppet: PuppetLauncher, text: str) -> PuppetAgent:
    """The next prompt the agent got is ``text`` (and nothing else came first)."""
    agent, got = await puppet.prompt()
    assert got == text
    return agent


async def session_of(gateway: Gateway) -> SessionRecord:
    session = await gateway.store.sessions.lookup(ROOM)
    assert session is not None
    return session


def texts_after(memory: MemoryPlatform, before: int) -> list[str]:
    return memory.texts(ROOM)[before:]


async def new_texts(memory: MemoryPlatform, before: int, count: int = 1) -> list[str]:
    """Wait for ``count`` texts shown after the first ``before``; all those shown then."""
    return await memory.wait_for(
        lambda: len(texts_after(memory, before)) >= count and texts_after(memory, before)
    )


async def card_of(memory: MemoryPlatform, probe: Callable[[Card], bool]) -> Rendered:
    def find() -> Rendered | None:
        return next((c for c in memory.cards(ROOM) if c.card is not None and probe(c.card)), None)

    return await memory.wait_for(find)


async def asked(gateway: Gateway, memory: MemoryPlatform, agent: PuppetAgent, key: str) -> Rendered:
    """The agent asks for an approval; its card, waiting."""
    before = len(memory.cards(ROOM))
    agent.ask(approval(key, title=f"Run {key}?"))
    return await memory.wait_for(
        lambda: memory.cards(ROOM)[-1] if len(memory.cards(ROOM)) > before else None
    )


async def record(gateway: Gateway, shown: Rendered) -> Interaction:
    session = await session_of(gateway)
    for interaction in await gateway.store.interactions.list_recent(session_id=session.id):
        copies = await gateway.store.cards.list_for(interaction.id)
        if any(c.message_ref == shown.ref.message_id for c in copies):
            return interaction
    raise AssertionError(f"no interaction shown as {shown.ref.message_id}")


def token(shown: Rendered, label: str) -> str:
    """The token of the button ``label`` as the card first showed it (its buttons may be
    gone now: a person may still press one on a screen not refreshed)."""
    first = shown.versions[0]
    assert isinstance(first, Card)
    [action] = [a for a in first.actions if a.label == label]
    return action.token


# --- /stop: one notice, who stopped it, and the card says so --------------------------------


async def test_stop_is_said_once_naming_who_stopped_it_and_the_card_says_they_did(
    tmp_path: Path,
) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        await memory.say(ROOM, ALICE, "look around")
        agent = await prompted(puppet, "look around")
        agent.start_turn()
        agent.say("m1", "Let me look.")
        card = await asked(gateway, memory, agent, "puppet:1")
        before = len(memory.texts(ROOM))

        await memory.say(ROOM, BOB, "/stop")
        await memory.wait_for(lambda: "ended interrupted" in memory.turn_signals(ROOM))
        shown = await card_of(memory, lambda c: c.status_line.startswith("Stopped by Bob"))
        assert shown is card and card.card is not None
        assert card.card.actions == ()  # no buttons left
        assert "Cancelled by the agent" not in card.card.status_line
        [notice] = await new_texts(memory, before)
        assert notice == "⏹ Stopped by Bob."

        ack = await memory.click(ROOM, ALICE, token(card, "Approve"))
        assert not ack.accepted and "Stopped by Bob" in ack.text
        interaction = await record(gateway, card)
        # nothing else was said: no "Stopping the turn", no "The turn was interrupted"
        assert texts_after(memory, before) == ["⏹ Stopped by Bob."]
    assert interaction.state is InteractionState.CANCELLED
    assert interaction.decision is None
    assert interaction.resolution is not None
    assert interaction.resolution.how is Resolution.STOPPED
    assert interaction.resolution.by == "memory:bob"
    assert interaction.delivery is not None
    assert interaction.delivery.outcome is DeliveryOutcome.SKIPPED
    assert agent.received == []  # the agent was told nothing


async def test_stop_with_nothing_running_says_so_once(tmp_path: Path) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (_, memory):
        await memory.say(ROOM, ALICE, "hello")
        agent = await prompted(puppet, "hello")
        agent.start_turn()
        agent.complete()
        await memory.wait_for(lambda: "ended completed" in memory.turn_signals(ROOM))
        before = len(memory.texts(ROOM))
        await memory.say(ROOM, ALICE, "/stop")
        assert await new_texts(memory, before) == ["Nothing is running."]


# --- after /stop, what is typed runs next; what was queued before waits ---------------------


async def stopped_with_two_held(
    gateway: Gateway, memory: MemoryPlatform, puppet: PuppetLauncher
) -> PuppetAgent:
    """A turn runs, two messages wait behind it, and Alice stops it."""
    await memory.say(ROOM, ALICE, "first")
    agent = await prompted(puppet, "first")
    agent.start_turn()
    await memory.say(ROOM, ALICE, "queued 1")
    await memory.say(ROOM, BOB, "queued 2")
    before = len(memory.texts(ROOM))
    await memory.say(ROOM, ALICE, "/stop")
    [notice] = await new_texts(memory, before)
    assert notice == (
        "⏹ Stopped by Alice. 2 earlier messages are held: /resume runs them, /clear drops "
        "them; a new message runs first."
    )
    return agent


async def test_after_stop_a_new_message_runs_next_and_resume_runs_the_held_ones_after_it(
    tmp_path: Path,
) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        await stopped_with_two_held(gateway, memory, puppet)
        before = len(memory.texts(ROOM))
        await memory.say(ROOM, ALICE, "do this instead")
        agent = await prompted(puppet, "do this instead")  # it ran next, without /resume
        [note] = await new_texts(memory, before)
        assert note == (
            "2 earlier messages are held: /resume runs them after this one, /clear drops them."
        )
        agent.start_turn()
        await memory.say(ROOM, ALICE, "and this")  # waits behind the turn: no note again
        agent.complete()
        agent = await prompted(puppet, "and this")  # before the held ones
        assert texts_after(memory, before) == [note]
        session = await session_of(gateway)
        held = await gateway.store.prompts.list_held(session.id)
        assert [(p.text, p.author) for p in held] == [("queued 1", ALICE), ("queued 2", BOB)]

        await memory.say(ROOM, ALICE, "/resume")  # while "and this" runs: they come after it
        await memory.wait_for(
            lambda: "▶ Resumed: 2 held messages run next, in order." in memory.texts(ROOM)
        )
        agent.start_turn()
        agent.complete()
        agent = await prompted(puppet, "queued 1")
        agent.start_turn()
        agent.complete()
        agent = await prompted(puppet, "queued 2")
        assert await gateway.store.prompts.list_held(session.id) == []


async def test_after_stop_clear_drops_the_held_messages(tmp_path: Path) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        await stopped_with_two_held(gateway, memory, puppet)
        before = len(memory.texts(ROOM))
        await memory.say(ROOM, ALICE, "/clear")
        assert await new_texts(memory, before) == ["Cleared 2 queued message(s)."]
        await memory.say(ROOM, ALICE, "fresh start")
        agent = await prompted(puppet, "fresh start")
        agent.start_turn()
        agent.complete()
        await memory.wait_for(lambda: memory.turn_signals(ROOM).count("ended completed") == 1)
        assert not any("held" in text for text in texts_after(memory, before))
        await memory.say(ROOM, ALICE, "/resume")
        await memory.wait_for(lambda: "Nothing is held." in memory.texts(ROOM))
        session = await session_of(gateway)
        states = {p.text: p.state for p in await prompts_of(gateway, session)}
    assert states["queued 1"] is states["queued 2"] is PromptState.DROPPED
    assert states["fresh start"] is PromptState.DONE


async def prompts_of(gateway: Gateway, session: SessionRecord) -> list[PromptRecord]:
    """Every prompt of the session, whatever its state, in the order they came."""
    found, prompt_id = [], 1
    while (prompt := await gateway.store.prompts.get(prompt_id)) is not None:
        if prompt.session_id == session.id:
            found.append(prompt)
        prompt_id += 1
    return found


async def test_after_a_restart_a_new_message_runs_next_and_the_waiting_ones_are_held(
    tmp_path: Path,
) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        await memory.say(ROOM, ALICE, "first")
        agent = await prompted(puppet, "first")
        agent.start_turn()
        await memory.say(ROOM, ALICE, "waiting 1")
        await memory.say(ROOM, BOB, "waiting 2")
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        [notice] = memory.texts(ROOM)  # recovery's notice, sent before anything else
        assert notice == (
            "↻ The gateway restarted; the agent process it ran was ended. 2 earlier messages "
            "are held: /resume runs them, /clear drops them; a new message runs first. Your "
            "next message resumes the conversation."
        )
        await memory.say(ROOM, ALICE, "after the restart")
        agent = await prompted(puppet, "after the restart")
        await memory.wait_for(
            lambda: (
                "2 earlier messages are held: /resume runs them after this one, /clear "
                "drops them." in memory.texts(ROOM)
            )
        )
        session = await session_of(gateway)
        status = await gateway.control.status_text(session)
        assert "Queue: 0 waiting, 2 held (the gateway restarted): /resume or /clear" in status
        agent.start_turn()
        agent.complete()
        await memory.wait_for(lambda: "ended completed" in memory.turn_signals(ROOM))
        await memory.say(ROOM, ALICE, "/resume")
        agent = await prompted(puppet, "waiting 1")
        agent.start_turn()
        agent.complete()
        await prompted(puppet, "waiting 2")


# --- chat text beside a waiting card --------------------------------------------------------


async def test_the_not_a_decision_notice_is_said_once_per_card_then_a_mark(
    tmp_path: Path,
) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        await memory.say(ROOM, ALICE, "look around")
        agent = await prompted(puppet, "look around")
        agent.start_turn()
        first = await asked(gateway, memory, agent, "puppet:1")
        one = (await record(gateway, first)).id
        before = len(memory.texts(ROOM))
        await memory.say(ROOM, ALICE, "ok")
        [notice] = await new_texts(memory, before)
        assert notice == (
            "Queued as a message for the agent, not as a decision. Still waiting for a "
            f"decision on: Run puppet:1? ({one}). Use the card's buttons, or /approve {one}, "
            f"/deny {one}."
        )
        yes = await memory.say(ROOM, BOB, "yes")
        await memory.wait_for(lambda: (ROOM, yes) in memory.marks)
        sure = await memory.say(ROOM, ALICE, "sure")
        await memory.wait_for(lambda: (ROOM, sure) in memory.marks)
        assert texts_after(memory, before) == [notice]  # a mark, no second notice

        second = await asked(gateway, memory, agent, "puppet:2")  # a new card: said again
        two = (await record(gateway, second)).id
        await memory.say(ROOM, ALICE, "hmm")
        [_, again] = await new_texts(memory, before, 2)
        assert f"Run puppet:1? ({one}), Run puppet:2? ({two})" in again
        session = await session_of(gateway)
        queued = await gateway.store.prompts.list_queued(session.id)
        assert [p.text for p in queued] == ["ok", "yes", "sure", "hmm"]
        assert agent.received == []  # none of it decided anything


async def test_a_reply_to_a_card_gets_the_notice_and_the_card_again_deciding_once(
    tmp_path: Path,
) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (gateway, memory):
        await memory.say(ROOM, ALICE, "look around")
        agent = await prompted(puppet, "look around")
        agent.start_turn()
        card = await asked(gateway, memory, agent, "puppet:1")
        iid = (await record(gateway, card)).id
        await memory.say(ROOM, ALICE, "ok")  # the notice for this card is said
        await memory.wait_for(lambda: any("not as a decision" in t for t in memory.texts(ROOM)))
        shown = len(memory.messages(ROOM))

        # a reply to the card: the whole notice again, then the card again, its buttons live
        await memory.say(ROOM, BOB, "what will it do?", reply_to=card.ref.message_id)
        await memory.wait_for(lambda: len(memory.messages(ROOM)) >= shown + 2)
        notice, again = memory.messages(ROOM)[shown : shown + 2]
        assert notice.text == (
            "Queued as a message for the agent, not as a decision. Still waiting for a "
            f"decision on: Run puppet:1? ({iid}). Decide with the buttons below, or /approve "
            f"{iid}, /deny {iid}."
        )
        assert again.card is not None and card.card is not None
        assert [a.label for a in again.card.actions] == [a.label for a in card.card.actions]

        ack = await memory.click(ROOM, BOB, token(again, "Approve"))
        assert ack.accepted
        await memory.wait_for(lambda: len(agent.received) == 1)
        for copy in (card, again):  # both copies show the one decision, no buttons left
            await memory.wait_for(
                lambda copy=copy: (
                    copy.card is not None
                    and not copy.card.actions
                    and "by Bob" in copy.card.status_line
                )
            )
        late = await memory.click(ROOM, ALICE, token(card, "Deny"))
        assert not late.accepted and "Already decided by Bob" in late.text
        assert len(agent.received) == 1
        assert agent.received[0].action_id == "accept"


async def test_a_reply_to_a_message_that_is_no_card_is_a_plain_message(tmp_path: Path) -> None:
    puppet = PuppetLauncher()
    async with running(tmp_path, puppet) as (_, memory):
        await memory.say(ROOM, ALICE, "hello")
        agent = await prompted(puppet, "hello")
        agent.start_turn()
        agent.say("m1", "Hi.")
        await memory.wait_for(lambda: "Hi." in memory.texts(ROOM))
        [text] = [m for m in memory.messages(ROOM) if m.text == "Hi."]
        cards = len(memory.cards(ROOM))
        before = len(memory.texts(ROOM))
        await memory.say(ROOM, ALICE, "about that", reply_to=text.ref.message_id)
        agent.complete()
        await prompted(puppet, "about that")
        assert len(memory.cards(ROOM)) == cards
        assert texts_after(memory, before) == []
