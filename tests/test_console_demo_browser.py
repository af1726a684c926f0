"""`agent-gateway demo` as a newcomer meets it: the console in a real browser (Debian's chromium,
headless, driven by Playwright), the demo agent as a real process, the whole gateway between.

What is checked is what a person reads: the conversation in the order it happened (live,
after a reload, after the gateway restarted), their own messages and sessions named in their
words, the demo's words offered on the start page, a form's error that goes away once the
answer is given, and a phone-sized page that neither wraps its header nor scrolls sideways.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, Page, ViewportSize, async_playwright, expect

from gateway.app.demo.command import build_demo
from gateway.app.demo.scenarios import SCENARIOS
from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.console.platform import ConsolePlatform
from tests.conftest import REQUIRE_REAL, ROOT
from tests.test_console_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.timeout(60)

WAIT_MS = 20_000  # for anything the page should come to show
DESKTOP: ViewportSize = {"width": 1100, "height": 820}
PHONE: ViewportSize = {"width": 390, "height": 844}
# what each child of the conversation is, for the order a person reads it in
READ_ORDER = """live => [...live.children].map(e =>
  e.matches('article.card') ? 'card'
  : e.matches('.msg.mine') ? 'mine'
  : e.textContent.includes('I will write') ? 'before'
  : e.textContent.includes('is in my work dir now') ? 'after'
  : 'other')"""


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.is_file():
        message = f"{CHROMIUM} not found (scripts/setup.sh installs Debian's chromium)"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


@asynccontextmanager
async def demo_console(data_dir: Path, *, pace: float = 0) -> AsyncIterator[ConsolePlatform]:
    """`agent-gateway demo` in this process: the console serving, the gateway running
    (``pace`` 1: its slow answer as slow as a person sees it, long enough to stop)."""
    demo = build_demo(data_dir, pace=pace)
    assert demo.console is not None
    gateway = Gateway(demo.config, platforms=demo.platforms, launcher=demo.launcher)
    async with connected(demo.platforms), gateway:
        yield demo.console


async def open_page(
    browser: Browser,
    console: ConsolePlatform,
    path: str = "",
    *,
    viewport: ViewportSize = DESKTOP,
    script: bool = True,
) -> Page:
    context = await browser.new_context(viewport=viewport, java_script_enabled=script)
    page = await context.new_page()
    await page.goto(f"{console.url}{path}?token={console.guard.token}")
    return page


async def start(page: Page, word: str, *, typed: bool = False) -> Locator:
    """Start a conversation with one of the demo's words (the start page's button for it,
    or ``typed`` in the first message); the conversation's feed."""
    if typed:
        await page.get_by_label("first message").fill(word)
        await page.get_by_role("button", name="Start").click()
    else:
        await page.get_by_role("button", name=word, exact=True).click()
    await expect(page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)
    return page.locator("#live")


async def read_order(live: Locator) -> list[str]:
    order: list[str] = await live.evaluate(READ_ORDER)
    return [what for what in order if what != "other"]


async def test_the_start_page_offers_the_demos_words(browser: Browser, tmp_path: Path) -> None:
    async with demo_console(tmp_path / "data") as console:
        page = await open_page(browser, console)
        offered = page.locator("form.start .try button")
        await expect(offered).to_have_text([scenario.name for scenario in SCENARIOS])
        await expect(page.locator("form.start")).to_contain_text("a command to approve")
        live = await start(page, "form")
        await expect(live.locator("article.card fieldset.question")).to_have_count(
            3, timeout=WAIT_MS
        )


async def test_the_conversation_reads_in_the_order_it_happened_live_reloaded_and_restarted(
    browser: Browser, tmp_path: Path
) -> None:
    async with demo_console(tmp_path / "data") as console:
        page = await open_page(browser, console)
        live = await start(page, "command", typed=True)
        # your own message, labelled with you, not an account id; the session in your words
        await expect(live.locator(".msg.mine .who")).to_have_text("You")
        await expect(page.locator("h1")).to_contain_text("demo: command")
        card = live.locator("article.card")
        allow = card.get_by_role("button", name="Allow once")
        await expect(allow).to_be_visible(timeout=WAIT_MS)
        await expect(live.locator(".msg", has_text="I will write")).to_be_visible()
        assert await read_order(live) == ["mine", "before", "card"]
        await allow.click()
        await expect(live).to_contain_text("is in my work dir now", timeout=WAIT_MS)
        await expect(page.locator("#head")).to_contain_text("idle", timeout=WAIT_MS)
        assert await read_order(live) == ["mine", "before", "card", "after"]
        await page.reload()
        assert await read_order(page.locator("#live")) == ["mine", "before", "card", "after"]
        session = page.url.rsplit("/", 1)[1]
    async with demo_console(tmp_path / "data") as console:  # a new gateway, a new console
        page = await open_page(browser, console, f"s/{session}")
        live = page.locator("#live")
        await expect(live.locator(".msg.mine .who")).to_have_text("You")
        assert await read_order(live) == ["mine", "before", "card", "after"]


async def test_a_forms_error_goes_away_as_soon_as_the_answer_is_given(
    browser: Browser, tmp_path: Path
) -> None:
    async with demo_console(tmp_path / "data") as console:
        page = await open_page(browser, console)
        live = await start(page, "form", typed=True)
        card = live.locator("article.card")
        submit = card.get_by_role("button", name="Submit answers")
        await expect(submit).to_be_visible(timeout=WAIT_MS)
        error = card.get_by_role("alert")
        await submit.click()
        await expect(error).to_have_text("Colour, Name and Token need an answer.")
        await expect(card.locator("fieldset.missing")).to_have_count(3)
        await card.get_by_label("Orange").check()
        await expect(error).to_have_text("Name and Token need an answer.")
        await card.locator('input[name="o.name"]').fill("sandbox-2")
        await expect(error).to_have_text("Token needs an answer.")
        await expect(card.locator("fieldset.missing legend")).to_have_text(["Token (required)"])
        await card.locator('input[name="o.token"]').fill("pretend-token")
        await expect(error).to_have_count(0)  # gone before anyone presses Submit again
        await expect(card.locator("fieldset.missing")).to_have_count(0)
        await submit.click()
        await expect(card.locator(".status")).to_contain_text("Answered", timeout=WAIT_MS)
        await expect(live).to_contain_text('"sandbox-2" (your own words)', timeout=WAIT_MS)


async def _fits_a_phone(page: Page) -> None:
    """The header on one line (its name and its height one line of text, plus its padding),
    nothing wider than the screen, and the message box's placeholder shown whole."""
    lines = await page.locator("header.top").evaluate(
        """header => {
          const line = parseFloat(getComputedStyle(header).lineHeight);
          const style = getComputedStyle(header);
          const inner = header.clientHeight - parseFloat(style.paddingTop)
            - parseFloat(style.paddingBottom);
          const brand = header.firstElementChild.getBoundingClientRect().height;
          return [brand / line, inner / line];
        }"""
    )
    assert lines[0] < 1.5, f"the header's name wraps: {lines[0]:.1f} lines"
    assert lines[1] < 1.5, f"the header takes {lines[1]:.1f} lines"
    widths = await page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"{page.url} scrolls sideways: {widths}"
    boxes = page.locator("form.say textarea")
    for at in range(await boxes.count()):
        fits = await boxes.nth(at).evaluate(
            """box => {
              const style = getComputedStyle(box);
              const pen = document.createElement('canvas').getContext('2d');
              pen.font = style.font;
              const room = box.clientWidth - parseFloat(style.paddingLeft)
                - parseFloat(style.paddingRight);
              return pen.measureText(box.placeholder).width <= room;
            }"""
        )
        assert fits, "the message box's placeholder is cut off"


async def test_on_a_phone_the_header_keeps_one_line_and_nothing_scrolls_sideways(
    browser: Browser, tmp_path: Path
) -> None:
    async with demo_console(tmp_path / "data") as console:
        page = await open_page(browser, console, viewport=PHONE)
        await _fits_a_phone(page)
        live = await start(page, "command")
        await expect(live.get_by_role("button", name="Allow once")).to_be_visible(timeout=WAIT_MS)
        await _fits_a_phone(page)
        for path in ("", "pending"):
            await page.goto(f"{console.url}{path}")
            await expect(page.locator("main")).to_contain_text("demo: command")
            await _fits_a_phone(page)


def _png_width(path: Path) -> int:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big")


@pytest.mark.timeout(120)
async def test_the_readme_screenshots_are_taken_from_the_demo(
    browser: Browser, tmp_path: Path
) -> None:
    # scripts/screenshots.py, run as docs/console.md's pictures are made: every screen, at a
    # desktop's width and a phone's
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts/screenshots.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    written = await script.take(tmp_path / "shots", tmp_path / "work", chromium=CHROMIUM)
    widths = {path.name: _png_width(path) for path in written}
    assert set(widths) == set(script.SHOTS)
    assert {w for name, w in widths.items() if name.endswith("-phone.png")} == {PHONE["width"]}
    assert {w for name, w in widths.items() if not name.endswith("-phone.png")} == {
        script.DESKTOP["width"]
    }
    console = (ROOT / "docs" / "console.md").read_text()
    shown = re.findall(r"\(screenshots/([\w.-]+\.png)\)", console)
    shown = [name for name in shown if not name.startswith("cards-")]  # card_screenshots.py's
    assert shown and set(shown) <= set(script.SHOTS)  # docs/console.md shows what the script takes


async def _one_row_one_line(buttons: Locator) -> None:
    """The buttons side by side (one top edge) and each label on one line (one height)."""
    boxes = [await buttons.nth(at).bounding_box() for at in range(await buttons.count())]
    assert len(boxes) == 4 and all(box is not None for box in boxes)
    tops = {round(box["y"]) for box in boxes if box is not None}
    heights = {round(box["height"]) for box in boxes if box is not None}
    assert len(tops) == 1, f"the decision buttons are not in one row: {boxes}"
    assert len(heights) == 1, f"a decision button's label wraps: {boxes}"


async def test_what_a_person_reads_of_their_inputs_and_of_the_gateways_words(
    browser: Browser, tmp_path: Path
) -> None:
    async with demo_console(tmp_path / "data", pace=1) as console:
        page = await open_page(browser, console, viewport={"width": 1280, "height": 800})
        live = await start(page, "stop")
        notice = page.locator("#notice")
        # a turn runs: Stop is a button beside its state; what it did is said as a command's
        stop = page.locator("#head").get_by_role("button", name="Stop")
        await expect(stop).to_be_visible(timeout=WAIT_MS)
        await stop.click()
        await expect(notice).to_have_text(
            "/stop is a command for the gateway: its answer is in the conversation."
        )
        # the gateway's answer is labelled as the gateway's, its mark drawn in any font
        stopped = live.locator(".msg.gateway", has_text="Stopped by")
        await expect(stopped).to_be_visible(timeout=WAIT_MS)
        await expect(stopped.locator(".who")).to_have_text("agent-gateway")
        await expect(stopped).to_contain_text("■ Stopped by")
        await expect(stop).to_have_count(0, timeout=WAIT_MS)  # nothing left to stop
        assert not await live.locator(".msg:not(.gateway)", has_text="Stopped by").count()
        box = page.get_by_label("message", exact=True)
        await box.fill("/status")
        await page.get_by_role("button", name="Send").click()
        await expect(notice).to_have_text(
            "/status is a command for the gateway: its answer is in the conversation."
        )
        await expect(live.locator(".msg.gateway").last).not_to_have_text(re.compile("Stopped"))
        # a message to an agent at rest reached it; a later refusal does not sit under that
        await box.fill("form")
        await page.get_by_role("button", name="Send").click()
        await expect(notice).to_have_text("Sent to the agent.")
        submit = live.get_by_role("button", name="Submit answers")
        await expect(submit).to_be_visible(timeout=WAIT_MS)
        await expect(page).to_have_title(re.compile(r"^\(1\) demo: stop"))  # one request waits
        await submit.click()
        await expect(live.locator("article.card").get_by_role("alert")).to_contain_text(
            "need an answer"
        )
        await expect(notice).to_be_empty()
        # a command card's four decisions side by side, each on one line, at 1280 px
        await page.goto(console.url)
        live = await start(page, "command")
        buttons = live.locator("article.card .actions button")
        await expect(buttons).to_have_count(4, timeout=WAIT_MS)
        await _one_row_one_line(buttons)
        await expect(page).to_have_title(re.compile(r"^\(2\) demo: command"))
