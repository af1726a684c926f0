"""Slack under the contract: the real slack-bolt and slack-sdk in Socket Mode against the fake
Slack (tests/servers/fake_slack.py), in a channel thread started by mentioning the app, where
Alice (an approver) and Carol (who may talk, not decide) both see the cards. A click's answer
is the ephemeral message only its person sees; a form is answered in a modal."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from gateway.domain import InteractionRequest
from gateway.sessions.engine import Gateway
from platforms.slack.platform import SLACK_LIMITS
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
from tests.servers.fake_slack import BOT_USER_ID, FakeSlack, Person, Posted
from tests.servers.slack_wire import buttons_of, inputs_of, text_of
from tests.slack_harness import ALICE, CAROL, GENERAL, on_slack, read, slack_config

__all__ = ["SlackDriver"]

T = TypeVar("T")
PEOPLE = {"alice": ALICE, "carol": CAROL}
ESCALATIONS = "C0ESCALATE"  # where a request is escalated


class SlackDriver(Driver):
    shown_as = {"alice": "@alice", "carol": "@carol"}
    name = "slack"
    accounts = {"alice": f"slack:{ALICE.id}", "carol": f"slack:{CAROL.id}"}
    channel_name = f"slack:#{ESCALATIONS}"

    def __init__(self, tmp_path: Path, fake: FakeSlack) -> None:
        self.limits = SLACK_LIMITS
        super().__init__(requests_for(self.limits))
        self.fake = fake
        fake.add_channel(ESCALATIONS, "escalations", members={ALICE.id, CAROL.id})
        self.thread: str | None = None  # the thread the first mention started
        self.buttons: dict[str, dict[str, Any]] = {}  # every button seen, by its value
        self.work_dir = tmp_path / "work"
        self.work_dir.mkdir()
        self.config = slack_config(
            fake,
            tmp_path / "data",
            work_dir=tmp_path / "work",
            approvers=(ALICE.id,),
            allow_from=(ALICE.id, CAROL.id),
            project=policy_rules(self.accounts, self.channel_name),
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        async with on_slack(self.config, self.fake, self.launcher) as running:
            yield running.gateway

    async def say(self, text: str, *, who: str = "alice") -> None:
        said = await self.fake.say(
            PEOPLE[who], GENERAL, f"<@{BOT_USER_ID}> {text}", thread_ts=self.thread
        )
        self.thread = self.thread or said.ts

    async def say_with_files(
        self, text: str, files: Sequence[tuple[str, bytes]], *, who: str = "alice"
    ) -> None:
        said = await self.fake.say(
            PEOPLE[who],
            GENERAL,
            f"<@{BOT_USER_ID}> {text}",
            thread_ts=self.thread,
            files=list(files),
        )
        self.thread = self.thread or said.ts

    async def click(self, card: Seen, token: str, *, who: str = "alice") -> str:
        person = PEOPLE[who]
        message = self.fake.message(GENERAL, card.key)
        before = len(self.fake.ephemerals(person, GENERAL))
        mine = [b for _, b in buttons_of(message.blocks) if b.get("value") == token]
        if mine and str(mine[0].get("action_id", "")).startswith("gw.msg."):
            # a button that asks for a message first: its modal, sent empty
            return await self.press_with_message(card, text_of(mine[0]["text"]), "", who=who)
        if mine:
            await self.fake.click(person, message, text_of(mine[0]["text"]))
        elif token in self.buttons:  # a copy on the person's screen not yet redrawn
            await self.fake.click(person, message, "", shown=self.buttons[token])
        else:  # forged: a button of the card carrying another value
            await self.fake.click(person, message, card.labels[0], value=token)
        return await self._answer(person, before)

    async def _answer(self, person: Person, before: int, channel: str = GENERAL) -> str:
        new = await self.fake.wait_for(
            lambda: self.fake.ephemerals(person, channel)[before:], DEADLINE
        )
        return read(new[0].text)

    async def click_in_channel(self, card: Seen, token: str, *, who: str = "alice") -> str:
        person = PEOPLE[who]
        message = self.fake.message(ESCALATIONS, card.key)
        before = len(self.fake.ephemerals(person, ESCALATIONS))
        [label] = [
            text_of(b["text"]) for _, b in buttons_of(message.blocks) if b.get("value") == token
        ]
        await self.fake.click(person, message, label)
        return await self._answer(person, before, ESCALATIONS)

    def _in_channel(self) -> list[Seen]:
        return [self._seen(m) for m in self.fake.messages(ESCALATIONS) if m.from_bot]

    async def in_channel(self) -> list[Seen]:
        return self._in_channel()

    async def card_in_channel(self, probe: Callable[[Seen], bool] = lambda s: True) -> Seen:
        def find() -> Seen | None:
            return next((s for s in self._in_channel() if s.card and probe(s)), None)

        try:
            return await self.fake.wait_for(find, DEADLINE)
        except TimeoutError:
            raise not_seen(f"{self.name} #escalations", DEADLINE, self._in_channel()) from None

    async def answer_form(
        self, card: Seen, request: InteractionRequest, answers: FormAnswers, *, who: str = "alice"
    ) -> str | None:
        """Answer… opens a modal (after the gateway said the person may answer); each
        question is an input, filled in and sent at once."""
        person = PEOPLE[who]
        message = self.fake.message(GENERAL, card.key)
        before = len(self.fake.ephemerals(person, GENERAL))
        opened = len(self.fake.modals(person))
        await self.fake.click(person, message, "Answer…")
        await self.fake.wait_for(
            lambda: (
                len(self.fake.modals(person)) > opened
                or len(self.fake.ephemerals(person, GENERAL)) > before
            ),
            DEADLINE,
        )
        if len(self.fake.ephemerals(person, GENERAL)) > before:  # refused: no modal
            return read(self.fake.ephemerals(person, GENERAL)[before].text)
        modal = self.fake.modal(person)
        labels = {text_of(b.get("label")): b["block_id"] for b, _ in inputs_of(modal.blocks)}
        filled: dict[str, Any] = {}
        for question in request.questions:
            block = labels[question.header or question.text]
            chosen = answers.chosen.get(question.id)
            typed = answers.typed.get(question.id)
            if chosen:
                filled[block] = list(chosen) if question.multi else chosen[0]
            if typed is not None:
                other = f"{block}.other"
                filled[other if other in labels.values() else block] = typed
        sent = await self.fake.submit(person, filled)
        if sent is None:
            return None  # Slack's client refused it: a required answer is missing
        await sent.settled()
        if modal.errors:
            return " ".join(modal.errors.values())
        return await self._answer(person, before)

    async def press_with_message(
        self, card: Seen, label: str, message: str, *, who: str = "alice"
    ) -> str:
        person = PEOPLE[who]
        before = len(self.fake.ephemerals(person, GENERAL))
        opened = len(self.fake.modals(person))
        await self.fake.click(person, self.fake.message(GENERAL, card.key), label)
        await self.fake.wait_for(lambda: len(self.fake.modals(person)) > opened, DEADLINE)
        sent = await self.fake.submit(person, {"Your message (optional)": message})
        assert sent is not None
        await sent.settled()
        return await self._answer(person, before)

    def lose_files(self) -> None:
        self.fake.sign_in_instead = True  # url_private: Slack's sign-in page

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

    async def seen(self) -> list[Seen]:
        return self._now()

    async def delete(self, key: str) -> None:
        self.fake.message(GENERAL, key).deleted = True

    def _now(self) -> list[Seen]:
        if self.thread is None:
            return []
        return [self._seen(m) for m in self.fake.replies(GENERAL, self.thread) if m.from_bot]

    def _seen(self, message: Posted) -> Seen:
        pairs = buttons_of(message.blocks)
        for _, button in pairs:
            self.buttons.setdefault(str(button.get("value")), dict(button))
        context = [
            text_of(element)
            for block in message.blocks
            if block.get("type") == "context"
            for element in block.get("elements") or []
        ]
        details = [text for text in context if text.startswith("Details: ")]
        status = [text for text in context if not text.startswith("Details: ")]
        files = tuple(
            (f.name, (f.content or b"").decode()) for f in message.files if f.content is not None
        )
        return Seen(
            key=message.ts,
            text=read(message.seen),
            card=any(block.get("type") == "header" for block in message.blocks),
            status=read(status[-1]) if status else "",
            details=read(details[-1]).removeprefix("Details: ") if details else "",
            buttons=tuple(
                Button(label=text_of(b.get("text")), token=str(b.get("value"))) for _, b in pairs
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
