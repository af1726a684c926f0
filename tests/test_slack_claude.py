"""Slack end to end with the real Claude Code: its questions (one single-choice, one
multi-select) are answered in a Slack modal, a submission missing an answer is refused in
place and then completed, and Claude reads the answers exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from gateway.config.model import Config
from tests.claude_env import ClaudeHome
from tests.servers.fake_anthropic import CHECKS, COLOR, DONE
from tests.servers.fake_slack import FakeSlack, Posted
from tests.slack_harness import ALICE, GENERAL, OnSlack, on_slack, read, slack_config

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

COLOR_ANSWER = '"Which color should the button be?"="Blue"'
CHECKS_ANSWER = '"Which checks should run?"="Lint, Tests"'


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def config_for(fake: FakeSlack, home: ClaudeHome, claude_bin: str, tmp_path: Path) -> Config:
    return slack_config(
        fake,
        tmp_path / "data",
        work_dir=home.workspace,
        codex_bin=claude_bin,
        home=home,
        agent="claude-code",
    )


async def questions_card(slack: OnSlack) -> tuple[Posted, Posted]:
    said = await slack.mention(ALICE, "ask me")
    card = await slack.card(GENERAL, said.ts)
    # two questions, one of them multi: a modal; no "Answer" without answers beside it; the
    # way to answer first, refusing last
    assert card.labels == ["Answer…", "Do not answer", "Do not answer and stop the turn"]
    assert "Which checks should run?" in read(card.seen)
    return said, card


def answers_claude_read(fake_anthropic: fm.FakeAnthropic) -> list[str]:
    """The text of every tool result Claude sent the model, in the last request's history."""
    last = fake_anthropic.model_requests()[-1]
    return [str(result.get("content")) for result in last.tool_results()]


async def test_a_multi_select_question_is_answered_in_a_modal(
    claude_bin: str,
    claude_home: ClaudeHome,
    fake_anthropic: fm.FakeAnthropic,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_anthropic.enqueue([fm.ask_user_question([COLOR, CHECKS]), DONE])
    async with on_slack(config_for(fake_slack, claude_home, claude_bin, tmp_path), fake_slack) as s:
        said, card = await questions_card(s)
        await fake_slack.click(ALICE, card, "Answer…")
        modal = (await fake_slack.wait_for(lambda: fake_slack.modals(ALICE)))[0]
        kinds = {b["block_id"]: b["element"]["type"] for b in modal.blocks if b["type"] == "input"}
        assert kinds["q1"] in ("checkboxes", "multi_static_select")
        sent = await fake_slack.submit(ALICE, {"Color": "Blue", "Checks": ["Lint", "Tests"]})
        assert sent is not None
        await sent.settled()
        assert sent.state == "acked" and modal.closed and not modal.errors
        await fake_slack.wait_for(lambda: not card.labels and "Answered" in card.seen)
        done = await fake_slack.wait_for(
            lambda: [m for m in fake_slack.replies(GENERAL, said.ts) if "Done." in m.seen]
        )
        assert CHECKS_ANSWER in read(done[0].seen)
    told = fake_anthropic.model_requests()[-1].tool_result()
    assert told is not None
    assert COLOR_ANSWER in told[0] and CHECKS_ANSWER in told[0]


async def test_a_missing_answer_is_refused_in_the_modal_then_completed_once(
    claude_bin: str,
    claude_home: ClaudeHome,
    fake_anthropic: fm.FakeAnthropic,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_anthropic.enqueue([fm.ask_user_question([COLOR, CHECKS]), DONE])
    async with on_slack(config_for(fake_slack, claude_home, claude_bin, tmp_path), fake_slack) as s:
        said, card = await questions_card(s)
        await fake_slack.click(ALICE, card, "Answer…")
        modal = (await fake_slack.wait_for(lambda: fake_slack.modals(ALICE)))[0]
        # each question may be an option or typed text, so Slack's client lets an empty one
        # through: the gateway refuses it in place
        refused = await fake_slack.submit(ALICE, {"Checks": ["Lint", "Tests"]})
        assert refused is not None
        await refused.settled()
        assert refused.state == "acked"  # within Slack's 3 s
        assert not modal.closed
        assert set(modal.errors) <= {"q0", "q0.other"} and modal.errors
        assert card.labels[0] == "Answer…"  # nothing decided, nothing sent
        assert len(fake_anthropic.model_requests()) == 1

        sent = await fake_slack.submit(ALICE, {"Color": "Blue", "Checks": ["Lint", "Tests"]})
        assert sent is not None
        await sent.settled()
        assert modal.closed and not modal.errors
        await fake_slack.wait_for(lambda: not card.labels and "Answered" in card.seen)
        await fake_slack.wait_for(
            lambda: [m for m in fake_slack.replies(GENERAL, said.ts) if "Done." in m.seen]
        )
    results = answers_claude_read(fake_anthropic)
    assert len(results) == 1  # the answer reached Claude once
    assert COLOR_ANSWER in results[0] and CHECKS_ANSWER in results[0]
