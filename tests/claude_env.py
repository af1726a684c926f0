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

import os
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from adapters.claude_code import ClaudeCodeCodec
from adapters.claude_launch import ClaudeLaunch
from adapters.codec import AgentCodec
from adapters.runtime import AgentRuntime
from adapters.stdio import ProcessSpec
from tests.agent_driver import DEADLINE, AgentDriver, Tap, TappedCodec, placeholders, scratch_dir
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
        # Claude names its per-project directories after the cwd, every other character "-".
        mangled = [(re.sub(r"[^A-Za-z0-9]", "-", p), "-$WORKSPACE") for p, _ in pairs[1:]]
        return placeholders(pairs, mangled)


@contextmanager
def make_claude_home(
    base_url: str, *, extra_env: Mapping[str, str] | None = None
) -> Iterator[ClaudeHome]:
    """Create the directories, yield them, remove them."""
    with scratch_dir("agent-gateway-claude-") as root:
        home = root / "home"
        workspace = root / "workspace"
        for path in (home / ".claude", workspace):
            path.mkdir(parents=True)
        env = claude_env(base_url, home, extra_env)
        yield ClaudeHome(root=root, home=home, workspace=workspace, env=env)


# --- the agent, through the adapter ------------------------------------------------------------


class ClaudeAgent(AgentDriver):
    """A running ``claude`` behind the adapter, its codec, and every event it emitted so far."""

    name = "claude"

    def __init__(self, runtime: AgentRuntime, codec: ClaudeCodeCodec) -> None:
        super().__init__(runtime)
        self.codec = codec


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
    wired: AgentCodec = codec if tap is None else TappedCodec(codec, tap)
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
