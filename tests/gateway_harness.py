"""A whole gateway in the test: the real engine and ledger, the memory platform, and the
real Codex app-server (against the fake model) started by the real launcher."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from adapters.launch import ConfiguredLauncher
from gateway.cards import Card
from gateway.clock import Clock
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform, Rendered
from platforms.registry import parse_config
from tests.codex_env import CodexHome

T = TypeVar("T")

ALICE = Actor(platform="memory", user_id="alice", display="Alice")
BOB = Actor(platform="memory", user_id="bob", display="Bob")
MALLORY = Actor(platform="memory", user_id="mallory", display="Mallory")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")


def gateway_config(
    codex_bin: str,
    home: CodexHome,
    data_dir: Path,
    *,
    approvers: tuple[str, ...] = ("alice", "bob"),
    allow_from: tuple[str, ...] = ("alice", "bob", "carol"),
    approval_policy: str = "on-request",
    sandbox: str = "workspace-write",
    features: tuple[str, ...] = (),
    extra: str = "",
    agent: str = "codex-app-server",
    busy_input: str = "queue",
    project_extra: str = "",  # more keys of [projects.demo]
) -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    text = f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(home.workspace))}
agent = "{agent}"
argv = [{json.dumps(codex_bin)}]
approval_policy = "{approval_policy}"
sandbox = "{sandbox}"
features = {json.dumps(list(features))}
busy_input = "{busy_input}"
{project_extra}

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.memory]
allow_from = {json.dumps(list(allow_from))}
approvers = {json.dumps(list(approvers))}

[platforms.memory]
{extra}
"""
    return parse_config(text, "test.toml")


# how long a wait for what the agent shows lasts by default (the memory platform's own)
WAIT_SECONDS = 30.0


@dataclass
class Running:
    gateway: Gateway
    memory: MemoryPlatform
    # the bound of every wait below: an agent that needs seconds of CPU before its first
    # event (opencode) is given more on a loaded machine
    deadline: float = WAIT_SECONDS

    def cards(self, conversation: ConversationRef = ROOM) -> list[Rendered]:
        return self.memory.cards(conversation)

    async def card_where(
        self, probe: Callable[[Card], bool], conversation: ConversationRef = ROOM
    ) -> Rendered:
        def find() -> Rendered | None:
            for shown in self.memory.cards(conversation):
                if shown.card is not None and probe(shown.card):
                    return shown
            return None

        return await self.memory.wait_for(find, self.deadline)

    async def text_where(
        self, probe: Callable[[str], bool], conversation: ConversationRef = ROOM
    ) -> str:
        def find() -> str | None:
            return next((t for t in self.memory.texts(conversation) if probe(t)), None)

        return await self.memory.wait_for(find, self.deadline)

    async def wait_for(self, probe: Callable[[], T | None]) -> T:
        """``memory.wait_for`` under this run's deadline."""
        return await self.memory.wait_for(probe, self.deadline)


@asynccontextmanager
async def running_gateway(
    config: Config, *, deadline: float = WAIT_SECONDS, schedule_clock: Clock | None = None
) -> AsyncIterator[Running]:
    memory = MemoryPlatform()
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    async with Gateway(
        config, platforms={"memory": memory}, launcher=launcher, schedule_clock=schedule_clock
    ) as gateway:
        yield Running(gateway=gateway, memory=memory, deadline=deadline)
