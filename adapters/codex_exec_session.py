"""``codex exec`` as a running agent: one process per turn, behind the app-server's interface.

    settings = CodexExecSettings(command=["codex"], cwd=str(work_dir))
    async with CodexExecSession(settings, env=env, thread_id=known_or_none) as agent:
        await agent.send(Prompt(text="..."))   # spawns `codex exec --json ... -`; pid now known
        async for event in agent.events():     # ... TurnCompleted; the next Prompt resumes
            ...
        await agent.send(Interrupt())          # ends the turn's process group:
                                               #   TurnCompleted(INTERRUPTED) follows
    # leaving the block ends a running turn's process group, then AgentExited(reason="stopped")

It offers what :class:`gateway.sessions.agents.RunningAgent` asks (pid, pgid, start_time,
capabilities,
started, send, events, stop), so that the core drives it like the app-server runtime. There is
no handshake: ``started`` says what is known before any process runs (the thread id being
resumed, if any, and the policy exec forces); the first turn's ``thread.started`` brings
``SessionStarted`` with the new thread id as an event. ``thread_id`` and ``usage_total`` are
what a caller persists to resume the thread later (exec reports the thread's running token
total, so the increment of a resumed turn needs the total known before it).

Ownership (STYLE.md, principle 4): each turn is a task of the session's TaskGroup, and its
process belongs to that task's ``async with AgentProcess.spawn(...)``. Events go through one
bounded queue: when the consumer falls behind, the turn stops reading and codex blocks on its
own stdout. ``pid``, ``pgid`` and ``start_time`` name the running turn's process (None between
turns). Interrupt has no native form: it ends the turn's process group (SIGTERM, then SIGKILL
after the grace period); the commands codex started live in sessions of their own and end
with it (its sandbox and children die with their parent; tests/test_codex_exec_real.py).
The prompt is written to stdin, never into argv (an argument is capped at 128 KiB).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from adapters.codex_exec import CodexExecCodec
from adapters.codex_exec_process import RUST_LOG, CodexExecSettings, prompt_lines
from adapters.stdio import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_STDERR_TAIL_BYTES,
    DEFAULT_STOP_GRACE_SECONDS,
    AgentProcess,
    ExitStatus,
    ProcessSpec,
)
from gateway.errors import AgentExitedError, AgentStartError, CodecUsageError, LineTooLong
from gateway.events import (
    AgentCommand,
    AgentEvent,
    AgentExited,
    Capabilities,
    Interrupt,
    Prompt,
    Respond,
    SessionStarted,
    Usage,
    Warning,
)

__all__ = ["DEFAULT_EVENT_BUFFER", "CodexExecSession"]

log = logging.getLogger(__name__)

DEFAULT_EVENT_BUFFER = 1024


@dataclass(eq=False)
class _Turn:
    interrupt: asyncio.Event = field(default_factory=asyncio.Event)
    process: AgentProcess | None = None
    task: asyncio.Task[None] | None = None


class CodexExecSession:
    """The turns of one Codex thread, each a ``codex exec`` process, for one ``async with``."""

    def __init__(
        self,
        settings: CodexExecSettings,
        *,
        env: Mapping[str, str],
        thread_id: str | None = None,
        usage_total: Usage | None = None,
        stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS,
        event_buffer: int = DEFAULT_EVENT_BUFFER,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stderr_tail_bytes: int = DEFAULT_STDERR_TAIL_BYTES,
    ) -> None:
        if event_buffer <= 0:
            raise ValueError("event_buffer must be positive")
        self.codec = CodexExecCodec(settings, thread_id=thread_id, usage_total=usage_total)
        # warnings_from_stderr() reads the tracing log: its level is ours, not the project's
        self._env = {**env, "RUST_LOG": RUST_LOG}
        self._stop_grace = stop_grace_seconds
        self._max_line_bytes = max_line_bytes
        self._stderr_tail_bytes = stderr_tail_bytes
        self._events: asyncio.Queue[AgentEvent] = asyncio.Queue(maxsize=event_buffer)
        self._stack: contextlib.AsyncExitStack | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._turn: _Turn | None = None
        self._closed = False
        self._exit_queued = False
        self._exit_delivered = False
        self.last_exit: ExitStatus | None = None
        self.started = SessionStarted(
            native_id=thread_id or "", policy=self.codec.policy, resumed=thread_id is not None
        )

    # --- what the core reads ---------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return self.codec.capabilities

    @property
    def thread_id(self) -> str | None:
        """The Codex thread to resume: None until the first turn has started one."""
        return self.codec.thread_id

    @property
    def usage_total(self) -> Usage:
        """The thread's token total as of the last completed turn (persist with thread_id)."""
        return self.codec.usage_total

    @property
    def turn_running(self) -> bool:
        return self._turn is not None

    @property
    def pid(self) -> int | None:
        process = self._turn.process if self._turn else None
        return process.pid if process else None

    @property
    def pgid(self) -> int | None:
        process = self._turn.process if self._turn else None
        return process.pgid if process else None

    @property
    def start_time(self) -> int | None:
        process = self._turn.process if self._turn else None
        return process.start_time if process else None

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("a CodexExecSession is entered once")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        self._tasks = await stack.enter_async_context(asyncio.TaskGroup())
        stack.callback(self._cancel_turn)  # runs first: the turn may wait on a full queue
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The block's own exception is not handed to the TaskGroup; a cancelled turn task
        # still stops its process (AgentProcess.spawn stops it on the way out).
        self._closed = True
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
        if not self._exit_queued:
            self._exit_queued = True
            with contextlib.suppress(asyncio.QueueFull):
                self._events.put_nowait(self._exited("stopped"))

    def _cancel_turn(self) -> None:
        if self._turn is not None and self._turn.task is not None:
            self._turn.task.cancel()

    async def stop(self) -> None:
        """End the session now: a running turn's process group first (its TurnCompleted
        follows), then AgentExited(reason="stopped"). Later sends raise AgentExitedError."""
        self._closed = True
        turn = self._turn
        if turn is not None and turn.task is not None:
            turn.interrupt.set()
            await asyncio.wait({turn.task})
        if not self._exit_queued:
            self._exit_queued = True
            await self._events.put(self._exited("stopped"))

    def _exited(self, reason: str) -> AgentExited:
        status = self.last_exit
        return AgentExited(
            code=status.code if status else None,
            stderr_tail=status.stderr_tail if status else "",
            reason=reason,
        )

    # --- events and commands ---------------------------------------------------------------

    async def next_event(self) -> AgentEvent:
        """The next event; the last one is AgentExited, after which this raises."""
        if self._exit_delivered:
            raise AgentExitedError("the codex exec session has ended")
        event = await self._events.get()
        if isinstance(event, AgentExited):
            self._exit_delivered = True
        return event

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every event of every turn, up to and including the final AgentExited."""
        while not self._exit_delivered:
            yield await self.next_event()

    async def send(self, command: AgentCommand) -> None:
        """Prompt starts a turn (CodecUsageError while one runs); Interrupt ends the running
        turn's process (nothing without one); Respond is refused: exec never asks."""
        if self._closed or self._tasks is None:
            raise AgentExitedError("the codex exec session has ended (or was never entered)")
        match command:
            case Prompt():
                await self._start_turn(command.text, [str(i.path) for i in command.images])
            case Interrupt():
                if self._turn is not None:
                    self._turn.interrupt.set()
            case Respond():
                raise CodecUsageError("codex exec has no approval channel: nothing to answer")

    async def _start_turn(self, text: str, images: list[str]) -> None:
        if self._turn is not None:
            raise CodecUsageError("a turn is running: wait for TurnCompleted before prompting")
        assert self._tasks is not None
        argv = self.codec.begin_turn(images)
        spec = ProcessSpec(
            argv=argv,
            cwd=self.codec.settings.cwd,
            env=self._env,
            max_line_bytes=self._max_line_bytes,
            stderr_tail_bytes=self._stderr_tail_bytes,
            stop_grace_seconds=self._stop_grace,
            eof_grace_seconds=0,  # stdin is closed from the start: EOF cannot stop a turn
        )
        turn = self._turn = _Turn()
        spawned: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        turn.task = self._tasks.create_task(self._run_turn(turn, spec, text, spawned))
        await asyncio.wait({spawned, turn.task}, return_when=asyncio.FIRST_COMPLETED)

    # --- a turn ---------------------------------------------------------------------------

    async def _run_turn(
        self, turn: _Turn, spec: ProcessSpec, text: str, spawned: asyncio.Future[None]
    ) -> None:
        status: ExitStatus | None = None
        try:
            async with AgentProcess.spawn(spec) as process:
                turn.process = process
                spawned.set_result(None)
                await self._drive(turn, process, text)
                if not turn.interrupt.is_set():
                    # stdout is closed: the turn is over and codex is exiting by itself
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._stop_grace):
                            await process.wait()
                status = await process.stop()
        except AgentStartError as exc:
            events = self.codec.finish(exit_code=None, exit_description=str(exc))
        else:
            assert status is not None
            self.last_exit = status
            events = self.codec.finish(
                exit_code=status.code,
                exit_description=status.describe(),
                stderr=status.stderr_tail,
                interrupted=turn.interrupt.is_set(),
            )
        finally:
            if not spawned.done():
                spawned.set_result(None)
        # The turn is over before its TurnCompleted is seen: the next Prompt may follow it.
        self._turn = None
        for event in events:
            await self._events.put(event)

    async def _drive(self, turn: _Turn, process: AgentProcess, text: str) -> None:
        async with asyncio.TaskGroup() as tasks:
            stopper = tasks.create_task(self._stop_on_interrupt(turn, process))
            try:
                await self._write_prompt(process, text)
                await self._pump(process)
            finally:
                if not turn.interrupt.is_set():
                    stopper.cancel()

    async def _stop_on_interrupt(self, turn: _Turn, process: AgentProcess) -> None:
        await turn.interrupt.wait()
        await process.stop()  # the pump then sees EOF

    async def _write_prompt(self, process: AgentProcess, text: str) -> None:
        try:
            for line in prompt_lines(text):
                await process.write_line(line)
            await process.close_stdin()
        except AgentExitedError:
            pass  # codex ended (or is being stopped) before reading it all: finish() says so

    async def _pump(self, process: AgentProcess) -> None:
        try:
            while (line := await process.read_line()) is not None:
                for event in self.codec.feed(line):
                    await self._events.put(event)
        except LineTooLong as exc:
            await self._events.put(Warning(message=str(exc), code="line_too_long"))
            await process.stop()
        except Exception as exc:  # a bug in the codec must not take the session down
            log.exception("codex exec codec failed on process %d", process.pid)
            text = f"internal codec error: {exc!r}"
            await self._events.put(Warning(message=text, code="protocol_error"))
            await process.stop()
