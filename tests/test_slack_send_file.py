"""send_file on Slack with the real Codex: the file is uploaded into the session's thread
(files.getUploadURLExternal, the bytes, files.completeUploadExternal) with its caption."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses
from tests.servers.fake_slack import FakeSlack
from tests.slack_harness import ALICE, GENERAL, on_slack, read, slack_config
from tests.test_telegram_send_file import PNG, send_file_turn

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_the_file_is_shared_in_the_session_s_thread(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png", "the chart"))  # type: ignore[arg-type]
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "send me the chart")
        await slack.fake.wait_for(
            lambda: any(
                read(m.seen).endswith("(72 bytes) to the chat")
                for m in fake_slack.replies(GENERAL, said.ts)
                if m.from_bot
            )
        )
        [shared] = fake_slack.files_in(GENERAL, said.ts)
        assert (shared.name, shared.content) == ("chart.png", PNG)
        assert read(shared.comment) == "the chart"
