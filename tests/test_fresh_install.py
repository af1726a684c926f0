"""A newcomer's first hour from the built wheel (issue 30): a fresh venv with only the
``[telegram]`` extra, ``init``, a ``check`` that the fake Telegram's 401 fails, then ``run``
answering a message. The venv holds what the extra brings and nothing else (no Slack, Discord
or PostgreSQL library), so a module that imports one of them where it need not fails here."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import Person, message_update, private_chat
from tests.wheel_build import build_wheel, fresh_venv, run

pytestmark = pytest.mark.timeout(180)

ALICE = Person(111, "Alice", "alice")


async def cli(binary: Path, *args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        cwd=cwd,
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


def codex_shim(bin_dir: Path, python: Path) -> None:
    """``codex`` on the newcomer's PATH: the demo agent of the installed wheel, which speaks
    Codex's app-server protocol, answering ``--version`` as the pinned codex does."""
    shim = bin_dir / "codex"
    shim.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "codex-cli 0.171.0"; exit 0; fi\n'
        f'exec {python} -m gateway.app.demo.agent --pace 0 "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)


async def test_a_fresh_venv_with_only_telegram_inits_checks_and_answers(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    python = fresh_venv(venv, {"telegram"})
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-index", f"{wheel}[telegram]"],
        cwd=tmp_path,
    )  # fmt: skip
    for absent in ("slack_sdk", "slack_bolt", "discord", "psycopg"):
        probe = f"import importlib.util as u; assert u.find_spec({absent!r}) is None"
        run([str(python), "-c", probe], cwd=tmp_path)
    gateway = venv / "bin" / "agent-gateway"

    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    codex_shim(home / "bin", python)
    project = home / "src" / "web"
    project.mkdir(parents=True)
    env = {
        "HOME": str(home),
        "PATH": f"{home / 'bin'}{os.pathsep}/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    code, out = await cli(
        gateway, "init", "--platform", "telegram", "--agent", "codex",
        "--work-dir", str(project), "--user-id", str(ALICE.id), env=env, cwd=home,
    )  # fmt: skip
    assert code == 0, out
    config = home / ".config" / "agent-gateway" / "config.toml"
    assert out.startswith(f"Wrote {config}. Next:")

    async with FakeTelegram() as fake:
        with config.open("a") as file:  # the fake in place of api.telegram.org
            file.write(f'base_url = "{fake.base_url}"\n')
        code, out = await cli(
            gateway, "check", "--config", str(config),
            env={**env, "TELEGRAM_BOT_TOKEN": "1:x"}, cwd=home,
        )  # fmt: skip
        assert code == 1 and "Telegram refused the bot token" in out, out
        assert "1:x" not in out  # the token is not echoed
        good = {**env, "TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-test"}
        code, out = await cli(gateway, "check", "--config", str(config), env=good, cwd=home)
        assert code == 0 and "config OK" in out, out

        proc = await asyncio.create_subprocess_exec(
            str(gateway), "run", "--config", str(config),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=good, cwd=home,
        )  # fmt: skip
        try:
            chat = private_chat(ALICE)
            await fake.push(message_update(fake, chat, ALICE, "hi"))
            menu = await fake.wait_for(
                lambda: next(
                    (m for m in fake.bot_messages(ALICE.id) if "demo agent" in (m.text or "")),
                    None,
                ),
                deadline=90,
            )
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                log, _ = await proc.communicate()
    assert menu.text and menu.text.startswith("Hi! I am the agent-gateway demo agent."), (
        log.decode()[-3000:]
    )
    assert proc.returncode == 0, log.decode()[-3000:]
    assert TOKEN not in log.decode()
