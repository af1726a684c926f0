"""The ack deadline rule of the platform contract (DESIGN.md, Platforms).

A platform must answer a click within its deadline (``PlatformLimits.ack_deadline_seconds``:
Slack and Discord 3 s). It waits for the core's Ack until that deadline minus a margin
(:func:`ack_wait_seconds`: the margin is what its own answer needs to reach its servers);
past that it answers neutrally (:data:`RECEIVED`; Slack and Discord may defer instead) and the
card edit carries the outcome. The core's work is never cancelled by the deadline: it runs
on, in a task the platform owns and awaits.

:func:`answer_in_time` is the rule for a platform that answers the click itself and can wait
for the outcome afterwards (Telegram's update handler, the console's request handler).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from gateway.platform import Ack, PlatformLimits

__all__ = [
    "ACK_MARGIN_FRACTION",
    "ACK_MARGIN_MAX_SECONDS",
    "RECEIVED",
    "ack_wait_seconds",
    "answer_in_time",
]

ACK_MARGIN_FRACTION = 0.2
ACK_MARGIN_MAX_SECONDS = 1.0
RECEIVED = Ack(text="Received: the card will show the outcome.", accepted=True)
"""The neutral answer past the deadline: not a refusal, not yet an outcome."""


def ack_wait_seconds(limits: PlatformLimits) -> float:
    """How long a platform waits for the core's Ack: its deadline less a fifth of it, at
    most a second (Slack's 3 s: 2.4 s; Telegram's 10 s: 9 s)."""
    deadline = limits.ack_deadline_seconds
    return deadline - min(ACK_MARGIN_MAX_SECONDS, deadline * ACK_MARGIN_FRACTION)


async def answer_in_time(
    work: Coroutine[Any, Any, Ack],
    limits: PlatformLimits,
    answer: Callable[[Ack], Awaitable[object]],
) -> Ack:
    """Run the core's ``work`` and ``answer`` the person once: with its Ack if it comes
    within :func:`ack_wait_seconds`, else with :data:`RECEIVED`. Returns the core's Ack
    once it comes (the caller may follow a late refusal up: the card does not change).

    An error of the core before the deadline is raised with nothing answered (a platform
    that is given the click again answers it then); after it, it is raised too, the neutral
    answer given. The deadline never cancels ``work``; cancelling this call does (the
    platform stopping), and waits for it to end.
    """
    task = asyncio.ensure_future(work)  # owned here: awaited below, or cancelled with us
    try:
        done, _ = await asyncio.wait({task}, timeout=ack_wait_seconds(limits))
        if done:
            ack = task.result()
            await answer(ack)
            return ack
        await answer(RECEIVED)
        return await task
    except BaseException:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        raise
