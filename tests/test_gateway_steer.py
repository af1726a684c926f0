"""Steering a running turn and /compact, through the whole gateway with the real Codex
app-server against the fake model (issue 31).

- ``busy_input = "steer"``: a message typed while the turn runs a command goes into that
  turn: the model's next request of the same turn carries it, no second turn starts, and it
  is never run again as a queued message.
- With a card of the turn waiting, the same message is queued with the "not a decision"
  notice, the card still waits, and the message runs as the next turn after the decision.
- ``/compact`` runs Codex's own compaction and says when it is done.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.session_record import SessionRecord
from gateway.store.records import PromptState
from tests.codex_env import CodexHome
from tests.command_gate import command_gate
from tests.gateway_harness import ALICE, BOB, ROOM, Running, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, ModelRequest, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

STEERED = "also mention bananas"


def _bananas(request: ModelRequest) -> str:
    return "Bananas, as asked." if STEERED in request.user_texts() else "No bananas."


async def _prompts(gw: Running) -> list[tuple[str, PromptState]]:
    """Every prompt the session's queue ever held (a fresh ledger numbers them from 1)."""
    found = []
    for prompt_id in range(1, 10):
        prompt = await gw.gateway.store.prompts.get(prompt_id)
        if prompt is None:
            break
        found.append((prompt.text, prompt.state))
    return found


async def _session(gw: Running) -> SessionRecord:
    session = await gw.gateway.store.sessions.lookup(ROOM)
    assert session is not None
    return session


async def test_a_message_typed_during_a_command_goes_into_the_running_turn(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("cat gate"), message(_bananas)))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", busy_input="steer")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "read the gate")
        async with command_gate(codex_home.workspace / "gate") as gate:  # the command now runs
            await gw.memory.say(ROOM, ALICE, STEERED)
            await gw.text_where(lambda text: "Sent into the running turn" in text)
            os.write(gate, b"open\n")
        await gw.text_where(lambda text: "Bananas, as asked." in text)
        requests = fake_model.model_requests()
        assert {r.turn_id for r in requests} == {requests[0].turn_id}  # one turn, no second
        assert STEERED not in requests[0].user_texts()
        assert STEERED in requests[-1].user_texts()
        assert await _prompts(gw) == [
            ("read the gate", PromptState.DONE),
            (STEERED, PromptState.DONE),  # taken by the turn: never queued again
        ]


async def test_with_a_card_waiting_the_message_is_queued_and_the_card_still_waits(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue(
        (shell("touch hello.txt", escalated=True), message("Done.")),
        (message(lambda r: f"Next turn read: {r.user_texts()[-1]}"),),
    )
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", busy_input="steer")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        await gw.memory.say(ROOM, ALICE, "yes, approve")
        await gw.text_where(lambda text: "not as a decision" in text)
        assert not any("Sent into the running turn" in t for t in gw.memory.texts(ROOM))
        [interaction] = await gw.gateway.store.interactions.list_open((await _session(gw)).id)
        assert interaction.state.value == "pending"  # the card still waits
        assert shown.card is not None
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Next turn read: yes, approve" in text)
        requests = fake_model.model_requests()
        first_turn = [r for r in requests if r.turn_id == requests[0].turn_id]
        assert all("yes, approve" not in r.user_texts() for r in first_turn)
        assert len({r.turn_id for r in requests}) == 2  # it ran as a turn of its own


async def test_compact_runs_codex_compaction_and_says_when_done(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("Hello."),), (message("A summary of it all."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "hi")
        await gw.text_where(lambda text: "Hello." in text)
        await gw.memory.say(ROOM, ALICE, "/compact")
        await gw.text_where(lambda text: text.startswith("🗜 Compacting"))
        done = await gw.text_where(lambda text: "ompact" in text and "Compacting" not in text)
        assert done.startswith("🗜 Compacted"), done


async def test_the_queued_notice_button_sends_the_message_into_the_turn_for_its_author_only(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("cat gate"), message(_bananas)))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data")  # busy_input = "queue"
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "read the gate")
        async with command_gate(codex_home.workspace / "gate") as gate:
            await gw.memory.say(ROOM, ALICE, STEERED)
            shown = await gw.card_where(lambda card: card.title.startswith("✍ Queued"))
            assert shown.card is not None
            [button] = shown.card.actions
            assert button.label == "Send into this turn now"
            forged = button.token[:-1] + ("A" if button.token[-1] != "A" else "B")
            refused = await gw.memory.click(ROOM, ALICE, forged)
            assert (refused.accepted, refused.text) == (False, "This button is not valid.")
            refused = await gw.memory.click(ROOM, BOB, button.token)
            assert (refused.accepted, refused.text) == (
                False,
                "Only Alice can send their message into the turn.",
            )
            ack = await gw.memory.click(ROOM, ALICE, button.token)
            assert ack.accepted, ack.text
            await gw.text_where(lambda text: "Sent into the running turn" in text)
            again = await gw.memory.click(ROOM, ALICE, button.token)  # once
            assert not again.accepted and "no longer waiting" in again.text
            os.write(gate, b"open\n")
        await gw.text_where(lambda text: "Bananas, as asked." in text)
        stale = await gw.memory.click(ROOM, ALICE, button.token)  # after the turn ended
        assert not stale.accepted and "no longer waiting" in stale.text
        requests = fake_model.model_requests()
        assert {r.turn_id for r in requests} == {requests[0].turn_id}
        assert STEERED in requests[-1].user_texts()
