"""``agent-gateway service`` (issue 37): the systemd unit it prints and writes passes
``systemd-analyze verify`` without a word on stderr (bad values only warn there), finds the
agents on the PATH it was written from, keeps the tokens out of the unit (an environment
file of mode 0600 listing the config's variables), and never writes over a file. There is
no systemd to run it here: the check is the syntax and what the unit says."""

from __future__ import annotations

import getpass
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)

CONFIG = """\
[gateway]
data_dir = "{data}"
stop_grace_seconds = 20

[platforms.telegram]
token = "${{TELEGRAM_BOT_TOKEN}}"

[projects.web]
work_dir = "{work}"
agent = "codex-app-server"
[projects.web.agent_options.env]
OPENAI_API_KEY = "${{OPENAI_API_KEY}}"
"""


def service(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PATH": "/opt/npm/bin:/usr/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gateway", "service", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def verify(unit: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        timeout=60,
        check=False,
    )


def a_config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG.format(data=tmp_path / "data", work=tmp_path / "work"))
    return path


def test_the_written_unit_verifies_and_keeps_the_tokens_in_a_0600_file(tmp_path: Path) -> None:
    config = a_config(tmp_path)
    done = service(tmp_path, "--config", str(config), "--write")
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "xdg" / "systemd" / "user" / "agent-gateway.service"
    env_file = tmp_path / "env"
    assert done.stdout.startswith(f"Wrote {unit} and {env_file}. Next:")
    assert "loginctl enable-linger" in done.stdout
    assert "systemctl --user enable --now agent-gateway.service" in done.stdout
    text = unit.read_text()
    assert f"--config {config}" in text and "Restart=on-failure" in text
    assert f"EnvironmentFile={env_file}" in text
    path_line = next(line for line in text.splitlines() if "PATH=" in line)
    assert "/opt/npm/bin" in path_line  # the PATH it was written from: npm's codex is found
    assert str(Path(sys.executable).parent) in path_line
    assert "network-online.target" not in text.replace("# no After=network-online", "")
    assert "KillMode=mixed" in text  # SIGTERM to the gateway, which stops its agents in order
    assert "TimeoutStopSec=45" in text  # 10 s of platform grace + 20 s of agents' + margin
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert env_file.read_text().splitlines()[-2:] == ["TELEGRAM_BOT_TOKEN=", "OPENAI_API_KEY="]

    checked = verify(unit, tmp_path)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr

    again = service(tmp_path, "--config", str(config), "--write")
    assert again.returncode == 2 and "exists: not overwritten" in again.stderr


def test_the_system_wide_unit_runs_as_its_user_and_verifies(tmp_path: Path) -> None:
    config = a_config(tmp_path)
    user = getpass.getuser()
    done = service(tmp_path, "--config", str(config), "--system-user", user)
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "agent-gateway.service"
    unit.write_text(done.stdout)
    (tmp_path / "env").write_text("")
    assert f"User={user}" in done.stdout and "WantedBy=multi-user.target" in done.stdout
    checked = verify(unit, tmp_path)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
