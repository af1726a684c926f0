"""Telegram end to end with the real Codex app-server: a phone approves, denies, answers, and
is refused what it may not do; every click is answered; every card tells how it ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config.model import Config
from gateway.domain import ConversationRef
from tests.codex_env import CodexHome
from tests.servers.fake_responses import (
    FakeResponses,
    apply_patch,
    message,
    request_user_input,
    shell,
)
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    ALICE,
    BOB,
    CAROL,
    GROUP,
    GROUP_ID,
    MALLORY,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


def config_for(
    fake: FakeTelegram, home: CodexHome, codex_bin: str, tmp_path: Path, **options: Any
) -> Config:
    return telegram_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home, **options
    )


async def decided(tg: OnTelegram, chat_id: int, message_id: int, word: str) -> str:
    """The card's text once its buttons are gone and its status says ``word``."""
    card = tg.fake.message(chat_id, message_id)
    await tg.fake.wait_for(lambda: card.markup is None and word in card.text)
    return card.text


async def test_a_command_is_approved_from_a_phone(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create hello.txt")
        card = await tg.card(ALICE.id)
        assert "touch hello.txt" in card.text
        assert "Reason:" not in card.text  # the summary says it: not twice
        assert "<pre><code" in card.html  # the command in a code block
        assert [b["text"] for b in card.buttons] == [
            "Allow once",
            "Always allow commands like this",
            "Deny",
            "Deny and stop the turn",
        ]
        assert all(len(b["callback_data"].encode()) <= 64 for b in card.buttons)
        deny = card.button("Deny")["callback_data"]

        answer = await tg.press(ALICE, card, "Allow once")
        assert answer["text"] == "Approved: Allow once. Sent to the agent."
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("Done."))
        text = await decided(tg, ALICE.id, card.message_id, "done")
        assert 'Approved ("Allow once") by @alice' in text and "sent to the agent" in text
        assert (codex_home.workspace / "hello.txt").exists()

        late = await tg.click(ALICE, card, deny)
        assert late["text"].startswith("Already decided by @alice: ")
        assert late["show_alert"] in (True, "true")
    assert fake_telegram.too_many == []
    menu = [c["command"] for c in fake_telegram.commands]
    expected = [
        *("new", "stop", "resume", "clear", "status", "pending", "compact", "help"),
        *("sessions", "switch", "name", "model", "mode"),
        *("every", "at", "schedules", "unschedule"),
        "transcribe",
    ]
    assert sorted(menu) == sorted(expected)


async def test_a_denied_command_does_not_run(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch denied.txt", escalated=True), message("Understood.")))
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create denied.txt")
        card = await tg.card(ALICE.id)
        answer = await tg.press(ALICE, card, "Deny")
        assert answer["text"].startswith("Denied. ")
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("Understood."))
        text = await decided(tg, ALICE.id, card.message_id, "Denied")
        assert 'Denied ("Deny") by @alice' in text
    assert not (codex_home.workspace / "denied.txt").exists()


async def test_in_a_group_only_approvers_decide_and_forged_buttons_do_nothing(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch group.txt", escalated=True), message("Made it.")))
    config = config_for(
        fake_telegram, codex_home, codex_bin, tmp_path, telegram='group_mode = "all"'
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create group.txt", chat=GROUP, thread=7)
        card = await tg.card(GROUP_ID)
        assert card.thread == 7
        genuine = card.button("Allow once")["callback_data"]
        forged = genuine[:-12] + ("A" * 12 if not genuine.endswith("A" * 12) else "B" * 12)
        for data in (forged, "hello", "a1:nosuchthing:0:1:AAAAAAAAAAAA"):
            refused = await tg.click(BOB, card, data)
            assert refused["text"] == "This button is not valid."
        assert (await tg.click(CAROL, card, genuine))["text"] == "You may not decide this request."
        stranger = await tg.click(MALLORY, card, genuine)
        assert stranger["text"] == "You may not use this project here."
        assert card.buttons, "nothing was decided"

        answer = await tg.click(BOB, card, genuine)
        assert answer["text"].startswith("Approved")
        text = await decided(tg, GROUP_ID, card.message_id, "done")
        assert "by @bob" in text
    assert (codex_home.workspace / "group.txt").exists()


async def test_a_long_diff_is_attached_as_a_file_and_the_card_says_so(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    body = "".join(f"+line {n:04d} of a long generated file\n" for n in range(300))
    patch = f"*** Begin Patch\n*** Add File: big.txt\n{body}*** End Patch\n"
    fake_model.enqueue((apply_patch(patch), message("Patched.")))
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path, sandbox="read-only")
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "write a big file")
        card = await tg.card(ALICE.id)
        assert "attached as changes.diff" in card.text
        [document] = [m for m in tg.fake.bot_messages(ALICE.id) if m.document is not None]
        name, content = document.document  # type: ignore[misc]
        assert name == "changes.diff"
        assert b"line 0299 of a long generated file" in content
        assert all("see attached diff" in b["text"] for b in card.buttons)
        await tg.press(ALICE, card, "Allow once")
        await decided(tg, ALICE.id, card.message_id, "done")
    assert (codex_home.workspace / "big.txt").read_text().count("\n") == 300


async def test_two_questions_one_after_another_with_other_text_and_a_summary(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    def question(qid: str, header: str, text: str, *labels: str) -> dict[str, object]:
        options = [{"label": label, "description": f"use {label}"} for label in labels]
        return {"id": qid, "header": header, "question": text, "options": options}

    questions = [
        question("color", "Color", "Which color should I use?", "Red", "Blue"),
        question("name", "Name", "What should the file be called?", "notes.txt", "notes.md"),
    ]
    fake_model.enqueue((request_user_input(questions), message("Noted.")))
    fake_model.scenario = (message(lambda request: f"heard: {request.user_texts()[-1]}"),)
    config = config_for(
        fake_telegram,
        codex_home,
        codex_bin,
        tmp_path,
        features=("default_mode_request_user_input",),
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "ask me first")
        card = await tg.card(ALICE.id)
        assert "Question 1 of 2" in card.text and "Which color" in card.text
        assert "Skip" not in [b["text"] for b in card.buttons]  # both are required

        await tg.press(ALICE, card, "Blue")
        await tg.fake.wait_for(lambda: "Question 2 of 2" in card.text)
        assert "Next »" not in [b["text"] for b in card.buttons]
        asked = await tg.press(ALICE, card, "Other…")
        assert asked["text"] == "Reply to my message with your answer."
        prompt = await tg.bot_message(ALICE.id, lambda m: m.force_reply)

        # meanwhile, a plain message is a prompt for the agent, not the answer
        await tg.say(ALICE, "call it plain.txt")
        await tg.bot_message(ALICE.id, lambda m: "not as a decision" in m.text)
        await tg.say(ALICE, "call it shopping-list.txt", reply_to=prompt)
        await tg.fake.wait_for(lambda: "Your answers" in card.text)
        assert "Blue" in card.text and "call it shopping-list.txt" in card.text

        answer = await tg.press(ALICE, card, "Submit answers")
        assert answer["text"].startswith("Answer sent to the agent.")
        await decided(tg, ALICE.id, card.message_id, "Answered")
        await tg.bot_message(ALICE.id, lambda m: "Noted." in m.text)
        # the plain message went to the agent as a prompt of its own, after the question
        await tg.bot_message(ALICE.id, lambda m: m.text == "heard: call it plain.txt")
    told = fake_model.last_tool_output()
    assert '"color":{"answers":["Blue"]}' in told
    assert "call it shopping-list.txt" in told and "plain.txt" not in told


async def test_forum_topics_are_sessions_and_mentions_mode_ignores_chatter(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.scenario = (message(lambda request: f"heard: {request.user_texts()[-1]}"),)
    config = config_for(
        fake_telegram,
        codex_home,
        codex_bin,
        tmp_path,
        telegram=f'groups = {{ "{GROUP_ID}" = "all" }}',
    )
    quiet = {"id": -1009, "type": "supergroup", "title": "Quiet", "is_forum": True}
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "alpha", chat=GROUP, thread=7)
        await tg.say(BOB, "beta", chat=GROUP, thread=9)
        await tg.bot_message(GROUP_ID, lambda m: m.text == "heard: alpha", thread=7)
        await tg.bot_message(GROUP_ID, lambda m: m.text == "heard: beta", thread=9)
        assert "heard: beta" not in tg.texts(GROUP_ID, thread=7)
        sessions = tg.gateway.store.sessions
        seven = await sessions.lookup(topic(GROUP_ID, 7))
        nine = await sessions.lookup(topic(GROUP_ID, 9))
        assert seven is not None and nine is not None and seven.id != nine.id

        # the quiet group takes only what mentions the bot (a topic is no reply to the bot)
        await tg.say(ALICE, "chatter among people", chat=quiet, thread=3)
        await tg.say(ALICE, "@gateway_bot gamma", chat=quiet, thread=3)
        await tg.bot_message(-1009, lambda m: m.text == "heard: gamma", thread=3)
        assert not any("chatter" in text for text in fake_model_texts(fake_model))


def topic(chat_id: int, thread: int) -> ConversationRef:
    return ConversationRef(
        platform="telegram", space=None, channel=str(chat_id), thread=str(thread)
    )


def fake_model_texts(fake_model: FakeResponses) -> list[str]:
    return [text for r in fake_model.model_requests() for text in r.user_texts()]
