"""Shared test plumbing.

Tests that need a real agent binary are marked ``@pytest.mark.real_agent("codex")`` (or
``"claude"``, ``"codex-acp"``, ``"opencode"``) and take the binary's path from the
``codex_bin`` (``claude_bin``, ``codex_acp_bin``, ``opencode_bin``) fixture.
They skip when the binary is missing, except
under ``AGENT_GATEWAY_REQUIRE_REAL_AGENTS=1`` (what ``.ci/run`` sets), where they fail. The
number of real-binary tests that passed is written to ``.cache/real-agent-tests.txt`` so that
CI can check it is above zero.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.servers.fake_telegram import FakeTelegram

pytest_plugins = [
    "tests.codex_env",  # fake_model, codex_home
    "tests.claude_env",  # fake_anthropic, claude_home
    "tests.discord_harness",  # fake_discord
    "tests.opencode_env",  # fake_chat, opencode_home
    "tests.pg_cluster",  # pg_cluster: a throwaway PostgreSQL server (issue 18)
    "tests.store_backends",  # ledger: the store tests on SQLite and on PostgreSQL
]

ROOT = Path(__file__).resolve().parent.parent
REAL_AGENT_REPORT = ROOT / ".cache" / "real-agent-tests.txt"
REQUIRE_REAL = os.environ.get("AGENT_GATEWAY_REQUIRE_REAL_AGENTS") == "1"

_real_passed = 0


def _find_binary(env_var: str, name: str) -> str | None:
    configured = os.environ.get(env_var)
    if configured:
        return configured if Path(configured).is_file() else None
    local = ROOT / ".cache" / "agents" / "node_modules" / ".bin" / name
    if local.is_file():
        return str(local)
    return shutil.which(name)


def _require_binary(env_var: str, name: str) -> str:
    found = _find_binary(env_var, name)
    if found is None:
        message = f"real {name} binary not found (set {env_var} or run scripts/setup.sh)"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def codex_bin() -> str:
    return _require_binary("AGENT_GATEWAY_CODEX_BIN", "codex")


@pytest.fixture(scope="session")
def claude_bin() -> str:
    return _require_binary("AGENT_GATEWAY_CLAUDE_BIN", "claude")


@pytest.fixture(scope="session")
def codex_acp_bin() -> str:
    return _require_binary("AGENT_GATEWAY_CODEX_ACP_BIN", "codex-acp")


@pytest.fixture(scope="session")
def opencode_bin() -> str:
    return _require_binary("AGENT_GATEWAY_OPENCODE_BIN", "opencode")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    global _real_passed
    if report.when == "call" and report.passed and "real_agent" in report.keywords:
        _real_passed += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: its reports reach the controller, which writes
    REAL_AGENT_REPORT.parent.mkdir(parents=True, exist_ok=True)
    REAL_AGENT_REPORT.write_text(f"{_real_passed}\n")


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A project work dir for an agent, empty."""
    path = tmp_path / "work"
    path.mkdir()
    yield path


@pytest.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    """The fake Bot API on loopback (tests/servers/fake_telegram.py), for one test."""
    async with FakeTelegram() as fake:
        yield fake
