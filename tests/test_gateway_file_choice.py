"""A message whose files did not come waits for its author's choice (issue 32), on the memory
platform with the scripted agent: "Send without the files" sends its text alone with a line
naming them, "Try again" fetches them again, "Drop it" drops it; anyone else's press, a
second press, an earlier offer's button or a forged one changes nothing; typed text is never
the choice; a restart between the failure and the press keeps the message waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.cards import Card
from gateway.domain import ConversationRef
from gateway.platform import MessageRef
from gateway.store.records import FilesChoice, PromptRecord, PromptState
from tests.forgery import tampered
from tests.platform_contract.contract import Seen
from tests.platform_contract.memory_driver import MemoryDriver

pytestmark = pytest.mark.timeout(90)

INBOX = Path(".agent-gateway/inbox")
LOG = b"line\n" * 4_000  # twenty chunks of 1 KB: a cut falls midway
MISSING = (
    "(Sent with files that were refused or could not be downloaded: first.txt, build.log."
    " They are not here.)"
)


def failing(tmp_path: Path) -> MemoryDriver:
    driver = MemoryDriver(tmp_path)
    driver.platform.chunk_bytes = 1024
    driver.platform.fetch_cuts = 1_000  # every download is cut until the test says otherwise
    return driver


async def offered(driver: MemoryDriver, tries: int = 1) -> Seen:
    """The card of the ``tries``-th failure (each failure shows a card of its own)."""
    return await driver.wait_for(
        lambda seen: (
            cards[tries - 1]
            if len(cards := [s for s in seen if s.card and "did not come" in s.text]) >= tries
            else None
        )
    )


async def test_files_that_never_come_offer_the_choice_and_send_without_them_when_asked(
    tmp_path: Path,
) -> None:
    driver = failing(tmp_path)
    async with driver.running() as gw:
        await driver.say_with_files("two files", [("first.txt", b"first\n"), ("build.log", LOG)])
        card = await offered(driver)
        assert card.labels == ["Send without the files", "Try again", "Drop it"]
        assert "could not be downloaded from memory after 3 tries" in card.text
        # typed text is a message of its own, never the choice: the waiting one still waits
        await driver.say("send without the files")
        await driver.text(lambda t: t.startswith("echo: send without the files"))
        assert [p.text for p in driver.launcher.prompts] == ["send without the files"]
        answer = await driver.press(card, "Send without the files")
        assert answer == "📎 Sending your message without first.txt, build.log."
        told = await driver.text(lambda t: t.startswith("📎 Sent to the agent without"))
        echo = await driver.text(lambda t: t.startswith("echo: two files"))
        again = await driver.press(card, "Try again")  # a second press: nothing changes
        settled = await driver.now(card.key)
        prompt = await gw.store.prompts.get(1)
    assert again == "This message was already sent without its files."
    assert "`first.txt`, `build.log`; the agent is told they did not come" in told.text
    sent = driver.launcher.prompts[-1]
    assert sent.text == f"two files\n\n{MISSING}" and sent.images == () and sent.files == ()
    assert MISSING in echo.text
    assert settled.buttons == () and "Alice: sent without first.txt, build.log" in settled.text
    assert prompt is not None and prompt.files_choice is FilesChoice.WITHOUT
    assert [p.text for p in driver.launcher.prompts].count(sent.text) == 1  # sent once
    inbox = driver.work_dir / INBOX
    assert sorted(p.name for p in inbox.iterdir()) == [".gitignore"]


async def test_try_again_fetches_the_files_again_and_an_earlier_cards_buttons_are_stale(
    tmp_path: Path,
) -> None:
    driver = failing(tmp_path)
    async with driver.running():
        await driver.say_with_files("see the log", [("build.log", LOG)])
        first = await offered(driver)
        assert first.labels == ["Send without the file", "Try again", "Drop it"]
        assert await driver.press(first, "Try again") == "🔁 Trying the file again."
        second = await offered(driver, 2)  # still failing: a new card, the first settled
        assert (await driver.now(first.key)).buttons == ()
        stale = await driver.press(first, "Send without the file")
        assert stale == "These buttons are from an earlier try: use the newest ones."
        forged = tampered(second.button("Send without the file").token)
        assert await driver.click(second, forged) == "This button is not valid."
        driver.platform.fetch_cuts = 0  # the platform serves the file again
        await driver.press(second, "Try again")
        echo = await driver.text(lambda t: t.startswith("echo: see the log"))
    saved = driver.work_dir / INBOX / "build.log"
    assert saved.read_bytes() == LOG
    assert f"- build.log (text/plain, {len(LOG)} bytes): {saved}" in echo.text
    assert [p.text.splitlines()[0] for p in driver.launcher.prompts] == ["see the log"]


async def test_only_the_author_chooses_and_drop_it_drops_the_message(tmp_path: Path) -> None:
    driver = failing(tmp_path)
    async with driver.running() as gw:
        await driver.say_with_files("look", [("shot.txt", b"x\n")])
        card = await offered(driver)
        refused = await driver.press(card, "Send without the file", who="carol")
        assert refused.startswith("Only ") and "can choose" in refused
        await driver.say("/status")
        await driver.text(
            lambda t: (
                "Files: 1 message whose files did not come through waits for its author's"
                " choice, on the card under it" in t
            )
        )
        waiting = await gw.store.prompts.get(1)
        assert waiting is not None and waiting.files_choice is FilesChoice.WAITING
        assert await driver.press(card, "Drop it") == "🗑 Dropped: your message will not be sent."
        late = await driver.press(card, "Send without the file")
        dropped = await gw.store.prompts.get(1)
        refusals = await gw.store.audit.entries(event="prompt.files_click_refused")
    assert late == "This message was already dropped."
    assert dropped is not None and dropped.state is PromptState.DROPPED
    assert driver.launcher.prompts == []
    assert len(refusals) == 2  # carol's press and the late one, each audited


async def test_a_press_before_the_card_s_message_is_kept_still_settles_the_card(
    tmp_path: Path,
) -> None:
    """The card is on the platform before the platform says so to the gateway (its answer
    still on the way, its message not yet in the ledger): a press meanwhile is taken, and
    the card is edited once its message is known, before the message goes on."""
    driver = failing(tmp_path)
    sending = driver.platform.send_card
    answer_held = asyncio.Event()
    chosen = asyncio.Event()

    async def slow_answer(conversation: ConversationRef, card: Card) -> MessageRef:
        ref = await sending(conversation, card)  # the card is there: it can be pressed
        if "did not come" in card.title:
            await answer_held.wait()
        return ref

    driver.platform.send_card = slow_answer  # type: ignore[method-assign]
    async with driver.running() as gw:
        choose = gw.store.prompts.choose_for_files

        async def choosing(*args: Any, **kwargs: Any) -> PromptRecord | None:
            found = await choose(*args, **kwargs)
            chosen.set()
            return found

        gw.store.prompts.choose_for_files = choosing  # type: ignore[method-assign]
        await driver.say_with_files("look", [("shot.txt", b"x\n")])
        card = await offered(driver)
        pressed = asyncio.create_task(driver.press(card, "Drop it"))
        await chosen.wait()  # the choice is in the ledger, the card's message is not
        answer_held.set()
        answer = await pressed
        settled = await driver.now(card.key)
    assert answer == "🗑 Dropped: your message will not be sent."
    assert settled.buttons == () and "Alice: dropped" in settled.text


async def test_a_restart_between_the_failure_and_the_press_keeps_the_message(
    tmp_path: Path,
) -> None:
    driver = failing(tmp_path)
    async with driver.running():
        await driver.say_with_files("after the restart", [("build.log", LOG)])
        card = await offered(driver)
    driver.platform.fetch_cuts = 0
    async with driver.running() as gw:
        kept = await gw.store.prompts.get(1)
        assert kept is not None and kept.files_choice is FilesChoice.WAITING
        assert [a.name for a in kept.attachments] == ["build.log"]
        await driver.press(card, "Try again")
        echo = await driver.text(lambda t: t.startswith("echo: after the restart"))
        settled = await driver.now(card.key)  # the card of the gateway before the restart
    assert f"build.log (text/plain, {len(LOG)} bytes)" in echo.text
    assert settled.buttons == () and "Alice: trying the file again." in settled.text
    assert "could not be downloaded from memory after 3 tries" in settled.text


async def test_a_choice_the_platform_could_not_show_is_shown_once_it_is_back(
    tmp_path: Path,
) -> None:
    driver = MemoryDriver(tmp_path)
    async with driver.running():
        await driver.say("hello")
        await driver.text(lambda t: t.startswith("echo: hello"))
        await driver.drop()  # the platform is down: its downloads and its cards fail
        await driver.say_with_files("look at this", [("shot.txt", b"x\n")])
        await driver.platform.wait_for(lambda: driver.platform.refused.count("send_card") >= 1, 20)
        await driver.back()
        card = await offered(driver)
        await driver.press(card, "Try again")
        echo = await driver.text(lambda t: t.startswith("echo: look at this"))
    assert "memory platform is down" in card.text
    assert "shot.txt (text/plain, 2 bytes)" in echo.text


async def test_a_choice_the_platform_could_not_show_before_a_restart_is_shown_after_it(
    tmp_path: Path,
) -> None:
    """The card waits in the ledger, not in the memory of the process that failed to show
    it: the gateway started again shows it, once, and its press edits it."""
    driver = MemoryDriver(tmp_path)
    async with driver.running():
        await driver.say("hello")
        await driver.text(lambda t: t.startswith("echo: hello"))
        await driver.drop()
        await driver.say_with_files("look at this", [("shot.txt", b"x\n")])
        await driver.platform.wait_for(lambda: driver.platform.refused.count("send_card") >= 1, 20)
    await driver.back()
    async with driver.running():
        card = await offered(driver)
        await driver.press(card, "Try again")
        echo = await driver.text(lambda t: t.startswith("echo: look at this"))
        settled = await driver.now(card.key)
    assert "memory platform is down" in card.text
    assert len([s for s in await driver.seen() if s.card and "did not come" in s.text]) == 1
    assert settled.buttons == () and "Alice: trying the file again." in settled.text
    assert "shot.txt (text/plain, 2 bytes)" in echo.text
