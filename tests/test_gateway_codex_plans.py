"""Codex plans through the whole gateway (issue 16): ``/plan TEXT`` runs a plan-mode turn, the
proposed plan is a card with Implement and Keep planning; Implement is a default-mode turn
saying "Implement the plan." (as Codex's own client does), Keep planning a plan-mode turn with
the person's message; a typed "ok" is a message, never a decision; a restart orphans the
card; a project can plan by default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.launch import ConfiguredLauncher
from gateway.cards import Card, TextBlock
from gateway.config.model import CollaborationMode
from gateway.domain import Answer
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from tests.codex_env import CodexHome
from tests.gateway_harness import ALICE, ROOM, Running, gateway_config, running_gateway
from tests.servers.fake_responses import COLOR, FakeResponses, message, request_user_input, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

PLAN = "# Plan\n\n1. Create `hello.txt`\n2. Say **done**\n"
PROPOSED = message(f"Here is my plan.\n\n<proposed_plan>\n{PLAN}</proposed_plan>\n")
PLAN_MODE = "# Plan Mode"
DEFAULT_MODE = "# Collaboration Mode: Default"


def plan_cards(gw: Running) -> list[Card]:
    return [
        shown.card
        for shown in gw.cards()
        if shown.card is not None and shown.card.title == "Implement the plan?"
    ]


async def waiting_plan(gw: Running, count: int = 1) -> Card:
    """The ``count``-th plan card, once it waits for a decision."""

    def find() -> Card | None:
        cards = plan_cards(gw)
        return cards[count - 1] if len(cards) >= count and cards[count - 1].actions else None

    card = await gw.memory.wait_for(find)
    assert any(
        isinstance(block, TextBlock) and block.markdown and block.text == PLAN
        for block in card.blocks
    )
    assert [action.label for action in card.actions] == ["Implement", "Keep planning"]
    return card


async def closed_plan(gw: Running, count: int = 1) -> Card:
    def find() -> Card | None:
        cards = plan_cards(gw)
        return cards[count - 1] if len(cards) >= count and not cards[count - 1].actions else None

    return await gw.memory.wait_for(find)


async def test_plan_then_implement_runs_a_default_mode_turn(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue([PROPOSED], [shell("touch hello.txt"), message("Done.")])
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "/plan create hello.txt")
        card = await waiting_plan(gw)
        assert fake_model.model_requests()[-1].mode_told().startswith(PLAN_MODE)
        assert not (codex_home.workspace / "hello.txt").exists()
        ack = await gw.memory.click(ROOM, ALICE, card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: text.endswith("Done."))
        assert "Queued as the next turn" in ack.text or "as the next turn" in ack.text, ack
        closed = await closed_plan(gw)
        assert closed.status_line.startswith("Approved") and "Alice" in closed.status_line
        # queued until its turn starts, then sent: never "sent" while it only waits
        assert closed.status_line.endswith("· sent to the agent as the next turn")
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        # the fake model reports 10 in and 5 out a call; Codex knows the model's window
        assert re.search(
            r"Tokens: [\d,]+ in, [\d,]+ out · context 15 of [\d,]+ \(0% used\)", status
        )
    assert (codex_home.workspace / "hello.txt").exists()
    implementing = fake_model.model_requests()[-1]
    assert implementing.mode_told() == DEFAULT_MODE
    assert implementing.user_texts()[-1] == "Implement the plan."


async def test_keep_planning_sends_the_message_in_plan_mode(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue([PROPOSED], [PROPOSED])
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "/plan create hello.txt")
        card = await waiting_plan(gw)
        interaction_id = card.actions[1].token.split(":")[1]
        await gw.memory.say(ROOM, ALICE, f"/deny {interaction_id} use two files instead")
        await waiting_plan(gw, 2)  # the agent planned again
        first = await closed_plan(gw)
        assert first.status_line.startswith('Sent back ("Keep planning") by Alice')
    again = fake_model.model_requests()[-1]
    assert again.mode_told().startswith(PLAN_MODE)
    assert again.user_texts()[-1] == "use two files instead"
    assert not (codex_home.workspace / "hello.txt").exists()


async def test_typed_ok_while_a_plan_card_waits_is_a_message_not_an_approval(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue([PROPOSED], [PROPOSED])
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "/plan create hello.txt")
        card = await waiting_plan(gw)
        await gw.memory.say(ROOM, ALICE, "ok")
        await gw.text_where(lambda text: "not as a decision: the plan is not implemented" in text)
        await waiting_plan(gw, 2)
        first = await closed_plan(gw)
        assert "a message to the agent came first" in first.status_line
        late = await gw.memory.click(ROOM, ALICE, card.actions[0].token)
        assert not late.accepted
    told = fake_model.model_requests()[-1]
    assert told.user_texts()[-1] == "ok"
    assert told.mode_told().startswith(PLAN_MODE)  # the thread still plans
    assert not (codex_home.workspace / "hello.txt").exists()


async def test_a_plan_card_orphaned_by_a_restart_loses_its_buttons(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue([PROPOSED], [message("Back again.")])
    config = gateway_config(codex_bin, codex_home, tmp_path / "d")
    memory = MemoryPlatform()
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        await gw.memory.say(ROOM, ALICE, "/plan create hello.txt")
        card = await waiting_plan(gw)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        await closed_plan(gw)
        late = await gw.memory.click(ROOM, ALICE, card.actions[0].token)
        assert not late.accepted
        await gw.memory.say(ROOM, ALICE, "hello again")
        await gw.text_where(lambda text: text == "Back again.")
    assert not (codex_home.workspace / "hello.txt").exists()
    assert all(r.user_texts()[-1] != "Implement the plan." for r in fake_model.model_requests())


async def test_a_project_that_plans_by_default_plans_a_plain_message(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue([PROPOSED])
    config = gateway_config(codex_bin, codex_home, tmp_path / "d")
    config.projects["demo"] = config.projects["demo"].model_copy(
        update={
            "agent_options": config.projects["demo"].agent_options.model_copy(
                update={"collaboration_mode": CollaborationMode.PLAN}
            )
        }
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "create hello.txt")
        await waiting_plan(gw)
    assert fake_model.model_requests()[-1].mode_told().startswith(PLAN_MODE)


async def test_a_question_asked_while_planning_is_answered_through_its_form(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue([request_user_input([COLOR]), PROPOSED])
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "/plan create hello.txt")
        shown = await gw.card_where(lambda card: card.form is not None)
        assert shown.card is not None and shown.card.form is not None
        form = shown.card.form
        [color] = [q.question for q in form.questions]
        [blue] = [option.id for option in color.options if option.label == "Blue"]
        ack = await gw.memory.submit(
            ROOM, ALICE, form.submit_token, {color.id: Answer(option_ids=(blue,))}
        )
        assert ack.accepted, ack.text
        await waiting_plan(gw)
    assert "Blue" in (fake_model.model_requests()[-1].tool_output() or "")
    assert fake_model.model_requests()[-1].mode_told().startswith(PLAN_MODE)
