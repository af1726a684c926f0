"""``[platforms.slack]``: what loads, what is refused and why, and ``check`` reading it
without importing slack-sdk or slack-bolt."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from platforms.registry import parse_config
from platforms.slack.config import ChannelMode, SlackConfig
from tests.servers.fake_slack import APP_TOKEN, BOT_TOKEN, SCOPES, FakeSlack
from tests.test_platform_registry import CLI, ROOT, _under

BASE = """\
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"

[projects.web.auth.slack]
allow_from = ["U0ALICE"]

[platforms.slack]
team_id = "T0FAKE"
"""


def load(table: str, env: dict[str, str] | None = None) -> SlackConfig:
    config = parse_config(BASE + table, "gw.toml", env=env or {})
    settings = config.platforms.get("slack", SlackConfig)
    assert settings is not None
    return settings


def refusal(table: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(BASE + table, "gw.toml", env={})
    return str(caught.value)


def test_socket_mode_with_two_tokens_from_the_environment() -> None:
    settings = load(
        'bot_token = "${B}"\napp_token = "${A}"\n',
        env={"B": "xoxb-1-bot", "A": "xapp-1-app"},
    )
    assert settings.mode == "socket"
    assert settings.bot_token.get_secret_value() == "xoxb-1-bot"
    assert settings.channel_mode is ChannelMode.MENTIONS
    assert settings.command == "/agent"
    assert settings.api_url == "https://slack.com/api/"
    assert "xoxb-1-bot" not in repr(settings)  # secrets never print


def test_the_signing_secret_can_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "signing"
    secret.write_text("0123456789abcdef\n")
    settings = load(
        f'mode = "http"\nbot_token = "xoxb-1"\nsigning_secret_file = {json.dumps(str(secret))}\n'
    )
    assert settings.signing_secret is not None
    assert settings.signing_secret.get_secret_value() == "0123456789abcdef"


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('bot_token = "xoxb-1"\n', 'mode = "socket" needs app_token'),
        ('bot_token = "xapp-1"\napp_token = "xapp-2"\n', "bot_token: the Bot User OAuth"),
        ('bot_token = "xoxb-1"\napp_token = "xoxb-2"\n', "app_token: the app-level token"),
        ('mode = "http"\nbot_token = "xoxb-1"\n', 'mode = "http" needs signing_secret'),
        ('bot_token = "xoxb-1"\napp_token = "xapp-1"\nchannel_mode = "some"\n', "channel_mode"),
    ],
    ids=["no-app-token", "bot-token-kind", "app-token-kind", "http-unsigned", "channel-mode"],
)
def test_a_table_that_cannot_work_is_refused_saying_why(table: str, said: str) -> None:
    assert said in refusal(table)


def test_team_id_is_required() -> None:
    text = BASE.replace('team_id = "T0FAKE"\n', "") + 'bot_token = "xoxb-1"\napp_token = "xapp-1"\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "gw.toml", env={})
    assert "platforms.slack.team_id: required" in str(caught.value)


def check_config_file(tmp_path: Path, table: str, team: str = "T0FAKE") -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"[gateway]\ndata_dir = {json.dumps(str(tmp_path / 'data'))}\n\n"
        + BASE.replace('"/srv/web"', json.dumps(str(work)))
        .replace('"T0FAKE"', json.dumps(team))
        .replace(
            'agent = "codex-app-server"',
            f'agent = "codex-app-server"\nargv = [{json.dumps(sys.executable)}]',
        )
        + table,
        encoding="utf-8",
    )
    return path


async def run_check(
    tmp_path: Path, fake: FakeSlack, *, team: str = "T0FAKE"
) -> tuple[int, str, set[str]]:
    """``agent-gateway check`` (its own process) on a config whose Slack is ``fake``: its
    exit code, what it printed, the modules it imported."""
    table = f'bot_token = "{BOT_TOKEN}"\napp_token = "{APP_TOKEN}"\nbase_url = "{fake.base_url}"\n'
    path = check_config_file(tmp_path, table, team)
    modules = tmp_path / "modules"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLI,
        str(modules),
        "check",
        "--config",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(), set(modules.read_text().split())


async def test_check_asks_slack_and_reads_its_config_without_its_sdk(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        code, out, imported = await run_check(tmp_path, fake)
    assert code == 0, out
    assert "config OK" in out
    assert "slack: OK (team T0FAKE, bot @gateway; scopes OK; Socket Mode on)" in out
    assert BOT_TOKEN not in out and APP_TOKEN not in out
    assert [m for m, _ in fake.calls] == ["auth.test", "apps.connections.open"]
    assert "platforms.slack.config" in imported
    assert not _under(imported, "slack_sdk") and not _under(imported, "slack_bolt")


async def test_check_names_a_missing_scope_and_socket_mode_off_before_anything_runs(
    tmp_path: Path,
) -> None:
    async with FakeSlack(scopes=SCOPES - {"im:write", "files:write"}, socket_mode=False) as fake:
        code, out, _ = await run_check(tmp_path, fake)
    assert code == 1, out
    assert "slack: the bot token lacks the scope(s) im:write, files:write" in out
    assert "reinstall the app" in out
    assert "slack: Socket Mode: apps.connections.open refused the app token" in out
    assert "turn Socket Mode on" in out
    assert "2 problem(s)" in out
    assert not fake.connected  # nothing ran: no socket opened


async def test_check_says_a_revoked_token_and_another_team(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        fake.revoke()
        code, out, _ = await run_check(tmp_path, fake)
    assert code == 1 and "slack: bot_token: it was revoked" in out, out
    assert "(token_revoked)" in out
    async with FakeSlack() as fake:
        code, out, _ = await run_check(tmp_path, fake, team="T0OTHER")
    assert code == 1 and "slack: team_id: the bot token is of team T0FAKE, not T0OTHER" in out
