"""When a Slack envelope is acked: once its effect is committed to the ledger (issue 19).

Slack's Socket Mode gives each envelope to one of the app's connections (up to 10: one per
host) and, for an Events API envelope not acked within 3 s, gives it again, to any of them.
So an envelope is acked only once what it asked for is in the ledger: a host that dies
before that lets Slack give it to another host, and the ledger takes it once (a message by
its ts, a decision by its compare-and-set).

- A message event is acked when its work on the conversation's lane ended, however long that
  takes (:func:`acked_when_done`): past 3 s Slack gives it again, possibly to another host,
  whose duplicate is taken once by the ledger; an ack that comes late only counts as late.
- A click, a modal's submission or a slash command is acked when the core answered (the
  decision committed, or refused), or at ``wait`` seconds (``ack_wait_seconds``, 2.4 s)
  with the work going on (:func:`acked_when_committed`): Slack never gives these again and
  shows the person a failure past 3 s, and a trigger dies then. A host that dies after such
  an ack and before its commit leaves the card undecided, with its buttons: the person
  clicks again.
- Work that was refused (a full lane, the platform stopping), failed or was cancelled before
  its commit is not acked (:func:`not_taken`): an event comes again, an interaction shows
  the person Slack's failure.
- A message event reaching a host that is fenced (its host lease or the ledger lost) is not
  acked either, unless it is Slack's last attempt (:func:`last_attempt`): Slack gives it to
  a connection again, a healthy host's or this one's once it started over; the last attempt
  is answered as before (the person told to try again), so that a message is never lost
  without a word.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from slack_bolt.response import BoltResponse

from platforms.slack.receive import Done

__all__ = [
    "LAST_RETRY",
    "Commit",
    "acked_when_committed",
    "acked_when_done",
    "last_attempt",
    "not_taken",
    "retry_attempt",
]

# Slack gives an Events API envelope that was not acked (within 3 s) or was refused again, 3
# times: at once, after about a minute, after about five (docs.slack.dev, Events API,
# "Retries"); Socket Mode's envelope says which in ``retry_attempt`` (1-3, 0 or none the
# first), HTTP in the ``X-Slack-Retry-Num`` header. After the third Slack gives up.
LAST_RETRY = 3
RETRY_HEADER = "x-slack-retry-num"  # bolt 1.30 puts Socket Mode's retry_attempt here too


def retry_attempt(headers: Mapping[str, Sequence[str]]) -> int:
    """Which of Slack's attempts an event is (0: the first), from bolt's request headers."""
    values = headers.get(RETRY_HEADER) or ()
    try:
        return max(0, int(values[0])) if values else 0
    except ValueError:
        return 0


def last_attempt(headers: Mapping[str, Sequence[str]]) -> bool:
    """Whether Slack gives up on the event if this attempt is not acked."""
    return retry_attempt(headers) >= LAST_RETRY


def not_taken() -> BoltResponse:
    """The listener's answer that is no ack: Slack gives an event again."""
    return BoltResponse(status=503, body="not taken")


class Commit:
    """The moment in a piece of work after which its envelope may be acked."""

    def __init__(self) -> None:
        self.future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def done(self) -> None:
        if not self.future.done():
            self.future.set_result(True)


async def acked_when_done(done: Done | None) -> BoltResponse | None:
    """An event's answer once its work ended: None (bolt acks) if it ended, else
    :func:`not_taken`. ``done`` None: the work was refused."""
    if done is None:
        return not_taken()
    ended = await asyncio.shield(done)  # this envelope's wait ends; the work is the lane's
    return None if ended else not_taken()


async def acked_when_committed(
    ack: Any, committed: asyncio.Future[bool], done: Done | None, wait: float
) -> BoltResponse | None:
    """An interaction's answer: ``ack()`` once ``committed`` (or at ``wait`` seconds with
    the work still going), :func:`not_taken` if the work (``done``) ended without it."""
    if done is None:
        return not_taken()
    await asyncio.wait({committed, done}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
    if committed.done():
        taken = committed.result()
    else:
        taken = not done.done()  # still working at the deadline: acked, it goes on
    if not taken:
        return not_taken()
    await ack()
    return None
