"""Slack end to end with the real Codex app-server: the lasting rule an "always" button adds
is on the card and in the confirm dialog Slack shows before the click (issue 29)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_slack import FakeSlack
from tests.slack_harness import ALICE, GENERAL, on_slack, read, slack_config
from tests.test_slack_codex import bot_says

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_the_rule_an_always_button_adds_is_on_the_card_and_in_its_confirm(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create hello.txt")
        card = await slack.card(GENERAL, said.ts)
        seen = read(card.seen)
        always = "Always allow commands like this"
        assert f"*{always}*: Run it, and add a lasting rule" in seen
        assert "```\ntouch hello.txt\n```" in seen  # the rule, whole, under its explanation
        _, button = card.button(always)
        confirm = read(button["confirm"]["text"]["text"])
        assert confirm != always  # not the label again: what the click adds
        assert confirm.startswith("Run it, and add a lasting rule")
        assert confirm.endswith("`touch hello.txt`")
        _, once = card.button("Allow once")
        assert "confirm" not in once  # only a grant beyond this once asks again
        await fake_slack.click(ALICE, card, always)
        await slack.fake.wait_for(lambda: not card.labels and "Approved" in card.seen)
        await bot_says(slack, said.ts, "Done.")  # the command ran before the turn ended
    assert (codex_home.workspace / "hello.txt").exists()
