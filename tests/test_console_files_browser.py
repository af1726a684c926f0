"""Files picked in the console in a real browser (Debian's chromium, headless, Playwright)
reach the real Codex (issue 32): the page's script posts the form with its files as
multipart, and the picture arrives in the model request as an ``input_image``."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.codex_env import CodexHome
from tests.console_harness import CONSOLE_TABLES, ConsoleRunning, console_gateway
from tests.gateway_harness import gateway_config
from tests.servers.fake_responses import FakeResponses, message
from tests.test_console_browser import WAIT_MS, browser, chromium, open_page  # noqa: F401

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


@pytest.fixture
async def running(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> AsyncIterator[ConsoleRunning]:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", extra=CONSOLE_TABLES)
    async with console_gateway(config) as running:
        yield running


async def test_a_picture_picked_on_the_start_page_reaches_the_model(
    browser: Browser,  # noqa: F811
    running: ConsoleRunning,
    fake_model: FakeResponses,
    codex_home: CodexHome,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("A red dot."),))
    picture = tmp_path / "screen.png"
    picture.write_bytes(PNG)
    page = await open_page(browser, running, "")
    await page.get_by_label("first message").fill("why is this broken?")
    await page.get_by_label("files for the agent").set_input_files(str(picture))
    await page.get_by_role("button", name="Start").click()
    await expect(page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)
    await expect(page.locator(".msg.mine")).to_contain_text("📎 screen.png")
    await expect(page.locator(".msg").last).to_contain_text("A red dot.", timeout=WAIT_MS)
    [request] = fake_model.model_requests()
    images = [
        base64.b64decode(part["image_url"].split(",", 1)[1])
        for item in request.input
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
        if part.get("type") == "input_image"
    ]
    assert images == [PNG]
    assert (codex_home.workspace / ".agent-gateway" / "inbox" / "screen.png").read_bytes() == PNG


async def test_a_picture_pasted_and_a_file_dropped_go_with_the_message(
    browser: Browser,  # noqa: F811
    running: ConsoleRunning,
    fake_model: FakeResponses,
    codex_home: CodexHome,
) -> None:
    fake_model.enqueue((message("Hello."),), (message("Both seen."),))
    page = await open_page(browser, running, "")
    await page.get_by_label("first message").fill("hello")
    await page.get_by_role("button", name="Start").click()
    await expect(page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)
    await expect(page.locator(".msg").last).to_contain_text("Hello.", timeout=WAIT_MS)
    box = page.get_by_label("message", exact=True)
    await box.fill("what about these?")
    await page.evaluate(
        """([b64, kind, name]) => {
            const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
            const files = new DataTransfer();
            files.items.add(new File([bytes], name, {type: 'image/png'}));
            const box = document.querySelector('form.say textarea');
            const init = {bubbles: true, cancelable: true};
            box.dispatchEvent(kind === 'paste'
                ? new ClipboardEvent('paste', {...init, clipboardData: files})
                : new DragEvent('drop', {...init, dataTransfer: files}));
        }""",
        [base64.b64encode(PNG).decode(), "paste", "image.png"],
    )
    await page.evaluate(
        """([text, name]) => {
            const files = new DataTransfer();
            files.items.add(new File([text], name, {type: 'text/plain'}));
            const box = document.querySelector('form.say textarea');
            box.dispatchEvent(
                new DragEvent('drop', {bubbles: true, cancelable: true, dataTransfer: files}));
        }""",
        ["Traceback: boom\n", "error.log"],
    )
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator(".msg").last).to_contain_text("Both seen.", timeout=WAIT_MS)
    request = fake_model.model_requests()[-1]
    images = [
        part
        for item in request.input
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
        if part.get("type") == "input_image"
    ]
    assert len(images) == 1  # the pasted picture
    inbox = codex_home.workspace / ".agent-gateway" / "inbox"
    assert (inbox / "error.log").read_text() == "Traceback: boom\n"  # the dropped file
    assert any(str(inbox / "error.log") in t for t in request.user_texts())


async def test_a_refused_picture_leaves_the_message_waiting_and_send_without_sends_it(
    browser: Browser,  # noqa: F811
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
) -> None:
    """Issue 32: the project refuses pictures; the message waits under a card whose button,
    pressed in the page, sends its words alone, the model told which file did not come."""
    fake_model.enqueue((message("Without it, then."),))
    refusing = '\n[projects.demo.files]\nrefuse_types = ["image/*"]\n'
    config = gateway_config(
        codex_bin, codex_home, tmp_path / "data", extra=CONSOLE_TABLES + refusing
    )
    picture = tmp_path / "screen.png"
    picture.write_bytes(PNG)
    async with console_gateway(config) as running:
        page = await open_page(browser, running, "")
        await page.get_by_label("first message").fill("why is this broken?")
        await page.get_by_label("files for the agent").set_input_files(str(picture))
        await page.get_by_role("button", name="Start").click()
        await expect(page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)
        card = page.locator("article.card.notice")
        await expect(card).to_contain_text(
            "is image/png, a type this project does not take", timeout=WAIT_MS
        )
        assert fake_model.model_requests() == []
        await card.get_by_role("button", name="Send without the file").click()
        await expect(page.locator(".msg").last).to_contain_text(
            "Without it, then.", timeout=WAIT_MS
        )
        await expect(card.get_by_role("button")).to_have_count(0)  # chosen: no buttons left
    [request] = fake_model.model_requests()
    [text] = [t for t in request.user_texts() if "why is this broken?" in t]
    assert "refused or could not be downloaded: screen.png." in text
    assert not any(
        part.get("type") == "input_image"
        for item in request.input
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
    )
