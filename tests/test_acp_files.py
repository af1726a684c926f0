"""Files sent in chat reach the real codex-acp (issue 32): a picture as an ACP ``image`` block
(codex-acp's ``promptCapabilities.image``), which the model receives as a Responses
``input_image`` of the same bytes; a PDF as a ``resource_link`` to its saved path, which
codex-acp puts before the model as a link to that path."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.codex_env import CodexHome, make_codex_home
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.servers.fake_responses import FakeResponses, message
from tests.test_acp_real import acp_config

pytestmark = [pytest.mark.real_agent("codex-acp"), pytest.mark.timeout(120)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


@pytest.fixture
def acp_home(fake_model: FakeResponses) -> Iterator[CodexHome]:
    with make_codex_home(fake_model.base_url, approval_policy="untrusted") as home:
        yield home


async def test_a_picture_as_an_image_block_and_a_pdf_as_a_resource_link(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("A dot and a spec."),))
    config = acp_config(codex_acp_bin, acp_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(
            ROOM, ALICE, "why is this broken?", files=[("screen.png", PNG), ("spec.pdf", PDF)]
        )
        await gw.text_where(lambda text: "A dot and a spec." in text)
    request = fake_model.model_requests()[-1]
    images = [
        base64.b64decode(part["image_url"].split(",", 1)[1])
        for item in request.input
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
        if part.get("type") == "input_image"
    ]
    assert images == [PNG]
    saved = acp_home.workspace / ".agent-gateway" / "inbox" / "spec.pdf"
    assert saved.read_bytes() == PDF
    texts = " ".join(request.user_texts())
    assert "why is this broken?" in texts
    assert saved.as_uri() in texts or str(saved) in texts, texts
