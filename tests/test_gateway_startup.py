"""A gateway whose start fails half-way closes what it had opened, and says why.

``Gateway.__aenter__`` takes the data dir's lock, opens the ledger, starts the card refresher,
recovers, then attaches the platforms. A failure in recovery (here: the launcher cannot end
a leftover agent) or in a platform's attach used to leave the refresher running and the
ledger and the lock held, with no ``__aexit__`` to close them: the process could not start
again in place. The failures are injected through the engine's own seams (the launcher, a
platform), never by patching the engine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.errors import AgentError, PlatformError
from gateway.platform import Inbox, Platform
from gateway.sessions.engine import Gateway
from gateway.store.store import Store
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import running_session

pytestmark = pytest.mark.timeout(30)


class LauncherThatCannotEnd(ScriptedLauncher):
    """A launcher whose leftover agent will not end (say, it belongs to another user)."""

    async def end_leftover(self, *, pid: int, pgid: int | None, start_time: int | None) -> str:
        raise AgentError(f"cannot end the leftover agent {pid}: operation not permitted")


class PlatformThatCannotAttach(MemoryPlatform):
    def attach(self, inbox: Inbox) -> None:
        raise PlatformError("the platform cannot take the gateway's messages")


def config(tmp_path: Path) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice"]

[platforms.memory]
""",
        "startup-test.toml",
    )


def failing_recovery() -> tuple[type[BaseException], Platform, ScriptedLauncher]:
    return AgentError, MemoryPlatform(), LauncherThatCannotEnd({})


def failing_attach() -> tuple[type[BaseException], Platform, ScriptedLauncher]:
    return PlatformError, PlatformThatCannotAttach(), ScriptedLauncher({})


@pytest.mark.parametrize("failure", [failing_recovery, failing_attach])
async def test_a_failed_start_closes_what_it_opened_and_the_next_start_recovers(
    tmp_path: Path,
    failure: Callable[[], tuple[type[BaseException], Platform, ScriptedLauncher]],
) -> None:
    cfg = config(tmp_path)
    async with Store.open(cfg.gateway.data_dir) as store:
        session, _ = await running_session(store)  # an agent a crashed gateway left behind
    error, platform, launcher = failure()
    before = asyncio.all_tasks()

    with pytest.raises(error):
        async with Gateway(cfg, platforms={"memory": platform}, launcher=launcher):
            raise AssertionError("the gateway started")

    left = {task.get_coro() for task in asyncio.all_tasks() - before}
    assert left == set(), "tasks of the failed gateway still run (the card refresher?)"
    # the lock and the ledger were let go: the next gateway starts in place and recovers
    memory = MemoryPlatform()
    async with Gateway(cfg, platforms={"memory": memory}, launcher=ScriptedLauncher({})) as gw:
        [ended] = await gw.store.audit.entries(event="recovery.leftover_agent")
        assert ended.session_id == session.id
        assert await gw.store.sessions.live_epochs() == []
