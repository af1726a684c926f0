"""A hermetic home for the real Codex CLI, pointed at the fake model server.

``CodexHome`` is a throw-away directory (under ``/var/tmp`` where it can be: Codex warns about
helper binaries under ``/tmp``) holding ``home/`` (``CODEX_HOME`` and ``HOME``) with the
``config.toml`` of ``/work/shared/TESTING.md``, ``workspace/`` (the agent's cwd) and
``outside/`` (a directory the sandbox does not let the agent write to). Its
``env`` is the whole environment the agent gets: nothing is inherited but ``PATH``.

:func:`run_codex` starts ``codex app-server`` there through the project's adapter
(``AgentProcess`` + ``CodexAppServerCodec`` + ``AgentRuntime``, exactly what the gateway
runs) and yields a :class:`CodexAgent`, which reads its events under a deadline and answers
its interactions the way a person clicking a button would. ``tap`` sees every line in and out
(the transcript recorder uses it).

Loaded as a pytest plugin by ``tests/conftest.py``, it provides the fixtures ``fake_model``
(a running :class:`~tests.servers.fake_responses.FakeResponses` with no scenario yet) and
``codex_home`` (a :class:`CodexHome` pointed at it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.codex_app_server import CodexAppServerCodec
from adapters.codex_launch import codex_app_server_argv
from adapters.runtime import AgentRuntime
from adapters.stdio import ProcessSpec
from gateway.domain import Decision, Effect, InteractionRequest, Scope
from gateway.events import InteractionOpened
from tests.agent_driver import DEADLINE, AgentDriver, Tap, TappedCodec, placeholders, scratch_dir
from tests.servers.fake_responses import FakeResponses

__all__ = [
    "DEADLINE",
    "CodexAgent",
    "CodexHome",
    "Tap",
    "choose",
    "codex_home",
    "config_toml",
    "fake_model",
    "make_codex_home",
    "run_codex",
]


def config_toml(
    base_url: str,
    *,
    model: str = "gpt-5.5",
    approval_policy: str = "on-request",
    sandbox_mode: str = "workspace-write",
    features: Mapping[str, bool] | None = None,
) -> str:
    """The ``config.toml`` of TESTING.md. ``approval_policy = "untrusted"`` is refused here by
    0.171 (the server exits): set that one per thread in ``thread/start``."""
    if not base_url.startswith(("http://127.", "http://localhost")):
        raise ValueError(f"the model provider must stay on 127.0.0.0/8, not {base_url}")
    flags = {"unbounded_connection_retries": False, "plugins": False, **(features or {})}
    feature_lines = "\n".join(f"{name} = {str(on).lower()}" for name, on in flags.items())
    return f"""\
model = "{model}"
model_provider = "mock"
approval_policy = "{approval_policy}"
sandbox_mode = "{sandbox_mode}"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[model_providers.mock]
name = "mock"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000

[features]
# with it on, an unreachable provider is retried forever
{feature_lines}
"""


@dataclass(frozen=True, kw_only=True)
class CodexHome:
    root: Path
    home: Path  # CODEX_HOME and HOME
    workspace: Path  # the agent's cwd, writable in the workspace-write sandbox
    outside: Path  # a directory outside the workspace (sandbox escapes write here)
    env: dict[str, str]

    def substitutions(self) -> list[tuple[str, str]]:
        """Real paths and their placeholders, longest first, for transcripts."""
        pairs = [
            (str(self.home), "$CODEX_HOME"),
            (str(self.workspace), "$WORKSPACE"),
            (str(self.outside), "$OUTSIDE"),
        ]
        return placeholders(pairs)


@contextmanager
def make_codex_home(
    base_url: str,
    *,
    features: Mapping[str, bool] | None = None,
    approval_policy: str = "on-request",
    sandbox_mode: str = "workspace-write",
) -> Iterator[CodexHome]:
    """Create the directories and config, yield them, remove them."""
    with scratch_dir("agent-gateway-codex-") as root:
        home = root / "home"
        workspace = root / "workspace"
        outside = root / "outside"
        for path in (home, workspace, outside):
            path.mkdir()
        (home / "config.toml").write_text(
            config_toml(
                base_url,
                features=features,
                approval_policy=approval_policy,
                sandbox_mode=sandbox_mode,
            ),
            encoding="utf-8",
        )
        env = {
            "CODEX_HOME": str(home),
            "HOME": str(home),
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "RUST_LOG": "warn",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        yield CodexHome(root=root, home=home, workspace=workspace, outside=outside, env=env)


# --- the agent, through the adapter ------------------------------------------------------------


class CodexAgent(AgentDriver):
    """A running app-server behind the adapter, and every event it emitted so far."""

    name = "codex"

    async def asked(self) -> InteractionRequest:
        """The next interaction the agent opens, reading past a turn's end on the way (where
        :meth:`AgentDriver.asked` fails)."""
        return (await self.next(InteractionOpened)).request


@asynccontextmanager
async def run_codex(
    codex_bin: str,
    home: CodexHome,
    *,
    enable: Sequence[str] = (),
    sandbox: str = "workspace-write",
    resume: str | None = None,
    experimental_api: bool = False,
    tap: Tap | None = None,
) -> AsyncIterator[CodexAgent]:
    """``codex app-server`` in ``home``, its session started (or resumed)."""
    argv = codex_app_server_argv([codex_bin], enable=enable)
    spec = ProcessSpec(argv=argv, cwd=home.workspace, env=home.env)
    codec = CodexAppServerCodec(
        cwd=str(home.workspace),
        sandbox=sandbox,
        resume_thread_id=resume,
        experimental_api=experimental_api,
    )
    wired = codec if tap is None else TappedCodec(codec, tap)
    async with AgentRuntime(spec, wired, handshake_timeout=DEADLINE) as runtime:
        yield CodexAgent(runtime)


def choose(request: InteractionRequest, effect: Effect, scope: Scope = Scope.ONCE) -> Decision:
    """The decision a person makes by clicking the one button with this effect and scope."""
    [action] = [a for a in request.actions if a.effect is effect and a.scope is scope]
    return Decision(action_id=action.id)


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
async def fake_model() -> AsyncIterator[FakeResponses]:
    async with FakeResponses() as fake:
        yield fake


@pytest.fixture
def codex_home(fake_model: FakeResponses) -> Iterator[CodexHome]:
    with make_codex_home(fake_model.base_url) as made:
        yield made
