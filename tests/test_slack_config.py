"""``[platforms.slack]``: what loads, what is refused and why, and ``check`` reading it
without importing slack-sdk or slack-bolt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from platforms.registry import parse_config
from platforms.slack.config import ChannelMode, SlackConfig
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


def test_check_with_slack_reads_its_config_without_its_sdk(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"[gateway]\ndata_dir = {json.dumps(str(tmp_path / 'data'))}\n\n"
        + BASE.replace('"/srv/web"', json.dumps(str(work))).replace(
            'agent = "codex-app-server"',
            f'agent = "codex-app-server"\nargv = [{json.dumps(sys.executable)}]',
        )
        + 'bot_token = "xoxb-1-fake"\napp_token = "xapp-1-fake"\n',
        encoding="utf-8",
    )
    modules = tmp_path / "modules"
    done = subprocess.run(
        [sys.executable, "-c", CLI, str(modules), "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "config OK" in done.stdout
    assert "xoxb-1-fake" not in done.stdout + done.stderr
    imported = set(modules.read_text().split())
    assert "platforms.slack.config" in imported
    assert not _under(imported, "slack_sdk") and not _under(imported, "slack_bolt")
