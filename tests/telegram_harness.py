"""A whole gateway on Telegram in the test: the real engine and ledger, the real
python-telegram-bot, a fake Bot API on 127.0.0.1, and an agent (the real Codex app-server
against the fake model, or the scripted in-process agent)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.launch import ConfiguredLauncher
from gateway.agents import AgentLauncher
from gateway.config import Config, parse_config
from gateway.engine import Gateway
from platforms.telegram import TelegramPlatform
from platforms.telegram.outbox import Pace
from tests.codex_env import CodexHome
from tests.servers.fake_telegram import TOKEN, FakeTelegram, Sent
from tests.servers.telegram_people import (
    Person,
    callback_update,
    group_chat,
    message_update,
    private_chat,
)

ALICE = Person(111, "Alice", "alice")  # talks and approves
BOB = Person(222, "Bob", "bob")  # talks and approves
CAROL = Person(333, "Carol", "carol")  # may talk, may not decide
MALLORY = Person(444, "Mallory", "mallory")  # a stranger
GROUP = group_chat(-1001234567890, "Team", forum=True)
GROUP_ID = int(GROUP["id"])
DEADLINE = 30.0


def telegram_config(fake: FakeTelegram, data_dir: Path, **options: Any) -> Config:
    """The gateway's config (see :func:`telegram_config_text` for the options)."""
    return parse_config(telegram_config_text(fake, data_dir, **options), "telegram-test.toml")


def telegram_config_text(
    fake: FakeTelegram,
    data_dir: Path,
    *,
    work_dir: Path,
    codex_bin: str = "codex",
    home: CodexHome | None = None,
    approvers: tuple[str, ...] = ("111", "222"),
    allow_from: tuple[str, ...] = ("111", "222", "333"),
    features: tuple[str, ...] = (),
    sandbox: str = "workspace-write",
    telegram: str = "",
) -> str:
    env = "\n".join(f"{k} = {json.dumps(v)}" for k, v in (home.env if home else {}).items())
    text = f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(work_dir))}
agent = "codex-app-server"
argv = [{json.dumps(codex_bin)}]
sandbox = "{sandbox}"
features = {json.dumps(list(features))}

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.telegram]
allow_from = {json.dumps(list(allow_from))}
approvers = {json.dumps(list(approvers))}

[platforms.telegram]
token = "{TOKEN}"
base_url = "{fake.base_url}"
poll_timeout_seconds = 10
{telegram}
"""
    return text


@dataclass
class OnTelegram:
    gateway: Gateway
    telegram: TelegramPlatform
    fake: FakeTelegram
    launcher: AgentLauncher
    pushed: list[dict[str, Any]] = field(default_factory=list)

    # --- what people do -------------------------------------------------------------------

    async def say(
        self,
        person: Person,
        text: str,
        *,
        chat: dict[str, Any] | None = None,
        thread: int | None = None,
        reply_to: Sent | None = None,
    ) -> dict[str, Any]:
        """``person`` writes ``text`` (in their private chat unless ``chat``); the update."""
        where = chat or private_chat(person)
        update = message_update(self.fake, where, person, text, thread=thread, reply_to=reply_to)
        await self.fake.push(update)
        self.pushed.append(update)
        return update

    async def click(self, person: Person, message: Sent, data: str) -> dict[str, Any]:
        """``person`` presses a button of ``message``; the answer they see."""
        query_id, update = callback_update(self.fake, person, message, data)
        await self.fake.push(update)

        def answered() -> dict[str, Any] | None:
            return next((a for a in self.fake.answers if a["callback_query_id"] == query_id), None)

        return await self.fake.wait_for(answered, DEADLINE)

    async def press(self, person: Person, message: Sent, label: str) -> dict[str, Any]:
        return await self.click(person, message, message.button(label)["callback_data"])

    # --- what people see ------------------------------------------------------------------

    async def bot_message(
        self,
        chat_id: int,
        probe: Callable[[Sent], bool],
        *,
        thread: int | None = None,
        deadline: float = DEADLINE,
    ) -> Sent:
        def find() -> Sent | None:
            return next((m for m in self.fake.bot_messages(chat_id, thread) if probe(m)), None)

        return await self.fake.wait_for(find, deadline)

    async def card(self, chat_id: int, probe: Callable[[Sent], bool] = lambda m: True) -> Sent:
        """A message of the bot with buttons that ``probe`` accepts."""
        return await self.bot_message(chat_id, lambda m: bool(m.buttons) and probe(m))

    def texts(self, chat_id: int, thread: int | None = None) -> list[str]:
        return [m.text for m in self.fake.bot_messages(chat_id, thread)]


@asynccontextmanager
async def on_telegram(
    config: Config,
    fake: FakeTelegram,
    launcher: AgentLauncher | None = None,
    *,
    pace: Pace | None = None,
    webhook_socket: socket.socket | None = None,
) -> AsyncIterator[OnTelegram]:
    assert config.platforms.telegram is not None
    agents = launcher or ConfiguredLauncher(env_source={}, handshake_timeout=60)
    platform = TelegramPlatform(config.platforms.telegram, pace=pace, webhook_socket=webhook_socket)
    async with (
        platform as telegram,
        Gateway(config, platforms={"telegram": telegram}, launcher=agents) as gateway,
    ):
        yield OnTelegram(gateway=gateway, telegram=telegram, fake=fake, launcher=agents)


__all__ = [
    "ALICE",
    "BOB",
    "CAROL",
    "DEADLINE",
    "GROUP",
    "GROUP_ID",
    "MALLORY",
    "OnTelegram",
    "on_telegram",
    "telegram_config",
    "telegram_config_text",
]
