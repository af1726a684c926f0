"""Files sent in chat reach the real OpenCode (issue 32): a picture, for a model whose
capabilities (``/config/providers``) take image input, as a ``file`` part, which the model
receives as a Chat Completions ``image_url`` of the same bytes; a PDF named, with its saved
path, in the prompt's text; for a model without image input, the picture is named too and
the chat says so."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.servers.fake_chat_completions as fc
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.opencode_env import OPENCODE_WAIT, VISION_MODEL, OpenCodeHome, make_opencode_home
from tests.servers.fake_chat_completions import FakeChatCompletions
from tests.test_gateway_opencode import opencode_config

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
INBOX = Path(".agent-gateway/inbox")


@pytest.fixture
def vision_home(fake_chat: FakeChatCompletions) -> Iterator[OpenCodeHome]:
    with make_opencode_home(fake_chat.base_url, VISION_MODEL) as made:
        yield made


def images_in(request: fc.ChatRequest) -> list[bytes]:
    found = []
    for message in request.messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                url = part["image_url"]["url"]
                found.append(base64.b64decode(url.split(",", 1)[1]))
    return found


async def test_a_picture_reaches_a_vision_model_as_an_image_url(
    opencode_bin: str, vision_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.text("A red dot and a spec.")])
    config = opencode_config(opencode_bin, vision_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(
            ROOM, ALICE, "why is this broken?", files=[("screen.png", PNG), ("spec.pdf", PDF)]
        )
        await gw.memory.wait_for(
            lambda: any("A red dot and a spec." in t for t in gw.memory.texts(ROOM)),
            OPENCODE_WAIT,
        )
    request = fake_chat.model_requests()[-1]
    assert images_in(request) == [PNG]
    saved = vision_home.workspace / INBOX / "spec.pdf"
    [prompt] = [p for p in request.prompts() if "why is this broken?" in p]
    assert f"- spec.pdf (application/pdf, {len(PDF)} bytes): {saved}" in prompt


async def test_a_model_without_image_input_gets_the_picture_named_and_the_chat_is_told(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.text("Read it.")])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "look", files=[("screen.png", PNG)])
        await gw.memory.wait_for(
            lambda: any("Read it." in t for t in gw.memory.texts(ROOM)), OPENCODE_WAIT
        )
        told = [t for t in gw.memory.texts(ROOM) if "not given pictures directly" in t]
    request = fake_chat.model_requests()[-1]
    assert images_in(request) == []
    saved = opencode_home.workspace / INBOX / "screen.png"
    assert any(str(saved) in p for p in request.prompts())
    assert len(told) == 1 and "screen.png" in told[0]
