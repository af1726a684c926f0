"""``/model``'s buttons where no real agent is needed (issue 31), with the scripted agent on
the memory platform: in a channel where each person has a session of their own, a person's
click reaches only the session their own ``/model`` would (another's list changes nothing);
a platform that draws no card that is no request's (the web console) gets the typed list; a
session's model comes back with it on /switch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.config.model import Config, ExpiryPolicy, SessionScope
from gateway.platform import PlatformLimits
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from tests.gateway_harness import ALICE, BOB, ROOM, Running
from tests.scripted_gateway import REQUESTS, scripted_config
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(60)


def with_models(config: Config, *, scope: SessionScope = SessionScope.CHANNEL) -> Config:
    slow = config.projects["slow"]
    options = slow.agent_options.model_copy(
        update={"model": "gpt-5.5", "models": ("gpt-5.5", "gpt-5.4-mini")}
    )
    slow = slow.model_copy(update={"agent_options": options, "scope": scope})
    return config.model_copy(update={"projects": {**config.projects, "slow": slow}})


@asynccontextmanager
async def gateway(config: Config, limits: PlatformLimits | None = None) -> AsyncIterator[Running]:
    memory = MemoryPlatform(limits=limits)
    launcher = ScriptedLauncher(REQUESTS)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gw:
        yield Running(gateway=gw, memory=memory)


async def test_a_click_reaches_only_the_session_the_clicker_s_own_command_would(
    tmp_path: Path,
) -> None:
    config = with_models(scripted_config(tmp_path, fast=ExpiryPolicy()), scope=SessionScope.USER)
    async with gateway(config) as gw:
        for person in (ALICE, BOB):
            await gw.memory.say(ROOM, person, f"hello from {person.user_id}")
            await gw.text_where(lambda text, p=person: text == f"echo: hello from {p.user_id}")
        await gw.memory.say(ROOM, ALICE, "/model")
        shown = await gw.card_where(lambda card: card.title.startswith("Model: "))
        assert shown.card is not None
        pick = next(a for a in shown.card.actions if a.label == "gpt-5.4-mini")
        refused = await gw.memory.click(ROOM, BOB, pick.token)
        assert not refused.accepted
        assert refused.text.startswith("This list belongs to a session no longer open here")
        taken = await gw.memory.click(ROOM, ALICE, pick.token)
        assert taken.accepted and taken.text == "Model: gpt-5.4-mini, from the next turn."
        await gw.memory.say(ROOM, BOB, "/status")
        bobs = await gw.text_where(lambda text: text.startswith("Session ") and "Model:" in text)
        assert "Model: gpt-5.5 (the project's)" in bobs


async def test_where_no_loose_card_is_drawn_the_list_is_typed(tmp_path: Path) -> None:
    config = with_models(scripted_config(tmp_path, fast=ExpiryPolicy()))
    async with gateway(config, PlatformLimits(loose_cards=False)) as gw:
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: text == "echo: hello")
        await gw.memory.say(ROOM, ALICE, "/model")
        listing = await gw.text_where(lambda text: "Choose one of:" in text)
        assert listing.splitlines() == [
            "Model: gpt-5.5 (the project's)",
            "Choose one of:",
            "  · /model gpt-5.5",
            "  · /model gpt-5.4-mini",
        ]
        assert gw.memory.cards(ROOM) == []


async def test_a_sessions_model_is_its_own_and_comes_back_with_it_on_switch(
    tmp_path: Path,
) -> None:
    config = with_models(scripted_config(tmp_path, fast=ExpiryPolicy()))
    async with gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: text == "echo: hello")
        await gw.memory.say(ROOM, ALICE, "/model gpt-5.4-mini")
        await gw.text_where(lambda text: text == "Model: gpt-5.4-mini, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "/new")
        await gw.text_where(lambda text: text.startswith("A new session starts"))
        await gw.memory.say(ROOM, ALICE, "again")
        await gw.text_where(lambda text: text == "echo: again")
        await gw.memory.say(ROOM, ALICE, "/status")
        await gw.text_where(lambda text: "Model: gpt-5.5 (the project's)" in text)
        await gw.memory.say(ROOM, ALICE, "/switch 2")
        await gw.text_where(lambda text: text.startswith("↪ Switched to session"))
        await gw.memory.say(ROOM, ALICE, "/status")
        await gw.text_where(lambda text: "Model: gpt-5.4-mini (chosen with /model)" in text)


async def test_a_typed_model_moves_the_mark_on_the_card_shown(tmp_path: Path) -> None:
    config = with_models(scripted_config(tmp_path, fast=ExpiryPolicy()))
    async with gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: text == "echo: hello")
        await gw.memory.say(ROOM, ALICE, "/model")
        shown = await gw.card_where(lambda card: card.title.startswith("Model: "))
        assert shown.card is not None
        assert [a.label for a in shown.card.actions] == ["✓ gpt-5.5", "gpt-5.4-mini"]
        await gw.memory.say(ROOM, ALICE, "/model GPT-5.4-mini")
        await gw.text_where(lambda text: text == "Model: gpt-5.4-mini, from the next turn.")
        redrawn = await gw.card_where(
            lambda card: [a.label for a in card.actions] == ["gpt-5.5", "✓ gpt-5.4-mini"]
        )
        assert redrawn.ref == shown.ref  # the same message, edited
