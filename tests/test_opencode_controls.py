"""/compact and /mode with the real OpenCode 1.18.33 through the whole gateway (issue 31).
/compact is its session summary (``POST /session/{id}/summarize``, with the model the session
last used, or the one chosen with /model), a turn of its own, said when done; the next
prompt's model request starts from the summary, not from the conversation. /mode picks the
OpenCode agent the next prompt runs with (plan tightens at once, build back needs an
approver)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.servers.fake_chat_completions as fc
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.opencode_env import OPENCODE_WAIT, OpenCodeHome
from tests.servers.fake_chat_completions import FakeChatCompletions
from tests.test_gateway_opencode import opencode_config

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]

# what the fake answers a request without tools: here, OpenCode's summary of the session
SUMMARY = "Fake title"


async def test_compact_summarizes_the_opencode_session_and_says_when_done(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.text("Noted.")], [fc.text("After.")])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "remember the codeword pelican")
        await gw.text_where(lambda text: "Noted." in text)
        await gw.memory.say(ROOM, ALICE, "/compact")
        done = await gw.text_where(lambda text: text.startswith(("🗜 Compacted", "⚠ The comp")))
        assert done == "🗜 Compacted: the agent goes on from a summary of this conversation."
        [summarizing] = [r for r in fake_chat.requests if "<conversation>" in json.dumps(r.body)]
        assert summarizing.body["model"] == fc.MODEL  # the model the session used
        assert SUMMARY not in gw.memory.texts(ROOM)  # the summary is the agent's, not a reply
        before = len(fake_chat.model_requests())
        await gw.memory.say(ROOM, ALICE, "and now?")
        await gw.text_where(lambda text: "After." in text)
    after = [m.get("content") for m in fake_chat.model_requests()[before].body["messages"]]
    assert SUMMARY in after and "and now?" in after
    assert "remember the codeword pelican" not in json.dumps(after)  # the summary instead


async def test_mode_runs_the_next_prompt_with_the_opencode_agent_chosen(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.text("One.")], [fc.text("Two.")])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    notes = config.projects["notes"]
    options = notes.agent_options.model_copy(update={"allowed_modes": ("plan", "build")})
    config = config.model_copy(
        update={"projects": {"notes": notes.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        first = json.dumps(fake_chat.model_requests()[-1].body)
        await gw.memory.say(ROOM, ALICE, "/mode")
        listing = await gw.text_where(lambda text: "Choose one of:" in text)
        assert listing.splitlines() == [
            "Mode: permission mode build",  # the agent OpenCode said the prompt ran with
            "Choose one of:",
            "  · /mode plan",
            "  · /mode build (in force)",
        ]
        await gw.memory.say(ROOM, ALICE, "/mode plan")
        await gw.text_where(lambda text: text == "Mode: plan, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        second = json.dumps(fake_chat.model_requests()[-1].body)
        assert "Plan Mode - System Reminder" in second and "Plan Mode" not in first
        await gw.memory.say(ROOM, ALICE, "/mode build")  # looser: an approver's card
        await gw.text_where(lambda text: "needs an approver of this project: request" in text)
