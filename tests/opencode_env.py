"""A hermetic home for the real ``opencode serve``, pointed at the fake Chat Completions API.

``OpenCodeHome`` is a throw-away directory holding ``home/`` (``HOME``, with the global
config in ``home/.config/opencode/opencode.json``: one ``@ai-sdk/openai-compatible`` provider
whose ``baseURL`` is the fake on 127.0.0.1, no auto-update, no sharing) and ``workspace/``
(the agent's cwd). Its ``env`` is the whole environment the agent gets: nothing is inherited
but ``PATH``. The config sets ``bash`` and ``edit`` to ``allow`` on purpose: the gateway's
session rules must still ask (tests/test_gateway_opencode.py).

Loaded as a pytest plugin by ``tests/conftest.py``: fixtures ``fake_chat`` and
``opencode_home``.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.opencode import parse_listening_line
from adapters.opencode_runtime import free_loopback_port, serve_argv
from adapters.stdio import AgentProcess, ProcessSpec
from tests.agent_driver import scratch_dir
from tests.servers.fake_chat_completions import MODEL, FakeChatCompletions

__all__ = [
    "OPENCODE_WAIT",
    "VISION_MODEL",
    "OpenCodeHome",
    "Server",
    "fake_chat",
    "make_opencode_home",
    "opencode_home",
    "opencode_server",
]

# What a person waits for through a gateway running opencode is awaited as an event (the
# memory platform's condition), under this bound rather than the platform's usual 30 s:
# opencode 1.18.33 spends ~5 s of CPU from its start to the first card (2.4 s to listening
# and a session, 2.7 s more to the first permission; the same with its model fetch, default
# plugins and LSP downloads switched off), so on 2 cores shared with other test workers the
# first card took past 30 s.
OPENCODE_WAIT = 150.0


SECOND_MODEL = "fake-mini"
# a model declared to take images (issue 32): OpenCode gives it the pictures sent in chat
VISION_MODEL = "fake-vision"


@dataclass(frozen=True, kw_only=True)
class OpenCodeHome:
    root: Path
    home: Path
    workspace: Path
    env: dict[str, str]


def opencode_config(base_url: str, model: str = MODEL) -> dict[str, object]:
    if not base_url.startswith("http://127."):
        raise ValueError(f"the model API must stay on 127.0.0.0/8, not {base_url}")
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake local",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": "sk-fake"},
                "models": {
                    MODEL: {"name": "Fake model", "tool_call": True},
                    # a second model, for /model (issue 31)
                    SECOND_MODEL: {"name": "Fake mini", "tool_call": True},
                    VISION_MODEL: {
                        "name": "Fake vision",
                        "tool_call": True,
                        "attachment": True,
                        "modalities": {"input": ["text", "image"], "output": ["text"]},
                    },
                },
            }
        },
        "model": f"fake/{model}",
        "small_model": f"fake/{MODEL}",
        # what a careless project might say: the gateway's session rules must win
        "permission": {"bash": "allow", "edit": "allow"},
        "autoupdate": False,
        "share": "disabled",
    }


@contextmanager
def make_opencode_home(base_url: str, model: str = MODEL) -> Iterator[OpenCodeHome]:
    with scratch_dir("agent-gateway-opencode-") as root:
        home = root / "home"
        workspace = root / "workspace"
        config_dir = home / ".config" / "opencode"
        for path in (config_dir, workspace):
            path.mkdir(parents=True)
        (config_dir / "opencode.json").write_text(json.dumps(opencode_config(base_url, model)))
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "NO_PROXY": "127.0.0.1,localhost",
            "LANG": "C.UTF-8",
        }
        yield OpenCodeHome(root=root, home=home, workspace=workspace, env=env)


@pytest.fixture
async def fake_chat() -> AsyncIterator[FakeChatCompletions]:
    async with FakeChatCompletions() as fake:
        yield fake


@pytest.fixture
def opencode_home(fake_chat: FakeChatCompletions) -> Iterator[OpenCodeHome]:
    with make_opencode_home(fake_chat.base_url) as made:
        yield made


@dataclass(frozen=True)
class Server:
    url: str
    password: str
    process: AgentProcess


@asynccontextmanager
async def opencode_server(
    opencode_bin: str, home: OpenCodeHome, extra_env: Mapping[str, str] | None = None
) -> AsyncIterator[Server]:
    """``opencode serve`` run by the test, as a person would run it: the gateway only
    reaches it (``extra_env``: more of the environment that person runs it in)."""
    port = free_loopback_port()
    password = secrets.token_urlsafe(18)
    spec = ProcessSpec(
        argv=serve_argv([opencode_bin], port),
        cwd=home.workspace,
        env={**home.env, **(extra_env or {}), "OPENCODE_SERVER_PASSWORD": password},
        stop_grace_seconds=2,
        eof_grace_seconds=0,
    )
    async with AgentProcess.spawn(spec) as process:
        while (line := await process.read_line()) is not None:
            if parse_listening_line(line.decode("utf-8", "replace")) is not None:
                break
        url = f"http://127.0.0.1:{port}"
        yield Server(url=url, password=password, process=process)
