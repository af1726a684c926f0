"""When a turn's end is worth a new message (platforms/turn_end.py): only when it completed
with its last words shown by an edit, which notifies no phone; once, whatever the edits."""

from __future__ import annotations

from gateway.domain import TurnStatus
from platforms.turn_end import DONE, TurnEnds

CHAT, TOPIC = ("chat", None), ("chat", 7)
COMPLETED, FAILED, INTERRUPTED = TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.INTERRUPTED


def test_a_stream_edited_to_its_end_gets_one_line_however_many_edits() -> None:
    ends = TurnEnds()
    ends.started(CHAT)
    ends.sent(CHAT, 1)
    for _ in range(50):
        ends.edited(1)
    assert ends.ended(CHAT, COMPLETED) == DONE
    assert ends.ended(CHAT, COMPLETED) is None  # asked again: that turn is over


def test_a_new_message_last_needs_nothing_more() -> None:
    ends = TurnEnds()
    ends.started(CHAT)
    ends.sent(CHAT, 1)
    ends.edited(1)
    ends.sent(CHAT, 2)  # a card, or the text after it, sent whole
    assert ends.ended(CHAT, COMPLETED) is None


def test_a_turn_that_did_not_complete_is_left_to_the_notice_that_says_why() -> None:
    ends = TurnEnds()
    for status in (FAILED, INTERRUPTED):
        ends.started(CHAT)
        ends.sent(CHAT, 1)
        ends.edited(1)
        assert ends.ended(CHAT, status) is None


def test_only_edits_of_the_turns_own_messages_in_its_own_conversation_count() -> None:
    ends = TurnEnds()
    ends.sent(CHAT, 1)  # before any turn: not followed
    ends.started(CHAT)
    ends.started(TOPIC)
    ends.sent(TOPIC, 2)
    ends.edited(1)  # a message of an earlier turn (a card redrawn, say)
    ends.edited(2)  # the other topic's turn
    assert ends.ended(CHAT, COMPLETED) is None  # nothing shown here
    assert ends.ended(TOPIC, COMPLETED) == DONE


def test_a_turn_that_showed_nothing_gets_nothing() -> None:
    ends = TurnEnds()
    ends.started(CHAT)
    assert ends.ended(CHAT, COMPLETED) is None
    assert ends.ended(TOPIC, COMPLETED) is None  # never started here
