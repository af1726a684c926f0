"""Approval round trips, as a person makes them, and what they cost.

A person asks the bench agent for N approvals in one conversation, then clicks "allow" on
each card as it appears. Every round trip is timed at four points on one clock
(CLOCK_MONOTONIC, shared by every process of the machine):

    sent   the agent wrote the request line (stamped inside the request itself)
    card   the card was handed to the platform (stamped at the platform seam)
    click  the person clicked (just before the platform hands the click to the gateway)
    read   the agent read the response line from its stdin (stamped by the agent)

"request -> card" is card - sent and "click -> response" is read - click: both include the
ledger's durable writes (the interaction recorded before its card is shown; the decision
committed before it is written), and both include one pipe crossing.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench.figures import Figure, Latency
from bench.gateway_setup import BenchGateway, allow_token, stamped
from gateway.domain import ConversationRef

__all__ = ["Trip", "answers_by_request", "approve_all", "round_trip_figures"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Trip:
    tag: str
    k: int
    sent_ns: int
    card_ns: int
    click_ns: int
    ack_ns: int
    accepted: bool


async def approve_all(
    gw: BenchGateway,
    conversation: ConversationRef,
    n: int,
    tag: str,
    *,
    think: Callable[[], float] | None = None,
) -> list[Trip]:
    """Ask for ``n`` approvals in ``conversation`` and allow each; wait for the turn's end.
    ``think``: the seconds the person takes to read each card before the click (none: at
    once, a closed loop as fast as the gateway goes)."""
    platform = gw.platform
    await platform.say(conversation, platform.person, f"approve {n} {tag}")
    trips = []
    for _ in range(n):
        seen = await platform.next_card(conversation)
        stamp = stamped(seen)
        token = allow_token(seen)
        if think is not None:
            await asyncio.sleep(think())  # a person reading the card: the bench's model of one
        click_ns = time.monotonic_ns()
        ack = await platform.click(conversation, platform.person, token)
        ack_ns = time.monotonic_ns()
        trips.append(
            Trip(
                tag=stamp.tag,
                k=stamp.k,
                sent_ns=stamp.sent_ns,
                card_ns=seen.at_ns,
                click_ns=click_ns,
                ack_ns=ack_ns,
                accepted=ack.accepted,
            )
        )
    done = f"done {tag} {n}"
    await platform.text_where(conversation, lambda text: done in text)
    return trips


def answers_by_request(stamps: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], list[int]]:
    """(tag, k) -> the times the agent read an answer to that request (one, if exactly once)."""
    found: defaultdict[tuple[str, int], list[int]] = defaultdict(list)
    for record in stamps:
        if record.get("ev") == "answer":
            found[(str(record["tag"]), int(record["k"]))].append(int(record["ns"]))
    return dict(found)


def round_trip_figures(
    benchmark: str,
    trips: list[Trip],
    stamps: Iterable[Mapping[str, Any]],
    deliveries: Mapping[str, int],
    *,
    target_ms: float | None,
) -> list[Figure]:
    """Latency figures of the round trips, and whether every decision arrived exactly once."""
    answers = answers_by_request(stamps)
    to_card = Latency.of_ns([t.card_ns - t.sent_ns for t in trips])
    to_agent = Latency.of_ns(
        [answers[(t.tag, t.k)][0] - t.click_ns for t in trips if (t.tag, t.k) in answers]
    )
    to_ack = Latency.of_ns([t.ack_ns - t.click_ns for t in trips])
    once = sum(1 for t in trips if len(answers.get((t.tag, t.k), ())) == 1)
    twice = sum(1 for t in trips if len(answers.get((t.tag, t.k), ())) > 1)
    accepted = sum(1 for t in trips if t.accepted)
    ledger_once = sum(1 for count in deliveries.values() if count == 1)
    target = f"p99 < {target_ms:g} ms" if target_ms is not None else ""

    def met(latency: Latency) -> bool | None:
        return latency.p99 < target_ms if target_ms is not None else None

    return [
        Figure(
            benchmark=benchmark,
            name="request line -> card at the platform",
            value=to_card.text(),
            target=target,
            met=met(to_card),
        ),
        Figure(
            benchmark=benchmark,
            name="click -> response line read by the agent",
            value=to_agent.text(),
            target=target,
            met=met(to_agent) if to_agent.count == len(trips) else False,
        ),
        Figure(
            benchmark=benchmark,
            name="click -> acknowledged (delivery recorded)",
            value=to_ack.text(),
        ),
        Figure(
            benchmark=benchmark,
            name="decisions delivered exactly once",
            value=(
                f"{once}/{len(trips)} at the agent ({twice} twice), {accepted} clicks accepted,"
                f" ledger: {ledger_once}/{len(deliveries)} with one ok delivery"
            ),
            target="all",
            met=once == len(trips) == accepted and twice == 0 and ledger_once == len(deliveries),
        ),
    ]
