"""send_file through the real codex-acp: the gateway's MCP server given to codex-acp as Codex's
own config (``-c mcp_servers.agent-gateway...`` on its command line, the tool pre-approved,
the token in its env through ``env_vars``), not as an ACP ``mcpServers`` entry, which
codex-acp 0.16 turns into a Codex entry that asks ``session/request_permission`` before every
call. So no card of codex-acp's appears; the gateway's policy is the one decision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome, make_codex_home
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.servers.fake_responses import FakeResponses
from tests.test_acp_real import acp_config
from tests.test_telegram_send_file import PNG, RULE, send_file_turn

pytestmark = [pytest.mark.real_agent("codex-acp"), pytest.mark.timeout(120)]


@pytest.fixture
def home(fake_model: FakeResponses) -> Iterator[CodexHome]:
    with make_codex_home(fake_model.base_url) as made:
        yield made


async def test_codex_acp_sends_a_picture_with_no_card_of_its_own(
    codex_acp_bin: str, home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    (home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png", "the chart"))  # type: ignore[arg-type]
    async with running_gateway(acp_config(codex_acp_bin, home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the chart")
        told = await gw.text_where(lambda text: text.endswith("(72 bytes) to the chat"))
        assert told.endswith("The tool said: sent chart.png (72 bytes) to the chat")
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content, f.caption) for f in files] == [("chart.png", PNG, "the chart")]
        assert not gw.cards()


async def test_under_a_send_file_rule_the_gateway_s_card_is_the_only_one(
    codex_acp_bin: str, home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    (home.workspace / "build.log").write_text("".join(f"step {n}\n" for n in range(1, 30)))
    fake_model.enqueue(send_file_turn("build.log", "the log"))  # type: ignore[arg-type]
    config = acp_config(codex_acp_bin, home, tmp_path / "d", policy=RULE)
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the build log")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        assert shown.card.title == "Send build.log to the chat?"
        assert [a.label for a in shown.card.actions] == ["Send it", "Don't send"]
        assert not [m for m in gw.memory.messages(ROOM) if m.file is not None]
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        told = await gw.text_where(lambda text: text.endswith("to the chat"))
        assert told.endswith("The tool said: sent build.log (223 bytes) to the chat")
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.caption) for f in files] == [("build.log", "the log")]
        # the card says what became of the file, once the agent went on
        await gw.card_where(lambda card: card.status_line.endswith(" · sent to the chat · done"))
        assert [c.card.title for c in gw.cards() if c.card is not None] == [
            "Send build.log to the chat?"
        ]  # one card, the gateway's


async def test_after_a_gateway_restart_the_loaded_session_still_sends_with_no_card(
    codex_acp_bin: str, home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    (home.workspace / "chart.png").write_bytes(PNG)
    (home.workspace / "report.txt").write_text("all green\n")
    fake_model.enqueue(
        send_file_turn("chart.png"),  # type: ignore[arg-type]
        send_file_turn("report.txt"),  # type: ignore[arg-type]
    )
    config = acp_config(codex_acp_bin, home, tmp_path / "d")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "send me the chart")
        await gw.text_where(lambda text: text.endswith("(72 bytes) to the chat"))
    async with running_gateway(config) as gw:  # a new gateway, a new codex-acp process
        await gw.memory.say(ROOM, ALICE, "and the report")
        told = await gw.text_where(lambda text: text.endswith("(10 bytes) to the chat"))
        assert told.endswith("The tool said: sent report.txt (10 bytes) to the chat")
        files = [m.file for m in gw.memory.messages(ROOM) if m.file is not None]
        assert [(f.name, f.content) for f in files] == [("report.txt", b"all green\n")]
        assert not gw.cards()
    last = fake_model.model_requests()[-1]
    assert "send me the chart" in last.user_texts()  # session/load, not a new session
