"""What a phone is told on Slack, with the real Codex app-server and the fake Slack: a turn
whose last words came by an edit (``chat.update``, which notifies nobody) ends with one short
new message; none when its last message was new; a card is a new message, which notifies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.model import Config
from platforms.turn_end import DONE
from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_slack import FakeSlack, Posted
from tests.slack_harness import ALICE, GENERAL, OnSlack, on_slack, read, slack_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

# a command that runs in the sandbox until the test lets it end
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done; echo found"


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def config_for(fake: FakeSlack, home: CodexHome, codex_bin: str, tmp_path: Path) -> Config:
    return slack_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home
    )


def bot_posts(slack: OnSlack, thread: str) -> list[Posted]:
    """The app's messages in the thread, as the thread lists them (each one a new post)."""
    return [m for m in slack.fake.replies(GENERAL, thread) if m.from_bot]


def texts(slack: OnSlack, thread: str) -> list[str]:
    return [read(m.seen) for m in bot_posts(slack, thread)]


async def posted(slack: OnSlack, thread: str, text: str) -> Posted:
    def find() -> Posted | None:
        return next((m for m in bot_posts(slack, thread) if read(m.seen) == text), None)

    return await slack.fake.wait_for(find)


async def test_a_turn_whose_last_words_came_by_an_edit_ends_with_one_new_message(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell(WAIT_FOR_GO), message("Found it.")), (message("Next.", chunks=1),))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "look for it")
        first = await slack.fake.wait_for(lambda: bot_posts(slack, said.ts))  # the command
        assert DONE not in texts(slack, said.ts)
        (codex_home.workspace / "go").touch()
        done = await posted(slack, said.ts, DONE)
        answer = first[0]
        assert read(answer.seen).endswith("Found it.") and len(answer.versions) >= 2  # edited
        assert float(done.ts) > float(answer.ts) and not done.edits  # a new message after it
        await slack.mention(ALICE, "and next?", thread_ts=said.ts)
        await posted(slack, said.ts, "Next.")
        # one for the turn, never one per edit; none for the next turn, sent whole
        assert texts(slack, said.ts) == [read(answer.seen), DONE, "Next."]
        assert len(fake_slack.calls_to("chat.postMessage")) == 3
    assert fake_slack.too_many == [] and fake_slack.refused == []


async def test_a_card_is_a_new_message_and_an_answer_sent_new_after_it_needs_nothing_more(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue(
        (shell("touch made.txt", escalated=True), message("Made it.", chunks=1)),
        (message("Next.", chunks=1),),
    )
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "make made.txt")
        card = await slack.card(GENERAL, said.ts)
        # a card waiting for the person is a new post in the thread: Slack notifies of it
        assert any(p.get("blocks") for p in fake_slack.calls_to("chat.postMessage"))
        await slack.click(ALICE, card, "Allow once")
        made = await posted(slack, said.ts, "Made it.")
        assert float(made.ts) > float(card.ts) and not made.edits
        await slack.mention(ALICE, "and next?", thread_ts=said.ts)
        await posted(slack, said.ts, "Next.")
        # what came after the card was a new message, which notified: nothing more
        assert DONE not in texts(slack, said.ts)
    assert fake_slack.refused == []
