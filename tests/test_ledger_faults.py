"""A ledger that fails in the middle of a turn with an approval (issue 28): for every store
call of the turn, in turn, the call fails for good, or commits and loses its answer. The
session never waits forever: either it goes on (the turn ends with the agent's answer) or it
ends honestly (its conversation is told, its card ends without buttons saying why, and the
next message starts the agent again). Nothing is written twice to the agent; nothing is
decided twice.

The faults come through the ledger's fault seam (gateway/store/ledger_faults.py), set on the
gateway's store as a test holds it; the agent is the in-process scripted one, the ledger a
real SQLite file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.config.model import ExpiryPolicy
from gateway.domain import InteractionState
from gateway.errors import StoreError
from gateway.sessions.runner import LEDGER_FAILED
from gateway.store.ledger_faults import Fault, LedgerFaults
from gateway.store.store import Store
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import REQUESTS, scripted_config, scripted_gateway
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(600)

ANSWERED = "Thanks: 0 answer(s) received."


@dataclass(frozen=True)
class Outcome:
    calls: int  # store calls the turn made, from the message to its end
    went_on: bool  # the turn ended with the agent's answer
    fired: list[tuple[str, Fault]]


def _told(gw: Running) -> str | None:
    """What says how the turn ended: the agent's answer, or the ledger's failure (the
    ledger's "not answering" is no end: the message waits in the queue, and runs)."""
    for text in gw.memory.texts(ROOM):
        if text == ANSWERED or text.startswith(LEDGER_FAILED):
            return text
    return None


async def _turn_with_an_approval(tmp_path: Path, faults: LedgerFaults) -> Outcome:
    tmp_path.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a test's own folder)
    config = scripted_config(tmp_path, fast=ExpiryPolicy())
    launcher = ScriptedLauncher(REQUESTS)
    async with scripted_gateway(config, launcher) as (gw, _):
        store = gw.gateway.store
        store.writer.faults = faults
        try:
            await gw.memory.say(ROOM, ALICE, "approve")
        except StoreError:  # the platform is told the message was not taken: sent again
            await gw.memory.say(ROOM, ALICE, "approve")

        def card_or_end() -> object:
            live = [c for c in gw.cards(ROOM) if c.card is not None and c.card.actions]
            return live[0] if live else _told(gw)

        try:
            return await _drive(gw, store, faults, launcher, card_or_end)
        except TimeoutError as exc:
            seen = [(c.card.title, c.card.status_line) for c in gw.cards(ROOM) if c.card]
            raise AssertionError(
                f"parked: faults {faults.fired}, texts {gw.memory.texts(ROOM)}, cards {seen}"
            ) from exc


async def _drive(
    gw: Running,
    store: Store,
    faults: LedgerFaults,
    launcher: ScriptedLauncher,
    card_or_end: Callable[[], object],
) -> Outcome:
    shown = await gw.wait_for(card_or_end)
    for _ in range(3):  # a click the ledger refused is made again, while the card asks
        live = [c.card for c in gw.cards(ROOM) if c.card is not None and c.card.actions]
        if isinstance(shown, str) or not live:
            break
        [approve] = [a.token for a in live[0].actions if a.label == "Approve"]
        if (await gw.memory.click(ROOM, ALICE, approve)).accepted:
            break
    told = await gw.wait_for(lambda: _told(gw))
    store.writer.faults = None
    assert len(launcher.received) <= 1  # never written twice
    if told != ANSWERED:
        # ended honestly: the card, if one was shown, ends without buttons and says why; a
        # card answered before the failure says so, one still open then says why not
        def settled() -> bool:
            lines = [c.card.status_line for c in gw.cards(ROOM) if c.card is not None]
            return all("ledger failed" in line or line.endswith(" · done") for line in lines)

        await gw.wait_for(lambda: all(not c.card.actions for c in gw.cards(ROOM) if c.card))
        await gw.wait_for(settled)
        # and the next message starts the agent again
        await gw.memory.say(ROOM, ALICE, "hello again")
        await gw.text_where(lambda text: text == "echo: hello again")
    decided = [e for e in await store.audit.entries() if e.event == "interaction.decided"]
    assert len(decided) <= 1  # never decided twice
    for interaction in await store.interactions.list_recent(limit=10):
        if interaction.state is InteractionState.RESOLVED:
            assert len(launcher.received) == 1  # answered: written once
    return Outcome(calls=faults.calls, went_on=told == ANSWERED, fired=list(faults.fired))


async def test_a_turn_with_an_approval_without_faults_goes_on(tmp_path: Path) -> None:
    census = await _turn_with_an_approval(tmp_path, LedgerFaults(rules=()))
    assert census.went_on and census.fired == []
    assert census.calls > 10


@pytest.mark.parametrize("fault", [Fault.FAIL, Fault.CUT])
async def test_every_store_call_of_a_turn_failing_never_parks_the_session(
    tmp_path: Path, fault: Fault
) -> None:
    census = await _turn_with_an_approval(tmp_path / "census", LedgerFaults(rules=()))
    outcomes: dict[int, Outcome] = {}
    for n in range(1, census.calls + 1):
        # FAIL twice in a row: the safe retry of the first meets the second (for good)
        text = f"*#{n}=fail,*#{n + 1}=fail" if fault is Fault.FAIL else f"*#{n}=cut"
        outcomes[n] = await _turn_with_an_approval(tmp_path / str(n), LedgerFaults.parse(text))
        assert outcomes[n].fired, f"call {n}: no fault fired"
    ended = [n for n, outcome in outcomes.items() if not outcome.went_on]
    went_on = [n for n, outcome in outcomes.items() if outcome.went_on]
    assert went_on  # some failures are ridden out
    if fault is Fault.FAIL:
        assert ended  # and some end the session, honestly
