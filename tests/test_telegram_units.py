"""The Telegram platform's pure parts and its outbox, on their own: the config keys, how a
card is drawn within Telegram's limits, and the order and pace of calls in one chat."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest
from telegram.error import BadRequest

from gateway.cards import Card, CardAction, CodeBlock, FormQuestion, QuestionForm, TextBlock
from gateway.domain import Actor, ConversationRef, Option, Question
from gateway.errors import ConfigError
from platforms.form_drafts import Form, MemoryForms, Redraw, Refuse, Submit
from platforms.outbox import MessageGone, Priority, Refused
from platforms.registry import parse_config
from platforms.telegram.config import GroupMode, TelegramConfig
from platforms.telegram.forms import MessageKey
from platforms.telegram.outbox import Pace, classify
from platforms.telegram.outbox import TelegramOutbox as Outbox
from platforms.telegram.render import parse_local_data, render_card, visible_length
from tests.servers.telegram_wire import visible_text

BASE = """
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"
[projects.web.auth.telegram]
allow_from = ["111"]
[platforms.telegram]
token = "123:abc"
"""
ALICE = Actor(platform="telegram", user_id="111", display="@alice")
HERE = ConversationRef(platform="telegram", space=None, channel="111")


# --- config --------------------------------------------------------------------------------


def test_group_modes_per_chat_and_the_default() -> None:
    config = parse_config(BASE + 'group_mode = "all"\ngroups = { "-1001" = "mentions" }\n')
    telegram = config.platforms.get("telegram", TelegramConfig)
    assert telegram is not None
    assert telegram.group_mode_for("-1001") is GroupMode.MENTIONS
    assert telegram.group_mode_for("-1002") is GroupMode.ALL
    with pytest.raises(ConfigError, match="groups"):
        parse_config(BASE + 'groups = { "general" = "all" }\n')


def test_webhook_mode_needs_a_url_and_a_secret_token_which_may_come_from_a_file(
    tmp_path: Path,
) -> None:
    webhook = BASE + 'mode = "webhook"\nwebhook_url = "https://gw.example.com/tg"\n'
    with pytest.raises(ConfigError, match="secret_token"):
        parse_config(webhook)
    with pytest.raises(ConfigError, match="secret_token"):
        parse_config(webhook + 'secret_token = "has spaces"\n')
    (tmp_path / "hook.secret").write_text("from-a-file_123\n")
    config = parse_config(webhook + 'secret_token_file = "hook.secret"\n', base_dir=tmp_path)
    telegram = config.platforms.get("telegram", TelegramConfig)
    assert telegram is not None and telegram.secret_token is not None
    assert telegram.secret_token.get_secret_value() == "from-a-file_123"
    assert "from-a-file" not in repr(config)


# --- drawing a card ------------------------------------------------------------------------


def test_what_the_agent_wrote_is_escaped_and_shown_as_written() -> None:
    card = Card(
        title="Run <script>",
        summary="a & b",
        blocks=(CodeBlock(code="echo '<b>' && rm -rf x", language="sh"),),
        actions=(CardAction(label="Allow once", token="a1:x:0:1:AAAAAAAAAAAA"),),
        status=("Waiting for a decision",),
    )
    drawn = render_card(card, None, private=True, limit=4096)
    shown = visible_text(drawn.html)  # what Telegram's HTML parser makes of it
    assert "Run <script>" in shown and "a & b" in shown
    assert "echo '<b>' && rm -rf x" in shown
    assert drawn.keyboard[0][0].data == "a1:x:0:1:AAAAAAAAAAAA"


def test_a_card_too_long_for_a_message_sends_its_command_as_a_file_and_says_so() -> None:
    command = "\n".join(f"echo line {n} with <angle> & ampersand" for n in range(400))
    card = Card(
        title="Run a long script",
        blocks=(CodeBlock(code=command, language="sh"), TextBlock(text="x" * 3000)),
        actions=(CardAction(label="Allow once", token="t0"),),
    )
    drawn = render_card(card, None, private=True, limit=4096)
    assert len(visible_text(drawn.html)) <= 4096
    assert visible_length(drawn.html) == len(visible_text(drawn.html))
    assert [a.name for a in drawn.attachments] == ["command.sh"]
    assert drawn.attachments[0].content == command
    assert "attached as command.sh" in visible_text(drawn.html)
    assert drawn.keyboard[0][0].label == "Allow once (see command.sh)"


# --- forms ---------------------------------------------------------------------------------


def form_of(*questions: Question) -> Form:
    items = tuple(
        FormQuestion(question=q, option_tokens=tuple(f"o{i}.{j}" for j in range(len(q.options))))
        for i, q in enumerate(questions)
    )
    card = Card(title="Asks", form=QuestionForm(questions=items, submit_token="submit"))
    form = MemoryForms[MessageKey]().new(HERE, card)
    assert form is not None
    return form


def test_a_required_question_cannot_be_skipped_or_submitted_unanswered() -> None:
    options = (Option(id="a", label="A"), Option(id="b", label="B"))
    form = form_of(
        Question(id="q1", header="One", text="First?", options=options),
        Question(id="q2", header="Two", text="Second?", options=options, required=False),
    )
    assert isinstance(form.move(ALICE, "skip"), Refuse)
    assert isinstance(form.move(ALICE, "next"), Refuse)
    assert isinstance(form.submit(ALICE), Refuse)
    assert isinstance(form.choose(ALICE, 0, 1), Redraw)
    assert form.draft(ALICE).step == 1
    assert isinstance(form.move(ALICE, "skip"), Redraw)
    submitted = form.submit(ALICE)
    assert isinstance(submitted, Submit) and set(submitted.answers) == {"q1"}
    assert submitted.answers["q1"].option_ids == ("b",)


def test_a_secret_is_only_taken_from_a_private_chat_and_never_kept_as_typed_text() -> None:
    form = form_of(Question(id="s", header="Secret", text="Token?", allow_other=True, secret=True))
    assert isinstance(form.typed(ALICE, 0, "hunter2", in_private=False), Refuse)
    done = form.typed(ALICE, 0, "hunter2", in_private=True)
    assert isinstance(done, Submit) and done.private
    assert done.answers["s"].other == "hunter2"
    drawn = render_card(form.card, form, private=False, limit=4096)
    assert "hunter2" not in drawn.html


def test_local_buttons_fit_and_parse() -> None:
    assert parse_local_data("f12:t3") == ("12", "t3")
    assert parse_local_data("f" + "x" * 48 + ":t12") == ("x" * 48, "t12")  # 53 bytes
    assert parse_local_data("f" + "x" * 49 + ":t12") is None
    assert parse_local_data("f12:x") is None
    assert parse_local_data("a1:abc:0:1:AAAAAAAAAAAA") is None


# --- the outbox ----------------------------------------------------------------------------


FAST = Pace(per_chat_seconds=0.2, margin_seconds=0.01)


async def test_cards_go_before_stream_edits_and_waiting_edits_merge() -> None:
    done: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def busy() -> str:
        started.set()
        await release.wait()
        done.append("text")
        return "text"

    def call(name: str):  # type: ignore[no-untyped-def]
        async def run() -> str:
            done.append(name)
            return name

        return run

    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, FAST)
        first = tasks.create_task(outbox.run(1, Priority.TEXT, busy))
        await started.wait()  # the lane is busy with the first call
        edits = [
            tasks.create_task(outbox.run(1, Priority.STREAM, call(f"edit {n}"), key="m1"))
            for n in range(5)
        ]
        card = tasks.create_task(outbox.run(1, Priority.CARD, call("card")))
        release.set()
        results = await asyncio.gather(first, card, *edits)
    assert done == ["text", "card", "edit 4"]
    assert results[2:] == ["edit 4"] * 5  # every waiter has the newest edit's result


async def test_one_chat_is_paced_and_other_chats_are_not_held_up() -> None:
    times: dict[int, list[float]] = {1: [], 2: []}

    def stamp(chat: int):  # type: ignore[no-untyped-def]
        async def run() -> None:
            times[chat].append(time.monotonic())

        return run

    async with asyncio.TaskGroup() as tasks:
        outbox = Outbox(tasks, FAST)
        calls = [outbox.run(chat, Priority.TEXT, stamp(chat)) for chat in (1, 1, 1, 2)]
        await asyncio.gather(*calls)
    one = times[1]
    assert all(b - a >= FAST.per_chat_seconds for a, b in itertools.pairwise(one))
    assert times[2][0] < one[1]


@pytest.mark.parametrize(
    "answer",
    ["Bad Request: message to edit not found", "Bad Request: message can't be edited"],
    ids=["deleted", "not-editable"],
)
def test_a_message_telegram_will_not_edit_is_gone_for_good(answer: str) -> None:
    verdict = classify(BadRequest(answer))
    assert isinstance(verdict, Refused) and isinstance(verdict.error, MessageGone)
    other = classify(BadRequest("Bad Request: chat not found"))
    assert isinstance(other, Refused) and not isinstance(other.error, MessageGone)


def test_a_prompt_names_its_request_and_its_note_reads_back() -> None:
    from platforms.telegram.forms import PromptNote, request_in, request_note

    text = f"✎ @alice: type your answer to “Note” as a reply. {request_note('20msd43c3v')}"
    assert request_in(text) == "20msd43c3v" and request_in("no request here") is None
    topic = ConversationRef(platform="telegram", space=None, channel="-100", thread="7")
    note = PromptNote(prompt=(111, 9), question=1, card=(-100, 5), conversation=topic)
    assert PromptNote.read(note.text(), "telegram") == note
    assert PromptNote.read("not a note", "telegram") is None
