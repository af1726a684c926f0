"""The agent process crashes in the middle of a turn (a real process, killed with SIGKILL:
tests/agents/codex_scripted.py behind the real launcher, in a whole gateway on the memory
platform).

What a person would notice is what is asserted: the turn ends and they are told once, the
card it asked is closed without buttons, the messages they queued behind the cut turn are
held (never sent to the dead process, never run unseen in a new one, never dropped) and the
notice says so, and the next message they type starts the agent again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.domain import InteractionState, TurnStatus
from gateway.store.records import PromptState
from gateway.store.store import Store
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, ROOM, Running, running_gateway

pytestmark = pytest.mark.timeout(60)

AGENT = Path(__file__).parent / "agents" / "codex_scripted.py"
CRASH = "agent process ended unexpectedly"


def scripted_config(tmp_path: Path) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    q = json.dumps
    text = f"""
[gateway]
data_dir = {q(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {q(str(work))}
agent = "codex-app-server"
argv = {q([sys.executable, str(AGENT), "normal"])}
approval_policy = "on-request"
sandbox = "workspace-write"

[projects.demo.agent_options.env]
PATH = {q(os.environ.get("PATH", "/usr/bin:/bin"))}
SCRIPTED_PROMPT_LOG = {q(str(tmp_path / "prompts.jsonl"))}

[projects.demo.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
"""
    return parse_config(text, "test.toml")


def asked(tmp_path: Path) -> list[dict[str, object]]:
    """Every prompt an agent process was given: {"pid", "text"}, in order."""
    log = tmp_path / "prompts.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def crash_notices(gw: Running) -> list[str]:
    return [text for text in gw.memory.texts(ROOM) if CRASH in text]


async def kill_agent(tmp_path: Path) -> None:
    pid = asked(tmp_path)[-1]["pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)


async def test_a_crash_mid_turn_ends_it_once_and_holds_what_was_queued(tmp_path: Path) -> None:
    async with running_gateway(scripted_config(tmp_path)) as gw:
        await gw.memory.say(ROOM, ALICE, "approve this")
        await gw.card_where(lambda card: bool(card.actions))
        await gw.memory.say(ROOM, ALICE, "first queued")
        await gw.memory.say(ROOM, ALICE, "second queued")
        await kill_agent(tmp_path)

        notice = await gw.text_where(lambda text: CRASH in text)
        assert "(killed by a signal)" in notice, notice
        assert "Its answer to your last message is cut short." in notice, notice
        assert "2 earlier messages are held: /resume runs them, /clear drops them" in notice
        orphaned = await gw.card_where(lambda card: "before anyone answered" in card.status_line)
        assert orphaned.card is not None and not orphaned.card.actions
        assert [a["text"] for a in asked(tmp_path)] == ["approve this"]  # nothing to the dead

        # the session takes the next message: a new process, the held ones still held
        await gw.memory.say(ROOM, ALICE, "hello again")
        await gw.text_where(lambda text: text == "echo: hello again")
        await gw.memory.say(ROOM, ALICE, "/resume")
        await gw.text_where(lambda text: text == "echo: second queued")
        assert len(crash_notices(gw)) == 1  # told once
        texts = gw.memory.texts(ROOM)
        echoes = [t for t in texts if t.startswith("echo: ")]
        assert echoes == ["echo: hello again", "echo: first queued", "echo: second queued"]
    prompts = asked(tmp_path)
    assert [p["text"] for p in prompts] == [
        "approve this",
        "hello again",
        "first queued",
        "second queued",
    ]
    assert prompts[0]["pid"] != prompts[1]["pid"] == prompts[3]["pid"]
    async with Store.open(tmp_path / "data") as store:
        [interaction] = await store.interactions.list_recent(limit=10)
        assert interaction.state is InteractionState.ORPHANED
        turns = [await store.turns.get(n) for n in range(1, 5)]
        prompt_states = [await store.prompts.get(n) for n in range(1, 5)]
    assert [t.status if t else None for t in turns] == [TurnStatus.FAILED] + [
        TurnStatus.COMPLETED
    ] * 3
    # by the order they were typed: the cut one, the two held, the one typed after the crash
    assert [p.state if p else None for p in prompt_states] == [PromptState.INTERRUPTED] + [
        PromptState.DONE
    ] * 3


async def test_a_crash_with_nothing_queued_holds_nothing_and_keeps_what_was_said(
    tmp_path: Path,
) -> None:
    async with running_gateway(scripted_config(tmp_path)) as gw:
        await gw.memory.say(ROOM, ALICE, "hang here")
        await gw.text_where(lambda text: text == "working on it")
        await kill_agent(tmp_path)
        notice = await gw.text_where(lambda text: CRASH in text)
        assert "held" not in notice, notice
        await gw.memory.say(ROOM, ALICE, "still there?")
        await gw.text_where(lambda text: text == "echo: still there?")
        assert len(crash_notices(gw)) == 1
        assert "working on it" in gw.memory.texts(ROOM)  # what it said before stays shown
    assert [a["text"] for a in asked(tmp_path)] == ["hang here", "still there?"]
