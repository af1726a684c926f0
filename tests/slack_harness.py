"""A whole gateway on Slack in the test: the real engine and ledger, the real slack-bolt and
slack-sdk, the fake Slack on 127.0.0.1 (tests/servers/fake_slack.py), and an agent (the real
Codex app-server against the fake model, or the scripted in-process agent)."""

from __future__ import annotations

import asyncio
import html
import json
import re
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.launch import ConfiguredLauncher
from gateway.clock import Clock
from gateway.config.model import Config
from gateway.platform import PlatformLimits, connected
from gateway.sessions.agents import AgentLauncher
from gateway.sessions.engine import Gateway
from gateway.transcription import Transcriber
from platforms.console.platform import ConsolePlatform
from platforms.outbox import Pacing
from platforms.registry import parse_config
from platforms.slack.config import SlackConfig
from platforms.slack.platform import SLACK_LIMITS, SlackPlatform
from tests.claude_env import ClaudeHome
from tests.codex_env import CodexHome
from tests.servers.fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    Ephemeral,
    FakeSlack,
    Person,
    Posted,
)

__all__ = [
    "ALICE",
    "BOB",
    "CAROL",
    "DEADLINE",
    "GENERAL",
    "MALLORY",
    "LedgerLock",
    "OnSlack",
    "on_slack",
    "read",
    "slack_config",
    "slack_config_text",
]

CAROL = Person("U0CAROL", "carol")  # may talk, may not decide
MALLORY = Person("U0MALLORY", "mallory")  # a stranger
GENERAL = "C0GENERAL"
DEADLINE = 30.0


def slack_config_text(
    fake: FakeSlack,
    data_dir: Path,
    *,
    work_dir: Path,
    codex_bin: str = "codex",
    home: CodexHome | ClaudeHome | None = None,
    agent: str = "codex-app-server",
    approvers: tuple[str, ...] = (ALICE.id, BOB.id),
    allow_from: tuple[str, ...] = (ALICE.id, BOB.id, CAROL.id),
    slack: str = "",
    project: str = "",
) -> str:
    env = "\n".join(f"{k} = {json.dumps(v)}" for k, v in (home.env if home else {}).items())
    sandbox = 'sandbox = "workspace-write"' if agent == "codex-app-server" else ""
    return f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(work_dir))}
agent = {json.dumps(agent)}
argv = [{json.dumps(codex_bin)}]
{sandbox}
{project}

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.slack]
allow_from = {json.dumps(list(allow_from))}
approvers = {json.dumps(list(approvers))}

[platforms.slack]
bot_token = "{BOT_TOKEN}"
app_token = "{APP_TOKEN}"
base_url = "{fake.base_url}"
team_id = "{TEAM_ID}"
{slack}
"""


def slack_config(fake: FakeSlack, data_dir: Path, **options: Any) -> Config:
    return parse_config(slack_config_text(fake, data_dir, **options), "slack-test.toml")


class LedgerLock:
    """Another SQLite connection holding the ledger's write lock (``BEGIN EXCLUSIVE``) for
    ``seconds``, on a thread of its own; ``taken`` is set once it holds it, ``releasing``
    before it lets it go (so anything the ledger wrote after is seen after it)."""

    def __init__(self, path: Path, seconds: float) -> None:
        self.taken = asyncio.Event()
        self.releasing = asyncio.Event()
        self.released = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._path, self._seconds = path, seconds
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _hold(self) -> None:
        with closing(sqlite3.connect(self._path, timeout=10, isolation_level=None)) as conn:
            conn.execute("BEGIN EXCLUSIVE")
            self._loop.call_soon_threadsafe(self.taken.set)
            threading.Event().wait(self._seconds)  # the other process's long transaction
            self._loop.call_soon_threadsafe(self.releasing.set)
            conn.execute("ROLLBACK")
        self._loop.call_soon_threadsafe(self.released.set)


_DATE = re.compile(r"<!date\^[0-9]+\^[^|>]*\|([^>]*)>")


def read(text: str) -> str:
    """What a person reads of mrkdwn the app sent (``&amp;`` as ``&``; a date as its UTC
    fallback text, which a client shows in the reader's own zone)."""
    return html.unescape(_DATE.sub(r"\1", text))


@dataclass
class OnSlack:
    gateway: Gateway
    slack: SlackPlatform
    fake: FakeSlack

    async def mention(
        self, person: Person, text: str, *, channel: str = GENERAL, thread_ts: str | None = None
    ) -> Posted:
        """``person`` says ``text`` to the app (a mention), at the top or in a thread."""
        return await self.fake.say(person, channel, f"<@{BOT_USER_ID}> {text}", thread_ts=thread_ts)

    async def card(
        self, channel: str, thread_ts: str | None, probe: Callable[[Posted], bool] = lambda m: True
    ) -> Posted:
        """A message of the app with buttons that ``probe`` accepts."""

        def find() -> Posted | None:
            shown = (
                self.fake.replies(channel, thread_ts) if thread_ts else self.fake.messages(channel)
            )
            return next((m for m in shown if m.from_bot and m.labels and probe(m)), None)

        return await self.fake.wait_for(find, DEADLINE)

    async def click(self, person: Person, card: Posted, label: str, **kw: Any) -> Ephemeral:
        """``person`` clicks ``label``; the ephemeral answer they are shown."""
        before = len(self.fake.ephemerals(person, card.channel))
        await self.fake.click(person, card, label, **kw)
        new = await self.fake.wait_for(
            lambda: self.fake.ephemerals(person, card.channel)[before:], DEADLINE
        )
        return new[0]


@asynccontextmanager
async def on_slack(
    config: Config,
    fake: FakeSlack,
    launcher: AgentLauncher | None = None,
    *,
    pacing: Pacing[str] | None = None,
    limits: PlatformLimits = SLACK_LIMITS,
    http_socket: socket.socket | None = None,
    console: ConsolePlatform | None = None,
    transcriber: Transcriber | None = None,
    schedule_clock: Clock | None = None,
) -> AsyncIterator[OnSlack]:
    """The platform around the gateway, as ``agent-gateway run`` has them (with the web
    console beside it, if given); ``schedule_clock``: the scheduler's clock."""
    settings = config.platforms.get("slack", SlackConfig)
    assert settings is not None
    for person in (CAROL, MALLORY):
        if person.id not in fake.people:
            fake.add_person(person)
            fake.channels[GENERAL].members.add(person.id)
    agents = launcher or ConfiguredLauncher(env_source={}, handshake_timeout=60)
    slack = SlackPlatform(settings, pacing=pacing, limits=limits, http_socket=http_socket)
    platforms: dict[str, Any] = {"slack": slack}
    async with AsyncExitStack() as stack:
        if console is not None:
            platforms["console"] = await stack.enter_async_context(console)
        await stack.enter_async_context(connected({"slack": slack}))
        gateway = await stack.enter_async_context(
            Gateway(
                config,
                platforms=platforms,
                launcher=agents,
                transcriber=transcriber,
                schedule_clock=schedule_clock,
            )
        )
        if settings.mode == "socket":
            await fake.wait_for(lambda: fake.connected, DEADLINE)
        yield OnSlack(gateway=gateway, slack=slack, fake=fake)
