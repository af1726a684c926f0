"""Files sent with a message reach the agent (issue 32): fetched through the platform by the
host that runs the session, saved in the work dir's inbox under safe names, named in the
prompt with the caption; a picture the agent does not take as an image is said so; a file
over the project's limit is refused with a reason and the agent is given nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.platform_contract.contract import Case, Driver

pytestmark = pytest.mark.timeout(60)

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 48
INBOX = Path(".agent-gateway/inbox")


def plain(text: str) -> str:
    """A message's text without the escapes a platform's Markdown adds (Discord: ``\\_``)."""
    return re.sub(r"\\(.)", r"\1", text)


def under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


async def test_files_sent_with_a_caption_reach_the_agent_saved_in_the_inbox(
    driver: Driver,
) -> None:
    driver.require(Case.FILES_IN)
    async with driver.running():
        await driver.say_with_files(
            "why is this broken?",
            [("error log.txt", b"Traceback: boom\n"), ("../../screen.png", PNG)],
        )
        shown = await driver.text(lambda t: t.startswith("echo: why is this broken?"))
        told = await driver.text(lambda t: "not given pictures directly" in t)
    inbox, echo = driver.work_dir / INBOX, plain(shown.text)
    assert (inbox / "error log.txt").read_bytes() == b"Traceback: boom\n"
    assert (inbox / "_.._screen.png").read_bytes() == PNG
    # the prompt names each file as sent, its type and where it was saved, in the order sent
    # (a list item, drawn as the platform draws one)
    assert f"error log.txt (text/plain, 16 bytes): {inbox / 'error log.txt'}" in echo
    assert f"../../screen.png (image/png, {len(PNG)} bytes): {inbox / '_.._screen.png'}" in echo
    assert echo.index("error log.txt") < echo.index("screen.png")
    assert "../../screen.png" in told.text
    assert under(driver.work_dir) == {
        ".agent-gateway",
        ".agent-gateway/inbox",
        ".agent-gateway/inbox/.gitignore",
        ".agent-gateway/inbox/error log.txt",
        ".agent-gateway/inbox/_.._screen.png",
    }


async def test_a_file_over_the_projects_limit_is_refused_and_the_agent_given_nothing(
    driver: Driver,
) -> None:
    """... unless its author asks for the message without it (issue 32): no "Try again"
    for a file refused for its size."""
    driver.require(Case.FILES_IN)
    async with driver.running():
        await driver.say_with_files("read this", [("huge.log", b"x" * (driver.max_file_bytes + 1))])
        refused = await driver.card(lambda s: "huge.log" in s.text)
        await driver.say("and hello")
        await driver.text(lambda t: t.startswith("echo: and hello"))
        seen = await driver.seen()
        assert refused.labels == ["Send without the file", "Drop it"]
        dropped = await driver.press(refused, "Drop it")
    assert "larger than this project takes for one file" in refused.text
    assert "Your message waits" in refused.text
    assert dropped == "🗑 Dropped: your message will not be sent."
    assert not any(s.text.startswith("echo: read this") for s in seen)
    assert [p.text for p in driver.launcher.prompts] == ["and hello"]
    inbox = driver.work_dir / INBOX
    assert not inbox.exists() or sorted(p.name for p in inbox.iterdir()) == [".gitignore"]


async def test_a_held_prompt_keeps_its_files_across_a_gateway_restart(driver: Driver) -> None:
    driver.require(Case.FILES_IN)
    driver.require(Case.FILES_KEPT)
    driver.require(Case.RESTART)
    async with driver.running():
        await driver.say("approve")
        await driver.card(lambda s: bool(s.buttons))
        await driver.say_with_files("and look at this", [("shot.png", PNG)])
        await driver.text(lambda t: "not as a decision" in t)  # queued behind the card
    async with driver.running():
        await driver.say("/resume")
        echo = await driver.text(lambda t: t.startswith("echo: and look at this"))
    saved = driver.work_dir / INBOX / "shot.png"
    assert saved.read_bytes() == PNG
    assert f"shot.png (image/png, {len(PNG)} bytes): {saved}" in plain(echo.text)


async def test_a_file_that_cannot_be_downloaded_waits_for_its_authors_choice(
    driver: Driver,
) -> None:
    """Issue 32: the message is not sent without its file; its author is offered the choice
    on a card, and "Send without the file" sends its text alone, with a line naming the
    file, and the chat says so; a second press changes nothing."""
    driver.require(Case.FILES_IN)
    async with driver.running():
        await driver.say("hello")  # a session first: the console's spool is made by then
        await driver.text(lambda t: t.startswith("echo: hello"))
        driver.lose_files()
        await driver.say_with_files("why is this broken?", [("screen.png", PNG)])
        card = await driver.card(lambda s: "did not come" in s.text)
        assert "Your message waits" in card.text
        assert card.labels == ["Send without the file", "Try again", "Drop it"]
        answer = await driver.press(card, "Send without the file")
        echo = await driver.text(lambda t: t.startswith("echo: why is this broken?"))
        told = await driver.text(lambda t: "Sent to the agent without" in t)
        again = await driver.press(card, "Drop it")
        settled = await driver.now(card.key)
    assert answer == "📎 Sending your message without screen.png."
    assert "refused or could not be downloaded: screen.png." in plain(echo.text)
    assert "screen.png" in plain(told.text)
    assert again == "This message was already sent without its file."
    assert settled.buttons == ()
    assert driver.launcher.prompts[-1].images == ()
    inbox = driver.work_dir / INBOX
    assert sorted(p.name for p in inbox.iterdir()) == [".gitignore"]
