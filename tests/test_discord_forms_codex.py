"""Codex's questions answered in Discord modals, end to end with the real Codex app-server:
a radio group, a twelve-option select, "other" text and a secret over two pages; a missing
answer refused and the page reopened pre-filled; a stranger gets no modal; a forged button
gets the gateway's answer; the secret reaches the agent and nothing a person, log or ledger
keeps."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says, card_in, discord_gateway_config, on_discord, seen
from tests.gateway_flows import told
from tests.servers.fake_discord import ALICE, BOB, BOT, FakeDiscord, Interaction
from tests.servers.fake_responses import FakeResponses, message, request_user_input

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

QUESTIONS_FEATURE = ("default_mode_request_user_input",)
SECRET = "hunter2-correct-horse"
CITIES = [f"City {n}" for n in range(12)]


def question(qid: str, header: str, text: str, *labels: str, **extra: object) -> dict[str, Any]:
    options = [{"label": label, "description": f"use {label}"} for label in labels]
    return {"id": qid, "header": header, "question": text, "options": options, **extra}


QUESTIONS = [
    question("color", "Color", "Which color should I use?", "Red", "Blue"),
    question("city", "City", "Where should it deploy?", *CITIES),
    question("token", "Deploy token", "Paste the deploy token", "I have none", isSecret=True),
    question("size", "Size", "How big?", "Small", "Large"),
]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def inputs(opened: Interaction) -> list[tuple[int, str]]:
    """The modal's inputs as (component type, custom_id)."""
    assert opened.modal is not None
    return [
        (top["component"]["type"], top["component"]["custom_id"])
        for top in opened.modal["components"]
        if "component" in top
    ]


def defaults(opened: Interaction, custom_id: str) -> list[str]:
    assert opened.modal is not None
    for top in opened.modal["components"]:
        child = top.get("component") or {}
        if child.get("custom_id") == custom_id:
            return [o["value"] for o in child.get("options") or [] if o.get("default")]
    raise AssertionError(f"no {custom_id} in the modal")


async def test_a_form_over_two_modal_pages_with_a_secret(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # the model's reply does not repeat what it was told
    fake_model.enqueue((request_user_input(QUESTIONS), message("Deployed.")))
    data = tmp_path / "data"
    config = discord_gateway_config(fake, codex_home, codex_bin, data, features=QUESTIONS_FEATURE)
    async with on_discord(config):
        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> deploy it", mentions=(BOT,))
        thread = await fake.wait_for(lambda: fake.channels.get(said.id))
        card = await card_in(fake, said.id)
        assert card.labels == ["Answer…"]

        stranger = await fake.click(BOB, card, "Answer…")
        await fake.wait_for(lambda: stranger.callback)
        assert stranger.modal is None  # no form for someone who may not answer
        assert stranger.original is not None and stranger.original.ephemeral
        assert "may not" in stranger.original.content

        forged = await fake.forge(
            ALICE,
            thread,
            {"custom_id": "agw:a1:forged00:0:1:AAAAAAAAAAAA", "component_type": 2},
            message=card,
        )
        await fake.wait_for(lambda: forged.followups)
        assert [(m.content, m.ephemeral) for m in forged.followups] == [
            ("This button is not valid.", True)
        ]
        assert card.labels == ["Answer…"]  # nothing decided

        first = await fake.click(ALICE, card, "Answer…")
        await fake.wait_for(lambda: first.modal)
        assert inputs(first) == [
            (21, "q0"),  # radio: Red, Blue
            (4, "q0.other"),
            (3, "q1"),  # twelve cities: a select
            (4, "q1.other"),
            (4, "q2"),  # the secret: text only
        ]
        # the color is left out: refused, and the page reopens with what was given
        refused = await fake.submit(ALICE, first, {"q1": ["7"], "q2": SECRET})
        await fake.wait_for(lambda: refused.original)
        assert refused.original is not None and refused.original.ephemeral
        assert "“Color” needs an answer." in refused.original.content
        again = await fake.click(ALICE, refused.original, "Answer again")
        await fake.wait_for(lambda: again.modal)
        assert defaults(again, "q1") == ["7"]
        assert SECRET not in str(again.modal)  # a secret is never shown again

        taken = await fake.submit(ALICE, again, {"q0": "1", "q1": ["7"], "q2": SECRET})
        await fake.wait_for(lambda: taken.original)
        assert taken.original is not None and "Page 1 of 2" in taken.original.content
        second = await fake.click(ALICE, taken.original, "Next")
        await fake.wait_for(lambda: second.modal)
        assert inputs(second) == [(21, "q3"), (4, "q3.other")]
        done = await fake.submit(ALICE, second, {"q3.other": "medium, please"})
        await fake.wait_for(lambda: done.followups)
        assert done.followups[0].content.startswith("Answer sent to the agent")
        await fake.wait_for(lambda: not card.labels and "Answered" in seen(card))
        await bot_says(fake, said.id, "Deployed.")

    model_was_told = told(fake_model)
    assert '"color":{"answers":["Blue"]}' in model_was_told
    assert '"city":{"answers":["City 7"]}' in model_was_told
    assert SECRET in model_was_told  # the agent has it
    assert '"size":{"answers":["user_note: medium, please"]}' in model_was_told
    shown = [m.content for m in fake.sent] + [seen(m) for m in fake.sent if m.embeds]
    shown += [v.content for m in fake.sent for v in m.edits]
    assert not any(SECRET in text for text in shown)
    assert SECRET not in caplog.text
    for stored in data.rglob("*"):
        if stored.is_file():
            assert SECRET.encode() not in stored.read_bytes(), stored
