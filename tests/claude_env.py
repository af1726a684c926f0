"""A hermetic home for the real Claude Code CLI, pointed at the fake Messages API.

``ClaudeHome`` is a throw-away directory (under ``/var/tmp`` where it can be) holding
``home/`` (``HOME``; ``CLAUDE_CONFIG_DIR`` is ``home/.claude``) and ``workspace/`` (the
agent's cwd). Its ``env`` is the whole environment the agent gets (TESTING.md): nothing is
inherited but ``PATH``, the API is the fake on 127.0.0.1 with a dummy key, and telemetry,
auto-update and non-essential traffic are off. ``CLAUDE_CODE_MAX_RETRIES=1`` keeps a failing
model call from being retried for minutes.

:func:`run_claude` starts ``claude`` there through the project's adapter (``AgentProcess`` +
``ClaudeCodeCodec`` + ``AgentRuntime``, exactly what the gateway runs) and yields a
:class:`ClaudeAgent`, which reads its events under a deadline and answers its interactions
the way a person clicking a button would. ``tap`` sees every line in and out (the transcript
recorder uses it).

Loaded as a pytest plugin by ``tests/conftest.py``, it provides the fixtures
``fake_anthropic`` (a running :class:`~tests.servers.fake_anthropic.FakeAnthropic` with no
scenario yet) and ``claude_home`` (a :class:`ClaudeHome` pointed at it).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import pytest

from adapters.claude_code import ClaudeCodeCodec
from adapters.claude_launch import ClaudeLaunch
from adapters.codec import AgentCodec
from adapters.runtime import AgentRuntime
from adapters.stdio import ProcessSpec
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
from tests.servers.fake_anthropic import FakeAnthropic

__all__ = [
    "DEADLINE",
    "ClaudeAgent",
    "ClaudeHome",
    "Tap",
    "claude_env",
    "claude_home",
    "fake_anthropic",
    "make_claude_home",
    "run_claude",
]

DEADLINE = 30.0  # seconds for any one awaited event; a whole approval turn takes ~0.3 s
E = TypeVar("E", bound=AgentEvent)
Tap = Callable[[str, bytes], None]  # (">>" written to the agent | "<<" read from it, line)

PREFERRED_PARENT = Path("/var/tmp")


def claude_env(base_url: str, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    if not base_url.startswith(("http://127.", "http://localhost")):
        raise ValueError(f"the model API must stay on 127.0.0.0/8, not {base_url}")
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-dummy-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        **(extra or {}),
    }


@dataclass(frozen=True, kw_only=True)
class ClaudeHome:
    root: Path
    home: Path  # HOME; CLAUDE_CONFIG_DIR is home/.claude
    workspace: Path  # the agent's cwd
    env: dict[str, str]

    def substitutions(self) -> list[tuple[str, str]]:
        """Real paths and their placeholders, longest first, for transcripts."""
        pairs = [(str(self.home), "$HOME"), (str(self.workspace), "$WORKSPACE")]
        resolved = [(str(Path(p).resolve()), name) for p, name in pairs]
        # Claude names its per-project directories after the cwd, every other character "-".
        mangled = [(re.sub(r"[^A-Za-z0-9]", "-", p), "-$WORKSPACE") for p, _ in pairs[1:]]
        return sorted({*pairs, *resolved, *mangled}, key=lambda pair: -len(pair[0]))


def _scratch_parent() -> Path | None:
    if PREFERRED_PARENT.is_dir() and os.access(PREFERRED_PARENT, os.W_OK):
        return PREFERRED_PARENT
    return None


@contextmanager
def make_claude_home(
    base_url: str, *, extra_env: Mapping[str, str] | None = None
) -> Iterator[ClaudeHome]:
    """Create the directories, yield them, remove them."""
    root = Path(tempfile.mkdtemp(prefix="agent-gateway-claude-", dir=_scratch_parent()))
    try:
        home = root / "home"
        workspace = root / "workspace"
        for path in (home / ".claude", workspace):
            path.mkdir(parents=True)
        env = claude_env(base_url, home, extra_env)
        yield ClaudeHome(root=root, home=home, workspace=workspace, env=env)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- the agent, through the adapter ------------------------------------------------------------


class _TappedCodec:
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


class ClaudeAgent:
    """A running ``claude`` behind the adapter, and every event it emitted so far."""

    def __init__(self, runtime: AgentRuntime, codec: ClaudeCodeCodec) -> None:
        assert runtime.session is not None
        self.runtime = runtime
        self.codec = codec
        self.session: SessionStarted = runtime.session
        self.seen: list[AgentEvent] = []

    async def until(self, done: Callable[[AgentEvent], bool]) -> AgentEvent:
        """Read events until ``done`` says so (AssertionError if claude exits first)."""
        async with asyncio.timeout(DEADLINE):
            while True:
                event = await self.runtime.next_event()
                self.seen.append(event)
                if done(event):
                    return event
                if isinstance(event, AgentExited):
                    raise AssertionError(f"claude exited: {event}")

    async def next(self, kind: type[E]) -> E:
        event = await self.until(lambda e: isinstance(e, kind))
        assert isinstance(event, kind)
        return event

    async def prompt(self, text: str) -> int:
        """Send a prompt; returns the index in ``seen`` where its events start."""
        await self.runtime.send(Prompt(text=text))
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
            raise AssertionError(f"claude asked again: {event.request.title}: {event.request}")
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


@asynccontextmanager
async def run_claude(
    claude_bin: str,
    home: ClaudeHome,
    *,
    launch: ClaudeLaunch | None = None,
    tap: Tap | None = None,
) -> AsyncIterator[ClaudeAgent]:
    """``claude`` in ``home``, its session started (a new one unless ``launch`` resumes)."""
    launch = replace(launch or ClaudeLaunch(), command=(claude_bin,))
    spec = ProcessSpec(argv=launch.argv(), cwd=home.workspace, env=home.env)
    codec = ClaudeCodeCodec(launch, cwd=str(home.workspace))
    wired: AgentCodec = codec if tap is None else _TappedCodec(codec, tap)
    async with AgentRuntime(spec, wired, handshake_timeout=DEADLINE) as runtime:
        yield ClaudeAgent(runtime, codec)


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def claude_home(fake_anthropic: FakeAnthropic) -> Iterator[ClaudeHome]:
    with make_claude_home(fake_anthropic.base_url) as made:
        yield made
