"""platforms/hand_over.py: a message the gateway fails to take is tried again, then given up
with the log saying so; the platform tells the person (Slack, Discord)."""

from __future__ import annotations

import logging

import pytest

import platforms.hand_over as hand_over_module
from gateway.domain import Actor, ConversationRef
from gateway.platform import InboundMessage
from platforms.hand_over import TAKE_ATTEMPTS, hand_over

MESSAGE = InboundMessage(
    conversation=ConversationRef(platform="slack", space="T1", channel="C1"),
    actor=Actor(platform="slack", user_id="U1", display="alice"),
    text="hello",
    message_id="1.0001",
)


class Busy:
    """An inbox that fails ``failures`` times before it takes a message."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.tried = 0
        self.taken: list[InboundMessage] = []

    async def on_message(self, message: InboundMessage) -> None:
        self.tried += 1
        if self.tried <= self.failures:
            raise RuntimeError("database is locked")
        self.taken.append(message)


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hand_over_module, "FIRST_PAUSE", 0.0)


async def test_a_message_refused_for_a_moment_is_taken_once() -> None:
    inbox = Busy(failures=2)
    assert await hand_over(inbox, MESSAGE)  # type: ignore[arg-type]
    assert inbox.taken == [MESSAGE] and inbox.tried == 3


async def test_a_message_never_taken_is_given_up_and_said_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inbox = Busy(failures=TAKE_ATTEMPTS)
    with caplog.at_level(logging.ERROR, logger="platforms.hand_over"):
        assert not await hand_over(inbox, MESSAGE)  # type: ignore[arg-type]
    assert inbox.tried == TAKE_ATTEMPTS and inbox.taken == []
    [record] = caplog.records
    assert record.getMessage() == "slack message 1.0001 not taken"
