"""send_file end to end: the real Codex app-server finds the gateway's MCP tool (tool_search),
calls it, and the file appears in the fake Telegram chat; what is refused, the model reads;
under a rule, the file goes only after an approver's click."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gateway.config.model import Config
from tests.codex_env import CodexHome
from tests.servers.fake_responses import (
    FakeResponses,
    ModelRequest,
    message,
    namespaced_call,
    tool_search,
)
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
NAMESPACE = "mcp__agent_gateway"


def config_for(
    fake: FakeTelegram, home: CodexHome, codex_bin: str, tmp_path: Path, **options: object
) -> Config:
    return telegram_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home, **options
    )


def tool_text(output: str) -> str:
    """What the model read of an MCP tool's result, unwrapped: Codex hands it back as
    content items (app-server: its own "Wall time: ... Output:" lines first; codex-acp: the
    MCP content items as JSON text)."""
    try:
        items = json.loads(output)
    except ValueError:
        rest = output.rsplit("Output:", 1)[-1].strip()
        return tool_text(rest) if rest != output else rest
    if isinstance(items, str):
        return tool_text(items)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return output
    joined = "".join(str(i.get("text", "")) for i in items)
    return tool_text(joined.rsplit("Output:", 1)[-1].strip())


def said(request: ModelRequest) -> str:
    return f"The tool said: {tool_text(request.tool_output() or '')}"


def send_file_turn(path: str, caption: str | None = None) -> tuple[object, ...]:
    arguments = {"path": path} if caption is None else {"path": path, "caption": caption}
    return (
        tool_search("send a file to the chat"),
        namespaced_call(NAMESPACE, "send_file", arguments),
        message(said),
    )


async def test_the_agent_sends_a_picture_and_it_appears_in_the_chat(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    fake_model.enqueue(send_file_turn("chart.png", "the chart"))  # type: ignore[arg-type]
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "send me the chart")
        photo = await tg.bot_message(ALICE.id, lambda m: m.photo is not None)
        assert photo.photo == ("chart.png", PNG)
        assert photo.text == "the chart"
        done = await tg.bot_message(ALICE.id, lambda m: m.text.endswith("to the chat"))
        assert done.text == "The tool said: sent chart.png (72 bytes) to the chat"
    # nobody was asked: no card of the agent, none of the gateway
    assert not [m for m in fake_telegram.bot_messages(ALICE.id) if m.buttons]


@pytest.mark.parametrize("how", ["outside", "link"])
async def test_a_file_outside_the_work_dir_is_refused_and_the_model_reads_why(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
    how: str,
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the chat\n")
    if how == "link":
        (codex_home.workspace / "notes.txt").symlink_to(secret)
        path = "notes.txt"
    else:
        path = str(secret)
    fake_model.enqueue(send_file_turn(path))  # type: ignore[arg-type]
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "send me the secret")
        done = await tg.bot_message(ALICE.id, lambda m: m.text.endswith("can be sent"))
        assert done.text == (
            f"The tool said: not sent: {path} is outside this session's working directory "
            "(a link that points out of it counts as outside); only files of the working "
            "directory can be sent"
        )
    sent = fake_telegram.bot_messages(ALICE.id)
    assert not [m for m in sent if m.document is not None or m.photo is not None]


RULE = """
[[projects.demo.policy]]
kind = "send_file"
path_glob = "*.log"
"""


async def test_under_a_send_file_rule_the_file_goes_only_after_an_approver_s_click(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / "build.log").write_text("".join(f"step {n}\n" for n in range(1, 30)))
    fake_model.enqueue(send_file_turn("build.log", "the log"))  # type: ignore[arg-type]
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path, policy=RULE)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "send me the build log")
        card = await tg.card(ALICE.id)
        assert "Send build.log to the chat?" in card.text
        assert "The agent wants to send build.log (223 bytes)." in card.text
        assert "Type: text/plain" in card.text and "step 1\nstep 2" in card.text
        assert [b["text"] for b in card.buttons] == ["Send it", "Don't send"]
        sent = fake_telegram.bot_messages(ALICE.id)
        assert not [m for m in sent if m.document is not None]  # not before the click

        await tg.press(ALICE, card, "Send it")
        document = await tg.bot_message(ALICE.id, lambda m: m.document is not None)
        assert document.document is not None and document.document[0] == "build.log"
        assert document.text == "the log"
        done = await tg.bot_message(ALICE.id, lambda m: m.text.endswith("to the chat"))
        assert done.text == "The tool said: sent build.log (223 bytes) to the chat"
        await tg.fake.wait_for(lambda: card.markup is None and "done" in card.text)
        assert 'Approved ("Send it") by @alice' in card.text
        assert "sent to the chat · done" in card.text  # what became of the file
        assert "sent to the agent" not in card.text


async def test_a_dotfile_is_asked_about_and_a_refusal_is_what_the_model_reads(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / ".env").write_text("TOKEN=secret\n")
    fake_model.enqueue(send_file_turn(".env"))  # type: ignore[arg-type]
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "send me the env file")
        card = await tg.card(ALICE.id)
        assert "a dotfile" in card.text
        await tg.press(ALICE, card, "Don't send")
        done = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("The tool said: not"))
        assert "chose not to send .env" in done.text
        await tg.fake.wait_for(lambda: card.markup is None and "done" in card.text)
        assert 'Denied ("Don\'t send") by @alice' in card.text
        assert "not sent · done" in card.text
    sent = fake_telegram.bot_messages(ALICE.id)
    assert not [m for m in sent if m.document is not None or m.photo is not None]


async def test_after_a_gateway_restart_the_resumed_thread_still_has_send_file(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / "chart.png").write_bytes(PNG)
    (codex_home.workspace / "report.txt").write_text("all green\n")
    fake_model.enqueue(
        send_file_turn("chart.png"),  # type: ignore[arg-type]
        send_file_turn("report.txt"),  # type: ignore[arg-type]
    )
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "send me the chart")
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("(72 bytes) to the chat"))
    async with on_telegram(config, fake_telegram) as tg:  # a new gateway, a new Codex process
        await tg.say(ALICE, "and the report")
        document = await tg.bot_message(ALICE.id, lambda m: m.document is not None)
        assert document.document == ("report.txt", b"all green\n")
        await tg.bot_message(ALICE.id, lambda m: m.text.endswith("(10 bytes) to the chat"))
    last = fake_model.model_requests()[-1]
    assert "send me the chart" in last.user_texts()  # the thread was resumed, not a new one


async def test_a_stop_while_the_file_waits_withdraws_its_card_and_nothing_is_sent(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    (codex_home.workspace / "build.log").write_text("step 1\n")
    fake_model.enqueue(send_file_turn("build.log"))  # type: ignore[arg-type]
    config = config_for(fake_telegram, codex_home, codex_bin, tmp_path, policy=RULE)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "send me the build log")
        card = await tg.card(ALICE.id)
        await tg.say(ALICE, "/stop")
        await tg.fake.wait_for(lambda: card.markup is None)
        # the person's /stop, whether the agent's hang-up or the turn's end closed it first
        assert re.search(
            r"Stopped by @alice at \d\d:\d\d UTC before anyone answered"
            r" · nothing was sent to the agent",
            card.text,
        ), card.text
    sent = fake_telegram.bot_messages(ALICE.id)
    assert not [m for m in sent if m.document is not None]
