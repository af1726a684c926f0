"""``/model`` end to end (issue 31): the real codex app-server against the fake Responses
server; the model a person picks from the project's ``models`` is the one the next model
request names, and it still is after a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.gateway_harness import ALICE, BOB, ROOM, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

MODELS = 'models = ["gpt-5.5", "gpt-5.4-mini"]'


async def test_the_model_picked_names_the_next_request_and_survives_a_restart(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),), (message("Three."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", project_extra=MODELS)
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        assert fake_model.model_requests()[-1].body["model"] == "gpt-5.5"

        await gw.memory.say(ROOM, ALICE, "/model gpt-9")
        await gw.text_where(lambda text: "“gpt-9” is not one of this project's models" in text)
        await gw.memory.say(ROOM, ALICE, "/model gpt-5.4-mini")
        await gw.text_where(lambda text: text == "Model: gpt-5.4-mini, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "/status")
        await gw.text_where(lambda text: "Model: gpt-5.4-mini (chosen with /model)" in text)

        asked = len(fake_model.model_requests())
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        later = fake_model.model_requests()[asked:]
        assert later[-1].body["model"] == "gpt-5.4-mini"

    async with running_gateway(config) as gw:
        asked = len(fake_model.model_requests())
        await gw.memory.say(ROOM, ALICE, "third")
        await gw.text_where(lambda text: "Three." in text)
        assert fake_model.model_requests()[-1].body["model"] == "gpt-5.4-mini"
        assert len(fake_model.model_requests()) > asked


async def test_without_models_in_config_model_changes_nothing(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        await gw.memory.say(ROOM, ALICE, "/model gpt-5.4-mini")
        await gw.text_where(lambda text: "This project lists no models to choose from" in text)
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        assert {r.body["model"] for r in fake_model.model_requests()} == {"gpt-5.5"}


MODES = 'allowed_modes = ["untrusted", "on-request", "read-only", "workspace-write"]'


async def test_a_tighter_mode_applies_from_the_next_turn_and_a_looser_one_is_not_taken_by_text(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", project_extra=MODES)
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        await gw.memory.say(ROOM, ALICE, "/mode danger-full-access")
        await gw.text_where(lambda text: "is not one of this project's modes" in text)
        await gw.memory.say(ROOM, ALICE, "/mode read-only")
        await gw.text_where(lambda text: text == "Sandbox: read-only, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Codex now runs with sandbox read-only" in text)
        await gw.text_where(lambda text: "Two." in text)
        # what Codex tells the model of its sandbox: the new one, in the turn it applies to
        told = json.dumps(fake_model.model_requests()[-1].input)
        assert "`sandbox_mode` is `read-only`" in told
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "Mode: approval policy on-request, sandbox read-only" in status
        assert "sandbox = read-only" in status  # the policy Codex took


async def test_a_looser_mode_waits_for_an_approver_then_the_next_turn_runs_in_it(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue(
        (message("One."),),
        (message("Not a decision."),),
        (message("Two."),),
        (message("Three."),),
    )
    config = gateway_config(
        codex_bin,
        codex_home,
        tmp_path / "data",
        approvers=("alice",),
        sandbox="read-only",
        project_extra=MODES,
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, BOB, "first")
        await gw.text_where(lambda text: "One." in text)
        await gw.memory.say(ROOM, BOB, "/mode workspace-write")
        await gw.text_where(lambda text: "needs an approver of this project: request" in text)
        shown = await gw.card_where(lambda card: "Loosen the sandbox" in card.title)
        assert shown.card is not None
        assert [a.label for a in shown.card.actions] == ["Allow for this session", "Deny"]
        # asked twice: one request
        await gw.memory.say(ROOM, BOB, "/mode workspace-write")
        await gw.text_where(lambda text: text.startswith("Already asked: request"))

        # typed, it is a message for the agent, never a decision on the card
        await gw.memory.say(ROOM, BOB, "yes, approve it")
        await gw.text_where(lambda text: "Not a decision." in text)
        told = json.dumps(fake_model.model_requests()[-1].input)
        assert "`sandbox_mode` is `read-only`" in told

        refused = await gw.memory.click(ROOM, BOB, shown.card.actions[0].token)
        assert not refused.accepted and refused.text == "You may not decide this request."
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text

        await gw.memory.say(ROOM, ALICE, "/grants")
        grants = await gw.text_where(lambda text: text.startswith("Grants in force"))
        assert "Loosen the sandbox: read-only → workspace-write" in grants

        await gw.memory.say(ROOM, BOB, "second")
        await gw.text_where(lambda text: "Codex now runs with sandbox workspace-write" in text)
        await gw.text_where(lambda text: "Two." in text)
        told = json.dumps(fake_model.model_requests()[-1].input)
        assert "`sandbox_mode` is `workspace-write`" in told
        decided = await gw.card_where(lambda card: "Loosen the sandbox" in card.title)
        assert decided.card is not None
        assert "applied from the agent's next turn" in decided.card.status_line

    async with running_gateway(config) as gw:  # a setting, not the process's: it stays
        await gw.memory.say(ROOM, ALICE, "/grants")
        grants = await gw.text_where(lambda text: text.startswith("Grants in force"))
        assert "a setting of this session, kept by the gateway across restarts" in grants
        await gw.memory.say(ROOM, ALICE, "/revoke 1")
        await gw.text_where(lambda text: "the sandbox is read-only again" in text)
        await gw.memory.say(ROOM, BOB, "third")
        await gw.text_where(lambda text: "Three." in text)
        told = json.dumps(fake_model.model_requests()[-1].input)
        assert "`sandbox_mode` is `read-only`" in told


async def test_a_looser_mode_nobody_accepts_in_time_expires_and_changes_nothing(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),))
    config = gateway_config(
        codex_bin,
        codex_home,
        tmp_path / "data",
        sandbox="read-only",
        project_extra=f"{MODES}\nexpiry = {{ after_seconds = 0.5 }}",
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, BOB, "first")
        await gw.text_where(lambda text: "One." in text)
        await gw.memory.say(ROOM, BOB, "/mode workspace-write")
        expired = await gw.card_where(
            lambda card: "Loosen the sandbox" in card.title and not card.actions
        )
        assert expired.card is not None
        assert "nothing changed: nobody accepted it in time" in expired.card.status_line
        await gw.memory.say(ROOM, BOB, "second")
        await gw.text_where(lambda text: "Two." in text)
        told = json.dumps(fake_model.model_requests()[-1].input)
        assert "`sandbox_mode` is `read-only`" in told
