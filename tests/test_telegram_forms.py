"""Question forms on a phone: toggles, "other" text by ForceReply, several questions with a
summary, required and optional questions, and a secret asked in a private chat only.

The agent is the scripted one (tests/scripted_launcher.py): the real Codex never asks a
multi-select question. Everything else is real: the engine, the ledger, python-telegram-bot
and the fake Bot API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.domain import Answer, InteractionKind, InteractionRequest, Option, Question
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import (
    ALICE,
    BOB,
    CAROL,
    GROUP,
    GROUP_ID,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = pytest.mark.timeout(90)

COLOURS = (
    Option(id="red", label="Red"),
    Option(id="green", label="Green"),
    Option(id="blue", label="Blue"),
)


def asking(key: str, *questions: Question, title: str = "The agent asks") -> InteractionRequest:
    return InteractionRequest(
        native_key=key, kind=InteractionKind.QUESTION, title=title, questions=questions
    )


REQUESTS = {
    "ask-multi": asking(
        "multi",
        Question(
            id="colours",
            header="Colours",
            text="Which colours?",
            options=COLOURS,
            multi=True,
            allow_other=True,
        ),
    ),
    "ask-three": asking(
        "three",
        Question(
            id="go",
            header="Go",
            text="Shall I go on?",
            options=(Option(id="yes", label="Yes"), Option(id="no", label="No")),
        ),
        Question(
            id="extras",
            header="Extras",
            text="Anything extra?",
            options=COLOURS,
            multi=True,
            required=False,
        ),
        Question(
            id="note", header="Note", text="A note for the log?", allow_other=True, required=False
        ),
    ),
    "ask-one": asking(
        "one", Question(id="pick", header="Pick", text="Which one?", options=COLOURS)
    ),
    "ask-secret": asking(
        "secret",
        Question(
            id="token", header="Token", text="Paste the deploy token", allow_other=True, secret=True
        ),
    ),
}


@asynccontextmanager
async def scripted(fake: FakeTelegram, tmp_path: Path) -> AsyncIterator[OnTelegram]:
    """The gateway on Telegram with the scripted agent (entered in the test's own task:
    the engine's task group must be left by the task that entered it)."""
    (tmp_path / "work").mkdir()
    config = telegram_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=f'groups = {{ "{GROUP_ID}" = "all" }}',
    )
    async with on_telegram(config, fake, ScriptedLauncher(REQUESTS)) as running:
        yield running


def received(tg: OnTelegram) -> list[dict[str, Answer]]:
    assert isinstance(tg.launcher, ScriptedLauncher)
    return [decision.answers for decision in tg.launcher.received]


async def test_multi_select_toggles_and_other_text_only_from_a_reply_to_the_prompt(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(ALICE, "ask-multi")
        card = await tg.card(ALICE.id)
        assert [b["text"] for b in card.buttons] == [
            "☐ Red",
            "☐ Green",
            "☐ Blue",
            "✎ Other…",
            "✅ Submit",
        ]
        assert (await tg.press(ALICE, card, "☐ Red"))["text"] == "☑ Red"
        await tg.fake.wait_for(lambda: "☑ Red" in [b["text"] for b in card.buttons])
        await tg.press(ALICE, card, "☐ Blue")
        await tg.fake.wait_for(lambda: "☑ Blue" in [b["text"] for b in card.buttons])
        assert (await tg.press(ALICE, card, "☑ Red"))["text"] == "☐ Red"
        await tg.fake.wait_for(lambda: "☐ Red" in [b["text"] for b in card.buttons])

        await tg.press(ALICE, card, "Other…")
        prompt = await tg.bot_message(ALICE.id, lambda m: m.force_reply)
        await tg.say(ALICE, "teal is nice")  # not a reply: a prompt for the agent
        await tg.bot_message(ALICE.id, lambda m: "not as a decision" in m.text)
        await tg.say(BOB, "magenta", chat=tg.fake.chats[ALICE.id], reply_to=prompt)  # not Alice
        await tg.say(ALICE, "teal", reply_to=prompt)
        await tg.fake.wait_for(lambda: "Your answer: teal" in card.text)

        answer = await tg.press(ALICE, card, "Submit")
        assert answer["text"].startswith("Answer sent to the agent.")
        await tg.fake.wait_for(lambda: card.markup is None and "Answered" in card.text)
        assert "Blue, teal" in card.text
        assert received(tg) == [{"colours": Answer(option_ids=("blue",), other="teal")}]
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: teal is nice")
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: magenta")


async def test_questions_one_after_another_required_then_optional_then_a_summary(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(ALICE, "ask-three")
        card = await tg.card(ALICE.id)
        assert "Question 1 of 3" in card.text
        labels = [b["text"] for b in card.buttons]
        assert "Skip" not in labels and "Next »" not in labels  # required, not yet answered

        await tg.press(ALICE, card, "Yes")
        await tg.fake.wait_for(lambda: "Question 2 of 3" in card.text)
        await tg.press(ALICE, card, "☐ Green")
        await tg.fake.wait_for(lambda: "☑ Green" in [b["text"] for b in card.buttons])
        await tg.press(ALICE, card, "Next »")
        await tg.fake.wait_for(lambda: "Question 3 of 3" in card.text)
        await tg.press(ALICE, card, "Skip")
        await tg.fake.wait_for(lambda: "Your answers" in card.text)
        assert "Shall I go on?" not in card.text
        assert "Go: Yes" in card.text and "Extras: Green" in card.text
        assert "Note: (skipped)" in card.text

        await tg.press(ALICE, card, "Back")
        await tg.fake.wait_for(lambda: "Question 3 of 3" in card.text)
        await tg.press(ALICE, card, "Skip")
        await tg.fake.wait_for(lambda: "Your answers" in card.text)
        answer = await tg.press(ALICE, card, "Submit answers")
        assert answer["text"].startswith("Answer sent to the agent.")
        assert received(tg) == [
            {"go": Answer(option_ids=("yes",)), "extras": Answer(option_ids=("green",))}
        ]


async def test_one_single_choice_question_is_answered_by_one_click(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(ALICE, "ask-one", chat=GROUP)
        card = await tg.card(GROUP_ID)
        answer = await tg.press(BOB, card, "Green")
        assert answer["text"].startswith("Answer sent to the agent.")
        await tg.fake.wait_for(lambda: card.markup is None and "by @bob" in card.text)
        assert received(tg) == [{"pick": Answer(option_ids=("green",))}]


async def test_a_secret_is_asked_in_a_private_chat_deleted_once_read_and_never_shown(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(ALICE, "ask-secret", chat=GROUP)
        card = await tg.card(GROUP_ID)
        assert [b["text"] for b in card.buttons] == ["🔒 Answer in a private chat"]
        first = await tg.press(ALICE, card, "private chat")
        assert (
            first["text"]
            == "Open a private chat with @gateway_bot (press Start), then press again."
        )

        await tg.say(ALICE, "/start")  # opens the private chat (and shows the help)
        await tg.bot_message(ALICE.id, lambda m: m.text.startswith("Commands:"))
        second = await tg.press(ALICE, card, "private chat")
        assert second["text"] == "I sent you a private message: reply to it there."
        prompt = await tg.bot_message(ALICE.id, lambda m: m.force_reply)
        typed = await tg.say(ALICE, "hunter2-secret", reply_to=prompt)
        await tg.fake.wait_for(lambda: card.markup is None and "Answered" in card.text)

        mine = tg.fake.message(ALICE.id, typed["message"]["message_id"])
        assert mine.deleted
        assert received(tg) == [{"token": Answer(other="hunter2-secret")}]
        shown = [m.text for chat in (GROUP_ID, ALICE.id) for m in tg.fake.bot_messages(chat)]
        assert not any("hunter2" in text for text in shown)
        assert "(secret, not shown)" in card.text
        interaction = (await tg.gateway.store.interactions.list_recent(limit=1))[0]
        assert "hunter2" not in repr(interaction)


async def test_no_prompt_is_sent_to_someone_who_may_not_answer(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    """Carol may talk to the project, not decide: "Other…" and the secret's private chat are
    refused by the core's pre-check (audited), and no ForceReply prompt reaches her."""

    def prompts() -> list[Sent]:
        chats = (GROUP_ID, CAROL.id)
        return [m for chat in chats for m in tg.fake.bot_messages(chat) if m.force_reply]

    async with scripted(fake_telegram, tmp_path) as tg:
        await tg.say(CAROL, "/start")  # her private chat is open: a prompt could go there
        await tg.bot_message(CAROL.id, lambda m: m.text.startswith("Commands:"))
        await tg.say(ALICE, "ask-multi", chat=GROUP)
        card = await tg.card(GROUP_ID)
        refused = await tg.press(CAROL, card, "Other…")
        assert refused["text"] == "You may not decide this request."
        assert refused["show_alert"] in (True, "true")
        assert prompts() == []
        # the one who may answer gets her prompt, and answers
        await tg.press(ALICE, card, "Other…")
        [prompt] = await tg.fake.wait_for(lambda: prompts() or None)
        assert "@alice" in prompt.text
        await tg.press(ALICE, card, "☐ Red")
        await tg.fake.wait_for(lambda: "☑ Red" in [b["text"] for b in card.buttons])
        await tg.press(ALICE, card, "Submit")
        await tg.fake.wait_for(lambda: card.markup is None and "Answered" in card.text)

        await tg.say(ALICE, "ask-secret", chat=GROUP)
        secret = await tg.card(GROUP_ID, lambda m: "private chat" in str(m.buttons))
        also = await tg.press(CAROL, secret, "private chat")
        assert also["text"] == "You may not decide this request."
        assert prompts() == [prompt]
        audited = await tg.gateway.store.audit.entries(event="click.rejected")
        assert [e.details["reason"] for e in audited] == ["not_approver", "not_approver"]
