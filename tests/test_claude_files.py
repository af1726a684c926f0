"""Files sent in chat reach the real Claude Code (issue 32): a picture as an ``image`` block
of the stream-json user message, which the model receives as a Messages ``image`` block of the
same bytes; a PDF saved in the inbox and named, with its path, in the prompt's text."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from tests.claude_env import ClaudeHome
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.test_gateway_claude import claude_config

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


async def test_a_picture_reaches_the_model_as_an_image_block_and_a_pdf_is_named_by_path(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.text("It is a red dot.")])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(
            ROOM, ALICE, "why is this broken?", files=[("screen.png", PNG), ("spec.pdf", PDF)]
        )
        await gw.text_where(lambda text: "It is a red dot." in text)
    request = fake_anthropic.model_requests()[-1]
    blocks = [
        block
        for message in request.messages
        if message.get("role") == "user"
        for block in (message.get("content") or [])
        if isinstance(block, dict)
    ]
    [image] = [b for b in blocks if b.get("type") == "image"]
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == PNG  # the bytes sent, byte for byte
    inbox = claude_home.workspace / ".agent-gateway" / "inbox"
    [prompt] = [p for p in request.prompts() if "why is this broken?" in p]
    assert f"- spec.pdf (application/pdf, {len(PDF)} bytes): {inbox / 'spec.pdf'}" in prompt
    assert "screen.png" not in prompt  # the picture went as a picture, not named
