"""CodexExecSession with the real codex binary against the fake model on loopback.

Each turn is a real ``codex exec --json`` process in a hermetic CODEX_HOME
(``tests/codex_env.py``). What is asserted is what a person following the chat would see:
the command's output and exit code, a second turn that remembers the first, a refusal said
plainly (never an approval card), an interrupt that ends the turn and leaves nothing running.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.codex_exec_process import CodexExecSettings
from adapters.codex_exec_session import CodexExecSession
from gateway.domain import Decision, TurnStatus
from gateway.errors import AgentExitedError, CodecUsageError
from gateway.events import (
    AgentEvent,
    AgentExited,
    AgentMessage,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    SessionStarted,
    ToolActivity,
    ToolPhase,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)
from gateway.sessions.agents import RunningAgent
from tests.codex_env import CodexHome, make_codex_home
from tests.servers import fake_responses as fm

pytestmark = pytest.mark.timeout(120)

DEADLINE = 60  # seconds for any one test body
E = TypeVar("E")


def session_for(
    codex_bin: str,
    home: CodexHome,
    *,
    sandbox: str = "workspace-write",
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> CodexExecSession:
    settings = CodexExecSettings(
        command=[codex_bin],
        cwd=str(home.workspace),
        sandbox=sandbox,
        skip_git_repo_check=True,  # the scratch workspace is no git repository
    )
    return CodexExecSession(settings, env=env or home.env, stop_grace_seconds=5.0, **kwargs)


async def turn(session: CodexExecSession, prompt: str) -> list[AgentEvent]:
    """Send a prompt; every event up to and including its TurnCompleted."""
    await session.send(Prompt(text=prompt))
    return await until_turn_completed(session)


async def until_turn_completed(session: CodexExecSession) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    while not isinstance(event := await session.next_event(), TurnCompleted):
        events.append(event)
    return [*events, event]


async def until_command_shown(session: CodexExecSession) -> list[AgentEvent]:
    """Every event up to and including the first command's ToolActivity STARTED: what a
    person following the chat sees as "the command is running"."""
    events: list[AgentEvent] = []
    while True:
        event = await session.next_event()
        events.append(event)
        if isinstance(event, ToolActivity) and event.phase is ToolPhase.STARTED:
            return events


def of_type(events: list[AgentEvent], kind: type[E]) -> list[E]:
    return [event for event in events if isinstance(event, kind)]


def ended(events: list[AgentEvent]) -> TurnCompleted:
    end = events[-1]
    assert isinstance(end, TurnCompleted)
    return end


# --- one turn with a command ---------------------------------------------------------------


@pytest.mark.real_agent("codex")
async def test_a_command_turn_reports_its_output_and_exit_code(
    codex_bin: str, fake_model: fm.FakeResponses, codex_home: CodexHome
) -> None:
    fake_model.enqueue([fm.shell("echo hello from exec; exit 3"), fm.message("It failed.")])
    async with asyncio.timeout(DEADLINE), session_for(codex_bin, codex_home) as session:
        agent: RunningAgent = session  # what the core drives
        assert agent.pid is None  # no process between turns
        assert session.started.policy == {"approval_policy": "never", "sandbox": "workspace-write"}
        events = await turn(session, "run the script")
        assert session.pid is None

    (started,) = of_type(events, SessionStarted)
    assert started.native_id and session.thread_id == started.native_id
    assert len(of_type(events, TurnStarted)) == 1
    done = [a for a in of_type(events, ToolActivity) if a.phase is ToolPhase.COMPLETED]
    assert [(a.title, a.exit_code, a.output) for a in done] == [
        ("/bin/bash -c 'echo hello from exec; exit 3'", 3, "hello from exec\n")
    ]
    assert [m.text for m in of_type(events, AgentMessage)] == ["It failed."]
    assert of_type(events, Usage) == [Usage(input_tokens=20, output_tokens=10)]
    assert ended(events).status is TurnStatus.COMPLETED
    assert fake_model.model_requests()[-1].tool_output() is not None  # the model saw the result


# --- resume --------------------------------------------------------------------------------


def remembers(request: fm.ModelRequest) -> str:
    """What the person said so far in the thread (codex adds its own context messages)."""
    said = [text.strip() for text in request.user_texts() if not text.startswith("<")]
    return "I remember: " + " | ".join(said)


@pytest.mark.real_agent("codex")
async def test_later_turns_resume_the_same_thread_and_the_model_sees_the_history(
    codex_bin: str, fake_model: fm.FakeResponses, codex_home: CodexHome
) -> None:
    fake_model.enqueue([fm.message("Noted.")], [fm.message(remembers)], [fm.message(remembers)])
    async with asyncio.timeout(DEADLINE):
        async with session_for(codex_bin, codex_home) as session:
            first = await turn(session, "the secret word is kumquat")
            second = await turn(session, "what was the secret word?")
            thread_id, usage_total = session.thread_id, session.usage_total
        # what the core persisted is enough to go on after a gateway restart
        assert thread_id is not None
        restarted = session_for(codex_bin, codex_home, thread_id=thread_id, usage_total=usage_total)
        async with restarted:
            assert restarted.started.native_id == thread_id and restarted.started.resumed
            third = await turn(restarted, "and once more?")

    assert [s.native_id for s in of_type(first, SessionStarted)] == [thread_id]
    assert not of_type(second, SessionStarted) and not of_type(third, SessionStarted)
    assert restarted.thread_id == thread_id
    assert of_type(second, AgentMessage)[0].text == (
        "I remember: the secret word is kumquat | what was the secret word?"
    )
    assert of_type(third, AgentMessage)[0].text == (
        "I remember: the secret word is kumquat | what was the secret word? | and once more?"
    )
    # each turn counts its own tokens, though exec reports the thread's running total
    for events in (first, second, third):
        assert of_type(events, Usage) == [Usage(input_tokens=10, output_tokens=5)]
        assert ended(events).status is TurnStatus.COMPLETED


# --- refusals ------------------------------------------------------------------------------


def escalated(home: CodexHome) -> tuple[fm.Step, Path, str]:
    target = home.workspace / "escalated.txt"
    return fm.shell(f"touch {target}", escalated=True), target, "codex refused a command"


def sandbox_write(home: CodexHome) -> tuple[fm.Step, Path, str]:
    target = home.outside / "escaped.txt"
    return fm.shell(f"touch {target}"), target, "the sandbox stopped a command's filesystem"


def read_only_patch(home: CodexHome) -> tuple[fm.Step, Path, str]:
    return fm.apply_patch(fm.PATCH_EXAMPLE), home.workspace / "patched.txt", "a file change"


REFUSALS = {
    "escalated-command": (escalated, "workspace-write"),
    "write-outside-the-sandbox": (sandbox_write, "workspace-write"),
    "patch-under-read-only": (read_only_patch, "read-only"),
}


@pytest.mark.real_agent("codex")
@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_a_refusal_by_policy_is_reported_as_denied_never_as_an_approval(
    case: str, codex_bin: str, fake_model: fm.FakeResponses, codex_home: CodexHome
) -> None:
    make, sandbox = REFUSALS[case]
    step, target, what = make(codex_home)
    fake_model.enqueue([step, fm.message("I could not do it.")])
    quiet = {**codex_home.env, "RUST_LOG": "off"}  # the project's env cannot hide a refusal
    async with (
        asyncio.timeout(DEADLINE),
        session_for(codex_bin, codex_home, sandbox=sandbox, env=quiet) as s,
    ):
        events = await turn(s, "please do the thing")
        with pytest.raises(CodecUsageError):  # there is nothing a person could answer
            await s.send(Respond(native_key="rpc:0", decision=Decision(action_id="accept")))

    assert not of_type(events, InteractionOpened)
    (denied,) = [w for w in of_type(events, Warning) if w.code == "denied_by_policy"]
    assert what in denied.message
    assert "app-server backend" in denied.message and "wider sandbox" in denied.message
    assert not target.exists()
    assert ended(events).status is TurnStatus.COMPLETED  # the agent went on and said so
    assert [m.text for m in of_type(events, AgentMessage)] == ["I could not do it."]


# --- interrupt -----------------------------------------------------------------------------


def pids_whose_argv_has(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv:
                found.append(int(entry))
    return found


def live_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                members.append(int(entry))
    return members


async def exited(pid: int) -> None:
    """Return once ``pid`` (not necessarily our child) has exited, as the kernel reports it."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(pidfd, on_readable)
    try:
        await done
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


@asynccontextmanager
async def fifo_reader(path: Path) -> AsyncIterator[asyncio.Future[bytes]]:
    """A FIFO the agent's command writes to once it runs; the future holds what it wrote."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    loop = asyncio.get_running_loop()
    written: asyncio.Future[bytes] = loop.create_future()

    def on_readable() -> None:
        data = os.read(fd, 64)
        if data and not written.done():
            written.set_result(data)

    loop.add_reader(fd, on_readable)
    try:
        yield written
    finally:
        loop.remove_reader(fd)
        os.close(fd)


@pytest.mark.real_agent("codex")
async def test_an_interrupt_ends_the_turn_and_leaves_no_process_behind(
    codex_bin: str, fake_model: fm.FakeResponses, codex_home: CodexHome
) -> None:
    marker = f"exec-interrupt-{uuid.uuid4().hex[:8]}"
    program = "import time; open('running.fifo', 'w').write('running'); time.sleep(600)"
    fake_model.enqueue([fm.shell(f'python3 -c "{program}" {marker}'), fm.DONE])
    async with (
        asyncio.timeout(DEADLINE),
        fifo_reader(codex_home.workspace / "running.fifo") as running,
        session_for(codex_bin, codex_home) as session,
    ):
        await session.send(Prompt(text="wait a long time"))
        pgid = session.pgid
        assert pgid is not None and live_members(pgid)
        # codex 0.171 prints a command's item.started while it spawns the command, not
        # before: either may come first. Interrupt once the person has been shown the
        # command and the command itself runs (it opened the FIFO), whichever came last.
        shown = await until_command_shown(session)
        assert await running == b"running"
        commands = pids_whose_argv_has(marker)
        assert commands

        await session.send(Interrupt())
        events = [*shown, *await until_turn_completed(session)]

        assert ended(events).status is TurnStatus.INTERRUPTED
        assert live_members(pgid) == []  # codex and its whole process group are gone
        for pid in commands:  # the command, in a session of its own, ended with codex
            await exited(pid)
        assert session.pid is None and not session.turn_running
    assert not of_type(events, AgentMessage)
    assert [a.phase for a in of_type(events, ToolActivity)] == [ToolPhase.STARTED]


# --- what else a person would notice -------------------------------------------------------


@pytest.mark.real_agent("codex")
async def test_a_prompt_longer_than_an_argument_may_be_reaches_the_model_whole(
    codex_bin: str, fake_model: fm.FakeResponses, codex_home: CodexHome
) -> None:
    prompt = "\n".join(f"line {n}: " + "x" * 90 for n in range(2000)) + "\nTHE END\n"
    assert len(prompt.encode()) > 128 * 1024  # Linux caps one argument at 128 KiB
    fake_model.enqueue([fm.message("Read it all.")])
    async with asyncio.timeout(DEADLINE), session_for(codex_bin, codex_home) as session:
        events = await turn(session, prompt)
    assert ended(events).status is TurnStatus.COMPLETED
    assert fake_model.model_requests()[-1].user_texts()[-1] == prompt


@pytest.mark.real_agent("codex")
async def test_a_failing_model_fails_the_turn_and_the_next_prompt_still_works(
    codex_bin: str, fake_model: fm.FakeResponses, codex_home: CodexHome
) -> None:
    fake_model.enqueue([fm.failure("the model broke")], [fm.message("Back again.")])
    async with asyncio.timeout(DEADLINE), session_for(codex_bin, codex_home) as session:
        failed = await turn(session, "hello")
        again = await turn(session, "hello again")
    end = ended(failed)
    assert end.status is TurnStatus.FAILED and end.error is not None
    assert "the model broke" in end.error
    assert [m.text for m in of_type(again, AgentMessage)] == ["Back again."]


# --- the session without a real binary ------------------------------------------------------


@pytest.fixture
def scratch_home() -> Iterator[CodexHome]:
    with make_codex_home("http://127.0.0.1:9/v1") as home:
        yield home


async def test_a_binary_that_cannot_start_fails_the_turn_not_the_session(
    scratch_home: CodexHome, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-codex")
    async with asyncio.timeout(DEADLINE), session_for(missing, scratch_home) as session:
        for _ in range(2):
            (end,) = await turn(session, "hello")
            assert isinstance(end, TurnCompleted) and end.status is TurnStatus.FAILED
            assert end.error is not None and "no-such-codex" in end.error


async def test_stop_ends_the_session_with_agent_exited_and_refuses_later_prompts(
    scratch_home: CodexHome,
) -> None:
    async with asyncio.timeout(DEADLINE), session_for("codex", scratch_home) as session:
        await session.stop()
        final = await session.next_event()
        assert isinstance(final, AgentExited) and final.reason == "stopped"
        with pytest.raises(AgentExitedError):
            await session.send(Prompt(text="hello"))
        with pytest.raises(AgentExitedError):
            await session.next_event()
