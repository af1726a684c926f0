"""Reload without restart (issue 37): SIGHUP to ``agent-gateway run`` rereads who may talk
and approve while the agents run on. A card opened before the reload, refused to a person
who was not an approver, is taken from them after the reload made them one; the agent that
asked is the same process (it answers the decision and writes the file). A change that
needs a restart is refused, said in the log, and nothing of it applied."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.servers.fake_telegram import TOKEN, FakeTelegram, Sent
from tests.servers.telegram_people import (
    Person,
    callback_update,
    message_update,
    private_chat,
)

pytestmark = pytest.mark.timeout(120)

ALICE = Person(111, "Alice", "alice")
DEADLINE = 60.0


def config_text(fake: FakeTelegram, tmp_path: Path, approvers: list[str], pace: str) -> str:
    return f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"
argv = {json.dumps([sys.executable, "-m", "gateway.app.demo.agent", "--pace", pace])}

[projects.demo.auth.telegram]
allow_from = ["111", "222"]
approvers = {json.dumps(approvers)}

[platforms.telegram]
token = "{TOKEN}"
base_url = "{fake.base_url}"
poll_timeout_seconds = 1
"""


class Log:
    """The gateway's output, read as it comes; waited on by the line a test expects."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace").rstrip())
                self._changed.notify_all()

    async def line_with(self, words: str) -> str:
        async with asyncio.timeout(DEADLINE), self._changed:
            while True:
                found = next((line for line in self.lines if words in line), None)
                if found is not None:
                    return found
                await self._changed.wait()

    async def close(self) -> None:
        await self._task


async def click(fake: FakeTelegram, card: Sent, label: str) -> dict[str, object]:
    query_id, update = callback_update(fake, ALICE, card, card.button(label)["callback_data"])
    await fake.push(update)
    return await fake.wait_for(
        lambda: next((a for a in fake.answers if a["callback_query_id"] == query_id), None),
        DEADLINE,
    )


async def test_sighup_makes_a_new_approver_and_the_agent_runs_on(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    async with FakeTelegram() as fake:
        config = tmp_path / "gateway.toml"
        config.write_text(config_text(fake, tmp_path, ["222"], "0"))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "run", "--config", str(config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert proc.stdout is not None
        log = Log(proc.stdout)
        try:
            await log.line_with("agent-gateway running")
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "command"))
            card = await fake.wait_for(
                lambda: next((m for m in fake.bot_messages(ALICE.id) if m.buttons), None),
                DEADLINE,
            )
            refused = await click(fake, card, "Allow once")
            assert "not" in str(refused.get("text", "")).lower()  # not an approver (yet)

            config.write_text(config_text(fake, tmp_path, ["111", "222"], "0"))
            proc.send_signal(signal.SIGHUP)
            said = await log.line_with("reloaded")
            assert "projects.demo.auth" in said

            taken = await click(fake, card, "Allow once")
            assert "not" not in str(taken.get("text", "")).lower(), taken
            # the same agent process answers the decision it asked for
            await fake.wait_for(
                lambda: any(
                    "is in my work dir now" in (m.text or "") for m in fake.bot_messages(ALICE.id)
                ),
                DEADLINE,
            )
            assert (tmp_path / "work" / "hello.txt").read_text() == "hello\n"

            # a change that needs a restart: refused, said, nothing applied
            config.write_text(config_text(fake, tmp_path, ["222"], "1"))
            proc.send_signal(signal.SIGHUP)
            refusal = await log.line_with("refused")
            assert "projects.demo.argv changed: that needs a restart" in refusal
            assert proc.returncode is None  # it runs on
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(DEADLINE):
                await proc.wait()
                await log.close()
    assert proc.returncode == 0, "\n".join(log.lines[-30:])
