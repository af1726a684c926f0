"""``agent-gateway check`` asks Telegram what it thinks of the token (issue 30): a token of
the right shape that Telegram refuses is caught before ``run``; and a configured platform
whose SDK is not installed names the extra that installs it. Each in its own process,
against the fake Telegram; the SDK is never imported by ``check``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.test_platform_registry import ROOT

# agent-gateway with the modules named in argv[1] (comma separated) not installed, as a
# venv without that extra has them: import fails and find_spec finds nothing
CLI = (
    "import runpy, sys\n"
    "for name in filter(None, sys.argv.pop(1).split(',')):\n"
    "    sys.modules[name] = None\n"
    "sys.argv[0] = 'agent-gateway'\n"
    "runpy.run_module('gateway', run_name='__main__', alter_sys=True)\n"
)


def config_file(tmp_path: Path, base_url: str, token: str) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"[gateway]\ndata_dir = {json.dumps(str(tmp_path / 'data'))}\n\n"
        "[projects.web]\n"
        f"work_dir = {json.dumps(str(work))}\n"
        'agent = "codex-app-server"\n'
        f"argv = [{json.dumps(sys.executable)}]\n\n"
        "[projects.web.auth.telegram]\nallow_from = [111]\n\n"
        f"[platforms.telegram]\ntoken = {json.dumps(token)}\nbase_url = {json.dumps(base_url)}\n",
        encoding="utf-8",
    )
    return path


async def run_check(path: Path, *, not_installed: str = "") -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLI,
        not_installed,
        "check",
        "--config",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_check_names_the_bot_a_good_token_is(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        code, out = await run_check(config_file(tmp_path, fake.base_url, TOKEN))
    assert code == 0, out
    assert "telegram: the token is bot @" in out
    assert "config OK" in out
    assert TOKEN not in out


async def test_check_catches_a_token_telegram_refuses(tmp_path: Path) -> None:
    refused = "1:x"  # the shape passes; only Telegram knows it is no bot's
    async with FakeTelegram() as fake:
        code, out = await run_check(config_file(tmp_path, fake.base_url, refused))
    assert code == 1, out
    assert "telegram: Telegram refused the bot token (401 Unauthorized)" in out
    assert "@BotFather" in out
    assert "1 problem(s)" in out
    assert "bot1:x" not in out  # the address carries the token: never printed


async def test_check_says_telegram_cannot_be_reached_and_where(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        gone = fake.base_url  # a loopback address nothing listens on once it is closed
    code, out = await run_check(config_file(tmp_path, gone, TOKEN))
    assert code == 1, out
    assert "telegram: cannot reach Telegram at 127.0.0.1" in out
    assert TOKEN not in out


async def test_a_platform_without_its_sdk_names_the_extra_to_install(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        path = config_file(tmp_path, fake.base_url, TOKEN)
        code, out = await run_check(path, not_installed="telegram")
    assert code == 1, out
    assert "pip install 'agent-gateway[telegram]'" in out, out
    assert "Traceback" not in out
