"""Handing a person's message to the gateway, tried again while the gateway fails to take it
(a busy ledger): every platform that receives messages itself does it the same way."""

from __future__ import annotations

import asyncio
import logging

from gateway.platform import InboundMessage, Inbox

__all__ = ["BUSY", "TAKE_ATTEMPTS", "hand_over"]

log = logging.getLogger(__name__)

TAKE_ATTEMPTS = 5  # a message the gateway failed to take is tried again this often
FIRST_PAUSE = 0.25  # seconds before the second attempt; doubled each time, at most 5
# what the person is told when it could not be taken at all
BUSY = "The gateway could not take your message; send it again in a moment."


async def hand_over(inbox: Inbox, message: InboundMessage) -> bool:
    """``message`` to ``inbox``, tried :data:`TAKE_ATTEMPTS` times with a growing back-off;
    whether it was taken (the platform tells the person :data:`BUSY` otherwise)."""
    delay = FIRST_PAUSE
    for attempt in range(1, TAKE_ATTEMPTS + 1):
        try:
            await inbox.on_message(message)
            return True
        except Exception:
            if attempt == TAKE_ATTEMPTS:
                log.exception(
                    "%s message %s not taken", message.conversation.platform, message.message_id
                )
                return False
            await asyncio.sleep(delay)  # a back-off, not a wait for state
            delay = min(delay * 2, 5.0)
    return False
