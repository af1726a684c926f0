"""``python -m gateway run --config F --host NAME`` processes sharing one PostgreSQL ledger
and one bot (issue 19): each host its own config file (the same but for its data dir, as on
its own machine), the hosts' key file, and a scripted Codex project on host "a".

    async with run_host(tmp_path, "b", config_text) as b:
        await b.line_containing("receives telegram:")

A process's stderr (the gateway's log) is read as it comes, kept in ``lines`` and written to
``logs/<host>-<n>.log``; :meth:`RunHost.line_containing` waits for a line (an event, never a
pause). Killed with SIGKILL by :meth:`RunHost.kill`, else interrupted (SIGINT) on the way out.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.config.hmac_key import HMAC_KEY_BYTES
from tests.harness.driver import SCRIPTED_AGENT

__all__ = [
    "RunHost",
    "demo_on_a_text",
    "hosts_gateway_text",
    "run_host",
    "scripted_project_text",
]

DEADLINE = 30.0
_numbers = itertools.count(1)


def hosts_gateway_text(tmp_path: Path, dsn: str, *, lease_seconds: float) -> str:
    """The ``[gateway]`` table every host shares (its data dir is added per host)."""
    key = tmp_path / "hmac.key"
    if not key.exists():
        key.write_bytes(os.urandom(HMAC_KEY_BYTES))
        key.chmod(0o600)
    return (
        f"store = {json.dumps(dsn)}\n"
        f"hmac_key_file = {json.dumps(str(key))}\n"
        f"host_lease_seconds = {lease_seconds}\n"
        "stop_grace_seconds = 5\n"
    )


def demo_on_a_text(
    tmp_path: Path, dsn: str, auth: str, platform: str, *, lease_seconds: float
) -> str:
    """A config every host shares: its ``[gateway]`` table, the scripted project "demo" on
    host a (``auth``: its auth tables), then ``platform`` (its ``[platforms.X]`` table)."""
    return (
        "[gateway]\n"
        + hosts_gateway_text(tmp_path, dsn, lease_seconds=lease_seconds)
        + "\n"
        + scripted_project_text("demo", "a", tmp_path / "work-a", tmp_path / "prompts.jsonl", auth)
        + platform
    )


def scripted_project_text(
    name: str, host: str, work_dir: Path, prompt_log: Path, auth: str, *, mode: str = "normal"
) -> str:
    """A project running tests/agents/codex_scripted.py on ``host``; ``auth``: its
    ``[projects.<name>.auth.<platform>]`` tables, ``{name}`` standing for the project."""
    work_dir.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SCRIPTED_PROMPT_LOG": str(prompt_log)}
    return (
        f"[projects.{name}]\n"
        f"work_dir = {json.dumps(str(work_dir))}\n"
        'agent = "codex-app-server"\n'
        f"host = {json.dumps(host)}\n"
        f"argv = {json.dumps([sys.executable, str(SCRIPTED_AGENT), mode])}\n"
        'approval_policy = "on-request"\n\n'
        f"[projects.{name}.agent_options.env]\n"
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in env.items())
        + "\n"
        + auth.replace("{name}", name)
        + "\n"
    )


class RunHost:
    def __init__(self, host: str, process: asyncio.subprocess.Process, log: Path) -> None:
        self.host = host
        self.process = process
        self.lines: list[str] = []
        self._log = log
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        with self._log.open("w", encoding="utf-8") as log:
            while line := await self.process.stderr.readline():
                text = line.decode(errors="replace")
                log.write(text)
                log.flush()
                async with self._changed:
                    self.lines.append(text)
                    self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    def count(self, words: str) -> int:
        return sum(words in line for line in self.lines)

    async def line_containing(self, words: str, *, after: int = 0) -> str:
        """The first line (from the ``after``-th on) that contains ``words``, once written;
        an AssertionError if the process ends first."""
        async with asyncio.timeout(DEADLINE), self._changed:
            while True:
                for line in self.lines[after:]:
                    if words in line:
                        return line
                if self._reader.done():
                    raise AssertionError(
                        f"host {self.host} ended ({self.process.returncode}) before "
                        f"{words!r}:\n{''.join(self.lines[-30:])}"
                    )
                await self._changed.wait()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    async def exited(self) -> int:
        code = await self.process.wait()
        await self._reader
        return code


@asynccontextmanager
async def run_host(tmp_path: Path, host: str, text: str) -> AsyncIterator[RunHost]:
    """``run --host HOST`` on a config of its own (``text`` plus its data dir), yielded once
    it runs (its recovery done, its platforms attached)."""
    config = tmp_path / f"{host}.toml"
    data_dir = tmp_path / f"data-{host}"
    config.write_text(
        text.replace("[gateway]\n", f"[gateway]\ndata_dir = {json.dumps(str(data_dir))}\n", 1),
        encoding="utf-8",
    )
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "run", "--config", str(config), "--host", host),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    running = RunHost(host, process, logs / f"{host}-{next(_numbers)}.log")
    try:
        await running.line_containing("agent-gateway running")
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            await running.exited()
