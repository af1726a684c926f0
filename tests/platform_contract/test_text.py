"""Text: a reply is sent, edited as it grows into its final text, and a reply longer than the
platform takes arrives whole, in order, split where no code fence breaks."""

from __future__ import annotations

import pytest

from tests.platform_contract.contract import STREAMED, Case, Driver, long_reply, marked_reply

pytestmark = pytest.mark.timeout(60)


async def test_a_reply_is_sent_then_edited_into_its_final_text(driver: Driver) -> None:
    driver.require(Case.TEXT)
    async with driver.running():
        await driver.say("hello there")
        await driver.text(lambda text: text == "echo: hello there")
        await driver.say("stream")
        first = await driver.text(lambda text: text == STREAMED[0])
        driver.launcher.go_on.set()
        whole = "".join(STREAMED)
        final = await driver.text(lambda text: text == whole)
        shown = [s.text for s in await driver.seen()]
    assert final.key == first.key and final.edits >= 1  # the same message, edited
    assert shown == ["echo: hello there", whole]  # each once, in order


async def test_a_reply_longer_than_a_message_arrives_whole_and_fences_hold(
    driver: Driver,
) -> None:
    driver.require(Case.TEXT)
    whole = long_reply(driver.limits)
    assert len(whole) > driver.limits.text_max_chars
    driver.launcher.go_on.set()
    async with driver.running():
        await driver.say("long reply")
        await driver.text(lambda text: text.endswith("That is the whole listing."))
        pieces = [s.text for s in await driver.seen()]
    assert len(pieces) >= 2
    assert all(len(piece) <= driver.limits.text_max_chars for piece in pieces)
    assert all(piece.count("```") % 2 == 0 for piece in pieces), "a fence is broken"
    # all of it, in order, once (each message ends at a line break, which it does not show)
    assert code_lines("\n".join(pieces)) == code_lines(whole)


async def test_a_reply_longer_once_escaped_is_split_as_the_platform_counts_and_never_cut(
    driver: Driver,
) -> None:
    """Discord counts the escapes its Markdown adds: a part that fits as written may not
    once sent. Every row arrives, once, in order, and no message is longer than the
    platform takes."""
    driver.require(Case.TEXT)
    whole = marked_reply(driver.limits)
    driver.launcher.go_on.set()
    async with driver.running():
        await driver.say("marked reply")
        await driver.text(lambda text: text.endswith("That is all."))
        pieces = [s.text for s in await driver.seen()]
    assert all(len(piece) <= driver.limits.text_max_chars for piece in pieces)
    rows = [line.replace("\\", "") for piece in pieces for line in piece.splitlines()]
    assert [r for r in rows if r.startswith("row ")] == whole.splitlines()[:-1]


async def test_a_streamed_reply_growing_past_the_limit_is_split_once_whole(
    driver: Driver,
) -> None:
    driver.require(Case.TEXT)
    whole = long_reply(driver.limits)
    async with driver.running():
        await driver.say("long stream")
        first = await driver.text(lambda text: "print('line 00000" in text)
        driver.launcher.go_on.set()
        await driver.text(lambda text: text.endswith("That is the whole listing."))
        pieces = await driver.seen()
    assert pieces[0].key == first.key  # the message shown first grew, then the rest followed
    texts = [s.text for s in pieces]
    assert all(len(text) <= driver.limits.text_max_chars for text in texts)
    assert all(text.count("```") % 2 == 0 for text in texts), "a fence is broken"
    assert code_lines("\n".join(texts)) == code_lines(whole)


def code_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and "```" not in line]


async def test_a_reply_whose_message_was_deleted_goes_on_in_a_new_one(driver: Driver) -> None:
    """The platform refuses to edit a deleted message for good (MessageGone): the rest of
    the turn's text is posted anew, and ends exact."""
    driver.require(Case.DELETED)
    async with driver.running():
        await driver.say("stream")
        first = await driver.text(lambda text: text == STREAMED[0])
        await driver.delete(first.key)
        driver.launcher.go_on.set()
        whole = "".join(STREAMED)
        final = await driver.text(lambda text: text == whole)
        shown = [s.text for s in await driver.seen()]
    assert final.key != first.key  # a new message
    assert shown == [whole]  # the deleted one is gone; the text is whole, once
