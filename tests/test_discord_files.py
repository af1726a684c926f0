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
    async with FakeDiscord() as fake:
        driver = DiscordDriver(tmp_path, fake)
        fake.cdn_expired = True
        async with driver.running():
            await driver.say_with_files("look", [("trace.txt", b"boom\n")])
            told = await driver.text(lambda t: "trace.txt" in t)
            seen = await driver.seen()
    assert "the CDN answered 404" in told.text and "not sent to the agent" in told.text
    assert len(fake.cdn_downloads) == 1  # a refusal is not fetched again
    assert not any(s.text.startswith("echo:") for s in seen)
    assert sorted(p.name for p in (driver.work_dir / INBOX).iterdir()) == [".gitignore"]
