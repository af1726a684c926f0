"""The Slack platform's lanes say when each piece of work ended, which is when its envelope
is acked (platforms/slack/receive.py, acking.py): True once it ended, False if it failed or
was cancelled, None when refused; work of one conversation in order."""

from __future__ import annotations

import asyncio

import pytest

from platforms.slack.acking import Commit, acked_when_committed, acked_when_done
from platforms.slack.receive import MAX_QUEUED, Lanes

pytestmark = pytest.mark.timeout(10)


async def test_each_put_says_when_its_work_ended_in_the_conversations_order() -> None:
    order: list[str] = []
    gate = asyncio.Event()

    async def first() -> None:
        await gate.wait()
        order.append("first")

    async def second() -> None:
        order.append("second")

    async def failing() -> None:
        raise RuntimeError("the ledger said no")

    async with asyncio.TaskGroup() as tasks:
        lanes = Lanes(tasks)
        one = lanes.put("c1", first)
        two = lanes.put("c1", second)
        bad = lanes.put("c2", failing)
        assert one is not None and two is not None and bad is not None
        assert await bad is False  # failed: not acked
        assert not one.done() and not two.done()  # behind the first, in order
        gate.set()
        assert await two is True and one.result() is True
        assert order == ["first", "second"]


async def test_work_cancelled_by_a_stop_and_work_refused_are_not_acked() -> None:
    never = asyncio.Event()

    async def stuck() -> None:
        await never.wait()

    async with asyncio.TaskGroup() as tasks:
        lanes = Lanes(tasks)
        running = lanes.put("c1", stuck)
        behind = lanes.put("c1", stuck)
        full = [lanes.put("c2", stuck) for _ in range(MAX_QUEUED + 1)]
        assert full[-1] is None  # the lane is full: refused
        assert not await lanes.drain(0)  # the stop cancels what runs
        assert running is not None and behind is not None
        assert await running is False and await behind is False
        assert lanes.put("c3", stuck) is None and lanes.spawn(stuck) is None
        assert (await acked_when_done(None)).status == 503  # type: ignore[union-attr]


async def test_an_interaction_is_acked_at_its_commit_or_at_the_deadline_never_after_a_failure() -> (
    None
):
    acks: list[str] = []

    async def ack() -> None:
        acks.append("ack")

    loop = asyncio.get_running_loop()
    async with asyncio.TaskGroup() as tasks:
        lanes = Lanes(tasks)
        committed = Commit()
        go_on = asyncio.Event()

        async def decide() -> None:
            committed.done()
            await go_on.wait()  # the ephemeral, after the ack

        done = lanes.spawn(decide)
        assert await acked_when_committed(ack, committed.future, done, 10.0) is None
        assert acks == ["ack"] and done is not None and not done.done()
        go_on.set()

        slow = Commit()
        stuck = asyncio.Event()

        async def slow_commit() -> None:
            await stuck.wait()

        late = lanes.spawn(slow_commit)
        assert await acked_when_committed(ack, slow.future, late, 0.01) is None
        assert acks == ["ack", "ack"]  # at the deadline, the work going on
        stuck.set()

        async def failing() -> None:
            raise RuntimeError("no ledger")

        broken = lanes.spawn(failing)
        refused = await acked_when_committed(ack, loop.create_future(), broken, 10.0)
        assert refused is not None and refused.status == 503
        assert acks == ["ack", "ack"]
