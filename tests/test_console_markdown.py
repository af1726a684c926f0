"""The agent's Markdown on the console, in a real browser (tests/test_console_browser.py's
chromium, the real Codex): drawn as formatting, live and after a reload, and any HTML the
agent writes shown as text, never run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.console_harness import ConsoleRunning
from tests.servers.fake_responses import FakeResponses, message
from tests.test_console_browser import (  # noqa: F401 - the browser and gateway fixtures
    WAIT_MS,
    browser,
    chromium,
    open_page,
    running,
    shots,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

ANSWER = (
    "I ran the **command** and the *Colour* is `blue`.\n\n"
    "- one\n- two\n\n"
    "```python\nprint(1 < 2)\n```\n\n"
    "<script>document.title = 'pwned'</script> "
    "<img src=x onerror=\"document.title = 'pwned'\"> [me](javascript:alert(1))"
)


async def test_the_agents_markdown_is_drawn_and_its_html_is_text(
    browser: Browser,  # noqa: F811
    running: ConsoleRunning,  # noqa: F811
    fake_model: FakeResponses,
    shots: Path,  # noqa: F811
) -> None:
    fake_model.enqueue((message(ANSWER),))
    page = await open_page(browser, running, "")
    await page.get_by_label("first message").fill("what did you run?")
    await page.get_by_role("button", name="Start").click()
    await expect(page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)
    for _ in ("live", "after a reload"):
        answer = page.locator(".msg.md", has_text="I ran the")
        await expect(answer.locator("strong")).to_have_text("command", timeout=WAIT_MS)
        await expect(answer.locator("em")).to_have_text("Colour")
        await expect(answer.locator("p code")).to_have_text("blue")
        await expect(answer.locator("li")).to_have_text(["one", "two"])
        await expect(answer.locator("pre code.language-python")).to_have_text("print(1 < 2)")
        await expect(answer).not_to_contain_text("**")
        # the agent's HTML is text on the page, and nothing of it ran
        await expect(answer).to_contain_text("<script>document.title = 'pwned'</script>")
        await expect(answer).to_contain_text("<img src=x onerror=")
        await expect(answer.locator("script, img")).to_have_count(0)
        await expect(answer.locator("a")).to_have_count(0)
        assert await page.title() != "pwned"
        await page.screenshot(path=shots / "conversation-markdown.png", full_page=True)
        await page.reload()
