"""The agent process: the only subprocess code in agent-gateway.

An agent runs as a child process in its own session and process group, talking newline-framed
bytes over stdin/stdout; what the bytes mean is the codec's business, never this module's.

    async with AgentProcess.spawn(spec) as proc:   # AgentStartError if it cannot start
        await proc.write_line(b'{"id": 1, ...}')   # AgentExitedError if it is gone
        line = await proc.read_line()              # None at EOF; LineTooLong past the limit
    # leaving the block stops it: stdin EOF, SIGTERM to the group, SIGKILL to the group

Guarantees:

- Bounded memory: stdout is read in chunks into a line buffer that never holds more than
  ``max_line_bytes`` plus one chunk; stderr is drained continuously (so a chatty agent never
  blocks on a full pipe) into a tail of the last ``stderr_tail_bytes``.
- Nothing outlives ``stop()``: every signal goes to the whole process group, and whatever the
  agent left in its group is killed even when the agent itself already exited.
- The environment is exactly ``ProcessSpec.env``, built by ``build_agent_env`` from an
  allowlist: the gateway's own secrets (platform tokens) never reach an agent.
- pid, process group and kernel start time are exposed so that the core can record them and,
  after a gateway crash, end the leftovers with ``end_leftover_process_group`` without ever
  signalling a process that merely reuses the pid.

Process-group bookkeeping (``/proc``, group signals, leftovers) lives in
``adapters/process_group.py`` and is re-exported here; it is Linux-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal as signals
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from adapters.process_group import (  # re-exported: callers import them from here
    DEFAULT_STOP_GRACE_SECONDS,
    LeftoverOutcome,
    end_leftover_process_group,
    read_process_start_time,
    signal_name,
    signal_process_group,
)
from gateway.errors import AgentExitedError, AgentStartError, CodecUsageError, LineTooLong

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_EOF_GRACE_SECONDS",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_STDERR_TAIL_BYTES",
    "DEFAULT_STOP_GRACE_SECONDS",
    "AgentProcess",
    "ExitStatus",
    "LeftoverOutcome",
    "ProcessSpec",
    "StopStep",
    "build_agent_env",
    "end_leftover_process_group",
    "read_process_start_time",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
DEFAULT_STDERR_TAIL_BYTES = 64 * 1024
DEFAULT_EOF_GRACE_SECONDS = 1.0

# What a CLI needs to find its tools, its home and its locale; nothing that carries a secret.
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = tuple(
    "PATH HOME USER LOGNAME SHELL LANG LANGUAGE LC_ALL LC_CTYPE LC_MESSAGES TERM TMPDIR TZ".split()
)

# Both the StreamReader limit and our read size: asyncio pauses the pipe once its buffer holds
# twice this, so the bytes in flight between the pipe and the line buffer stay small.
_READ_CHUNK = 64 * 1024
# How long to let the stderr drain catch up with a process that has exited. A leftover child
# that inherited stderr keeps the pipe open, so EOF cannot be awaited without a bound.
_STDERR_SETTLE_SECONDS = 0.5


def build_agent_env(
    allowlist: Iterable[str],
    extra: Mapping[str, str],
    source: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """The complete environment of an agent: allowlisted names from ``source``, then ``extra``.

    Never the whole of ``source``: the gateway's environment holds platform tokens, and an
    agent runs commands a chat message asked for.
    """
    env = {name: source[name] for name in allowlist if name in source}
    env.update(extra)
    return env


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcessSpec:
    """How to start one agent process. ``argv`` is run directly, never through a shell."""

    argv: Sequence[str]
    cwd: str | os.PathLike[str]
    env: Mapping[str, str]
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    stderr_tail_bytes: int = DEFAULT_STDERR_TAIL_BYTES
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    eof_grace_seconds: float = DEFAULT_EOF_GRACE_SECONDS  # after stdin EOF, before SIGTERM
    close_fds: bool = True

    def __post_init__(self) -> None:
        # A string is a Sequence[str] too: refuse it rather than exec each character.
        if isinstance(self.argv, str | bytes) or not self.argv:
            raise TypeError("argv must be a non-empty list of arguments, not a command string")
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        if self.max_line_bytes <= 0 or self.stderr_tail_bytes < 0:
            raise ValueError("max_line_bytes must be positive and stderr_tail_bytes not negative")
        if self.stop_grace_seconds < 0 or self.eof_grace_seconds < 0:
            raise ValueError("grace periods must not be negative")


class StopStep(StrEnum):
    """What it took to end the process (the last step ``stop()`` had to take)."""

    NONE = "none"  # it had exited on its own before stop() was asked
    STDIN_CLOSED = "stdin_closed"  # it exited at stdin EOF
    SIGTERM = "sigterm"
    SIGKILL = "sigkill"  # it outlived the grace period after SIGTERM


@dataclass(frozen=True, kw_only=True, slots=True)
class ExitStatus:
    """How the agent process ended: an exit code or a signal, and the end of its stderr."""

    code: int | None
    signal: int | None
    stderr_tail: str
    stop_step: StopStep = StopStep.NONE

    def describe(self) -> str:
        if self.signal is not None:
            outcome = f"killed by {signal_name(self.signal)}"
        elif self.code is not None:
            outcome = f"exited with code {self.code}"
        else:
            outcome = "ended"
        outcome += {
            StopStep.NONE: "",
            StopStep.STDIN_CLOSED: " after its stdin was closed",
            StopStep.SIGTERM: " after SIGTERM to its process group",
            StopStep.SIGKILL: " after SIGKILL: it did not stop within the grace period",
        }[self.stop_step]
        last_lines = self.stderr_tail.strip().splitlines()[-5:]
        if last_lines:
            outcome += "; stderr ends with: " + " | ".join(last_lines)[-500:]
        return outcome


# --- the process ---------------------------------------------------------------------------


class _PipesProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol, plus an event set as soon as the process has exited.

    ``asyncio.subprocess.Process.wait()`` also waits for every pipe to close, which never
    happens while a leftover child holds stdout or while unread output fills the pipe.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()
        self._transport_to_close: asyncio.BaseTransport | None = None
        self._close_when_exited = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._transport_to_close = transport

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()
        if self._close_when_exited:
            self.close_transport()

    def close_transport(self) -> None:
        """Close every pipe (a reader then sees EOF), but only once the exit is known.

        Closing earlier makes asyncio poll() the child, racing the child watcher for the
        exit status (the watcher then reports 255).
        """
        if not self.exited.is_set():
            self._close_when_exited = True
        elif self._transport_to_close is not None:
            self._transport_to_close.close()


class AgentProcess:
    """One running agent process, owned by the ``async with`` block that spawned it."""

    def __init__(
        self,
        *,
        spec: ProcessSpec,
        transport: asyncio.SubprocessTransport,
        protocol: _PipesProtocol,
    ) -> None:
        # Built by spawn(); the pipes exist because spawn() asks for all three.
        assert protocol.stdin and protocol.stdout and protocol.stderr
        self._spec = spec
        self._transport = transport
        self._protocol = protocol
        self._stdin = protocol.stdin
        self._stdout = protocol.stdout
        self._stderr = protocol.stderr
        self.pid: int = transport.get_pid()
        # start_new_session=True made the process the leader of a new session and group.
        self.pgid: int = self.pid
        self.start_time: int | None = read_process_start_time(self.pid)

        self._read_lock = asyncio.Lock()
        self._line_buffer = bytearray()
        self._line_start = 0  # bytes before this were returned already
        self._scanned = 0  # no newline before this offset
        self._read_failed = False

        self._write_lock = asyncio.Lock()
        self._stdin_closed = False
        self._stopping = False

        self._stop_lock = asyncio.Lock()
        self._stop_step = StopStep.NONE
        self._stderr_tail = bytearray()
        # Owned by this object: stop() always awaits it before returning.
        self._stderr_task = asyncio.get_running_loop().create_task(
            self._drain_stderr(), name=f"agent-{self.pid}-stderr"
        )

    @classmethod
    @contextlib.asynccontextmanager
    async def spawn(cls, spec: ProcessSpec) -> AsyncIterator[AgentProcess]:
        """Start the agent; stop it (and its whole process group) when the block is left."""
        process = await cls._start(spec)
        try:
            yield process
        finally:
            await process.stop()

    @classmethod
    async def _start(cls, spec: ProcessSpec) -> AgentProcess:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _PipesProtocol(_READ_CHUNK, loop),
                *spec.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=spec.cwd,
                env=dict(spec.env),
                start_new_session=True,
                close_fds=spec.close_fds,
            )
        except OSError as exc:
            # subprocess names the working directory as the culprit when chdir failed.
            where = "working directory " if str(exc.filename) == os.fspath(spec.cwd) else ""
            culprit = f" ({where}{exc.filename})" if exc.filename is not None else ""
            reason = exc.strerror or str(exc)
            raise AgentStartError(
                f"cannot start agent {spec.argv[0]!r}: {reason}{culprit}"
            ) from exc
        except ValueError as exc:  # e.g. a NUL byte in an argument
            raise AgentStartError(f"cannot start agent {spec.argv[0]!r}: {exc}") from exc
        return cls(spec=spec, transport=transport, protocol=protocol)

    @property
    def running(self) -> bool:
        return self._transport.get_returncode() is None

    # --- stdout ----------------------------------------------------------------------------

    async def read_line(self) -> bytes | None:
        """The next line from stdout without its newline; None at EOF.

        A last line without a newline is still a line. A line longer than ``max_line_bytes``
        raises LineTooLong as soon as the limit is passed, and so does every later call: the
        stream cannot be re-synchronised, and the caller is expected to stop the process.
        """
        async with self._read_lock:
            limit = self._spec.max_line_bytes
            while True:
                if self._read_failed:
                    raise LineTooLong(limit)
                buffer = self._line_buffer
                newline = buffer.find(b"\n", self._scanned)
                if newline >= 0:
                    if newline - self._line_start > limit:
                        self._fail_reading()
                        continue
                    line = bytes(buffer[self._line_start : newline])
                    self._line_start = self._scanned = newline + 1
                    return line
                if len(buffer) - self._line_start > limit:
                    self._fail_reading()
                    continue
                # Drop what was returned already before reading more: the buffer then holds
                # only the current line, at most limit + one chunk.
                del buffer[: self._line_start]
                self._line_start = 0
                self._scanned = len(buffer)
                chunk = await self._stdout.read(_READ_CHUNK)
                if not chunk:
                    if not buffer:
                        return None
                    line = bytes(buffer)
                    buffer.clear()
                    self._scanned = 0
                    return line
                buffer += chunk

    def _fail_reading(self) -> None:
        self._read_failed = True
        self._line_buffer = bytearray()  # give the memory back now, not at stop()

    # --- stdin -----------------------------------------------------------------------------

    async def write_line(self, data: bytes) -> None:
        """Write ``data`` and a newline, and wait until the pipe has taken it.

        Lines from concurrent callers never interleave. Raises AgentExitedError when the
        process is gone or being stopped.
        """
        if b"\n" in data:
            raise CodecUsageError("a line written to an agent must not contain a newline")
        async with self._write_lock:
            if not self.running or self._stopping:
                raise await self._exited_error("cannot write to agent")
            if self._stdin_closed:
                raise CodecUsageError("write_line after close_stdin")
            try:
                self._stdin.write(data)
                self._stdin.write(b"\n")
                await self._stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise await self._exited_error("agent closed its stdin") from exc

    async def close_stdin(self) -> None:
        """Send EOF after any line being written, for agents that read their input to EOF."""
        async with self._write_lock:
            self._close_stdin_now()

    def _close_stdin_now(self) -> None:
        # The transport flushes what it holds, then closes: EOF never cuts a line in half.
        self._stdin_closed = True
        self._stdin.close()

    async def _exited_error(self, message: str) -> AgentExitedError:
        """The error, with the end of the agent's stderr: a process that exited may have
        written why a moment ago (the drain catches up first, bounded as in :meth:`wait`)."""
        await self._settle_stderr()
        returncode = self._transport.get_returncode()
        code = returncode if returncode is not None and returncode >= 0 else None
        return AgentExitedError(
            f"{message} (pid {self.pid})", code=code, stderr_tail=self.stderr_tail()
        )

    # --- stderr ----------------------------------------------------------------------------

    async def _drain_stderr(self) -> None:
        keep = self._spec.stderr_tail_bytes
        tail = self._stderr_tail
        try:
            while chunk := await self._stderr.read(_READ_CHUNK):
                tail += chunk
                if len(tail) > keep:
                    del tail[: len(tail) - keep]
        except OSError as exc:  # a pipe error only ends the tail; the process is unaffected
            log.warning("reading stderr of agent %d failed: %s", self.pid, exc)

    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` the agent wrote to stderr, decoded leniently."""
        return self._stderr_tail.decode("utf-8", errors="replace")

    async def _settle_stderr(self) -> None:
        await asyncio.wait({self._stderr_task}, timeout=_STDERR_SETTLE_SECONDS)

    # --- ending ----------------------------------------------------------------------------

    async def wait(self) -> ExitStatus:
        """Wait until the process exits by itself (or is stopped) and say how it ended."""
        await self._protocol.exited.wait()
        await self._settle_stderr()
        return self._exit_status()

    async def stop(self, grace: float | None = None) -> ExitStatus:
        """End the process and everything in its process group; idempotent.

        Closes stdin and gives the agent ``eof_grace_seconds`` to exit, then sends SIGTERM to
        the group and waits ``grace`` (default ``stop_grace_seconds``), then SIGKILL. Whatever
        is left in the group once the agent has exited is killed.
        """
        grace = self._spec.stop_grace_seconds if grace is None else grace
        async with self._stop_lock:
            self._stopping = True
            try:
                if self.running:
                    await self._end_leader(grace)
                # The leader is gone; its leftovers must not outlive it.
                self._signal_own_group(signals.SIGKILL)
                await self._settle_stderr()
            except BaseException:
                # Cancelled mid-stop: there is no time left to be gentle.
                self._signal_own_group(signals.SIGKILL)
                self._protocol.close_transport()
                self._stderr_task.cancel()
                raise
            # Closing the pipes ends the stderr drain and wakes any reader with EOF.
            self._protocol.close_transport()
            await asyncio.wait({self._stderr_task})
            return self._exit_status()

    async def _end_leader(self, grace: float) -> None:
        self._close_stdin_now()
        if await self._exited_within(min(self._spec.eof_grace_seconds, grace)):
            self._stop_step = StopStep.STDIN_CLOSED
            return
        self._stop_step = StopStep.SIGTERM
        self._signal_own_group(signals.SIGTERM)
        if await self._exited_within(grace):
            return
        self._stop_step = StopStep.SIGKILL
        self._signal_own_group(signals.SIGKILL)
        await self._protocol.exited.wait()

    async def _exited_within(self, seconds: float) -> bool:
        try:
            async with asyncio.timeout(seconds):
                await self._protocol.exited.wait()
        except TimeoutError:
            return False
        return True

    def _signal_own_group(self, sig: int) -> None:
        # Our group's number cannot be reused while any member lives; if it now names a live
        # process with another start time, our group is empty and that process is not ours.
        now = read_process_start_time(self.pgid)
        if now is not None and self.start_time is not None and now != self.start_time:
            return
        signal_process_group(self.pgid, sig)

    def _exit_status(self) -> ExitStatus:
        returncode = self._transport.get_returncode()
        assert returncode is not None, "only called once the process has exited"
        return ExitStatus(
            code=returncode if returncode >= 0 else None,
            signal=-returncode if returncode < 0 else None,
            stderr_tail=self.stderr_tail(),
            stop_step=self._stop_step,
        )
