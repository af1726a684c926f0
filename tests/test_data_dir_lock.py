"""One gateway per data dir (DESIGN.md, "Storage"): a second one is refused before recovery.

Without the lock, a second ``agent-gateway run`` on the same data dir recovered "after a
crash" that never happened: it ended the first gateway's live agents and orphaned their
requests. Now it stops at once with a message naming the gateway that holds the dir, and the
first gateway and its agent go on untouched. Reading the ledger (``agent-gateway ledger``)
needs no lock.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.domain import Actor
from gateway.errors import DataDirInUse
from gateway.sessions.engine import Gateway
from gateway.store.datadir import LOCK_FILE
from gateway.store.store import Store
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config
from tests.harness.driver import (
    ROOT,
    end_leftover_agents,
    gateway_process,
    process_alive,
    room,
    scripted_project,
    write_config,
)
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(90)

DEADLINE = 30.0
ROOM = room("demo")
ALICE = Actor(platform="memory", user_id="alice", display="Alice")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def with_console(config: Path, projects: list[str]) -> Path:
    """The same file with the web console too: ``agent-gateway run`` needs a chat platform."""
    tables = "".join(
        f'\n[projects.{name}.auth.local]\nallow_from = ["alice"]\n' for name in projects
    )
    second = config.with_name("second.toml")
    second.write_text(
        config.read_text(encoding="utf-8")
        + tables
        + '\n[platforms.console]\nidentity = "local:alice"\nhost = "127.0.0.1"\nport = 0\n',
        encoding="utf-8",
    )
    return second


async def cli(*args: str) -> tuple[int, str, str]:
    """``python -m gateway ARGS`` to its end (killed past the deadline: a test failure)."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", *args),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(DEADLINE):
            out, err = await process.communicate()
    except TimeoutError:
        process.send_signal(signal.SIGINT)
        out, err = await process.communicate()
        raise AssertionError(
            f"agent-gateway {args[0]} did not stop by itself:\n{err.decode()}"
        ) from None
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_second_gateway_on_the_same_data_dir_is_refused_and_the_first_goes_on(
    tmp_path: Path, data_dir: Path
) -> None:
    project = scripted_project("demo", "normal", tmp_path / "work", channel="demo")
    config = write_config(tmp_path / "gateway.toml", data_dir, [project])
    try:
        async with gateway_process(config, tmp_path / "logs") as first:
            await first.say(ROOM, "alice", "hello")
            await first.text_containing("echo: hello", ROOM)
            async with Store.open(data_dir) as store:  # reading needs no lock
                [epoch] = await store.sessions.live_epochs()
            assert epoch.pid is not None and epoch.process_start_time is not None

            code, out, err = await cli("run", "--config", str(with_console(config, ["demo"])))

            assert code == 2, err
            assert f"data dir {data_dir} is in use by agent-gateway pid {first.pid}" in err
            assert "tests/harness/gateway_proc.py --config" in err  # the holder's command line
            assert "agent-gateway console:" not in err  # it never got as far as serving
            assert process_alive(epoch.pid, int(epoch.process_start_time))
            await first.say(ROOM, "alice", "still there?")
            await first.text_containing("echo: still there?", ROOM)
            assert not any("restarted" in text for text in first.texts(ROOM))

            code, out, err = await cli("ledger", "--data-dir", str(data_dir))
            assert code == 0, err
            assert "Pending (0)" in out
        async with Store.open(data_dir) as store:
            audit = await store.audit.entries(event="recovery.leftover_agent")
        assert audit == []  # nobody ever "recovered" the first gateway's agent
    finally:
        await end_leftover_agents(data_dir)


def scripted_config(data_dir: Path, work_dir: Path) -> Config:
    work_dir.mkdir(parents=True, exist_ok=True)
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.demo]
work_dir = {json.dumps(str(work_dir))}
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice"]

[platforms.memory]
""",
        "lock-test.toml",
    )


async def test_a_second_gateway_in_the_same_process_is_refused_until_the_first_stops(
    tmp_path: Path, data_dir: Path
) -> None:
    config = scripted_config(data_dir, tmp_path / "work")
    first_memory = MemoryPlatform()
    async with Gateway(config, platforms={"memory": first_memory}, launcher=ScriptedLauncher({})):
        holder = json.loads((data_dir / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid()
        second = Gateway(
            config, platforms={"memory": MemoryPlatform()}, launcher=ScriptedLauncher({})
        )
        with pytest.raises(DataDirInUse) as refused:
            async with second:
                pass
        assert refused.value.holder_pid == os.getpid()
        assert f"is in use by agent-gateway pid {os.getpid()}" in str(refused.value)
        await first_memory.say(ROOM, ALICE, "hello")
        await first_memory.wait_for(lambda: "echo: hello" in first_memory.texts(ROOM) or None)
    assert (data_dir / LOCK_FILE).read_text() == ""  # a clean stop leaves no holder behind
    async with Gateway(
        config, platforms={"memory": MemoryPlatform()}, launcher=ScriptedLauncher({})
    ):
        pass
