"""``/switch`` after a gateway restart continues the earlier Codex thread natively (issue
31): the real Codex app-server against the fake Responses server, the whole gateway in the
test, stopped and started again on the same data dir between the two sessions and the
switch. What is asserted is what the model receives: the next request of the session taken
up again carries its earlier messages, and none of the session left. A session whose thread
Codex no longer has is said to be gone, and the next message starts a new one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gateway.config.model import SessionScope
from tests.codex_env import CodexHome
from tests.gateway_flows import session_of, with_scope
from tests.gateway_harness import ALICE, ROOM, Running, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


async def reply_to(gw: Running, text: str) -> str:
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, text)
    [reply] = await gw.memory.wait_for(lambda: gw.memory.texts(ROOM)[before:] or None)
    return reply


async def exchange(gw: Running, fake: FakeResponses, said: str, answer: str) -> None:
    fake.enqueue([message(answer)])
    await gw.memory.say(ROOM, ALICE, said)
    await gw.text_where(lambda text: answer in text)


async def test_switch_after_a_restart_continues_the_earlier_codex_thread(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_scope(
        gateway_config(codex_bin, codex_home, tmp_path / "data"), SessionScope.CHANNEL
    )
    async with running_gateway(config) as gw:
        await exchange(gw, fake_model, "remember the codeword pelican", "Noted: pelican.")
        assert (await reply_to(gw, "/name birds")).startswith("This session is now named")
        birds = await session_of(gw)
        assert birds.native_session_id is not None

        assert await reply_to(gw, "/new") == "A new session starts with your next message."
        await exchange(gw, fake_model, "an unrelated start", "Fresh here.")
    async with running_gateway(config) as gw:  # the gateway restarted
        assert (await reply_to(gw, "/switch birds")).splitlines() == [
            "↪ Switched to session birds (project demo, codex-app-server): your next message"
            " continues it.",
            "Last exchange:",
            "Alice: remember the codeword pelican",
            "Agent: Noted: pelican.",
        ]
        await exchange(gw, fake_model, "what was the codeword?", "It was pelican.")
        assert (await session_of(gw)).id == birds.id
    # Codex keeps the name of its thread (0.171: a line of $CODEX_HOME/session_index.jsonl):
    # /name waited for its answer, so the "/new" right after ended an agent that had it; and
    # it was not given again at the start after the restart (thread/resume says the name)
    index_file = codex_home.home / "session_index.jsonl"
    index = index_file.read_text(encoding="utf-8").splitlines()
    assert [(json.loads(line)["id"], json.loads(line)["thread_name"]) for line in index] == [
        (birds.native_session_id, "birds")
    ]
    last = fake_model.model_requests()[-1].user_texts()
    assert any("remember the codeword pelican" in text for text in last)
    assert any("what was the codeword?" in text for text in last)
    assert not any("an unrelated start" in text for text in last)


async def test_a_session_whose_thread_codex_no_longer_has_is_gone_and_a_new_one_starts(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_scope(
        gateway_config(codex_bin, codex_home, tmp_path / "data"), SessionScope.CHANNEL
    )
    async with running_gateway(config) as gw:
        await exchange(gw, fake_model, "remember the codeword pelican", "Noted: pelican.")
        gone = await session_of(gw)
    shutil.rmtree(codex_home.home / "sessions")  # Codex's threads, cleaned away
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "what was the codeword?")
        notice = await gw.text_where(lambda text: text.startswith("⚠ This session is gone"))
        assert notice == (
            "⚠ This session is gone: codex-app-server no longer has its conversation (no rollout"
            f" found for thread id {gone.native_session_id}). Your message was not sent: send"
            " it again to start a new session."
        )
        await exchange(gw, fake_model, "let us start again", "Fresh start.")
        fresh = await session_of(gw)
        assert fresh.id != gone.id and fresh.native_session_id != gone.native_session_id
    last = fake_model.model_requests()[-1].user_texts()
    assert any("let us start again" in text for text in last)
    assert not any("pelican" in text or "codeword" in text for text in last)


async def test_a_name_codex_was_not_given_is_given_at_its_next_start_once(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data")
    async with running_gateway(config) as gw:
        await exchange(gw, fake_model, "remember the codeword heron", "Noted: heron.")
        thread = (await session_of(gw)).native_session_id
    async with running_gateway(config) as gw:  # no agent runs until the next message
        assert (await reply_to(gw, "/name herons")).startswith("This session is now named")
        await exchange(gw, fake_model, "and now?", "Still heron.")
        await exchange(gw, fake_model, "and again?", "Heron.")
    async with running_gateway(config) as gw:  # Codex has the name: not given again
        await exchange(gw, fake_model, "once more?", "Heron, still.")
    index = (codex_home.home / "session_index.jsonl").read_text(encoding="utf-8").splitlines()
    assert [(json.loads(line)["id"], json.loads(line)["thread_name"]) for line in index] == [
        (thread, "herons")
    ]
