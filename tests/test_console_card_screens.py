"""scripts/card_screenshots.py, as docs/screenshots/cards-*.png are made: a card of each
agent's kind (a Codex command, a Claude edit, an ACP permission, a question, an orphaned
card) drawn by the console's pages in Debian's headless chromium, at 1280 px and 390 px.
What is checked is what the pictures would show: the decisions side by side on a desktop,
each label on one line, and nothing wider than a phone."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from playwright.async_api import Browser

from tests.conftest import ROOT
from tests.test_console_browser import CHROMIUM
from tests.test_console_demo_browser import (
    _one_row_one_line,
    _png_width,
    browser,
)

__all__ = ["browser"]  # the fixture, shared with the demo's browser tests


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "card_screenshots", ROOT / "scripts/card_screenshots.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


async def test_each_agents_card_is_taken_at_a_desktops_width_and_a_phones(
    browser: Browser, tmp_path: Path
) -> None:
    script = _script()
    written = await script.take(tmp_path, chromium=CHROMIUM)
    widths = {path.name: _png_width(path) for path in written}
    assert set(widths) == set(script.SHOTS)
    for name, width in widths.items():
        assert width == (390 if name.endswith("-phone.png") else 1280), name
    console = (ROOT / "docs" / "console.md").read_text()
    linked = {n for n in re.findall(r"\(screenshots/(cards-[\w.-]+\.png)\)", console)}
    assert linked == set(script.SHOTS)  # docs/console.md links every one, and only those
    for name in script.SHOTS:
        assert (ROOT / "docs" / "screenshots" / name).is_file(), name
    context = await browser.new_context(viewport=script.DESKTOP)
    page = await context.new_page()
    for name in ("codex-command", "claude-edit"):
        await page.set_content(script.page(name))
        await _one_row_one_line(page.locator("article.card .actions button"))
    phone = await (await browser.new_context(viewport=script.PHONE)).new_page()
    for name in script.CARDS:
        await phone.set_content(script.page(name))
        wide = await phone.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert wide[0] <= wide[1], f"{name} scrolls sideways on a phone: {wide}"
