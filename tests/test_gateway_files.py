"""Downloads where the agent runs (issue 32), on the memory platform: a fetch cut midway is
tried again and the file arrives whole; one that keeps failing is reported and its prompt is
not sent without it; files with a command are refused, nothing done."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.sessions.file_fetch import FETCH_TRIES
from tests.platform_contract.memory_driver import MemoryDriver

pytestmark = pytest.mark.timeout(60)

INBOX = Path(".agent-gateway/inbox")
LOG = b"line\n" * 4_000  # 20,000 bytes: twenty chunks of 1 KB, so a cut falls midway


async def test_a_download_cut_midway_is_tried_again_and_the_file_arrives_whole(
    tmp_path: Path,
) -> None:
    driver = MemoryDriver(tmp_path)
    driver.platform.chunk_bytes = 1024
    driver.platform.fetch_cuts = 1
    async with driver.running():
        await driver.say_with_files("see the log", [("build.log", LOG)])
        echo = await driver.text(lambda t: t.startswith("echo: see the log"))
    saved = driver.work_dir / INBOX / "build.log"
    assert saved.read_bytes() == LOG
    assert f"- build.log (text/plain, {len(LOG)} bytes): {saved}" in echo.text
    assert len(driver.platform.fetched) == 2  # cut once, then whole
    assert sorted(p.name for p in saved.parent.iterdir()) == [".gitignore", "build.log"]


async def test_a_download_that_keeps_failing_is_reported_and_the_prompt_not_sent(
    tmp_path: Path,
) -> None:
    driver = MemoryDriver(tmp_path)
    driver.platform.chunk_bytes = 1024
    driver.platform.fetch_cuts = FETCH_TRIES
    async with driver.running():
        await driver.say_with_files("two files", [("first.txt", b"first\n"), ("second.log", LOG)])
        told = await driver.card(lambda s: "could not be downloaded" in s.text)
        await driver.say("next")
        await driver.text(lambda t: t.startswith("echo: next"))
        seen = await driver.seen()
    assert f"after {FETCH_TRIES} tries" in told.text and "Your message waits" in told.text
    assert not any(s.text.startswith("echo: two files") for s in seen)
    assert [p.text for p in driver.launcher.prompts] == ["next"]
    # the first file, saved before the second failed, is removed with it
    inbox = driver.work_dir / INBOX
    assert sorted(p.name for p in inbox.iterdir()) == [".gitignore"]


async def test_files_with_a_command_are_refused_and_the_command_not_run(tmp_path: Path) -> None:
    driver = MemoryDriver(tmp_path)
    async with driver.running():
        await driver.say_with_files("/clear", [("x.txt", b"x\n")])
        told = await driver.text(lambda t: t.startswith("Files go with a message"))
    assert "nothing was done" in told.text
    assert driver.launcher.prompts == []
    assert driver.platform.fetched == []
