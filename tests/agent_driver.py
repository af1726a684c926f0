"""What the real-agent test homes share: a scratch directory, a tapped codec, a driver.

``tests/claude_env.py`` and ``tests/codex_env.py`` each build a hermetic home for their agent
and start it through the project's adapter (``AgentRuntime`` and the agent's codec, exactly
what the gateway runs). The pieces that do not depend on which agent it is live here:

- :func:`scratch_dir`, a throw-away directory under ``/var/tmp`` where it can be (Codex warns
  about helper binaries under ``/tmp``), and :func:`placeholders` for its paths in transcripts;
- :class:`TappedCodec`, the real codec with every line in and out shown to a :data:`Tap` (the
  transcript recorders use it);
- :class:`AgentDriver`, which reads the agent's events under a deadline and answers its
  interactions the way a person clicking a button would.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, TypeVar

from adapters.codec import AgentCodec
from adapters.runtime import AgentRuntime
from gateway.domain import Decision, InteractionRequest, Resolution
from gateway.events import (
    AgentCommand,
    AgentEvent,
    AgentExited,
    Capabilities,
    InteractionClosed,
    InteractionOpened,
    Prompt,
    Respond,
    SessionStarted,
    TurnCompleted,
)

__all__ = [
    "DEADLINE",
    "AgentDriver",
    "Tap",
    "TappedCodec",
    "placeholders",
    "scratch_dir",
]

DEADLINE = 30.0  # seconds for any one awaited event; a whole approval turn takes ~0.3 s
E = TypeVar("E", bound=AgentEvent)
Tap = Callable[[str, bytes], None]  # (">>" written to the agent | "<<" read from it, line)

PREFERRED_PARENT = Path("/var/tmp")


def _scratch_parent() -> Path | None:
    if PREFERRED_PARENT.is_dir() and os.access(PREFERRED_PARENT, os.W_OK):
        return PREFERRED_PARENT
    return None


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A new empty directory named ``prefix...``, removed with all it holds afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=_scratch_parent()))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def placeholders(
    pairs: Sequence[tuple[str, str]], more: Iterable[tuple[str, str]] = ()
) -> list[tuple[str, str]]:
    """Real paths and their placeholders, each path also resolved, longest first."""
    resolved = [(str(Path(p).resolve()), name) for p, name in pairs]
    return sorted({*pairs, *resolved, *more}, key=lambda pair: -len(pair[0]))


class TappedCodec:
    """The real codec, with each line it reads and writes shown to ``tap`` on the way."""

    def __init__(self, codec: AgentCodec, tap: Tap) -> None:
        self.codec = codec
        self.tap = tap

    @property
    def capabilities(self) -> Capabilities:
        return self.codec.capabilities

    def start(self) -> list[AgentEvent] | None:
        return self.codec.start()

    def feed(self, line: bytes) -> list[AgentEvent]:
        self.tap("<<", line)
        return self.codec.feed(line)

    def send(self, command: AgentCommand) -> None:
        self.codec.send(command)

    def data_to_send(self) -> list[bytes]:
        lines = self.codec.data_to_send()
        for line in lines:
            self.tap(">>", line)
        return lines


class AgentDriver:
    """A running agent behind the adapter, and every event it emitted so far."""

    name: ClassVar[str] = "the agent"  # in assertion messages

    def __init__(self, runtime: AgentRuntime) -> None:
        assert runtime.session is not None
        self.runtime = runtime
        self.session: SessionStarted = runtime.session
        self.seen: list[AgentEvent] = []

    async def until(self, done: Callable[[AgentEvent], bool]) -> AgentEvent:
        """Read events until ``done`` says so (AssertionError if the agent exits first)."""
        async with asyncio.timeout(DEADLINE):
            while True:
                event = await self.runtime.next_event()
                self.seen.append(event)
                if done(event):
                    return event
                if isinstance(event, AgentExited):
                    raise AssertionError(f"{self.name} exited: {event}")

    async def next(self, kind: type[E]) -> E:
        event = await self.until(lambda e: isinstance(e, kind))
        assert isinstance(event, kind)
        return event

    async def prompt(self, text: str, *, mode: str | None = None) -> int:
        """Send a prompt; returns the index in ``seen`` where its events start."""
        await self.runtime.send(Prompt(text=text, mode=mode))
        return len(self.seen)

    async def asked(self) -> InteractionRequest:
        """The next interaction the agent opens (AssertionError if the turn ends first)."""
        event = await self.until(lambda e: isinstance(e, InteractionOpened | TurnCompleted))
        if isinstance(event, TurnCompleted):
            raise AssertionError(f"the turn ended without asking anything: {event}")
        assert isinstance(event, InteractionOpened)
        return event.request

    async def decide(self, request: InteractionRequest, decision: Decision) -> None:
        await self.runtime.send(Respond(native_key=request.native_key, decision=decision))

    async def turn_end(self) -> TurnCompleted:
        """The end of the turn, with nothing more asked on the way (else AssertionError)."""
        event = await self.until(lambda e: isinstance(e, TurnCompleted | InteractionOpened))
        if isinstance(event, InteractionOpened):
            raise AssertionError(f"{self.name} asked again: {event.request.title}: {event.request}")
        assert isinstance(event, TurnCompleted)
        return event

    async def exited(self) -> AgentExited:
        """Read to the end: the process is gone."""
        async with asyncio.timeout(DEADLINE):
            async for event in self.runtime.events():
                self.seen.append(event)
        assert isinstance(self.seen[-1], AgentExited)
        return self.seen[-1]

    def opened_since(self, mark: int) -> list[InteractionRequest]:
        return [e.request for e in self.seen[mark:] if isinstance(e, InteractionOpened)]

    def closed(self, request: InteractionRequest) -> list[Resolution]:
        """How the agent closed ``request`` (empty while it is open)."""
        return [
            e.how
            for e in self.seen
            if isinstance(e, InteractionClosed) and e.native_key == request.native_key
        ]
