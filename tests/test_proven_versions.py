"""What ``agent-gateway check`` says of an agent at a version other than the one the adapters
are proven with, and of Codex without bubblewrap (issue 30): a warning with what to do, never
a failure. Run as a user runs it, on agents that print the version asked of them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from adapters.proven_versions import CODEX_ACP, PROVEN
from gateway.domain import AgentKind
from tests.test_cli import _cli, _config

ROOT = Path(__file__).resolve().parents[1]


def agent_printing(tmp_path: Path, version: str) -> str:
    """An executable that answers ``--version`` as codex does."""
    path = tmp_path / "codex"
    path.write_text(f"#!{sys.executable}\nprint('codex-cli {version}')\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_versions_proven_are_the_ones_the_tests_install() -> None:
    pinned = dict(
        line.split("=", 1)
        for line in (ROOT / "scripts" / "agent-versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert PROVEN[AgentKind.CODEX_APP_SERVER][0] == pinned["CODEX_NPM_VERSION"]
    assert PROVEN[AgentKind.CODEX_EXEC][0] == pinned["CODEX_NPM_VERSION"]
    assert PROVEN[AgentKind.CLAUDE_CODE][0] == pinned["CLAUDE_NPM_VERSION"]
    assert PROVEN[AgentKind.OPENCODE][0] == pinned["OPENCODE_NPM_VERSION"]
    assert CODEX_ACP[0] == pinned["CODEX_ACP_NPM_VERSION"]


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("0.90.0", "codex 0.90.0 is older than 0.171.0, the version the gateway is proven with"),
        ("0.172.1", "codex 0.172.1 is newer than 0.171.0, the version the gateway is proven with"),
    ],
)
def test_check_warns_of_an_agent_older_or_newer_and_passes(
    tmp_path: Path, version: str, said: str
) -> None:
    done = _cli("check", "--config", str(_config(tmp_path, [agent_printing(tmp_path, version)])))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"p: warning: {said}" in done.stdout
    assert ("npm install -g @openai/codex@0.171.0" in done.stdout) == version.startswith("0.90")
    assert ("untested" in done.stdout) == version.startswith("0.172")
    assert "config OK" in done.stdout


def test_check_at_the_version_proven_warns_of_nothing(tmp_path: Path) -> None:
    done = _cli("check", "--config", str(_config(tmp_path, [agent_printing(tmp_path, "0.171.0")])))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is older" not in done.stdout and "is newer" not in done.stdout


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Codex's sandbox is bwrap on Linux"
)
def test_check_names_the_package_when_codex_has_no_bubblewrap(tmp_path: Path) -> None:
    agent = agent_printing(tmp_path, "0.171.0")
    path = _config(tmp_path, [agent])
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no bwrap on it
    done = _cli("check", "--config", str(path), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "p: warning: bwrap (bubblewrap) is not installed" in done.stdout
    assert "apt install bubblewrap" in done.stdout
    # a project that runs without Codex's sandbox needs none
    full = _config(tmp_path, [agent], extra='sandbox = "danger-full-access"')
    done = _cli("check", "--config", str(full), env=env)
    assert "bubblewrap" not in done.stdout, done.stdout
