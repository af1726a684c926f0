"""The thin async runtime that joins a sans-IO codec to an agent process.

    spec = ProcessSpec(argv=codex_app_server_argv(["codex"]), cwd=workdir, env=env)
    async with AgentRuntime(spec, CodexAppServerCodec(cwd=workdir)) as runtime:
        # the handshake is over: the codec emitted SessionStarted (HandshakeTimeout if not
        # within handshake_timeout; AgentExitedError if the process ended first; the codec's
        # RemoteError / ProtocolError if the agent refused to start the session)
        print(runtime.pid, runtime.pgid, runtime.start_time, runtime.session)
        await runtime.send(Prompt(text="hello"))
        async for event in runtime.events():     # ends after the final AgentExited
            ...
        await runtime.stop()                     # the last resort after an Interrupt
    # leaving the block stops the process and its process group

Ownership (STYLE.md, principle 4): the process belongs to the ``async with`` block
(:meth:`adapters.stdio.AgentProcess.spawn`); one reader task, owned by a TaskGroup inside the
same block, reads stdout line by line, feeds the codec, puts the events on a bounded queue and
writes whatever the codec queued. When the consumer falls behind, the queue fills and the
reader stops reading: the agent then blocks on its own stdout (back-pressure, never loss).

The last event is always ``AgentExited(code, stderr_tail, reason)``; reason is one of

- ``"exited"``: stdout closed and the process ended by itself;
- ``"killed"``: it ended by a signal;
- ``"line_too_long"``: a line past ``ProcessSpec.max_line_bytes`` (the stream cannot be
  resynchronised, so the process is stopped);
- ``"protocol_error"``: the codec declared the session over (a Warning with the reason comes
  just before);
- ``"stopped"``: the gateway ended it with :meth:`AgentRuntime.stop` (or left the
  ``async with`` block, which only a task still waiting in ``next_event`` sees).

After it, :meth:`AgentRuntime.next_event` and :meth:`AgentRuntime.send` raise
:class:`gateway.errors.AgentExitedError`. ``pid``, ``pgid`` and ``start_time`` name the
process for the ledger (stdio.py explains why all three), ``session`` is the SessionStarted
event, ``exit_status`` the :class:`adapters.stdio.ExitStatus` once the process has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

from adapters.codec import AgentCodec
from adapters.stdio import AgentProcess, ExitStatus, ProcessSpec
from gateway.errors import AgentError, AgentExitedError, HandshakeTimeout, LineTooLong
from gateway.events import AgentCommand, AgentEvent, AgentExited, SessionStarted, Warning

__all__ = ["DEFAULT_EVENT_BUFFER", "DEFAULT_HANDSHAKE_TIMEOUT", "AgentRuntime"]

log = logging.getLogger(__name__)

DEFAULT_HANDSHAKE_TIMEOUT = 30.0
DEFAULT_EVENT_BUFFER = 1024


class AgentRuntime:
    """One agent process driven through one codec, for the life of an ``async with`` block."""

    def __init__(
        self,
        spec: ProcessSpec,
        codec: AgentCodec,
        *,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        event_buffer: int = DEFAULT_EVENT_BUFFER,
    ) -> None:
        if handshake_timeout <= 0 or event_buffer <= 0:
            raise ValueError("handshake_timeout and event_buffer must be positive")
        self.codec = codec
        self._spec = spec
        self._handshake_timeout = handshake_timeout
        self._events: asyncio.Queue[AgentEvent] = asyncio.Queue(maxsize=event_buffer)
        self._write_lock = asyncio.Lock()
        self._flushers = 0  # calls of _flush under way: holding the lock or waiting for it
        self._settled = asyncio.Event()  # the session started, or the process ended first
        self._stack: contextlib.AsyncExitStack | None = None
        self._proc: AgentProcess | None = None
        self._reader: asyncio.Task[None] | None = None
        self._failure: AgentError | None = None
        self._exit: ExitStatus | None = None
        self._exit_delivered = False
        self._final_queued = False
        self._stop_requested = False
        self.session: SessionStarted | None = None

    # --- identity -------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def pgid(self) -> int:
        return self._process.pgid

    @property
    def start_time(self) -> int | None:
        """Kernel start time of the process (with pid, names it uniquely; see stdio.py)."""
        return self._process.start_time

    @property
    def exit_status(self) -> ExitStatus | None:
        """How the process ended, once it has."""
        return self._exit

    @property
    def _process(self) -> AgentProcess:
        if self._proc is None:
            raise AgentExitedError("the agent runtime is not running")
        return self._proc

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("an AgentRuntime is entered once")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            self._proc = await stack.enter_async_context(AgentProcess.spawn(self._spec))
            stack.push_async_callback(self._stop)  # runs once the reader is done
            tasks = await stack.enter_async_context(asyncio.TaskGroup())
            stack.callback(self._cancel_reader)  # runs first on exit: the reader may be blocked
            for event in self.codec.start() or ():
                self._note(event)
                self._events.put_nowait(event)
            await self._flush()
            self._reader = tasks.create_task(self._read(), name=f"agent-{self._proc.pid}-reader")
            await self._handshake()
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The block's own exception is not handed to the TaskGroup (which would wrap it in an
        # ExceptionGroup): the reader never fails, and it is cancelled first in any case.
        stack, self._stack = self._stack, None
        self._exit_delivered = True
        if stack is not None:
            await stack.aclose()
        status = self._exit
        if not self._final_queued and status is not None:
            # Wake a task still waiting in next_event(): the agent was stopped under it.
            final = AgentExited(code=status.code, stderr_tail=status.stderr_tail, reason="stopped")
            with contextlib.suppress(asyncio.QueueFull):
                self._events.put_nowait(final)

    async def _stop(self) -> None:
        status = await self._process.stop()  # idempotent: the reader may have stopped it
        self._exit = self._exit or status

    def _cancel_reader(self) -> None:
        if self._reader is not None:
            self._reader.cancel()

    async def _handshake(self) -> None:
        try:
            async with asyncio.timeout(self._handshake_timeout):
                await self._settled.wait()
        except TimeoutError as exc:
            tail = self._process.stderr_tail().strip()[-500:]
            raise HandshakeTimeout(
                f"the agent did not start a session within {self._handshake_timeout:g} s"
                + (f"; stderr ends with: {tail}" if tail else "")
            ) from exc
        if self.session is not None:
            return
        if self._failure is not None:
            raise self._failure
        status = self._exit
        raise AgentExitedError(
            f"the agent ended before its session started: {status.describe() if status else ''}",
            code=status.code if status else None,
            stderr_tail=status.stderr_tail if status else "",
        )

    # --- events and commands ---------------------------------------------------------------

    async def next_event(self) -> AgentEvent:
        """The next event; the last one is AgentExited, after which this raises."""
        if self._exit_delivered:
            raise self._exited_error()
        event = await self._events.get()
        if isinstance(event, AgentExited):
            self._exit_delivered = True
        return event

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every event up to and including the final AgentExited."""
        while not self._exit_delivered:
            yield await self.next_event()

    async def send(self, command: AgentCommand) -> None:
        """Encode a command and write it. CodecUsageError (nothing written) for misuse;
        AgentExitedError once the process is gone."""
        if self._exit is not None or self._proc is None:
            raise self._exited_error()
        self.codec.send(command)
        await self._flush()

    async def stop(self) -> None:
        """End the process now (its group too: stdin EOF, SIGTERM, SIGKILL, see stdio.py);
        the events then end with ``AgentExited(reason="stopped")``."""
        self._stop_requested = True
        await self._process.stop()

    def _exited_error(self) -> AgentExitedError:
        status = self._exit
        return AgentExitedError(
            "the agent has exited" + (f": {status.describe()}" if status else ""),
            code=status.code if status else None,
            stderr_tail=status.stderr_tail if status else "",
        )

    async def _flush(self) -> None:
        # Drained under the lock: lines from the reader and from send() keep the codec's order.
        # The reader flushes after every line and almost always finds nothing to write: when
        # no other flush is under way the lock would be taken at once, with no await between,
        # so draining first is the same (and spares the lock ~10% of an event's cost).
        self._flushers += 1
        try:
            lines: list[bytes] | None = None
            if self._flushers == 1:
                lines = self.codec.data_to_send()
                if not lines:
                    return
            async with self._write_lock:
                if lines is None:
                    lines = self.codec.data_to_send()
                for line in lines:
                    await self._process.write_line(line)
        finally:
            self._flushers -= 1

    def _note(self, event: AgentEvent) -> None:
        if isinstance(event, SessionStarted) and self.session is None:
            self.session = event
            self._settled.set()

    # --- the reader -------------------------------------------------------------------------

    async def _read(self) -> None:
        proc = self._process
        reason = "exited"
        try:
            while (line := await proc.read_line()) is not None:
                events = self.codec.feed(line)
                for event in events:
                    self._note(event)
                    await self._events.put(event)
                await self._flush()
        except LineTooLong:
            reason = "line_too_long"
        except AgentExitedError:
            pass  # stdin is gone: the process is ending; its status says how
        except AgentError as exc:  # the codec declared the session over
            reason = "protocol_error"
            self._failure = exc
            await self._events.put(Warning(message=str(exc), code="protocol_error"))
        except Exception as exc:  # a bug in a codec must not take the gateway's task down
            log.exception("codec %s failed on agent %d", type(self.codec).__name__, proc.pid)
            reason = "protocol_error"
            self._failure = AgentError(f"internal codec error: {exc!r}")
            await self._events.put(Warning(message=str(self._failure), code="protocol_error"))
        status = await proc.stop()
        self._exit = status
        if reason == "exited" and self._stop_requested:
            reason = "stopped"
        elif reason == "exited" and status.signal is not None:
            reason = "killed"
        self._settled.set()
        await self._events.put(
            AgentExited(code=status.code, stderr_tail=status.stderr_tail, reason=reason)
        )
        self._final_queued = True
