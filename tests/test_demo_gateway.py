"""The demo as a newcomer meets it, headless: a whole gateway (real engine, ledger, launcher)
built by ``build_demo``, the in-memory platform standing in for the console, and the demo
agent as a real process. Each test does what a person would and checks what they would see."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.app.demo.command import build_demo
from gateway.app.demo.scenarios import PATCH_TARGET, patched_greeting
from gateway.app.demo.texts import LONG_ANSWER
from gateway.cards import CodeBlock, DiffBlock, FieldsBlock
from gateway.domain import Actor, Answer, ConversationRef
from gateway.render.textsplit import split_text
from gateway.sessions.engine import Gateway
from tests.gateway_harness import ROOM, Running

pytestmark = pytest.mark.timeout(60)

YOU = Actor(platform="memory", user_id="you", display="You")
STRANGER = Actor(platform="memory", user_id="someone-else", display="Someone")


@asynccontextmanager
async def demo_gateway(tmp_path: Path, *, pace: float = 0.0) -> AsyncIterator[Running]:
    demo = build_demo(tmp_path / "data", headless=True, pace=pace)
    assert demo.memory is not None
    async with Gateway(demo.config, platforms=demo.platforms, launcher=demo.launcher) as gateway:
        yield Running(gateway=gateway, memory=demo.memory)


def work_dir(tmp_path: Path) -> Path:
    return tmp_path / "data-work"


async def test_the_first_message_gets_the_menu(tmp_path: Path) -> None:
    async with demo_gateway(tmp_path) as gw:
        await gw.memory.say(ROOM, YOU, "hi")
        # the menu streams: read it once its last line is shown
        menu = await gw.text_where(lambda text: "start with a slash" in text)
        await gw.memory.say(ROOM, STRANGER, "command")  # a stranger in a shared room: silence
        alone = ConversationRef(platform="memory", space=None, channel=STRANGER.user_id)
        await gw.memory.say(alone, STRANGER, "command", private=True)
        refused = await gw.text_where(lambda text: "not allowed" in text, alone)
    assert menu.startswith("Hi! I am the agent-gateway demo agent.")
    assert "**command**" in menu and "**crash**" in menu and str(work_dir(tmp_path)) in menu
    assert "Your Memory id is someone-else" in refused  # only "you" may use the demo
    assert not any("not allowed" in text for text in gw.memory.texts(ROOM))


async def test_an_approved_command_creates_the_file(tmp_path: Path) -> None:
    async with demo_gateway(tmp_path) as gw:
        await gw.memory.say(ROOM, YOU, "command")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        assert [action.label for action in shown.card.actions] == [
            "Allow once",
            "Always allow this command",
            "Deny",
            "Deny and stop the turn",
        ]
        assert CodeBlock(code="/bin/sh -c 'echo hello | tee hello.txt'", language="sh") in (
            shown.card.blocks
        )
        ack = await gw.memory.click(ROOM, YOU, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        reply = await gw.text_where(lambda text: "is in my work dir now" in text)
        done = await gw.card_where(lambda card: card.status_line.endswith("· done"))
    assert "```\nhello\n```" in reply
    assert (work_dir(tmp_path) / "hello.txt").read_text() == "hello\n"
    assert done.card is not None and not done.card.actions
    assert done.card.status_line.startswith('Approved ("Allow once") by You')


async def test_an_approved_patch_with_its_diff_is_applied(tmp_path: Path) -> None:
    target = work_dir(tmp_path) / PATCH_TARGET
    async with demo_gateway(tmp_path) as gw:
        await gw.memory.say(ROOM, YOU, "patch")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        [diff] = [block for block in shown.card.blocks if isinstance(block, DiffBlock)]
        assert diff.paths == (str(target),)
        # a new file is a diff of added lines, its path relative to the work dir
        added = "".join(f"+{line}\n" for line in patched_greeting(None).splitlines())
        assert diff.diff.startswith(f"--- /dev/null\n+++ b/{PATCH_TARGET}\n@@ -0,0 +")
        assert diff.diff.endswith(added)
        assert not target.exists()
        ack = await gw.memory.click(ROOM, YOU, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "now reads" in text)
    assert target.read_text() == patched_greeting(None)


async def test_the_form_takes_other_and_a_private_secret_and_never_shows_it(
    tmp_path: Path,
) -> None:
    secret = "hunter2-but-longer"
    async with demo_gateway(tmp_path) as gw:
        await gw.memory.say(ROOM, YOU, "form")
        shown = await gw.card_where(lambda card: card.form is not None)
        assert shown.card is not None and shown.card.form is not None
        form = shown.card.form
        assert [q.question.header for q in form.questions] == ["Colour", "Name", "Token"]
        assert [q.question.secret for q in form.questions] == [False, False, True]
        answers = {
            "colour": Answer(option_ids=("0",)),
            "name": Answer(other="my-own-name"),
            "token": Answer(other=secret),
        }
        in_public = await gw.memory.submit(ROOM, YOU, form.submit_token, answers)
        assert not in_public.accepted  # a secret is only taken in a private form
        ack = await gw.memory.submit(ROOM, YOU, form.submit_token, answers, private=True)
        assert ack.accepted, ack.text
        reply = await gw.text_where(lambda text: "got a secret of" in text)
        answered = await gw.card_where(lambda card: card.status_line.endswith("· done"))
    assert f"got a secret of {len(secret)} characters" in reply
    assert "Teal (Recommended) (an option)" in reply
    assert '"my-own-name" (your own words)' in reply
    everything = [*gw.memory.texts(), *(repr(m.versions) for m in gw.memory.messages())]
    assert not any(secret in shown_text for shown_text in everything)
    assert answered.card is not None
    [fields] = [block for block in answered.card.blocks if isinstance(block, FieldsBlock)]
    assert ("Token", "(secret, not shown)") in fields.fields


async def test_the_long_answer_arrives_whole_and_split(tmp_path: Path) -> None:
    async with demo_gateway(tmp_path) as gw:
        expected = split_text(LONG_ANSWER, gw.memory.limits.text_max_chars)
        assert len(expected) > 1
        await gw.memory.say(ROOM, YOU, "long")
        await gw.memory.wait_for(lambda: gw.memory.texts(ROOM) == expected)
    # cut where the code block begins (a blank line), not inside it: the code is whole
    assert expected[0].count("```") % 2 == 0 and expected[1].startswith("```python\n")
    assert expected[1].count("```") == 2


async def test_stop_interrupts_the_slow_answer(tmp_path: Path) -> None:
    async with demo_gateway(tmp_path, pace=1.0) as gw:
        await gw.memory.say(ROOM, YOU, "stop")
        await gw.text_where(lambda text: "1…" in text)
        await gw.memory.say(ROOM, YOU, "/stop")
        await gw.text_where(lambda text: text == "⏹ Stopped by You.")
        counted = next(text for text in gw.memory.texts(ROOM) if "1…" in text)
    assert "40…" not in counted and "nobody stopped me" not in counted


async def test_a_crash_with_an_approval_pending_orphans_the_card(tmp_path: Path) -> None:
    async with demo_gateway(tmp_path) as gw:
        await gw.memory.say(ROOM, YOU, "crash")
        orphaned = await gw.card_where(
            lambda card: "before anyone answered: no answer can reach it now" in card.status_line
        )
        notice = await gw.text_where(lambda text: "The agent process ended" in text)
        assert orphaned.card is not None and not orphaned.card.actions
        assert orphaned.card.status_line == (
            "The agent process ended (exited with code 17) before anyone answered: no answer"
            " can reach it now · your next message starts the agent again"
        )
        assert "crashing on purpose" in notice
        # the command it asked for is not shown running any more: it ended with the agent
        said = await gw.text_where(lambda text: "echo this never runs" in text)
        assert "✗ `/bin/sh -c 'echo this never runs'` (stopped: the agent process ended)" in said
        assert "▸" not in said
        # the next message starts the agent again, resuming the conversation
        await gw.memory.say(ROOM, YOU, "menu")
        await gw.text_where(lambda text: "Type one of these words" in text)


def test_the_python_in_the_long_answer_runs_as_it_says(tmp_path: Path) -> None:
    found = re.search(r"```python\n(.*?)\n```", LONG_ANSWER, re.DOTALL)
    assert found is not None
    done = subprocess.run(
        [sys.executable, "-c", found.group(1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Approved: Allow once.")
    assert (tmp_path / "demo-data-work" / "hello.txt").read_text() == "hello\n"


async def test_a_named_demo_session_says_nothing_more_than_its_new_name(tmp_path: Path) -> None:
    """/name reaches the demo agent as thread/name/set (as Codex takes it): no warning."""
    async with demo_gateway(tmp_path) as gw:
        await gw.memory.say(ROOM, YOU, "hi")
        await gw.text_where(lambda text: "start with a slash" in text)
        await gw.memory.say(ROOM, YOU, "/name my demo")
        await gw.text_where(lambda text: text.startswith("This session is now named “my demo”"))
        await gw.memory.say(ROOM, YOU, "/status")  # answered after the agent took the name
        await gw.text_where(lambda text: text.startswith("Session "))
        assert not any(text.startswith("⚠") for text in gw.memory.texts(ROOM))
