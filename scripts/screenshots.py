"""Take the screenshots of docs/console.md of the web console from `agent-gateway demo`.

    .venv/bin/python scripts/screenshots.py            # into docs/screenshots/
    .venv/bin/python scripts/screenshots.py --out DIR  # anywhere else

Runs the demo as `agent-gateway demo` does (the console, the demo agent as a real process,
the whole gateway between; a fresh data dir under the system's temporary folder), drives
Debian's headless chromium through Playwright as a person would (the start page's words, the
buttons, the form), and saves each screen at a desktop width (1280 px) and, for the ones a
phone shows differently, at a phone's (390 px, the ``-phone`` files). Nothing is faked: what
the pictures show is what a newcomer gets. tests/test_console_demo_browser.py runs it too, so
that it keeps working.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Browser, Page, ViewportSize, async_playwright, expect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: `python scripts/screenshots.py`

from gateway.app.demo.command import build_demo  # noqa: E402
from gateway.platform import connected  # noqa: E402
from gateway.sessions.engine import Gateway  # noqa: E402
from platforms.console.platform import ConsolePlatform  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
DESKTOP: ViewportSize = {"width": 1280, "height": 820}
PHONE: ViewportSize = {"width": 390, "height": 844}
WAIT_MS = 30_000
# The screens, each a file in the output folder (docs/console.md shows some of them).
SHOTS = (
    "start.png",
    "start-phone.png",
    "conversation-approval.png",
    "conversation-approval-phone.png",
    "conversation-approved.png",
    "pending-diff.png",
    "pending-form-missing.png",
    "pending-form-missing-phone.png",
    "orphaned.png",
    "plan.png",
    "plan-phone.png",
    "plan-implemented.png",
    "sessions.png",
)


@asynccontextmanager
async def _demo(data_dir: Path) -> AsyncIterator[ConsolePlatform]:
    demo = build_demo(data_dir, pace=0)
    assert demo.console is not None
    gateway = Gateway(demo.config, platforms=demo.platforms, launcher=demo.launcher)
    async with connected(demo.platforms), gateway:
        yield demo.console


class _Person:
    """One browser window (its own cookies) on the demo's console."""

    def __init__(self, page: Page, console: ConsolePlatform, out: Path) -> None:
        self.page, self.console, self.out = page, console, out

    @classmethod
    async def open(
        cls, browser: Browser, console: ConsolePlatform, out: Path, viewport: ViewportSize
    ) -> _Person:
        page = await (await browser.new_context(viewport=viewport)).new_page()
        await page.goto(console.login_url)
        return cls(page, console, out)

    async def shot(self, name: str, *, around: str | None = None) -> None:
        """The whole page; or, ``around`` an element, the screen with it in the middle (what
        a phone shows: its whole page is too long to read in a README)."""
        if around is None:
            await self.page.screenshot(path=self.out / name, full_page=True)
            return
        await self.page.locator(around).last.evaluate("e => e.scrollIntoView({block: 'center'})")
        await self.page.screenshot(path=self.out / name)

    async def go(self, path: str) -> None:
        await self.page.goto(f"{self.console.url}{path}")

    async def start(self, word: str) -> None:
        """A new conversation, by the start page's button for ``word``."""
        await self.go("")
        await self.page.get_by_role("button", name=word, exact=True).click()
        await expect(self.page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)

    async def card_waits(self) -> None:
        card = self.page.locator("#live article.card.live").last
        await expect(card.locator("form button").first).to_be_visible(timeout=WAIT_MS)


async def take(out: Path, work: Path, *, chromium: Path = CHROMIUM) -> list[Path]:
    """Every screen of :data:`SHOTS`, written into ``out``; the files written. The demo's
    data dir and work dir are made afresh in ``work`` (the cards show its path)."""
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(shutil.rmtree, work, ignore_errors=True)
    async with async_playwright() as playwright, _demo(work / "demo") as console:
        browser = await playwright.chromium.launch(
            executable_path=str(chromium), args=CHROMIUM_ARGS
        )
        try:
            desk = await _Person.open(browser, console, out, DESKTOP)
            phone = await _Person.open(browser, console, out, PHONE)
            await desk.go("")
            await desk.shot("start.png")
            await phone.go("")
            await phone.shot("start-phone.png")

            # command: the card, then what the agent said after the decision, below it
            await desk.start("command")
            await desk.card_waits()
            await desk.shot("conversation-approval.png")
            await phone.go(desk.page.url.removeprefix(console.url))
            await phone.card_waits()
            await phone.shot("conversation-approval-phone.png", around="article.card .actions")
            await desk.page.get_by_role("button", name="Allow once").click()
            live = desk.page.locator("#live")
            await expect(live).to_contain_text("is in my work dir now", timeout=WAIT_MS)
            await expect(desk.page.locator("#head")).to_contain_text("idle", timeout=WAIT_MS)
            await desk.shot("conversation-approved.png")

            # patch: the diff, on the pending page
            await desk.start("patch")
            await desk.card_waits()
            await desk.go("pending")
            await desk.shot("pending-diff.png")
            await desk.page.get_by_role("button", name="Allow once").click()
            await expect(desk.page.locator("#live")).to_contain_text(
                "Nothing waits", timeout=WAIT_MS
            )

            # form: sent with answers missing, each named
            await desk.start("form")
            await desk.card_waits()
            for person in (desk, phone):
                await person.go("pending")
                form = person.page.locator("form.qform")
                await form.get_by_label("Teal (Recommended)").check()
                await form.get_by_role("button", name="Submit answers").click()
                await expect(person.page.get_by_role("alert")).to_be_visible()
            await desk.shot("pending-form-missing.png")
            await phone.shot("pending-form-missing-phone.png", around="[role=alert]")

            # crash: the agent dies with its card open
            await desk.start("crash")
            card = desk.page.locator("#live article.card").last
            await expect(card.locator(".status")).to_contain_text(
                "no answer can reach it now", timeout=WAIT_MS
            )
            await desk.shot("orphaned.png")

            # plan: the plan drawn, Implement and Keep planning; then the decision's turn
            await desk.start("plan")
            await desk.card_waits()
            await desk.shot("plan.png")
            await phone.go(desk.page.url.removeprefix(console.url))
            await phone.card_waits()
            await phone.shot("plan-phone.png", around="#live article.card")
            await desk.page.get_by_role("button", name="Implement").click()
            await expect(desk.page.locator("#live")).to_contain_text(
                "You approved the plan", timeout=WAIT_MS
            )
            await expect(desk.page.locator("#head")).to_contain_text("idle", timeout=WAIT_MS)
            await desk.shot("plan-implemented.png")

            await desk.go("")
            await desk.shot("sessions.png")
        finally:
            await browser.close()
    await asyncio.to_thread(shutil.rmtree, work, ignore_errors=True)
    return [out / name for name in SHOTS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", type=Path, default=CHROMIUM)
    args = parser.parse_args()
    work = Path(tempfile.gettempdir()) / "agent-gateway-screenshots"
    for path in asyncio.run(take(args.out, work, chromium=args.chromium)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
