"""adapters/stdio.py against small scripted agents (tests/agents/stdio_*.py), real processes.

Each scripted agent misbehaves in one way a real agent can: dies mid-request, writes garbage,
writes a 20 MiB line, never answers, floods stderr, exits before replying, leaves a child
behind. Nothing is mocked; every wait is an awaited event under a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from adapters.stdio import (
    DEFAULT_ENV_ALLOWLIST,
    AgentProcess,
    LeftoverOutcome,
    ProcessSpec,
    StopStep,
    build_agent_env,
    end_leftover_process_group,
    read_process_start_time,
)
from gateway.errors import AgentExitedError, AgentStartError, LineTooLong

pytestmark = pytest.mark.timeout(60)

AGENTS = Path(__file__).parent / "agents"
DEADLINE = 30  # seconds for any one test body; a hang fails the test instead of CI


def agent_spec(workdir: Path, script: str, *args: str, **overrides: Any) -> ProcessSpec:
    settings: dict[str, Any] = {
        "cwd": workdir,
        "env": build_agent_env(DEFAULT_ENV_ALLOWLIST, {}),
        "stop_grace_seconds": 5.0,
        "eof_grace_seconds": 2.0,
    }
    settings.update(overrides)
    return ProcessSpec(argv=[sys.executable, str(AGENTS / script), *args], **settings)


def is_alive(pid: int) -> bool:
    """A zombie is dead: it only waits to be reaped, by a parent that may not be us."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    state = stat[stat.rfind(b")") + 2 :].split()[0]
    return state not in (b"Z", b"X")


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


# --- lines in, lines out -------------------------------------------------------------------


async def test_echo_round_trip_and_stdin_eof_ends_the_agent(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_echo.py")) as proc,
    ):
        await proc.write_line(b'{"id": 1, "method": "ping"}')
        assert await proc.read_line() == b'{"id": 1, "method": "ping"}'
        await proc.write_line(b"")
        assert await proc.read_line() == b""

        status = await proc.stop()

    assert status.code == 0
    assert status.signal is None
    assert status.stop_step is StopStep.STDIN_CLOSED
    assert "exited with code 0" in status.describe()


async def test_the_process_leads_its_own_group_and_its_start_time_is_recorded(
    workdir: Path,
) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_echo.py")) as proc,
    ):
        assert proc.pgid == proc.pid == os.getpgid(proc.pid)
        assert proc.pgid != os.getpgid(0)  # a SIGKILL to the agent's group never hits us
        assert proc.start_time is not None
        assert proc.start_time == read_process_start_time(proc.pid)
    assert read_process_start_time(proc.pid) != proc.start_time


async def test_a_malformed_line_is_returned_as_is(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_malformed.py")) as proc,
    ):
        assert await proc.read_line() == b'{"jsonrpc": "2.0", "method": \xff\xfe broken'
        assert await proc.read_line() == b'{"jsonrpc": "2.0", "method": "ok"}'
        assert await proc.read_line() is None
        assert await proc.read_line() is None  # EOF stays EOF


async def test_a_last_line_without_newline_is_still_a_line(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_partial_line.py")) as proc,
    ):
        assert await proc.read_line() == b"first"
        assert await proc.read_line() == b"last-without-newline"
        assert await proc.read_line() is None


async def test_a_line_of_exactly_the_limit_passes_and_one_byte_more_fails(workdir: Path) -> None:
    limit = 100_000  # more than one read chunk, so the line spans several reads
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_echo.py", max_line_bytes=limit)) as proc,
    ):
        await proc.write_line(b"a" * limit)
        assert await proc.read_line() == b"a" * limit
        await proc.write_line(b"b" * (limit + 1))
        with pytest.raises(LineTooLong):
            await proc.read_line()


async def test_a_20_mib_line_raises_line_too_long_with_bounded_memory(workdir: Path) -> None:
    limit = 8 * 1024 * 1024
    spec = agent_spec(
        workdir, "stdio_huge_line.py", "20", max_line_bytes=limit, eof_grace_seconds=0.1
    )
    tracemalloc.start()
    try:
        async with asyncio.timeout(DEADLINE), AgentProcess.spawn(spec) as proc:
            with pytest.raises(LineTooLong) as raised:
                await proc.read_line()
            _, peak = tracemalloc.get_traced_memory()
            assert raised.value.limit == limit
            # The reader is done with this stream: it keeps saying so, and does not hang.
            with pytest.raises(LineTooLong):
                await proc.read_line()
            # The agent is blocked writing the rest of its line; stop() must still end it.
            status = await proc.stop(grace=2.0)
    finally:
        tracemalloc.stop()

    # Reading a 20 MiB line whole would have cost at least 20 MiB.
    assert peak < 12 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"
    assert status.signal == signal.SIGTERM
    assert status.stop_step is StopStep.SIGTERM
    assert not is_alive(proc.pid)


async def test_writes_from_many_tasks_never_interleave(workdir: Path) -> None:
    writers = 40
    size = 100_000  # larger than a pipe buffer, so a torn write would show

    def line_of(index: int) -> bytes:
        return f"{index:03d}:".encode() + bytes([ord("a") + index % 26]) * size

    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_echo.py")) as proc,
    ):
        received: list[bytes] = []

        async def read_all() -> None:
            for _ in range(writers):
                line = await proc.read_line()
                assert line is not None
                received.append(line)

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(read_all())
            for index in range(writers):
                tasks.create_task(proc.write_line(line_of(index)))

    assert sorted(received) == [line_of(index) for index in range(writers)]


# --- ends, good and bad --------------------------------------------------------------------


async def test_killed_mid_request_reads_eof_and_reports_the_signal(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_echo.py")) as proc,
    ):
        await proc.write_line(b"warm-up")
        assert await proc.read_line() == b"warm-up"

        async with asyncio.TaskGroup() as tasks:
            pending_read = tasks.create_task(proc.read_line())  # the reply never comes
            await proc.write_line(b'{"id": 2, "method": "turn/start"}')
            os.kill(proc.pid, signal.SIGKILL)
        assert pending_read.result() in (None, b'{"id": 2, "method": "turn/start"}')
        if pending_read.result() is not None:  # the echo raced the kill
            assert await proc.read_line() is None

        status = await proc.wait()
        assert status.signal == signal.SIGKILL
        assert status.code is None
        assert "killed by SIGKILL" in status.describe()
        with pytest.raises(AgentExitedError):
            await proc.write_line(b'{"id": 3}')


async def test_exit_before_the_first_reply_reports_code_and_stderr(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_exit_early.py")) as proc,
    ):
        assert await proc.read_line() is None
        status = await proc.wait()
        with pytest.raises(AgentExitedError) as raised:
            await proc.write_line(b'{"id": 1, "method": "initialize"}')

    assert status.code == 3
    assert status.signal is None
    assert "fatal: no configuration found" in status.stderr_tail
    assert "exited with code 3" in status.describe()
    assert "fatal: no configuration found" in status.describe()
    assert raised.value.code == 3
    assert "fatal: no configuration found" in raised.value.stderr_tail


async def test_writing_to_an_agent_that_stopped_reading_is_agent_exited_error(
    workdir: Path,
) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(
            agent_spec(workdir, "stdio_closes_stdin.py", eof_grace_seconds=0.1)
        ) as proc,
    ):
        assert await proc.read_line() == b"stdin closed"
        with pytest.raises(AgentExitedError) as raised:
            await proc.write_line(b'{"id": 1, "method": "initialize"}')
    assert isinstance(raised.value.__cause__, BrokenPipeError | ConnectionResetError)


async def test_an_agent_that_never_answers_is_terminated(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_silent.py", eof_grace_seconds=0.2)) as proc,
    ):
        assert await proc.read_line() == b"ready"
        status = await proc.stop(grace=5.0)

    assert status.signal == signal.SIGTERM
    assert status.stop_step is StopStep.SIGTERM
    assert "killed by SIGTERM" in status.describe()


async def test_an_agent_that_ignores_sigterm_is_killed_after_the_grace(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(
            agent_spec(workdir, "stdio_silent.py", "--ignore-sigterm", eof_grace_seconds=0.2)
        ) as proc,
    ):
        assert await proc.read_line() == b"ready"
        status = await proc.stop(grace=0.3)
        assert await proc.stop() == status  # idempotent: same answer, nothing more happens

    assert status.signal == signal.SIGKILL
    assert status.stop_step is StopStep.SIGKILL
    assert "did not stop within the grace period" in status.describe()


async def test_leaving_the_block_stops_the_agent_even_on_error(workdir: Path) -> None:
    with pytest.raises(RuntimeError, match="the caller failed"):
        async with (
            asyncio.timeout(DEADLINE),
            AgentProcess.spawn(
                agent_spec(workdir, "stdio_silent.py", eof_grace_seconds=0.1)
            ) as proc,
        ):
            assert await proc.read_line() == b"ready"
            raise RuntimeError("the caller failed")
    assert not is_alive(proc.pid)


async def test_stderr_flood_keeps_a_bounded_tail_and_stdout_flowing(workdir: Path) -> None:
    tail_bytes = 64 * 1024
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(
            agent_spec(workdir, "stdio_stderr_flood.py", "8", stderr_tail_bytes=tail_bytes)
        ) as proc,
    ):
        # Reached only if stderr was drained while the agent wrote 8 MiB to it.
        assert await proc.read_line() == b"after-flood"
        await proc.write_line(b"still talking")
        assert await proc.read_line() == b"still talking"
        status = await proc.stop()

    assert status.code == 0
    assert len(status.stderr_tail.encode()) <= tail_bytes
    assert status.stderr_tail.endswith("END-OF-FLOOD\n")
    last_number = 8 * 1024 * 1024 // 20 - 1
    assert f"stderr line {last_number:07d}\n" in status.stderr_tail
    assert "stderr line 0000000\n" not in status.stderr_tail


async def test_a_child_left_behind_does_not_survive_stop(workdir: Path) -> None:
    async with asyncio.timeout(DEADLINE):
        async with AgentProcess.spawn(
            agent_spec(workdir, "stdio_leave_child.py", "--exit")
        ) as proc:
            line = await proc.read_line()
            assert line is not None
            grandchild = int(line)
            assert is_alive(grandchild)
            assert os.getpgid(grandchild) == proc.pgid
            await proc.stop()
        await exited(grandchild)
    assert not is_alive(grandchild)


async def test_stop_takes_the_whole_group_down_with_a_running_agent(workdir: Path) -> None:
    async with asyncio.timeout(DEADLINE):
        async with AgentProcess.spawn(
            agent_spec(workdir, "stdio_leave_child.py", eof_grace_seconds=0.1)
        ) as proc:
            line = await proc.read_line()
            assert line is not None
            grandchild = int(line)
            status = await proc.stop()
        assert status.signal == signal.SIGTERM
        await exited(grandchild)
    assert not is_alive(grandchild)


# --- start-up ------------------------------------------------------------------------------


async def test_a_missing_binary_is_an_agent_start_error(workdir: Path) -> None:
    spec = ProcessSpec(argv=["/nonexistent/bin/codex-missing", "app-server"], cwd=workdir, env={})
    with pytest.raises(AgentStartError, match="codex-missing") as raised:
        async with AgentProcess.spawn(spec):
            pass
    assert isinstance(raised.value.__cause__, FileNotFoundError)


async def test_a_file_that_is_not_executable_is_an_agent_start_error(workdir: Path) -> None:
    script = workdir / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(AgentStartError, match="not-executable"):
        async with AgentProcess.spawn(ProcessSpec(argv=[str(script)], cwd=workdir, env={})):
            pass


async def test_a_missing_working_directory_is_an_agent_start_error(workdir: Path) -> None:
    missing = workdir / "no-such-project"
    spec = ProcessSpec(argv=[sys.executable, "-c", "pass"], cwd=missing, env={})
    with pytest.raises(AgentStartError, match="no-such-project") as raised:
        async with AgentProcess.spawn(spec):
            pass
    assert "working directory" in str(raised.value)


def test_argv_must_be_a_list_never_a_command_string(workdir: Path) -> None:
    with pytest.raises(TypeError):
        ProcessSpec(argv="codex app-server", cwd=workdir, env={})


# --- environment ---------------------------------------------------------------------------


def test_build_agent_env_takes_only_allowlisted_names_and_the_extras() -> None:
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "SLACK_BOT_TOKEN": "xoxb-secret",
        "TELEGRAM_BOT_TOKEN": "123:secret",
    }
    env = build_agent_env(DEFAULT_ENV_ALLOWLIST, {"CODEX_HOME": "/tmp/codex", "HOME": "/h"}, source)
    assert env == {"PATH": "/usr/bin", "HOME": "/h", "CODEX_HOME": "/tmp/codex"}


async def test_platform_tokens_never_reach_the_agent(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-must-not-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = build_agent_env(DEFAULT_ENV_ALLOWLIST, {"AGENT_EXTRA": "configured"})
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_print_env.py", env=env)) as proc,
    ):
        line = await proc.read_line()
    assert line is not None
    seen = json.loads(line)
    assert "SLACK_BOT_TOKEN" not in seen
    assert "xoxb-must-not-leak" not in line.decode()
    assert seen["AGENT_EXTRA"] == "configured"
    assert seen["LANG"] == "C.UTF-8"


# --- leftovers of a crashed gateway --------------------------------------------------------


async def test_end_leftover_leaves_a_process_with_another_start_time_alone(
    workdir: Path,
) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_echo.py")) as proc,
    ):
        assert proc.start_time is not None
        outcome = await end_leftover_process_group(
            proc.pid, proc.pgid, proc.start_time + 1, grace=0.5
        )
        assert outcome is LeftoverOutcome.NOT_OURS
        await proc.write_line(b"still here")
        assert await proc.read_line() == b"still here"

        outcome = await end_leftover_process_group(proc.pid, proc.pgid, proc.start_time, grace=5)
        assert outcome is LeftoverOutcome.TERMINATED
        status = await proc.wait()
        assert status.signal == signal.SIGTERM


async def test_end_leftover_ends_the_children_of_an_agent_that_is_gone(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(
            agent_spec(workdir, "stdio_leave_child.py", "--exit", "--quiet-child")
        ) as proc,
    ):
        line = await proc.read_line()
        assert line is not None
        grandchild = int(line)
        assert (await proc.wait()).code == 0
        assert proc.start_time is not None
        # What a restarted gateway does with the pid, group and start time it recorded.
        outcome = await end_leftover_process_group(proc.pid, proc.pgid, proc.start_time, grace=5)
        assert outcome is LeftoverOutcome.TERMINATED
        await exited(grandchild)
        assert not is_alive(grandchild)
        outcome = await end_leftover_process_group(proc.pid, proc.pgid, proc.start_time, grace=5)
        assert outcome is LeftoverOutcome.NONE_FOUND


async def test_a_reader_waiting_on_the_agent_sees_eof_when_it_is_stopped(workdir: Path) -> None:
    async with (
        asyncio.timeout(DEADLINE),
        AgentProcess.spawn(agent_spec(workdir, "stdio_silent.py", eof_grace_seconds=0.1)) as proc,
    ):
        assert await proc.read_line() == b"ready"
        async with asyncio.TaskGroup() as tasks:
            waiting_read = tasks.create_task(proc.read_line())
            stopped = tasks.create_task(proc.stop())
        assert waiting_read.result() is None
        assert stopped.result().signal == signal.SIGTERM


async def test_a_stop_cut_short_by_a_deadline_still_kills_the_group(workdir: Path) -> None:
    async with asyncio.timeout(DEADLINE):
        async with AgentProcess.spawn(
            agent_spec(workdir, "stdio_silent.py", "--ignore-sigterm", eof_grace_seconds=0.1)
        ) as proc:
            assert await proc.read_line() == b"ready"
            # A gateway shutting down on its own deadline, shorter than the agent's grace.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await proc.stop(grace=600)
            status = await proc.wait()
        assert status.signal == signal.SIGKILL
        assert not is_alive(proc.pid)
