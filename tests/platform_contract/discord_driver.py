"""Discord under the contract: the real discord.py against the fake Discord
(tests/servers/fake_discord.py), in a thread made from the message that mentioned the bot in
#general, where Alice (an approver) and Carol (who may talk, not decide) both see the cards.
A click's answer is the ephemeral followup only its person sees; a form is a modal."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from gateway.domain import InteractionRequest
from gateway.platform import connected
from gateway.sessions.engine import Gateway
from gateway.transcription import Transcriber
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DISCORD_LIMITS, DiscordPlatform
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
from tests.servers.fake_discord import (
    ALICE,
    APP_ID,
    BOT,
    TOKEN,
    FakeDiscord,
    Interaction,
    Person,
    Sent,
)

__all__ = ["DiscordDriver"]

T = TypeVar("T")
CAROL = Person("1300000000000000003", "carol")
PEOPLE = {"alice": ALICE, "carol": CAROL}
ESCALATIONS = "1600000000000000099"  # where a request is escalated


class DiscordDriver(Driver):
    shown_as = {"alice": "@alice", "carol": "@carol"}
    name = "discord"
    accounts = {"alice": f"discord:{ALICE.id}", "carol": f"discord:{CAROL.id}"}
    channel_name = f"discord:#{ESCALATIONS}"

    def __init__(self, tmp_path: Path, fake: FakeDiscord) -> None:
        self.limits = DISCORD_LIMITS
        super().__init__(requests_for(self.limits))
        self.fake = fake
        fake.add_person(CAROL)
        self.escalations = fake.add_channel(ESCALATIONS, "escalations")
        self.thread: str | None = None
        self.transcriber: Transcriber | None = None  # voice notes (issue 34)
        self.work_dir = tmp_path / "work"
        self.work_dir.mkdir()
        self.config = parse_config(
            f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"
argv = ["codex"]

[projects.demo.auth.discord]
allow_from = [{json.dumps(ALICE.id)}, {json.dumps(CAROL.id)}]
approvers = [{json.dumps(ALICE.id)}]

[platforms.discord]
token = "{TOKEN}"
application_id = "{APP_ID}"
channels = ["{fake.general.id}", "{ESCALATIONS}"]
api_base_url = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
{policy_rules(self.accounts, self.channel_name)}""",
            "discord-test.toml",
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        settings = self.config.platforms.get("discord", DiscordConfig)
        assert settings is not None
        platform = DiscordPlatform(settings)
        platforms = {"discord": platform}
        async with (
            connected(platforms),  # type: ignore[arg-type]
            Gateway(
                self.config,
                platforms=platforms,  # type: ignore[arg-type]
                launcher=self.launcher,
                transcriber=self.transcriber,
            ) as gateway,
        ):
            yield gateway

    def _where(self) -> Any:
        return self.fake.channels[self.thread] if self.thread else self.fake.general

    async def say(self, text: str, *, who: str = "alice") -> None:
        await self.say_with_files(text, (), who=who)

    async def say_with_files(
        self, text: str, files: Sequence[tuple[str, bytes]], *, who: str = "alice"
    ) -> None:
        said = await self.fake.say(
            PEOPLE[who],
            self._where(),
            f"<@{BOT.id}> {text}",
            mentions=(BOT,),
            files=list(files),
        )
        if self.thread is None:
            await self.fake.wait_for(lambda: said.id in self.fake.channels, DEADLINE)
            self.thread = said.id

    async def _answer(self, interaction: Interaction) -> str:
        def said() -> str | None:
            if interaction.followups:
                return interaction.followups[0].content
            original = interaction.original
            if original is not None and original.content:
                return original.content
            return None

        return await self.fake.wait_for(said, DEADLINE)

    async def click(self, card: Seen, token: str, *, who: str = "alice") -> str:
        message = self.fake.message(card.key)
        asks = [b for b in _buttons(message) if b.get("custom_id") == "agwm:" + token]
        if asks:  # a button that asks for a message first: its modal, sent empty
            opened = await self.fake.click(PEOPLE[who], message, asks[0]["custom_id"])
            await self._opened(opened)
            if opened.modal is None:
                return await self._answer(opened)
            return await self._answer(await self.fake.submit(PEOPLE[who], opened, {}))
        data = {"custom_id": "agw:" + token, "component_type": 2}
        mine = [b for b in _buttons(message) if b.get("custom_id") == data["custom_id"]]
        if mine:
            clicked = await self.fake.click(PEOPLE[who], message, data["custom_id"])
        else:  # a copy on screen not yet redrawn, or forged: the same data on this message
            clicked = await self.fake._interact(  # type: ignore[attr-defined]
                3, PEOPLE[who], self.fake.channels[message.channel_id], data, message
            )
        return await self._answer(clicked)

    async def click_in_channel(self, card: Seen, token: str, *, who: str = "alice") -> str:
        return await self.click(card, token, who=who)  # a message is found by its id alone

    def _in_channel(self) -> list[Seen]:
        return [self._seen(m) for m in self.fake.bot_messages(self.escalations)]

    async def in_channel(self) -> list[Seen]:
        return self._in_channel()

    async def card_in_channel(self, probe: Callable[[Seen], bool] = lambda s: True) -> Seen:
        def find() -> Seen | None:
            return next((s for s in self._in_channel() if s.card and probe(s)), None)

        try:
            return await self.fake.wait_for(find, DEADLINE)
        except TimeoutError:
            raise not_seen(f"{self.name} #escalations", DEADLINE, self._in_channel()) from None

    async def press_with_message(
        self, card: Seen, label: str, message: str, *, who: str = "alice"
    ) -> str:
        person = PEOPLE[who]
        opened = await self.fake.click(person, self.fake.message(card.key), label)
        await self._opened(opened)
        assert opened.modal is not None, "no modal for the message"
        sent = await self.fake.submit(person, opened, {"message": message})
        return await self._answer(sent)

    async def answer_form(
        self, card: Seen, request: InteractionRequest, answers: FormAnswers, *, who: str = "alice"
    ) -> str | None:
        person = PEOPLE[who]
        message = self.fake.message(card.key)
        opened = await self.fake.click(person, message, "Answer…")
        await self._opened(opened)
        if opened.modal is None:
            return await self._answer(opened)
        replies: list[str] = []
        while True:
            modal = opened.modal
            assert modal is not None
            labels: dict[str, str] = {}
            for top in modal.get("components") or []:
                if top.get("type") == 18:
                    labels.setdefault(top["label"], top["component"]["custom_id"])
            filled: dict[str, Any] = {}
            for question in request.questions:
                label = (question.header or question.text)[:45]
                key = labels.get(label)
                if key is None:
                    key = next(
                        (v for k, v in labels.items() if label.startswith(k.rstrip("…"))), None
                    )
                if key is None:
                    continue  # on another page
                chosen = answers.chosen.get(question.id)
                typed = answers.typed.get(question.id)
                options = {o.label: str(j) for j, o in enumerate(question.options)}
                if chosen:
                    values = [options[c] for c in chosen]
                    filled[key] = (
                        values if question.multi or len(question.options) > 10 else values[0]
                    )
                if typed is not None:
                    other = f"{key}.other"
                    filled[other if other in labels.values() else key] = typed
            sent = await self.fake.submit(person, opened, filled)
            reply = await self._answer(sent)
            replies.append(reply)
            message_shown = sent.original
            next_button = None
            if message_shown is not None:
                next_button = next(
                    (b for b in _buttons(message_shown) if b.get("label") == "Next"), None
                )
            if next_button is None:
                return reply
            opened = await self.fake.click(person, message_shown, "Next")  # type: ignore[arg-type]
            await self._opened(opened)
            if opened.modal is None:
                return await self._answer(opened)

    async def _opened(self, clicked: Interaction) -> None:
        await self.fake.wait_for(lambda: clicked.modal or clicked.original, DEADLINE)

    def lose_files(self) -> None:
        self.fake.cdn_expired = True  # every signed CDN address: 404

    def storm(self, seconds: float) -> None:
        self.fake.storm(seconds, retry_after=1)

    def too_many(self) -> int:
        return len(self.fake.too_many)

    async def drop(self) -> None:
        self.fake.cut = 0
        await self.fake.go_down()

    async def drop_at_next_card(self) -> None:
        self.fake.down_at_next_card = True
        await self.fake.wait_for(lambda: self.fake.down and self.fake.cut, DEADLINE)

    async def refused_while_down(self) -> None:
        await self.fake.wait_for(lambda: self.fake.cut, DEADLINE)

    async def back(self) -> None:
        await self.fake.come_back()

    async def delete(self, key: str) -> None:
        self.fake.message(key).deleted = True

    async def seen(self) -> list[Seen]:
        return self._now()

    def _now(self) -> list[Seen]:
        if self.thread is None or self.thread not in self.fake.channels:
            return []
        return [self._seen(m) for m in self.fake.bot_messages(self.fake.channels[self.thread])]

    def _seen(self, message: Sent) -> Seen:
        embed = message.embeds[0] if message.embeds else None
        details = ""
        if embed is None:
            text = message.content
            status = ""
        else:
            details = next(
                (f["value"] for f in embed.get("fields", []) if f["name"] == "Details"), ""
            )
            parts = [embed.get("title", ""), embed.get("description", "")]
            parts += [f"{f['name']}: {f['value']}" for f in embed.get("fields", [])]
            status = (embed.get("footer") or {}).get("text", "")
            parts.append(status)
            text = "\n".join(p for p in parts if p)
        files = tuple(
            (
                a["filename"],
                a["content"] if isinstance(a["content"], str) else a["content"].decode(),
            )
            for a in message.attachments
            if a.get("content") is not None
        )
        return Seen(
            key=message.id,
            text=text,
            card=embed is not None,
            status=status,
            details=details,
            buttons=tuple(
                Button(
                    label=b.get("label", ""),
                    token=str(b.get("custom_id", "")).split(":", 1)[-1],  # agw: or agwm:
                )
                for b in _buttons(message)
            ),
            files=files,
            edits=len(message.edits),
        )

    async def wait_for(
        self, probe: Callable[[list[Seen]], T | None], deadline: float = DEADLINE
    ) -> T:
        try:
            return await self.fake.wait_for(lambda: probe(self._now()), deadline)
        except TimeoutError:
            raise not_seen(self.name, deadline, self._now()) from None


def _buttons(message: Sent) -> list[dict[str, Any]]:
    return [
        child
        for row in message.components
        for child in row.get("components") or []
        if child.get("type") == 2
    ]
