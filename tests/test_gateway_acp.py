"""An ACP agent through the whole gateway: the scripted ACP agent (tests/agents/acp_scripted.py)
started by the real launcher, its permission requests as cards with the agent's own options in
order, a click answered with the chosen optionId, refusals, /stop, expiry and /status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gateway.config.model import Config
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, ROOM, Running, running_gateway
from tests.scripted_gateway import with_expiry

pytestmark = pytest.mark.timeout(60)

AGENT = Path(__file__).parent / "agents" / "acp_scripted.py"


def acp_config(tmp_path: Path) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "acp"
argv = {json.dumps([sys.executable, str(AGENT)])}

[projects.demo.auth.memory]
allow_from = ["alice", "bob"]
approvers = ["alice", "bob"]

[platforms.memory]
"""
    return parse_config(text, "test.toml")


async def asked_card(gw: Running, prompt: str) -> tuple[list[str], dict[str, str]]:
    before = len(gw.cards())
    await gw.memory.say(ROOM, ALICE, prompt)

    def fresh() -> object:
        cards = [c for c in gw.cards()[before:] if c.card is not None and c.card.actions]
        return cards[-1] if cards else None

    shown = await gw.memory.wait_for(fresh)
    assert shown.card is not None  # type: ignore[attr-defined]
    actions = shown.card.actions  # type: ignore[attr-defined]
    return [a.label for a in actions], {a.label: a.token for a in actions}


async def status(gw: Running) -> str:
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, "/status")
    return await gw.memory.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith("Session")), None)
    )


async def test_the_agents_four_options_in_order_and_the_chosen_id_goes_back(
    tmp_path: Path,
) -> None:
    async with running_gateway(acp_config(tmp_path)) as gw:
        labels, tokens = await asked_card(gw, "ask")
        # the gateway says the reach a label leaves out
        assert labels == ["Yes, once", "Yes, always", "No", "Never (always)"]
        ack = await gw.memory.click(ROOM, ALICE, tokens["Yes, always"])
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "chose 7" in text)
        said = await status(gw)
        assert "Grants:" in said and "none" not in said.split("Grants:")[1].splitlines()[0]


async def test_grants_say_the_gateway_does_not_know_where_another_acp_agent_keeps_always(
    tmp_path: Path,
) -> None:
    """An ACP agent that is not codex-acp keeps its "always" where it likes: /grants and
    /revoke say the gateway does not know where, and never send the person to another agent's
    settings."""
    async with running_gateway(acp_config(tmp_path)) as gw:
        _, tokens = await asked_card(gw, "ask")
        await gw.memory.click(ROOM, ALICE, tokens["Yes, always"])
        await gw.text_where(lambda text: "chose 7" in text)
        before = len(gw.memory.texts(ROOM))
        await gw.memory.say(ROOM, ALICE, "/grants")
        listed = await gw.memory.wait_for(
            lambda: next((t for t in gw.memory.texts(ROOM)[before:] if "Grants in" in t), None)
        )
        assert "the gateway does not know where this agent keeps it" in listed, listed
        assert "Claude" not in listed and "settings.json" not in listed
        await gw.memory.say(ROOM, ALICE, "/revoke 1")
        revoked = await gw.memory.wait_for(
            lambda: next((t for t in gw.memory.texts(ROOM)[before:] if "Grant 1" in t), None)
        )
        assert "does not know where this agent keeps it" in revoked, revoked
        assert "Claude" not in revoked


async def test_a_numeric_request_id_and_a_refusal_with_an_odd_option_id(tmp_path: Path) -> None:
    async with running_gateway(acp_config(tmp_path)) as gw:
        _, tokens = await asked_card(gw, "ask-num")
        ack = await gw.memory.click(ROOM, ALICE, tokens["No"])
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "chose no/2" in text)
        assert "Grants: none" in await status(gw)


async def test_a_file_edit_shows_its_path(tmp_path: Path) -> None:
    async with running_gateway(acp_config(tmp_path)) as gw:
        _, tokens = await asked_card(gw, "ask-edit")
        [card] = [c.card for c in gw.cards() if c.card is not None and c.card.actions]
        assert "notes.md" in repr(card)
        await gw.memory.click(ROOM, ALICE, tokens["Yes, once"])
        await gw.text_where(lambda text: "chose ok:1" in text)


async def test_fs_and_elicitation_are_refused_and_said_and_a_bad_line_is_survived(
    tmp_path: Path,
) -> None:
    async with running_gateway(acp_config(tmp_path)) as gw:
        await gw.memory.say(ROOM, ALICE, "refuse")
        await gw.text_where(lambda text: "refused with -32601 -32601" in text)
        texts = gw.memory.texts(ROOM)
        assert any("fs/read_text_file" in t and "refused" in t for t in texts)
        assert any("elicitation/create" in t and "refused" in t for t in texts)
        assert any("malformed message" in t for t in texts)
        await gw.memory.say(ROOM, ALICE, "still there?")
        await gw.text_where(lambda text: "echo: still there?" in text)


async def test_stop_while_a_permission_is_pending_cancels_it(tmp_path: Path) -> None:
    async with running_gateway(acp_config(tmp_path)) as gw:
        await asked_card(gw, "ask")
        await gw.memory.say(ROOM, ALICE, "/stop")
        await gw.memory.wait_for(lambda: "ended interrupted" in gw.memory.turn_signals(ROOM))
        await gw.card_where(lambda card: card.status_line.startswith("Stopped by Alice"))
        await gw.memory.say(ROOM, ALICE, "next")
        await gw.text_where(lambda text: "echo: next" in text)


async def test_expiry_picks_the_agents_reject_once(tmp_path: Path) -> None:
    async with running_gateway(with_expiry(acp_config(tmp_path), 0.5)) as gw:
        await asked_card(gw, "ask")
        await gw.text_where(lambda text: "chose no/2" in text)
