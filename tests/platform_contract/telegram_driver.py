"""Telegram under the contract: the real python-telegram-bot against the fake Bot API
(tests/servers/fake_telegram.py), in a forum group in "all" mode where Alice (an approver)
and Carol (who may talk, not decide) both see the cards."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from gateway.domain import InteractionRequest
from gateway.sessions.engine import Gateway
from platforms.telegram.platform import TELEGRAM_LIMITS
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
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.servers.telegram_people import Person, document_update, group_chat
from tests.telegram_harness import ALICE, CAROL, GROUP, GROUP_ID, on_telegram, telegram_config

__all__ = ["TelegramDriver"]

T = TypeVar("T")
PEOPLE = {"alice": ALICE, "carol": CAROL}
# where a request is escalated: another group the bot is in
ESCALATIONS = group_chat(-1009876543210, "Escalations")
ESCALATIONS_ID = int(ESCALATIONS["id"])
# the status line, its times date_time entities; then, on an unvoted card, the hash's spoiler
_STATUS = re.compile(
    r"<i>((?:[^<]|</?tg-time[^>]*>)*)</i>\s*(?:Details: <tg-spoiler>([^<]*)</tg-spoiler>\s*)?$"
)
_TIME_TAG = re.compile(r"</?tg-time[^>]*>")


class TelegramDriver(Driver):
    shown_as = {"alice": "@alice", "carol": "@carol"}
    name = "telegram"
    accounts = {"alice": f"telegram:{ALICE.id}", "carol": f"telegram:{CAROL.id}"}
    channel_name = f"telegram:#{ESCALATIONS_ID}"
    message_button = "✎ {}, with a message"

    def __init__(self, tmp_path: Path, fake: FakeTelegram) -> None:
        self.limits = TELEGRAM_LIMITS
        super().__init__(requests_for(self.limits))
        self.fake = fake
        fake.register_chat(ESCALATIONS)
        self.refused = False  # whether the last click was answered with a refusal
        self.work_dir = tmp_path / "work"
        self.work_dir.mkdir()
        self.config = telegram_config(
            fake,
            tmp_path / "data",
            work_dir=tmp_path / "work",
            approvers=("111",),
            allow_from=("111", "333"),
            telegram=f'groups = {{ "{GROUP_ID}" = "all" }}',
            policy=policy_rules(self.accounts, self.channel_name),
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        async with on_telegram(self.config, self.fake, self.launcher) as running:
            self.tg = running
            yield running.gateway

    async def say(self, text: str, *, who: str = "alice") -> None:
        await self.tg.say(PEOPLE[who], text, chat=GROUP)

    async def say_with_files(
        self, text: str, files: Sequence[tuple[str, bytes]], *, who: str = "alice"
    ) -> None:
        """Each file a document; several an album (one media_group_id), the caption on the
        first, as a phone sends them."""
        album = f"album{uuid.uuid4().hex[:8]}" if len(files) > 1 else None
        for n, (name, content) in enumerate(files):
            caption = text if n == 0 else None
            update = document_update(
                self.fake, GROUP, PEOPLE[who], content, name, caption=caption, media_group_id=album
            )
            await self.fake.push(update)

    async def click(self, card: Seen, token: str, *, who: str = "alice") -> str:
        message = self.fake.message(GROUP_ID, int(card.key))
        answer = await self.tg.click(PEOPLE[who], message, token)
        self.refused = answer.get("show_alert") in (True, "true")  # a refusal is an alert
        return str(answer.get("text") or "")

    async def click_in_channel(self, card: Seen, token: str, *, who: str = "alice") -> str:
        message = self.fake.message(ESCALATIONS_ID, int(card.key))
        answer = await self.tg.click(PEOPLE[who], message, token)
        self.refused = answer.get("show_alert") in (True, "true")
        return str(answer.get("text") or "")

    async def in_channel(self) -> list[Seen]:
        return [_seen(m) for m in self.fake.bot_messages(ESCALATIONS_ID)]

    async def card_in_channel(self, probe: Callable[[Seen], bool] = lambda s: True) -> Seen:
        def find() -> Seen | None:
            shown = [_seen(m) for m in self.fake.bot_messages(ESCALATIONS_ID)]
            return next((s for s in shown if s.card and probe(s)), None)

        try:
            return await self.fake.wait_for(find, DEADLINE)
        except TimeoutError:
            raise not_seen(f"{self.name} escalations", DEADLINE, await self.in_channel()) from None

    async def press_with_message(
        self, card: Seen, label: str, message: str, *, who: str = "alice"
    ) -> str:
        """The card's "✎ <label>, with a message" button asks for the message (a ForceReply
        prompt); the reply to it is the press."""
        before = {m.message_id for m in self.fake.bot_messages(GROUP_ID)}
        asked = await self.press(card, self.message_button.format(label), who=who)
        assert not self.refused, asked
        prompt = await self.tg.bot_message(
            GROUP_ID, lambda m: m.force_reply and m.message_id not in before
        )
        update = await self.tg.say(PEOPLE[who], message, chat=GROUP, reply_to=prompt)
        reply_id = update["message"]["message_id"]
        answer = await self.tg.bot_message(GROUP_ID, lambda m: m.reply_to == reply_id)
        return answer.text

    async def answer_form(
        self, card: Seen, request: InteractionRequest, answers: FormAnswers, *, who: str = "alice"
    ) -> str | None:
        """Telegram has no forms: one question at a time on the card, an option per button
        (toggles for a multi-select), free text by a reply to the bot's ForceReply prompt, a
        secret by a reply in the person's private chat; then Submit."""
        questions, key = request.questions, card.key
        self.refused = False
        for n, question in enumerate(questions, start=1):
            if len(questions) > 1:
                card = await self.card(lambda s, n=n: s.key == key and f"Question {n} of" in s.text)
            chosen = answers.chosen.get(question.id, ())
            typed = answers.typed.get(question.id)
            if question.secret and typed is not None:
                return await self._secret(card, typed, who)
            if not chosen and typed is None:
                if question.required:
                    offered = {
                        label for label in card.labels if "Skip" in label or "Submit" in label
                    }
                    assert not offered, card  # nothing lets the person past it
                    return None
                await self.press(card, "Skip", who=who)
                continue
            if not question.multi and chosen:
                answer = await self.press(card, chosen[0], who=who)
                if len(questions) == 1 or self.refused:
                    return answer
                continue
            for label in chosen:
                answer = await self.press(card, f"☐ {label}", who=who)
                if self.refused:
                    return answer
                card = await self.card(
                    lambda s, label=label: s.key == key and f"☑ {label}" in s.labels
                )
            if typed is not None:
                await self._type(card, typed, who)
                card = await self.card(lambda s, typed=typed: s.key == key and typed in s.text)
            if n < len(questions):
                await self.press(card, "Next »", who=who)
        card = await self.card(lambda s: s.key == key and "Your answers" in s.text)
        return await self.press(card, "Submit", who=who)

    async def _type(self, card: Seen, text: str, who: str) -> None:
        before = {m.message_id for m in self.fake.bot_messages(GROUP_ID)}
        answer = await self.press(card, "…", who=who)  # "✎ Other…", "✎ Answer…"
        assert not self.refused, answer
        prompt = await self.tg.bot_message(
            GROUP_ID, lambda m: m.force_reply and m.message_id not in before
        )
        await self.tg.say(PEOPLE[who], text, chat=GROUP, reply_to=prompt)

    async def _secret(self, card: Seen, text: str, who: str) -> str:
        person = PEOPLE[who]
        if person.id not in self.fake.private_open:
            await self.tg.say(person, "/start")  # opens the private chat
            await self.tg.bot_message(person.id, lambda m: m.text.startswith("Commands:"))
        answer = await self.press(card, "private chat", who=who)
        prompt = await self.tg.bot_message(person.id, lambda m: m.force_reply)
        await self.tg.say(person, text, reply_to=prompt)
        return answer

    def lose_files(self) -> None:
        self.fake.file_fails = 1_000_000  # the file server answers 502

    def storm(self, seconds: float) -> None:
        self.fake.storm(seconds, retry_after=1)

    def too_many(self) -> int:
        return len(self.fake.too_many)

    async def drop(self) -> None:
        self.fake.refused.clear()
        self.fake.down = True

    async def refused_while_down(self) -> None:
        await self.fake.wait_for(lambda: bool(self.fake.refused), DEADLINE)

    async def drop_at_next_card(self) -> None:
        self.fake.down_at_next_card = True
        await self.fake.wait_for(lambda: self.fake.down, DEADLINE)

    async def back(self) -> None:
        self.fake.down = False  # the platform's poller finds it answers again

    async def seen(self) -> list[Seen]:
        return self._now()

    async def delete(self, key: str) -> None:
        self.fake.message(GROUP_ID, int(key)).deleted = True

    def _now(self) -> list[Seen]:
        return [_seen(m) for m in self.fake.bot_messages(GROUP_ID)]

    async def wait_for(
        self, probe: Callable[[list[Seen]], T | None], deadline: float = DEADLINE
    ) -> T:
        try:
            return await self.fake.wait_for(lambda: probe(self._now()), deadline)
        except TimeoutError:
            raise not_seen(self.name, deadline, self._now()) from None


def _seen(message: Sent) -> Seen:
    buttons = tuple(
        Button(label=b["text"], token=str(b.get("callback_data", ""))) for b in message.buttons
    )
    status = _STATUS.search(message.html)
    card = bool(buttons) or status is not None
    return Seen(
        key=str(message.message_id),
        text=message.text,
        card=card and message.document is None,
        status=html.unescape(_TIME_TAG.sub("", status.group(1))) if status else "",
        details=html.unescape(status.group(2) or "") if status else "",
        buttons=buttons,
        files=_files(message),
        edits=len(message.versions) - 1,
    )


def _files(message: Sent) -> tuple[tuple[str, str], ...]:
    if message.document is None:
        return ()
    name, content = message.document
    return ((name, content.decode()),)


def person(who: str) -> Person:
    return PEOPLE[who]
