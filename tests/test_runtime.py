"""AgentRuntime: a real process (tests/agents/fake_codex_app_server.py) driven through the
real Codex codec. Nothing is mocked; every wait is an awaited event under a deadline."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.codec import AgentCodec
from adapters.codex_app_server import CodexAppServerCodec
from adapters.runtime import AgentRuntime
from adapters.stdio import DEFAULT_ENV_ALLOWLIST, ProcessSpec, build_agent_env
from gateway.domain import Decision
from gateway.errors import AgentExitedError, CodecUsageError, HandshakeTimeout, RemoteError
from gateway.events import (
    AgentEvent,
    AgentExited,
    AgentMessage,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    SessionStarted,
    TurnCompleted,
    Warning,
)

pytestmark = pytest.mark.timeout(60)

FAKE = Path(__file__).parent / "agents" / "fake_codex_app_server.py"
DEADLINE = 20


def spec(workdir: Path, mode: str, **overrides: Any) -> ProcessSpec:
    settings: dict[str, Any] = {
        "cwd": workdir,
        "env": build_agent_env(DEFAULT_ENV_ALLOWLIST, {}),
        "eof_grace_seconds": 5.0,
    }
    settings.update(overrides)
    return ProcessSpec(argv=[sys.executable, str(FAKE), mode], **settings)


def runtime(workdir: Path, mode: str, **options: Any) -> AgentRuntime:
    codec: AgentCodec = CodexAppServerCodec(cwd=str(workdir))
    overrides = options.pop("spec", {})
    return AgentRuntime(spec(workdir, mode, **overrides), codec, **options)


async def until(run: AgentRuntime, kind: type[AgentEvent]) -> list[AgentEvent]:
    """Events up to and including the first of ``kind``."""
    seen: list[AgentEvent] = []
    async with asyncio.timeout(DEADLINE):
        while not seen or not isinstance(seen[-1], kind):
            seen.append(await run.next_event())
    return seen


async def test_an_approval_round_trip_through_a_real_process(workdir: Path) -> None:
    async with runtime(workdir, "approve") as run:
        assert run.session is not None and run.session.native_id == "thread-fake"
        assert run.session.policy["approvals_reviewer"] == "user"
        assert run.pid > 0 and run.pgid == run.pid and run.start_time is not None
        await run.send(Prompt(text="create hello.txt"))
        opened = (await until(run, InteractionOpened))[-1]
        assert isinstance(opened, InteractionOpened)
        assert [a.id for a in opened.request.actions] == ["accept", "decline", "cancel"]
        decision = Decision(action_id="accept")
        await run.send(Respond(native_key=opened.request.native_key, decision=decision))
        events = await until(run, TurnCompleted)
        assert any(isinstance(e, InteractionClosed) for e in events)
        [message] = [e for e in events if isinstance(e, AgentMessage)]
        assert message.text == 'decision: "accept"'
    # leaving the block ended the process and its group
    assert run.exit_status is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(run.pgid, 0)
    with pytest.raises(AgentExitedError):
        await run.next_event()


async def test_interrupt_withdraws_the_pending_request(workdir: Path) -> None:
    async with runtime(workdir, "approve") as run:
        await run.send(Prompt(text="create hello.txt"))
        await until(run, InteractionOpened)
        await run.send(Interrupt())
        events = await until(run, InteractionClosed)
        done = next(e for e in events if isinstance(e, TurnCompleted))
        closed = events[-1]
        assert done.status.value == "interrupted"
        assert isinstance(closed, InteractionClosed) and closed.how.value == "cancelled_by_agent"
        with pytest.raises(CodecUsageError):
            await run.send(
                Respond(native_key=closed.native_key, decision=Decision(action_id="accept"))
            )


async def test_local_misuse_writes_nothing_and_the_session_goes_on(workdir: Path) -> None:
    async with runtime(workdir, "approve") as run:
        with pytest.raises(CodecUsageError):
            await run.send(Respond(native_key="rpc:7", decision=Decision(action_id="accept")))
        await run.send(Prompt(text="go"))
        assert isinstance((await until(run, InteractionOpened))[-1], InteractionOpened)


async def test_the_process_ending_is_the_last_event(workdir: Path) -> None:
    async with runtime(workdir, "exit-after-turn") as run:
        await run.send(Prompt(text="go"))
        seen = [event async for event in run.events()]
        assert isinstance(seen[-1], AgentExited)
        assert (seen[-1].code, seen[-1].reason) == (0, "exited")
        assert any(isinstance(e, TurnCompleted) for e in seen)
        with pytest.raises(AgentExitedError):
            await run.next_event()
        with pytest.raises(AgentExitedError):
            await run.send(Prompt(text="again"))


async def test_an_agent_that_exits_during_the_handshake(workdir: Path) -> None:
    with pytest.raises(AgentExitedError) as raised:
        async with runtime(workdir, "exit-early"):
            pytest.fail("the session cannot have started")
    assert raised.value.code == 3
    assert "boom" in raised.value.stderr_tail


async def test_an_agent_that_never_answers_times_out(workdir: Path) -> None:
    with pytest.raises(HandshakeTimeout):
        async with runtime(workdir, "silent", handshake_timeout=0.5, spec={"eof_grace_seconds": 0}):
            pytest.fail("the session cannot have started")


async def test_a_refused_thread_is_the_agents_error(workdir: Path) -> None:
    with pytest.raises(RemoteError) as raised:
        async with runtime(workdir, "refuse-thread"):
            pytest.fail("the session cannot have started")
    assert raised.value.message == "thread refused by the fake"


async def test_a_line_past_the_limit_ends_the_agent(workdir: Path) -> None:
    async with runtime(workdir, "huge-line", spec={"max_line_bytes": 4096}) as run:
        await run.send(Prompt(text="go"))
        async with asyncio.timeout(DEADLINE):
            seen = [event async for event in run.events()]
    assert isinstance(seen[-1], AgentExited) and seen[-1].reason == "line_too_long"


async def test_a_line_that_is_not_json_is_a_warning_and_the_turn_goes_on(workdir: Path) -> None:
    async with runtime(workdir, "garbage") as run:
        await run.send(Prompt(text="go"))
        events = await until(run, TurnCompleted)
    warnings = [e for e in events if isinstance(e, Warning) and e.code == "malformed_message"]
    assert len(warnings) == 1 and "this is not json" in warnings[0].message
    assert any(isinstance(e, AgentMessage) and e.text == "still here" for e in events)


async def test_a_task_waiting_for_events_is_woken_when_the_runtime_is_left(
    workdir: Path,
) -> None:
    async with asyncio.TaskGroup() as tasks:
        async with runtime(workdir, "approve") as run:
            await until(run, SessionStarted)
            waiting = asyncio.Event()

            async def wait_for_an_event() -> AgentEvent:
                waiting.set()
                return await run.next_event()  # nothing comes: the agent waits for a prompt

            waiter = tasks.create_task(wait_for_an_event())
            await waiting.wait()
    woken = waiter.result()
    assert isinstance(woken, AgentExited) and woken.reason == "stopped"


async def test_stop_ends_the_agent_and_its_events(workdir: Path) -> None:
    async with runtime(workdir, "approve") as run:
        await run.send(Prompt(text="go"))
        await until(run, InteractionOpened)
        await run.stop()
        async with asyncio.timeout(DEADLINE):
            seen = [event async for event in run.events()]
        assert isinstance(seen[-1], AgentExited) and seen[-1].reason == "stopped"
        with pytest.raises(AgentExitedError):
            await run.send(Interrupt())
