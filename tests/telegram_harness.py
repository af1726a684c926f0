"""A whole gateway on Telegram in the test: the real engine and ledger, the real
python-telegram-bot, a fake Bot API on 127.0.0.1, and an agent (the real Codex app-server
against the fake model, or the scripted in-process agent).

Failures of the core are injected at the platform's own seam, the Inbox: ``on_telegram(...,
inbox=lambda gateway: FlakyInbox(gateway, ...))`` puts a :class:`FlakyInbox` between the
platform and the gateway (:class:`InboxBetween`), which fails where told as a busy ledger
or a bug of ours would, and passes everything else on to the gateway."""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.launch import ConfiguredLauncher
from gateway.cards import Card
from gateway.clock import Clock
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef, TurnStatus
from gateway.errors import StoreError
from gateway.platform import (
    Ack,
    EditResult,
    InboundAction,
    InboundForm,
    InboundMessage,
    Inbox,
    MessageRef,
    PlatformLimits,
)
from gateway.session_record import SessionRecord
from gateway.sessions.agents import AgentLauncher
from gateway.sessions.engine import Gateway
from gateway.transcription import Transcriber
from platforms.registry import parse_config
from platforms.telegram.config import TelegramConfig
from platforms.telegram.outbox import Pace
from platforms.telegram.platform import TELEGRAM_LIMITS, TelegramPlatform
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


def codex_telegram_config(
    fake: FakeTelegram, tmp_path: Path, codex_bin: str, home: CodexHome
) -> Config:
    """The usual config of a test with the real Codex: its home's workspace as the work dir,
    the ledger in ``tmp_path / "data"``."""
    return telegram_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home
    )


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
    policy: str = "",
    project: str = "",
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
{project}

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
{policy}"""
    return text


class FlakyInbox:
    """The gateway's Inbox, failing where told before anything reaches the gateway.

    A message whose text is in ``busy`` raises StoreError ("database is locked": the ledger
    is busy) as many times as its number says (lower it to let the message through); a text
    in ``broken`` raises RuntimeError every time, as a bug of ours would. ``busy_forms`` and
    ``broken_clicks`` do the same for form submissions and clicks. ``failures`` counts what
    failed; ``passed`` lists the texts passed on, in order."""

    def __init__(
        self,
        gateway: Inbox,
        *,
        busy: Mapping[str, int] | None = None,
        broken: tuple[str, ...] = (),
        busy_forms: int = 0,
        broken_clicks: bool = False,
    ) -> None:
        self.gateway = gateway
        self.busy = dict(busy or {})
        self.broken = set(broken)
        self.busy_forms = busy_forms
        self.broken_clicks = broken_clicks
        self.failures: Counter[str] = Counter()
        self.passed: list[str] = []

    async def on_message(self, message: InboundMessage) -> None:
        text = message.text
        if text in self.broken:
            self.failures[text] += 1
            raise RuntimeError("injected: a bug of ours")
        if self.busy.get(text, 0) > 0:
            self.busy[text] -= 1
            self.failures[text] += 1
            raise StoreError("ledger error: database is locked")
        self.passed.append(text)
        await self.gateway.on_message(message)

    async def on_action(self, action: InboundAction) -> Ack:
        if self.broken_clicks:
            self.failures["click"] += 1
            raise RuntimeError("injected: a bug of ours")
        return await self.gateway.on_action(action)

    async def on_form(self, form: InboundForm) -> Ack:
        if self.busy_forms > 0:
            self.busy_forms -= 1
            self.failures["form"] += 1
            raise StoreError("ledger error: database is locked")
        return await self.gateway.on_form(form)

    async def may_answer(self, action: InboundAction) -> Ack:
        return await self.gateway.may_answer(action)

    async def has_session(self, conversation: ConversationRef) -> bool:
        return await self.gateway.has_session(conversation)

    async def on_platform_back(self, platform: str) -> None:
        await self.gateway.on_platform_back(platform)


class InboxBetween:
    """The Telegram platform as the gateway sees it, with an Inbox between the two: the
    gateway attaches itself, and the platform is attached to ``wrap(gateway)``."""

    def __init__(self, telegram: TelegramPlatform, wrap: Callable[[Inbox], Inbox]) -> None:
        self.telegram = telegram
        self.name: str = telegram.name
        self.limits: PlatformLimits = telegram.limits
        self._wrap = wrap
        self.inbox: Inbox | None = None

    async def connect(self) -> None:
        await self.telegram.connect()

    def attach(self, gateway: Inbox) -> None:
        self.inbox = self._wrap(gateway)
        self.telegram.attach(self.inbox)

    async def stop_input(self) -> None:
        await self.telegram.stop_input()

    async def close(self) -> None:
        await self.telegram.close()

    def spell_command(self, name: str) -> str:
        return self.telegram.spell_command(name)

    def mirror_conversation(self, session: SessionRecord) -> ConversationRef | None:
        return self.telegram.mirror_conversation(session)

    async def direct_conversation(self, actor: Actor) -> ConversationRef | None:
        return await self.telegram.direct_conversation(actor)

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        return await self.telegram.send_text(conversation, text)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        return await self.telegram.edit_text(ref, text)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        return await self.telegram.send_card(conversation, card)

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        return await self.telegram.edit_card(ref, card)

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        return await self.telegram.mark_queued(conversation, message_id)

    async def turn_started(self, conversation: ConversationRef) -> None:
        await self.telegram.turn_started(conversation)

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        await self.telegram.turn_ended(conversation, status)


@dataclass
class OnTelegram:
    gateway: Gateway
    telegram: TelegramPlatform
    fake: FakeTelegram
    launcher: AgentLauncher
    inbox: Inbox | None = None  # what the platform hands updates to, if not the gateway
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
        """``person`` writes ``text`` (in their private chat unless ``chat``); the update,
        with its ``update_id``."""
        where = chat or private_chat(person)
        update = message_update(self.fake, where, person, text, thread=thread, reply_to=reply_to)
        update["update_id"] = await self.fake.push(update)
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
    inbox: Callable[[Inbox], Inbox] | None = None,
    limits: PlatformLimits = TELEGRAM_LIMITS,
    transcriber: Transcriber | None = None,
    schedule_clock: Clock | None = None,
) -> AsyncIterator[OnTelegram]:
    """The platform around the gateway, as ``agent-gateway run`` has them; with ``inbox``,
    the platform hands its updates to ``inbox(gateway)``; ``schedule_clock``: the
    scheduler's clock (gateway/clock.py)."""
    settings = config.platforms.get("telegram", TelegramConfig)
    assert settings is not None
    agents = launcher or ConfiguredLauncher(env_source={}, handshake_timeout=60)
    platform = TelegramPlatform(settings, pace=pace, webhook_socket=webhook_socket, limits=limits)
    async with platform as telegram:
        seen = telegram if inbox is None else InboxBetween(telegram, inbox)
        async with Gateway(
            config,
            platforms={"telegram": seen},
            launcher=agents,
            transcriber=transcriber,
            schedule_clock=schedule_clock,
        ) as gateway:
            between = seen.inbox if isinstance(seen, InboxBetween) else None
            yield OnTelegram(
                gateway=gateway, telegram=telegram, fake=fake, launcher=agents, inbox=between
            )


__all__ = [
    "ALICE",
    "BOB",
    "CAROL",
    "DEADLINE",
    "GROUP",
    "GROUP_ID",
    "MALLORY",
    "FlakyInbox",
    "InboxBetween",
    "OnTelegram",
    "on_telegram",
    "telegram_config",
    "telegram_config_text",
]
