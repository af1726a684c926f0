"""The memory platform (platforms/memory) under the contract: the platform object is the
"server" that keeps what it showed across gateway restarts, as a real one would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from gateway.cards import Card, CodeBlock, DiffBlock, FieldsBlock, TextBlock
from gateway.domain import Actor, Answer, ConversationRef, InteractionRequest
from gateway.platform import PlatformLimits
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform, Rendered
from platforms.registry import parse_config
from tests.platform_contract.contract import (
    DEADLINE,
    Button,
    Driver,
    FormAnswers,
    Seen,
    not_seen,
    policy_rules,
    requests_for,
)

__all__ = ["MemoryDriver", "card_text"]

T = TypeVar("T")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
# where a request is escalated ("memory:#escalations": the space is the session's own)
ESCALATIONS = ConversationRef(platform="memory", space="team", channel="escalations")
PEOPLE = {
    "alice": Actor(platform="memory", user_id="alice", display="Alice"),
    "carol": Actor(platform="memory", user_id="carol", display="Carol"),
}


def card_text(card: Card) -> str:
    """A card's text as a platform draws it: title, summary, blocks, form, status."""
    parts = [card.title, card.summary]
    for block in card.blocks:
        match block:
            case CodeBlock(code=code):
                parts.append(code)
            case DiffBlock(diff=diff):
                parts.append(diff)
            case TextBlock(text=text):
                parts.append(text)
            case FieldsBlock(fields=fields):
                parts.extend(f"{k}: {v}" for k, v in fields)
    if card.form is not None:
        for item in card.form.questions:
            question = item.question
            parts.append(question.text)
            parts.extend(option.label for option in question.options)
    parts.append(card.status_line)
    return "\n".join(part for part in parts if part)


class MemoryDriver(Driver):
    shown_as = {"alice": "Alice", "carol": "Carol"}
    name = "memory"
    accounts = {"alice": "memory:alice", "carol": "memory:carol"}
    channel_name = "memory:#escalations"

    def __init__(self, tmp_path: Path, limits: PlatformLimits | None = None) -> None:
        self.limits = limits or PlatformLimits()
        super().__init__(requests_for(self.limits))
        self.platform = MemoryPlatform(limits=self.limits)
        self.work_dir = tmp_path / "work"
        self.work_dir.mkdir()
        self.max_file_bytes = 64 * 1024
        self.config = parse_config(
            f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"

[projects.demo.files]
max_file_bytes = {self.max_file_bytes}
max_prompt_bytes = {2 * self.max_file_bytes}

[projects.demo.auth.memory]
allow_from = ["alice", "carol"]
approvers = ["alice"]

[platforms.memory]
{policy_rules(self.accounts, self.channel_name)}""",
            "memory-contract.toml",
        )
        self._gateway: Gateway | None = None
        self._running = False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        platforms = {"memory": self.platform}
        async with Gateway(self.config, platforms=platforms, launcher=self.launcher) as gateway:
            self._gateway, self._running = gateway, True
            try:
                yield gateway
            finally:
                self._running = False

    @property
    def title(self) -> str:
        return self.name if self.limits.has_private_surface else f"{self.name} (no private surface)"

    async def say(self, text: str, *, who: str = "alice") -> None:
        await self.platform.say(ROOM, PEOPLE[who], text)

    async def say_with_files(
        self, text: str, files: Sequence[tuple[str, bytes]], *, who: str = "alice"
    ) -> None:
        await self.platform.say(ROOM, PEOPLE[who], text, files=files)

    async def click(self, card: Seen, token: str, *, who: str = "alice") -> str:
        return (await self.platform.click(ROOM, PEOPLE[who], token)).text

    async def click_in_channel(self, card: Seen, token: str, *, who: str = "alice") -> str:
        return (await self.platform.click(ESCALATIONS, PEOPLE[who], token)).text

    async def in_channel(self) -> list[Seen]:
        return [self._seen(m) for m in self.platform.messages(ESCALATIONS)]

    async def card_in_channel(self, probe: Callable[[Seen], bool] = lambda s: True) -> Seen:
        def find() -> Seen | None:
            shown = [self._seen(m) for m in self.platform.messages(ESCALATIONS)]
            return next((s for s in shown if s.card and probe(s)), None)

        try:
            return await self.platform.wait_for(find, DEADLINE)
        except TimeoutError:
            raise not_seen(f"{self.name} #escalations", DEADLINE, await self.in_channel()) from None

    async def press_with_message(
        self, card: Seen, label: str, message: str, *, who: str = "alice"
    ) -> str:
        [shown] = [m for m in self.platform.cards(ROOM) if m.ref.message_id == card.key]
        assert shown.card is not None
        [action] = [a for a in shown.card.actions if a.label == label]
        assert action.takes_message, f"{label!r} takes no message"
        return (await self.platform.click(ROOM, PEOPLE[who], action.token, message)).text

    async def answer_form(
        self, card: Seen, request: InteractionRequest, answers: FormAnswers, *, who: str = "alice"
    ) -> str:
        [shown] = [m for m in self.platform.cards(ROOM) if m.ref.message_id == card.key]
        assert shown.card is not None and shown.card.form is not None, card
        given: dict[str, Answer] = {}
        for item in shown.card.form.questions:
            question = item.question
            labels = answers.chosen.get(question.id, ())
            ids = tuple(o.id for o in question.options if o.label in labels)
            other = answers.typed.get(question.id)
            if ids or other is not None:
                given[question.id] = Answer(option_ids=ids, other=other)
        token = shown.card.form.submit_token
        secret = any(q.secret and q.id in answers.typed for q in request.questions)
        ack = await self.platform.submit(ROOM, PEOPLE[who], token, given, private=secret)
        return ack.text

    def lose_files(self) -> None:
        self.platform.fetch_cuts = 1_000_000  # every try cut midway

    def storm(self, seconds: float) -> None:
        self.platform.rate_limited = 0.2  # a retry-after for every call...
        loop = asyncio.get_running_loop()
        loop.call_later(seconds, setattr, self.platform, "rate_limited", None)  # ...until then

    def too_many(self) -> int:
        return len(self.platform.too_many)

    async def drop(self) -> None:
        self.platform.refused.clear()
        self.platform.down = True

    async def refused_while_down(self) -> None:
        await self.platform.wait_for(lambda: bool(self.platform.refused), DEADLINE)

    async def drop_at_next_card(self) -> None:
        self.platform.refused.clear()
        self.platform.down = True
        await self.platform.wait_for(lambda: "send_card" in self.platform.refused, DEADLINE)

    async def back(self) -> None:
        self.platform.down = False
        if self._gateway is not None and self._running:
            # the memory platform has no connection of its own to find back: its driver says
            # so, as a platform does when its servers answer again
            await self._gateway.on_platform_back(self.name)

    async def seen(self) -> list[Seen]:
        return self._now()

    async def delete(self, key: str) -> None:
        await self.platform.delete(key)

    def _now(self) -> list[Seen]:
        return [self._seen(m) for m in self.platform.messages(ROOM)]

    async def wait_for(
        self, probe: Callable[[list[Seen]], T | None], deadline: float = DEADLINE
    ) -> T:
        try:
            return await self.platform.wait_for(lambda: probe(self._now()), deadline)
        except TimeoutError:
            raise not_seen(self.name, deadline, self._now()) from None

    def _seen(self, shown: Rendered) -> Seen:
        if shown.card is None:
            return Seen(key=shown.ref.message_id, text=shown.text or "", edits=shown.edits)
        card = shown.card
        buttons = tuple(Button(label=a.label, token=a.token) for a in card.actions)
        return Seen(
            key=shown.ref.message_id,
            text=card_text(card),
            card=True,
            status=card.status_line,
            details=card.content_hash and f"content hash {card.content_hash}",
            buttons=buttons,
            files=tuple((a.name, a.content) for a in card.attachments),
            edits=shown.edits,
        )
