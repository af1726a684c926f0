"""A scheduled run with the real Codex app-server (issue 35): the run's prompt reaches the model
as typed, the command it wants to run is a card that waits for a click, a click by someone who
may talk but not approve is refused, and an approver's click runs it. Nothing scheduled is a
decision."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.clock import FileClock
from gateway.domain import Actor, InteractionState
from tests.codex_env import CodexHome
from tests.gateway_flows import session_of
from tests.gateway_harness import ALICE, BOB, ROOM, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

CAROL = Actor(platform="memory", user_id="carol", display="Carol")


async def test_a_scheduled_runs_approval_waits_for_an_approvers_click(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    clock = FileClock(tmp_path / "clock")
    clock.set(datetime(2026, 6, 1, 6, 0, tzinfo=UTC))
    config = gateway_config(
        codex_bin, codex_home, tmp_path / "data", project_extra='time_zone = "Europe/Berlin"'
    )
    async with running_gateway(config, schedule_clock=clock) as gw:
        before = len(gw.memory.texts(ROOM))
        await gw.memory.say(ROOM, ALICE, "/every 0 9 * * 1-5 please create hello.txt")
        made = await gw.wait_for(lambda: gw.memory.texts(ROOM)[before:] or None)
        assert made[0].startswith("⏰ Schedule S1 made: every 0 9 * * 1-5 (Europe/Berlin)")
        clock.set(datetime(2026, 6, 1, 7, 0, tzinfo=UTC))  # Monday 09:00 CEST
        assert gw.gateway.scheduler is not None
        await gw.gateway.scheduler.tick()
        await gw.text_where(lambda said: said == "⏰ scheduled: please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        assert "please create hello.txt" in fake_model.model_requests()[0].user_texts()
        allow = shown.card.actions[0]
        assert allow.label == "Allow once"
        refused = await gw.memory.click(ROOM, CAROL, allow.token)
        assert not refused.accepted
        assert refused.text.startswith("You may not decide this request")
        session = await session_of(gw)
        [waiting] = await gw.gateway.store.interactions.list_open(session.id)
        assert waiting.state is InteractionState.PENDING
        assert not (codex_home.workspace / "hello.txt").exists()
        assert session.initiator == ALICE
        ack = await gw.memory.click(ROOM, BOB, allow.token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done." in text)
        assert (codex_home.workspace / "hello.txt").exists()
        [turn] = await gw.gateway.store.timeline.of_session(session.id)
        assert turn.prompt is not None
        assert turn.prompt.author.display == "schedule S1 by Alice"
