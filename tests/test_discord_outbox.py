"""Discord's errors as the shared outbox reads them: discord.py's RateLimited and an
unretried 429 wait and try again, a 5xx or the network is an outage, anything else is
refused with Discord's code; and a lane per channel sends cards before stream edits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
import discord
import pytest

from gateway.platform import PlatformUnreachable, RefusedForGood
from platforms.discord.outbox import DiscordOutbox, DiscordRefused, classify, discord_pacing
from platforms.outbox import MessageGone, Priority, Refused, RetryLater, Unreachable


@dataclass
class Answer:
    """What discord.py's HTTPException reads of an aiohttp response."""

    status: int
    reason: str = "x"
    headers: dict[str, str] = field(default_factory=dict)


def http_error(status: int, code: int = 0, **headers: str) -> discord.HTTPException:
    kind = {403: discord.Forbidden, 404: discord.NotFound}.get(status, discord.HTTPException)
    if status >= 500:
        kind = discord.DiscordServerError
    return kind(Answer(status, headers=headers), {"code": code, "message": "no"})  # type: ignore[arg-type]


def test_rate_limits_wait_and_try_again() -> None:
    assert classify(discord.RateLimited(42.5)) == RetryLater(seconds=42.5)
    assert classify(http_error(429, **{"Retry-After": "3"})) == RetryLater(seconds=3.0)
    assert classify(http_error(429)) == RetryLater(seconds=1.0)


def test_outages_and_refusals() -> None:
    server = classify(http_error(502))
    assert isinstance(server, Unreachable) and isinstance(server.error, PlatformUnreachable)
    network = classify(aiohttp.ClientConnectionError("down"))
    assert isinstance(network, Unreachable)
    refused = classify(http_error(400, 50083))
    assert isinstance(refused, Refused) and isinstance(refused.error, DiscordRefused)
    assert (refused.error.status, refused.error.code) == (400, 50083)
    forbidden = classify(http_error(403, 50013))
    assert isinstance(forbidden, Refused) and "50013" in str(forbidden.error)
    assert classify(ValueError("ours")) is None


async def test_a_rate_limited_call_is_tried_again_and_cards_go_before_edits() -> None:
    done: list[str] = []
    attempts = 0

    async def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise discord.RateLimited(0.0)
        done.append("card")
        return "sent"

    async def edit(n: int) -> None:
        done.append(f"edit {n}")

    gate = asyncio.Event()

    async def first() -> None:
        await gate.wait()
        done.append("first")

    async with asyncio.TaskGroup() as tasks:
        outbox = DiscordOutbox(tasks, discord_pacing(per_channel=50, per_second=50))
        held = tasks.create_task(outbox.run("c1", Priority.STREAM, first))
        await asyncio.sleep(0)
        edits = [
            tasks.create_task(outbox.run("c1", Priority.STREAM, lambda n=n: edit(n), key="m"))
            for n in range(3)
        ]
        card = tasks.create_task(outbox.run("c1", Priority.CARD, flaky))
        await asyncio.sleep(0)
        gate.set()
        assert await card == "sent"
        await held
        results = await asyncio.gather(*edits)
        outbox.close()
    assert done == ["first", "card", "edit 2"]  # the waiting edits replaced by the newest
    assert results == [None, None, None]  # each caller told when the newest went


@pytest.mark.parametrize("status", [400, 403, 404])
def test_a_refusal_names_its_status(status: int) -> None:
    verdict = classify(http_error(status, 10008))
    assert isinstance(verdict, Refused) and f"HTTP {status}" in str(verdict.error)


def test_an_unknown_message_is_gone_for_good_and_other_refusals_are_not() -> None:
    gone = classify(http_error(404, 10008))
    assert isinstance(gone, Refused) and isinstance(gone.error, MessageGone)
    assert isinstance(gone.error, RefusedForGood) and isinstance(gone.error, DiscordRefused)
    other = classify(http_error(404, 10003))  # Unknown Channel: not a message gone
    assert isinstance(other, Refused) and not isinstance(other.error, MessageGone)
