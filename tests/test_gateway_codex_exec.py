"""The codex exec backend through the whole gateway: one process per turn, the thread resumed
for the next turn, and a policy refusal said plainly (never an approval card)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.gateway_harness import ALICE, ROOM, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]


def _git_repo(path: Path) -> None:
    # codex exec refuses to run outside a git repository
    subprocess.run(["git", "init", "-q", str(path)], check=True)


async def test_exec_turns_resume_the_thread_and_refusals_are_plain(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    _git_repo(codex_home.workspace)
    outside = codex_home.outside / "escaped.txt"
    fake_model.enqueue(
        (message("First answer."),),
        (shell(f"touch {outside}", escalated=True), message("Tried.")),
    )
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", agent="codex-exec")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: "First answer." in text)
        await gw.memory.say(ROOM, ALICE, "now write outside")
        refusal = await gw.text_where(lambda text: "app-server" in text or "sandbox" in text)
        await gw.text_where(lambda text: "Tried." in text)
        assert not outside.exists()
        assert gw.cards() == []  # never a fake approval card
        assert "denied" in refusal.lower() or "refused" in refusal.lower()
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None and session.native_session_id
    second_turn = fake_model.model_requests()[-1]
    assert "hello" in " ".join(second_turn.user_texts())  # the thread was resumed


async def test_stop_mid_turn_ends_the_turns_process(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    _git_repo(codex_home.workspace)
    fake_model.enqueue((shell("sleep 60"), message("Slept.")))
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", agent="codex-exec")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "take your time")
        await gw.text_where(lambda text: "sleep 60" in text)  # the command is running
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        runner = gw.gateway.existing_runner(session.id)
        assert runner is not None and runner.agent is not None
        pid = runner.agent.pid
        assert pid is not None
        await gw.memory.say(ROOM, ALICE, "/stop")
        await gw.text_where(lambda text: text == "⏹ Stopped by Alice.")
        assert _gone(pid)  # the turn's process group was ended
    assert not any("Slept." in text for text in gw.memory.texts(ROOM))


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
