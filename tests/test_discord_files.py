"""Discord attachments reach the agent from the CDN (issue 32); an address whose signature
expired is refused with the reason, nothing saved, and not fetched again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platform_contract.discord_driver import DiscordDriver
from tests.servers.fake_discord import FakeDiscord

pytestmark = pytest.mark.timeout(60)

INBOX = Path(".agent-gateway/inbox")


async def test_an_attachment_whose_cdn_address_expired_is_refused(tmp_path: Path) -> None:
    """... and its author may send the message without it: its text alone goes, with a
    line naming the file; another person's press changes nothing."""
    async with FakeDiscord() as fake:
        driver = DiscordDriver(tmp_path, fake)
        fake.cdn_expired = True
        async with driver.running():
            await driver.say_with_files("look", [("trace.txt", b"boom\n")])
            told = await driver.card(lambda s: "trace.txt" in s.text)
            seen = await driver.seen()
            assert told.labels == ["Send without the file", "Try again", "Drop it"]
            refused = await driver.press(told, "Send without the file", who="carol")
            answer = await driver.press(told, "Send without the file")
            echo = await driver.text(lambda t: t.startswith("echo: look"))
    assert "the CDN answered 404" in told.text and "Your message waits" in told.text
    assert len(fake.cdn_downloads) == 1  # a refusal is not fetched again
    assert not any(s.text.startswith("echo:") for s in seen)
    assert refused.startswith("Only ") and "can choose" in refused
    assert answer == "📎 Sending your message without trace.txt."
    assert "could not be downloaded: trace.txt." in echo.text.replace("\\", "")
    assert driver.launcher.prompts[-1].images == ()
    assert sorted(p.name for p in (driver.work_dir / INBOX).iterdir()) == [".gitignore"]
