"""The shared paced outbox (platforms/outbox.py) on its own, as a platform other than
Telegram would use it: lanes named by channel ids, its limits as windows, its SDK's errors
sorted by its own function; on a clock that moves only when the test moves it, so that each
call is seen at the very time it was made."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from gateway.errors import PlatformError
from gateway.platform import RateLimited
from platforms.outbox import (
    MAX_ATTEMPTS,
    MAX_QUEUED,
    Outbox,
    Pacing,
    Priority,
    Refused,
    RetryLater,
    Unreachable,
    Verdict,
    Window,
)

pytestmark = pytest.mark.timeout(10)

MARGIN = 0.5


class ManualClock:
    """Time stands still until :meth:`wake` moves it to the earliest sleeper's time."""

    def __init__(self) -> None:
        self.time = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self._slept = asyncio.Event()

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.time + seconds, woken)
        self._sleepers.append(entry)
        self._slept.set()
        try:
            await woken
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def sleeping(self) -> None:
        """Wait until something sleeps."""
        while not self._sleepers:
            self._slept.clear()
            await self._slept.wait()

    async def wake(self) -> float:
        """Wait until something sleeps, then move time to when it wakes and wake it."""
        while not self._sleepers:
            self._slept.clear()
            await self._slept.wait()
        self.time = min(at for at, _ in self._sleepers)
        for at, woken in list(self._sleepers):
            if at <= self.time:
                self._sleepers.remove((at, woken))
                woken.set_result(None)
        return self.time

    async def run(self, *calls: asyncio.Task[object]) -> None:
        """Wake each sleeper in turn until ``calls`` are done (one lane sleeps at a time)."""
        while not all(call.done() for call in calls):
            waking = asyncio.ensure_future(self.wake())
            finished = asyncio.ensure_future(asyncio.wait(calls))
            await asyncio.wait({waking, finished}, return_when=asyncio.FIRST_COMPLETED)
            for task in (waking, finished):
                task.cancel()


class Throttled(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"slow down for {seconds} s")
        self.seconds = seconds


class Offline(Exception):
    pass


class Denied(Exception):
    pass


def classify(exc: Exception) -> Verdict | None:
    """The SDK of the test's chat platform, as a platform module would sort it."""
    if isinstance(exc, Throttled):
        return RetryLater(seconds=exc.seconds)
    if isinstance(exc, Offline):
        return Unreachable(error=PlatformError("chat: cannot reach the server"))
    if isinstance(exc, Denied):
        return Refused(error=PlatformError(f"chat refused: {exc}"))
    return None


def pacing(**windows: Any) -> Pacing[str]:
    return Pacing[str](margin_seconds=MARGIN, **windows)


class Calls:
    """Calls that say when they were made, in which lane."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.made: list[tuple[float, str]] = []

    def __call__(self, name: str, *fail: Exception) -> Callable[[], Awaitable[str]]:
        failures = list(fail)

        async def call() -> str:
            self.made.append((self.clock.now(), name))
            if failures:
                raise failures.pop(0)
            return name

        return call

    def at(self, name: str) -> list[float]:
        return [time for time, made in self.made if made == name]


async def outcome(call: Awaitable[str]) -> str | PlatformError:
    """What a call came to, its error included (a task of the test's group must not fail)."""
    try:
        return await call
    except PlatformError as exc:
        return exc


async def test_a_lane_keeps_to_its_window_and_other_lanes_are_not_held_up() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    discord = pacing(lane=(Window(calls=5, seconds=5),), shared=(Window(calls=50, seconds=1),))
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, discord, classify=classify, name="chat", clock=clock)
        busy = [tasks.create_task(outbox.run("C1", Priority.TEXT, calls("C1"))) for _ in range(7)]
        other = tasks.create_task(outbox.run("C2", Priority.TEXT, calls("C2")))
        assert await other == "C2"
        assert calls.at("C2") == [0.0]  # while C1 waits for its window
        await clock.run(*busy)
    assert calls.at("C1") == [0.0] * 5 + [5.5] * 2


async def test_a_lane_named_a_group_keeps_to_the_group_window_too() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    groups = pacing(
        lane=(Window(calls=1, seconds=1),),
        group=(Window(calls=3, seconds=60),),
        is_group=lambda channel: channel.startswith("G"),
    )
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, groups, classify=classify, name="chat", clock=clock)
        for lane in ("G1", "D1"):
            made = [tasks.create_task(outbox.run(lane, Priority.TEXT, calls(lane))) for _ in "abcd"]
            await clock.run(*made)
    assert calls.at("G1") == [0.0, 1.5, 3.0, 60.5]
    assert calls.at("D1") == [60.5, 62.0, 63.5, 65.0]


async def test_a_shared_window_counts_calls_in_flight_and_leaves_its_headroom() -> None:
    clock = ManualClock()
    started: list[tuple[float, str]] = []
    two_started = asyncio.Event()
    release = {lane: asyncio.Event() for lane in ("C1", "C2", "C3")}

    def slow(lane: str) -> Callable[[], Awaitable[str]]:
        async def call() -> str:
            started.append((clock.now(), lane))
            if len(started) == 2:
                two_started.set()
            await release[lane].wait()
            return lane

        return call

    bot = pacing(shared=(Window(calls=3, seconds=1, headroom=1),))  # two at a time
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, bot, classify=classify, name="chat", clock=clock)
        runs = {
            lane: tasks.create_task(outbox.run(lane, Priority.TEXT, slow(lane))) for lane in release
        }
        release["C3"].set()
        await two_started.wait()
        release["C1"].set()
        assert await runs["C1"] == "C1"
        # C3 waited for a call in flight to return, then for the window: it sleeps now
        assert await clock.wake() == 1.5
        assert await runs["C3"] == "C3"
        release["C2"].set()
    assert started == [(0.0, "C1"), (0.0, "C2"), (1.5, "C3")]


async def test_a_window_of_one_method_counts_only_its_calls() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    tier3 = frozenset({"chat.update"})
    slack = pacing(shared=(Window(calls=2, seconds=60, methods=tier3),))
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, slack, classify=classify, name="chat", clock=clock)
        updates = [
            tasks.create_task(outbox.run(lane, Priority.STREAM, calls(lane), method="chat.update"))
            for lane in ("C1", "C2", "C3")
        ]
        posts = [
            tasks.create_task(
                outbox.run("C4", Priority.TEXT, calls("post"), method="chat.postMessage")
            )
            for _ in range(3)
        ]
        await asyncio.gather(*posts)
        await clock.run(*updates)
    assert calls.at("post") == [0.0] * 3
    assert sorted(time for time, name in calls.made if name != "post") == [0.0, 0.0, 60.5]


async def test_a_window_ignores_the_calls_it_is_told_to_and_they_wait_for_no_other() -> None:
    # Telegram's pace of a chat is of messages: its "typing…" must not hold a text back
    clock = ManualClock()
    calls = Calls(clock)
    typing = frozenset({"sendChatAction"})
    telegram = pacing(lane=(Window(calls=1, seconds=1, ignores=typing),))
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, telegram, classify=classify, name="chat", clock=clock)
        await outbox.run("C1", Priority.STREAM, calls("typing"), method="sendChatAction")
        await outbox.run("C1", Priority.TEXT, calls("text"), method="sendMessage")
        await outbox.run("C1", Priority.STREAM, calls("typing"), method="sendChatAction")
        made = tasks.create_task(outbox.run("C1", Priority.TEXT, calls("text")))
        await clock.run(made)
    assert calls.at("typing") == [0.0, 0.0]  # the text sent before it does not hold it
    assert calls.at("text") == [0.0, 1.5]  # nor does it hold a text back


async def test_an_edit_waiting_for_its_methods_budget_holds_back_no_post_of_its_lane() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    slack = pacing(
        lane=(Window(calls=1, seconds=1, methods=frozenset({"chat.postMessage"})),),
        shared=(Window(calls=1, seconds=60, methods=frozenset({"chat.update"})),),
    )
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, slack, classify=classify, name="chat", clock=clock)
        await outbox.run("C1", Priority.CARD, calls("edit"), method="chat.update")
        # the budget is spent: the next edit waits a minute, the card posted after it does not
        edit = tasks.create_task(
            outbox.run("C1", Priority.CARD, calls("edit"), method="chat.update")
        )
        card = tasks.create_task(
            outbox.run("C1", Priority.CARD, calls("card"), method="chat.postMessage")
        )
        text = tasks.create_task(
            outbox.run("C1", Priority.TEXT, calls("text"), method="chat.postMessage")
        )
        await clock.run(card, text)
        assert not edit.done()
        await clock.run(edit)
    assert calls.at("card") == [0.0] and calls.at("text") == [1.5]  # posts in order, paced
    assert calls.at("edit") == [0.0, 60.5]


async def test_a_call_queued_while_its_lane_waits_for_a_later_window_goes_at_once() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    slack = pacing(shared=(Window(calls=1, seconds=60, methods=frozenset({"chat.update"})),))
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, slack, classify=classify, name="chat", clock=clock)
        await outbox.run("C1", Priority.CARD, calls("edit"), method="chat.update")
        edit = tasks.create_task(
            outbox.run("C1", Priority.CARD, calls("edit"), method="chat.update")
        )
        await clock.sleeping()  # the lane sleeps until the budget has room
        card = await outbox.run("C1", Priority.CARD, calls("card"), method="chat.postMessage")
        assert card == "card" and not edit.done()
        await clock.run(edit)
    assert calls.at("card") == [0.0]  # not at 60.5, when the lane's sleep would have ended
    assert calls.at("edit") == [0.0, 60.5]


async def test_a_429_holds_the_lane_and_the_call_goes_again_before_the_next() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(
            tasks,
            pacing(lane=(Window(calls=1, seconds=1),)),
            classify=classify,
            name="chat",
            clock=clock,
        )
        first = tasks.create_task(outbox.run("C1", Priority.TEXT, calls("first", Throttled(3))))
        second = tasks.create_task(outbox.run("C1", Priority.TEXT, calls("second")))
        await clock.run(first, second)
    assert calls.made == [(0.0, "first"), (3.5, "first"), (5.0, "second")]
    assert outbox.rate_limited == 1


async def test_a_call_refused_429_every_time_is_rate_limited_at_last() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    always = [Throttled(2) for _ in range(MAX_ATTEMPTS)]
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, pacing(), classify=classify, name="chat", clock=clock)
        call = tasks.create_task(outcome(outbox.run("C1", Priority.CARD, calls("card", *always))))
        await clock.run(call)
    error = call.result()
    assert isinstance(error, RateLimited) and error.retry_after == 2
    assert isinstance(error.__cause__, Throttled)
    assert calls.at("card") == [2.5 * n for n in range(MAX_ATTEMPTS)]


async def test_the_platforms_errors_are_what_its_classifier_says() -> None:
    clock = ManualClock()
    calls = Calls(clock)
    said: list[str] = []
    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(
            tasks,
            pacing(),
            classify=classify,
            name="chat",
            clock=clock,
            on_unreachable=lambda: said.append("unreachable"),
            on_success=lambda: said.append("ok"),
        )
        with pytest.raises(PlatformError, match="cannot reach") as offline:
            await outbox.run("C1", Priority.TEXT, calls("a", Offline()))
        assert said == ["unreachable"] and isinstance(offline.value.__cause__, Offline)
        with pytest.raises(PlatformError, match="chat refused: no") as denied:
            await outbox.run("C1", Priority.TEXT, calls("b", Denied("no")))
        assert said == ["unreachable"] and isinstance(denied.value.__cause__, Denied)
        with pytest.raises(PlatformError, match="chat: unexpected KeyError") as bug:
            await outbox.run("C1", Priority.TEXT, calls("c", KeyError("x")))
        assert type(bug.value) is PlatformError and isinstance(bug.value.__cause__, KeyError)
        assert await outbox.run("C1", Priority.TEXT, calls("d")) == "d"
        assert said == ["unreachable", "ok"]
    assert outbox.rate_limited == 0


async def test_a_full_lane_refuses_more_and_closing_fails_every_call_left() -> None:
    clock = ManualClock()
    started, never = asyncio.Event(), asyncio.Event()

    async def stuck() -> str:
        started.set()
        await never.wait()
        return "never"

    async def quick() -> str:
        return "quick"

    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, pacing(), classify=classify, name="chat", clock=clock)
        in_flight = tasks.create_task(outcome(outbox.run("C1", Priority.TEXT, stuck)))
        await started.wait()
        waiting = [
            tasks.create_task(outcome(outbox.run("C1", Priority.TEXT, quick)))
            for _ in range(MAX_QUEUED)
        ]
        # started after the others (tasks start in order): the lane is full by then
        one_more = tasks.create_task(outcome(outbox.run("C1", Priority.TEXT, quick)))
        refused = await one_more
        assert isinstance(refused, PlatformError) and "outbox of C1 is full" in str(refused)
        outbox.close()
        results = await asyncio.gather(in_flight, *waiting)
        with pytest.raises(PlatformError, match="closed"):
            await outbox.run("C2", Priority.TEXT, quick)
    assert all(isinstance(r, PlatformError) and "closed" in str(r) for r in results)
