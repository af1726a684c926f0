"""The ack deadline rule on every platform: a click the core has not answered within the
platform's deadline (less a margin) is answered neutrally, and the core's work goes on to the
end: the decision reaches the agent once and the card ends "sent to the agent".

The decision is made slow by the scripted agent (tests/scripted_launcher.py), whose write is
held (``writes.hold()``) until the person has had the neutral answer. Each platform is given
a short deadline through its own ``limits``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gateway.config.model import ExpiryPolicy
from gateway.deadline import RECEIVED, ack_wait_seconds
from gateway.domain import Decision
from gateway.platform import Ack, PlatformLimits
from gateway.sessions.engine import Gateway
from platforms.console.platform import CONSOLE_LIMITS
from platforms.memory.platform import MemoryPlatform
from platforms.telegram.platform import TELEGRAM_LIMITS
from tests.console_harness import client, console_gateway, logged_in, origin, plain_config
from tests.gateway_flows import WHEN, settles
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import REQUESTS, open_card, scripted_config
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE as ALICE_ON_TELEGRAM
from tests.telegram_harness import on_telegram, telegram_config

pytestmark = pytest.mark.timeout(60)

DEADLINE_SECONDS = 0.5
APPROVE = Decision(action_id="accept")
DELIVERED = rf'Approved \("Approve"\) by Alice at {WHEN} · sent to the agent · done'
DELIVERED_FROM_CONSOLE = DELIVERED.replace("by Alice", "by alice")


def test_a_platform_waits_for_the_core_until_its_deadline_less_a_margin() -> None:
    assert ack_wait_seconds(PlatformLimits(ack_deadline_seconds=3.0)) == pytest.approx(2.4)
    assert ack_wait_seconds(PlatformLimits(ack_deadline_seconds=10.0)) == pytest.approx(9.0)
    assert ack_wait_seconds(PlatformLimits(ack_deadline_seconds=0.5)) == pytest.approx(0.4)


async def test_memory_a_click_past_the_deadline_is_received_and_the_card_ends_delivered(
    tmp_path: Path,
) -> None:
    memory = MemoryPlatform(limits=PlatformLimits(ack_deadline_seconds=DEADLINE_SECONDS))
    launcher = ScriptedLauncher(REQUESTS)
    config = scripted_config(tmp_path, fast=ExpiryPolicy())
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        asked = await open_card(gw, ROOM, "approve")
        launcher.writes.hold()
        ack = await memory.click(ROOM, ALICE, asked.token("Approve"))
        assert ack == RECEIVED
        assert launcher.writes.waiting.is_set()  # committed, its write still held
        launcher.writes.release()
        await settles(gw, asked, DELIVERED)
        assert launcher.received == [APPROVE]
    # the core's own answer came after the neutral one, and nothing cut it short
    assert memory.late == [Ack(text="Approved. Sent to the agent.", accepted=True)]


async def test_telegram_a_click_past_the_deadline_is_received_and_the_card_ends_delivered(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    config = telegram_config(fake_telegram, tmp_path / "data", work_dir=tmp_path / "work")
    launcher = ScriptedLauncher(REQUESTS)
    limits = replace(TELEGRAM_LIMITS, ack_deadline_seconds=DEADLINE_SECONDS)
    async with on_telegram(config, fake_telegram, launcher, limits=limits) as tg:
        await tg.say(ALICE_ON_TELEGRAM, "approve")
        card = await tg.card(ALICE_ON_TELEGRAM.id)
        launcher.writes.hold()
        answer = await tg.press(ALICE_ON_TELEGRAM, card, "Approve")
        assert answer["text"] == RECEIVED.text
        assert answer.get("show_alert") in (None, False, "false")
        assert launcher.writes.waiting.is_set()
        launcher.writes.release()
        await tg.fake.wait_for(lambda: card.markup is None and "sent to the agent" in card.text)
        assert launcher.received == [APPROVE]


async def test_console_a_click_past_the_deadline_is_received_and_the_card_ends_delivered(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    config = plain_config(tmp_path / "data", tmp_path / "work")
    launcher = ScriptedLauncher(REQUESTS)
    limits = replace(CONSOLE_LIMITS, ack_deadline_seconds=DEADLINE_SECONDS)
    async with console_gateway(config, launcher, limits=limits) as running:
        gw = Running(gateway=running.gateway, memory=running.memory)
        asked = await open_card(gw, ROOM, "approve")
        approve = running.gateway.broker.render(asked.interaction, running.console).actions[0]
        assert approve.label == "Approve"
        launcher.writes.hold()
        async with client() as http:
            csrf = await logged_in(http, running)
            url = f"{running.console.url}i/{asked.interaction.id}/act"
            data = {"token": approve.token, "csrf": csrf}
            async with http.post(url, data=data, headers=origin(running)) as response:
                reply = await response.json()
        assert reply == {"accepted": True, "text": RECEIVED.text, "location": None}
        assert launcher.writes.waiting.is_set()
        launcher.writes.release()
        await settles(gw, asked, DELIVERED_FROM_CONSOLE)
        assert launcher.received == [APPROVE]
