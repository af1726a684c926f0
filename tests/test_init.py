"""``agent-gateway init`` as a newcomer runs it (issue 30): a config for one platform and one
agent that ``check`` passes once the token is exported (against the fake Telegram), and
that a refused token fails; never written over a file, never with a secret in it, never
with the data dir inside the work dir."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import tomllib
from pathlib import Path

from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.test_proven_versions import agent_printing


async def agent_gateway(*args: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


def a_home(tmp_path: Path) -> dict[str, str]:
    """A newcomer's environment: their own home, and a codex on the PATH."""
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    codex = Path(agent_printing(home / "bin", "0.171.0"))
    assert codex.name == "codex"
    path = f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return {
        **os.environ,
        "HOME": str(home),
        "PATH": path,
        "XDG_CONFIG_HOME": "",
        "XDG_DATA_HOME": "",
    }


async def test_init_writes_a_config_that_check_passes_once_the_token_is_exported(
    tmp_path: Path,
) -> None:
    env = a_home(tmp_path)
    home = Path(env["HOME"])
    project = home / "src" / "web"
    project.mkdir(parents=True)
    code, out = await agent_gateway(
        "init",
        "--platform",
        "telegram",
        "--agent",
        "codex",
        "--work-dir",
        str(project),
        "--user-id",
        "111",
        env=env,
    )
    assert code == 0, out
    written = home / ".config" / "agent-gateway" / "config.toml"
    assert out.startswith(f"Wrote {written}. Next:")
    steps = out.splitlines()[1:4]
    assert [line.strip()[:3] for line in steps] == ["1. ", "2. ", "3. "]
    assert "@BotFather" in steps[0] and "export TELEGRAM_BOT_TOKEN" in steps[1]
    assert f"agent-gateway check --config {written}" in steps[2]
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    config = tomllib.loads(written.read_text())
    assert config["platforms"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN}"  # no secret
    assert config["projects"]["main"]["auth"]["telegram"]["allow_from"] == ["111"]
    data_dir = Path(config["gateway"]["data_dir"])
    assert project not in data_dir.parents

    async with FakeTelegram() as fake:
        with written.open("a") as file:  # the fake in place of api.telegram.org
            file.write(f'base_url = "{fake.base_url}"\n')
        code, out = await agent_gateway(
            "check", "--config", str(written), env={**env, "TELEGRAM_BOT_TOKEN": TOKEN}
        )
        assert code == 0, out
        assert "telegram: the token is bot @" in out and "config OK" in out
        code, out = await agent_gateway(
            "check", "--config", str(written), env={**env, "TELEGRAM_BOT_TOKEN": "1:x"}
        )
        assert code == 1, out
        assert "Telegram refused the bot token" in out

    # run again: the file is kept as it is
    before = written.read_bytes()
    code, out = await agent_gateway(
        "init", "--platform", "telegram", "--agent", "codex", "--work-dir", str(project), env=env
    )
    assert code == 2 and "exists: not overwritten" in out
    assert written.read_bytes() == before


async def test_init_from_the_home_folder_refuses_a_work_dir_that_holds_the_data_dir(
    tmp_path: Path,
) -> None:
    env = a_home(tmp_path)
    home = env["HOME"]
    code, out = await agent_gateway(
        "init", "--platform", "console", "--agent", "claude", "--work-dir", home, env=env
    )
    assert code == 2, out
    assert "holds the data dir" in out and "--work-dir ~/src/myproject" in out
    assert not (Path(home) / ".config" / "agent-gateway" / "config.toml").exists()


async def test_init_without_a_terminal_asks_for_what_is_missing(tmp_path: Path) -> None:
    code, out = await agent_gateway("init", "--agent", "codex", env=a_home(tmp_path))
    assert code == 2
    assert "--platform: one of telegram, slack, discord, console" in out


async def test_init_without_an_id_says_where_to_find_it_and_check_says_what_is_missing(
    tmp_path: Path,
) -> None:
    env = a_home(tmp_path)
    project = Path(env["HOME"]) / "web"
    project.mkdir()
    config = tmp_path / "gw.toml"
    args = ("init", "--config", str(config), "--work-dir", str(project))
    code, out = await agent_gateway(*args, "--platform", "slack", "--agent", "opencode", env=env)
    assert code == 0, out
    assert "put your user id in allow_from (your profile" in out
    code, out = await agent_gateway(
        "check",
        "--config",
        str(config),
        env={
            **env,
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_APP_TOKEN": "xapp-1",
            "SLACK_TEAM_ID": "T1",
        },
    )
    assert code != 0
    assert "nobody may talk to this project from it" in out
