"""``/new`` in a Telegram forum's General topic opens a topic for the new session (issue 31),
with the scripted agent (tests/scripted_launcher.py), the real python-telegram-bot and the
fake Bot API, which opens topics only for an admin with "Manage topics" and refuses
``message_thread_id`` 1 (the General topic) as the real one does.

The topic's cards and its form's ForceReply prompt stay in the topic; without the right the
person is told how to give it and nothing changes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.domain import Answer, ConversationRef, InteractionKind, InteractionRequest, Question
from gateway.domain import Option as Choice
from platforms.telegram.topics import NO_TOPIC_RIGHTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.servers.telegram_people import Person, group_chat
from tests.telegram_harness import (
    ALICE,
    GROUP,
    GROUP_ID,
    OnTelegram,
    on_telegram,
    telegram_config,
)

pytestmark = pytest.mark.timeout(120)

PLAIN_GROUP = group_chat(-1005550001, "Plain group")  # a supergroup without topics
REQUESTS = {
    "ask": InteractionRequest(
        native_key="topic-ask",
        kind=InteractionKind.QUESTION,
        title="The agent asks",
        questions=(
            Question(
                id="colour",
                header="Colour",
                text="Which colour?",
                options=(Choice(id="red", label="Red"), Choice(id="blue", label="Blue")),
                allow_other=True,
            ),
        ),
    )
}


@asynccontextmanager
async def scripted(fake: FakeTelegram, tmp_path: Path) -> AsyncIterator[OnTelegram]:
    (tmp_path / "work").mkdir()
    config = telegram_config(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=f'groups = {{ "{GROUP_ID}" = "all", "{PLAIN_GROUP["id"]}" = "all" }}',
    )
    async with on_telegram(config, fake, ScriptedLauncher(REQUESTS)) as running:
        yield running


async def said_in(
    tg: OnTelegram,
    person: Person,
    text: str,
    starts: str,
    *,
    chat: dict[str, object] = GROUP,
    thread: int | None = None,
) -> Sent:
    """``person`` says ``text`` in ``chat`` (its General topic, or ``thread``); the bot's next
    message there that starts with ``starts``."""
    chat_id = int(str(chat["id"]))

    def there() -> list[Sent]:
        return [m for m in tg.fake.bot_messages(chat_id) if m.thread == thread]

    before = len(there())
    await tg.say(person, text, chat=chat, thread=thread)
    return await tg.fake.wait_for(
        lambda: next((m for m in there()[before:] if m.text.startswith(starts)), None), 30.0
    )


def thread_ids_sent(fake: FakeTelegram) -> list[object]:
    return [
        params["message_thread_id"]
        for _, params in fake.calls
        if params.get("message_thread_id") is not None
    ]


async def test_new_in_general_opens_a_topic_where_the_sessions_cards_and_forms_stay(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_in(tg, ALICE, "hello general", "echo: hello general")
        opened = await said_in(tg, ALICE, "/new Fix the login", "🧵 Opened a topic")
        assert list(fake_telegram.topics[GROUP_ID].values()) == ["Fix the login"]
        (topic,) = fake_telegram.topics[GROUP_ID]
        assert opened.text == (
            f"🧵 Opened a topic for the new session “Fix the login”: "
            f"https://t.me/c/1234567890/{topic}"
        )
        first = tg.fake.bot_messages(GROUP_ID, topic)
        assert [m.text for m in first] == [
            "🧵 New session “Fix the login”: write here, and the agent starts with your "
            "first message."
        ]

        # the topic is its own session, named as its topic; General's session goes on
        status = await said_in(tg, ALICE, "/status", "Session ", thread=topic)
        assert "“Fix the login”" in status.text.splitlines()[0]
        general = await said_in(tg, ALICE, "/status", "Session ")
        assert general.text.split()[1] != status.text.split()[1]
        switched = await said_in(tg, ALICE, "/switch Fix the login", "Session ")
        assert switched.text == (  # a link to its topic; nothing moves
            f"Session Fix the login follows its own thread: https://t.me/c/1234567890/{topic}"
            " — continue it there. Nothing was changed here."
        )

        # a card of the topic's session, and its form's ForceReply prompt, in the topic
        await tg.say(ALICE, "ask", chat=GROUP, thread=topic)
        card = await tg.bot_message(GROUP_ID, lambda m: bool(m.buttons), thread=topic)
        assert card.thread == topic
        await tg.press(ALICE, card, "Other…")
        prompt = await tg.bot_message(GROUP_ID, lambda m: m.force_reply)
        assert prompt.thread == topic
        await tg.say(ALICE, "teal", chat=GROUP, thread=topic, reply_to=prompt)
        await tg.fake.wait_for(lambda: card.markup is None and "Answered" in card.text)
        assert "teal" in card.text
        await tg.bot_message(
            GROUP_ID, lambda m: m.text == "Answer sent to the agent.", thread=topic
        )
        assert isinstance(tg.launcher, ScriptedLauncher)
        assert [d.answers for d in tg.launcher.received] == [{"colour": Answer(other="teal")}]

        in_general = [m.text for m in tg.fake.bot_messages(GROUP_ID) if m.thread is None]
        assert not any("Which colour" in text or "✎" in text for text in in_general)
        assert 1 not in thread_ids_sent(fake_telegram) and "1" not in thread_ids_sent(fake_telegram)
        assert fake_telegram.rejected == []


async def test_new_without_a_name_opens_a_topic_named_by_its_number(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=True)
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_in(tg, ALICE, "hello", "echo: hello")
        await said_in(tg, ALICE, "/new", "🧵 Opened a topic for the new session “Session 2”")
        await said_in(tg, ALICE, "/new", "🧵 Opened a topic for the new session “Session 3”")
        assert sorted(fake_telegram.topics[GROUP_ID].values()) == ["Session 2", "Session 3"]
        refused = await said_in(tg, ALICE, "/new 12345", "A session's name cannot be only")
        assert refused.text.endswith("Nothing was changed.")
        assert len(fake_telegram.topics[GROUP_ID]) == 2


async def test_without_the_right_to_manage_topics_new_says_how_and_changes_nothing(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(GROUP_ID, can_manage_topics=False)
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_in(tg, ALICE, "hello", "echo: hello")
        before = await said_in(tg, ALICE, "/status", "Session ")
        refused = await said_in(tg, ALICE, "/new", "I may not open topics")
        assert refused.text == NO_TOPIC_RIGHTS
        assert "“Manage topics”" in refused.text
        assert fake_telegram.topics[GROUP_ID] == {}
        assert fake_telegram.rejected == [
            ("createForumTopic", "Bad Request: not enough rights to create a topic")
        ]
        after = await said_in(tg, ALICE, "/status", "Session ")
        assert after.text.splitlines()[0] == before.text.splitlines()[0]  # the same session
        await said_in(tg, ALICE, "still here", "echo: still here")


async def test_new_in_a_group_without_topics_starts_the_next_session_there(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake_telegram.make_admin(int(str(PLAIN_GROUP["id"])), can_manage_topics=True)
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_in(tg, ALICE, "hello", "echo: hello", chat=PLAIN_GROUP)
        await said_in(
            tg, ALICE, "/new", "A new session starts with your next message.", chat=PLAIN_GROUP
        )
        assert fake_telegram.calls_to("createForumTopic") == []


async def test_nothing_is_sent_with_the_general_topics_id(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with scripted(fake_telegram, tmp_path) as tg:
        await said_in(tg, ALICE, "hello", "echo: hello")  # the group is known to the fake
        general = ConversationRef(
            platform="telegram", space=None, channel=str(GROUP_ID), thread="1"
        )
        sent = await tg.telegram.send_text(general, "to General")
        shown = tg.fake.message(GROUP_ID, int(sent.message_id))
        assert shown.text == "to General" and shown.thread is None
        assert 1 not in thread_ids_sent(fake_telegram)
        assert fake_telegram.rejected == []
