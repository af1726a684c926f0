"""Files sent in chat reach the real codex app-server (issue 32): a picture as a ``localImage``
input item, which Codex sends to the model as a Responses ``input_image`` of the same bytes;
a PDF saved in the inbox and named, with its path, in the prompt's text."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.command_gate import command_gate
from tests.gateway_harness import ALICE, ROOM, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]

# a real 1x1 PNG (red), small enough to travel as it is
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


async def test_a_picture_reaches_the_model_as_an_input_image_and_a_pdf_is_named_by_path(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("It is a red dot."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(
            ROOM, ALICE, "why is this broken?", files=[("screen.png", PNG), ("spec.pdf", PDF)]
        )
        await gw.text_where(lambda text: "It is a red dot." in text)
    [request] = fake_model.model_requests()
    [user] = [i for i in request.input if i.get("type") == "message" and i.get("role") == "user"][
        -1:
    ]
    images = [p for p in user["content"] if p.get("type") == "input_image"]
    assert len(images) == 1
    url = images[0]["image_url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == PNG  # the bytes sent, byte for byte
    inbox = codex_home.workspace / ".agent-gateway" / "inbox"
    [text] = [t for t in request.user_texts() if "why is this broken?" in t]
    assert f"- spec.pdf (application/pdf, {len(PDF)} bytes): {inbox / 'spec.pdf'}" in text
    assert "screen.png" not in text  # the picture went as a picture, not named
    assert (inbox / "spec.pdf").read_bytes() == PDF
    assert (inbox / "screen.png").read_bytes() == PNG


def _git_repo(path: Path) -> None:
    # codex exec refuses to run outside a git repository
    subprocess.run(["git", "init", "-q", str(path)], check=True)


async def test_codex_exec_gives_a_picture_of_a_resumed_turn_to_the_model(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    _git_repo(codex_home.workspace)
    fake_model.enqueue((message("Hello."),), (message("A red dot."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", agent="codex-exec")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: "Hello." in text)
        await gw.memory.say(ROOM, ALICE, "and this?", files=[("screen, v2.png", PNG)])
        await gw.text_where(lambda text: "A red dot." in text)
    request = fake_model.model_requests()[-1]
    images = [
        part
        for item in request.input
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
        if part.get("type") == "input_image"
    ]
    assert len(images) == 1  # once, in the resumed turn, though its name has a comma
    assert base64.b64decode(images[0]["image_url"].split(",", 1)[1]) == PNG


async def test_a_picture_sent_during_a_turn_is_not_steered_but_runs_as_a_turn_of_its_own(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    """``busy_input = "steer"`` puts typed text into the running turn; a message with files
    waits for a turn of its own, where its files are fetched and given."""
    fake_model.enqueue((shell("cat gate"), message("Gate read.")), (message("A red dot."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", busy_input="steer")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "read the gate")
        async with command_gate(codex_home.workspace / "gate") as gate:  # the command now runs
            await gw.memory.say(ROOM, ALICE, "and this?", files=[("screen.png", PNG)])
            os.write(gate, b"open\n")
        await gw.text_where(lambda text: "A red dot." in text)
        assert not any("Sent into the running turn" in t for t in gw.memory.texts(ROOM))
    first, *_, last = fake_model.model_requests()
    assert first.turn_id != last.turn_id  # a second turn
    assert not any(
        "and this?" in t for r in fake_model.model_requests()[:-1] for t in r.user_texts()
    )
    assert any("and this?" in t for t in last.user_texts())
    images = [
        part
        for item in last.input
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
        if part.get("type") == "input_image"
    ]
    assert len(images) == 1
