"""A committed decision reaches its agent exactly once, whatever happens to whoever clicked.

Through the whole gateway on the memory platform, with the scripted agent
(tests/scripted_launcher.py), whose writes behave as a real runtime's: the codec takes an
answer before its write is awaited (a second answer is AlreadyAnswered), and a test may hold
writes at that point or make them fail. What is asserted is what a person and the agent
would notice: how many answers the agent received, and what every card and /pending say.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.config.model import ExpiryPolicy
from gateway.domain import Decision, InteractionState
from gateway.events import Respond
from gateway.interactions.machine import DeliveryOutcome, Interaction
from gateway.sessions.runner import SessionRunner
from tests.gateway_flows import Asked, interaction, session_of, settles
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import open_card, scripted_config, scripted_gateway

pytestmark = pytest.mark.timeout(60)

NEVER = ExpiryPolicy()  # no request expires here
APPROVE = Decision(action_id="accept")
DELIVERED = r'Approved \("Approve"\) by Alice at .* · sent to the agent · done'


async def runner_of(gw: Running) -> SessionRunner:
    session = await session_of(gw, ROOM)
    runner = gw.gateway.existing_runner(session.id)
    assert runner is not None
    return runner


async def sweep(gw: Running) -> int:
    """Run the session's sweep now, as its runner does; how many decisions it handled."""
    runner = await runner_of(gw)
    assert runner.epoch is not None
    return await gw.gateway.broker.sweep(runner.session_id, runner.epoch)


async def commit_only(gw: Running, asked: Asked) -> Interaction:
    """A decision committed with nothing written, as a caller cancelled while its commit
    landed (or a gateway whose write's record failed) leaves it."""
    return await gw.gateway.store.interactions.decide(
        asked.interaction.id,
        expected_version=asked.interaction.version,
        actor=ALICE,
        decision=APPROVE,
    )


async def test_a_click_cancelled_after_the_commit_still_reaches_the_agent_once(
    tmp_path: Path,
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        asked = await open_card(gw, ROOM, "approve")
        launcher.writes.hold()
        click = asyncio.create_task(gw.memory.click(ROOM, ALICE, asked.token("Approve")))
        await launcher.writes.waiting.wait()  # committed, and its write under way
        # the platform gives up on the click (an ack deadline, a shutdown): cancelled here
        click.cancel()
        with pytest.raises(asyncio.CancelledError):
            await click
        launcher.writes.release()
        record = await settles(gw, asked, DELIVERED)
        assert launcher.received == [APPROVE]
        assert record.delivery is not None and record.delivery.outcome is DeliveryOutcome.OK
        await gw.text_where(lambda text: text == "Thanks: 0 answer(s) received.")


async def test_the_sweep_delivers_a_stranded_decision_once(tmp_path: Path) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        asked = await open_card(gw, ROOM, "approve")
        decided = await commit_only(gw, asked)
        assert decided.state is InteractionState.DECIDED and decided.delivery is None
        (await runner_of(gw)).sweep_soon()
        await settles(gw, asked, DELIVERED)
        assert launcher.received == [APPROVE]
        # a later sweep finds nothing to do
        assert await sweep(gw) == 0
        assert launcher.received == [APPROVE]


async def test_the_sweep_never_writes_a_decision_whose_write_is_under_way(
    tmp_path: Path,
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        asked = await open_card(gw, ROOM, "approve")
        launcher.writes.hold()
        click = asyncio.create_task(gw.memory.click(ROOM, ALICE, asked.token("Approve")))
        await launcher.writes.waiting.wait()
        assert await sweep(gw) == 0
        launcher.writes.release()
        ack = await click
        assert ack.accepted
        await settles(gw, asked, DELIVERED)
        assert launcher.received == [APPROVE]


async def test_a_write_whose_record_was_lost_is_recorded_not_written_again(
    tmp_path: Path,
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        asked = await open_card(gw, ROOM, "approve")
        await commit_only(gw, asked)
        runner = await runner_of(gw)
        assert runner.agent is not None and runner.epoch is not None
        native_key = asked.interaction.native_key
        assert native_key is not None
        # the answer's bytes are queued by the codec, and then nothing records the write
        launcher.writes.hold()
        written = asyncio.create_task(
            runner.agent.send(Respond(native_key=native_key, decision=APPROVE))
        )
        await launcher.writes.waiting.wait()
        # the sweep tries again: the codec says it was answered; that write is the delivery
        assert await sweep(gw) == 1
        record = await interaction(gw, asked.interaction.id)
        assert record.state is InteractionState.DELIVERED
        assert record.delivery is not None and record.delivery.outcome is DeliveryOutcome.OK
        launcher.writes.release()
        await written
        await settles(gw, asked, DELIVERED)
        assert launcher.received == [APPROVE]


async def test_a_failed_write_says_so_on_the_card_and_in_pending_and_is_not_resent(
    tmp_path: Path,
) -> None:
    async with scripted_gateway(scripted_config(tmp_path, fast=NEVER)) as (gw, launcher):
        asked = await open_card(gw, ROOM, "approve")
        launcher.writes.fail_with = "the agent's stdin is closed"
        ack = await gw.memory.click(ROOM, ALICE, asked.token("Approve"))
        failed = (
            r'Approved \("Approve"\) by Alice at .* · the answer did not reach the agent '
            r"\(the agent's stdin is closed\) and was not resent: /stop the turn, then send a"
            " new message"
        )
        assert ack.text.startswith("Approved. ") and "did not reach" in ack.text
        await settles(gw, asked, failed)
        await gw.memory.say(ROOM, ALICE, "/pending")
        pending = await gw.text_where(lambda text: text.startswith("Open requests:"))
        assert pending.splitlines()[1:] == [
            f"  · {asked.interaction.id}: Run ls? [decided, shown]",
            "    ⚠ The answer did not reach the agent (the agent's stdin is closed) and was not"
            " resent: /stop the turn, then send a new message",
        ]
        # a new click is not a way round it: the decision stands, and is not written again
        again = await gw.memory.click(ROOM, ALICE, asked.token("Approve"))
        assert not again.accepted
        assert await sweep(gw) == 0
        # what the card says to do works: /stop ends the turn, the request goes with it
        launcher.writes.fail_with = None
        await gw.memory.say(ROOM, ALICE, "/stop")
        await settles(
            gw,
            asked,
            r'Approved \("Approve"\) by Alice at .* · nothing reached the agent: '
            "Alice stopped the turn first",
        )
        assert launcher.received == []
