"""Start-up: from the command to ready, the import time of each platform module, and no
platform imported that is not configured.

    python -m bench.startup [--runs 3] [--json]

- ``agent-gateway run --config F`` with every platform of the registry
  (platforms/registry.py) that ``run`` starts enabled (Telegram against the project's fake
  Bot API on 127.0.0.1, the console on a free port): the time from spawning the command to
  its "agent-gateway running" log line. A command that refuses to start is reported with its
  reason, never hidden.
- ``agent-gateway demo`` (the console and the demo agent): the time to the line with the
  console's address, which it prints once the gateway is ready.
- ``python -X importtime -c "import M"`` for the core modules and each platform's config
  module (what ``check`` imports) and factory module (what ``run`` imports): the cumulative
  import time of M.
- For each platform alone, ``agent-gateway run`` with only that platform configured: the
  modules of every other platform (bench/platforms.py, PLATFORM_IMPORTS) must not be among
  the modules in its ``sys.modules``, which it writes to a file when it exits (``-X
  importtime`` would leave out what the registry imports with ``importlib.import_module``).
- The agents whose pinned binary is installed (bench/agent_startup.py): ``opencode serve`` to
  listening and to a session, and its RSS; codex-acp spawn, ``initialize`` -> ``session/new``,
  and its RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import agent_startup
from bench.figures import Figure, emit
from bench.platforms import PLATFORM_IMPORTS
from platforms.registry import PLATFORMS

__all__ = ["import_time_ms", "measure", "platform_modules"]

NAME = "startup"
CORE_MODULES = ("gateway.app.cli", "gateway.sessions.engine", "adapters.launch")
READY_DEADLINE = 60.0
ROOT = Path(__file__).resolve().parent.parent


def platform_modules() -> list[str]:
    """Every platform of the registry, by the name of its config table."""
    return list(PLATFORMS.names())


def _platform_import_modules() -> list[str]:
    """Each platform's config module, and its factory's module if ``run`` starts it."""
    found = []
    for name in PLATFORMS.names():
        entry = PLATFORMS.entry(name)
        found.append(entry.config)
        if entry.factory is not None:
            found.append(entry.factory.partition(":")[0])
    return found


def _parse_importtime(stderr: str) -> dict[str, int]:
    """module -> cumulative import time (us), from ``-X importtime`` output."""
    found: dict[str, int] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, module = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit():
            found[module] = int(cumulative)
    return found


async def _run(argv: Sequence[str], *, cwd: Path | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd or ROOT,
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


async def import_time_ms(module: str, runs: int) -> float:
    """Median cumulative import time of ``module`` in a fresh interpreter, in ms."""
    times = []
    for _ in range(runs):
        code, _, err = await _run([sys.executable, "-X", "importtime", "-c", f"import {module}"])
        if code != 0:
            raise RuntimeError(f"import {module} failed: {err.strip().splitlines()[-1:]}")
        times.append(_parse_importtime(err)[module] / 1000)
    return statistics.median(times)


# --- configs for `agent-gateway run` ----------------------------------------------------------


@asynccontextmanager
async def _platform_table(name: str) -> AsyncIterator[tuple[str, str]]:
    """The ``[platforms.<name>]`` table for ``run`` and the auth table its person is in, with
    whatever local fake the platform talks to running."""
    if name == "telegram":
        from tests.servers.fake_telegram import TOKEN, FakeTelegram

        async with FakeTelegram() as fake:
            table = f'token = "{TOKEN}"\nbase_url = "{fake.base_url}"\npoll_timeout_seconds = 1'
            yield table, "telegram"
    elif name == "slack":
        from tests.servers.fake_slack import APP_TOKEN, BOT_TOKEN, TEAM_ID, FakeSlack

        async with FakeSlack() as fake:
            table = (
                f'bot_token = "{BOT_TOKEN}"\napp_token = "{APP_TOKEN}"\n'
                f'base_url = "{fake.base_url}"\nteam_id = "{TEAM_ID}"'
            )
            yield table, "slack"
    elif name == "discord":
        from tests.servers.fake_discord import APP_ID, TOKEN, FakeDiscord

        async with FakeDiscord() as fake:
            table = (
                f'token = "{TOKEN}"\napplication_id = "{APP_ID}"\n'
                f'channels = ["{fake.general.id}"]\napi_base_url = "{fake.api_base}"\n'
                f'gateway_url = "{fake.gateway_url}"'
            )
            yield table, "discord"
    elif name == "console":
        yield 'host = "127.0.0.1"\nport = 0\nidentity = "local:alice"', "local"
    else:
        yield "", name


def _config_text(root: Path, tables: dict[str, tuple[str, str]]) -> str:
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    auth = "".join(
        f'\n[projects.bench.auth.{auth_name}]\nallow_from = ["alice"]\n'
        for auth_name in sorted({auth_name for _, auth_name in tables.values()})
    )
    platform_tables = "".join(f"\n[platforms.{n}]\n{t}\n" for n, (t, _) in tables.items())
    return f"""
[gateway]
data_dir = {json.dumps(str(root / "data"))}

[projects.bench]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
argv = [{json.dumps(sys.executable)}, {json.dumps(str(ROOT / "bench/agents/codex_bench_agent.py"))}]
{auth}{platform_tables}"""


@asynccontextmanager
async def _config(root: Path, names: Sequence[str]) -> AsyncIterator[Path]:
    async with AsyncExitStack() as stack:
        tables = {name: await stack.enter_async_context(_platform_table(name)) for name in names}
        path = root / f"run-{'-'.join(names) or 'none'}.toml"
        path.write_text(_config_text(root, tables), encoding="utf-8")
        yield path


# --- from the command to ready ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Started:
    seconds: float | None  # None: it ended (or the deadline passed) before it was ready
    stderr: str
    tail: str  # the last line it wrote, when it did not start


async def _until_ready(argv: Sequence[str], marker: str, stream: str) -> _Started:
    """Spawn ``argv`` and wait for a line containing ``marker`` on ``stream``; then stop the
    process with SIGINT and collect what it wrote."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    watched, other = (
        (proc.stdout, proc.stderr) if stream == "stdout" else (proc.stderr, proc.stdout)
    )
    seen: list[str] = []
    ready: float | None = None
    async with asyncio.TaskGroup() as tasks:
        drained = tasks.create_task(other.read())  # so that a full pipe never blocks it
        try:
            async with asyncio.timeout(READY_DEADLINE):
                while line := await watched.readline():
                    seen.append(line.decode(errors="replace").rstrip())
                    if marker in seen[-1]:
                        ready = time.monotonic() - started
                        break
        except TimeoutError:
            pass
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        rest = (await watched.read()).decode(errors="replace").splitlines()
        await proc.wait()
    other_text = drained.result().decode(errors="replace")
    watched_text = "\n".join([*seen, *rest])
    stderr = other_text if stream == "stdout" else watched_text
    lines = [line for line in [*seen, *rest, *other_text.splitlines()] if line.strip()]
    tail = "" if ready is not None else (lines[-1] if lines else f"exit {proc.returncode}")
    return _Started(seconds=ready, stderr=stderr, tail=tail[-160:])


async def _ready_figure(
    label: str, argv: Sequence[str], marker: str, stream: str, runs: int
) -> Figure:
    times = []
    for _ in range(runs):
        started = await _until_ready(argv, marker, stream)
        if started.seconds is None:
            return Figure(benchmark=NAME, name=label, value=f"does not start: {started.tail}")
        times.append(started.seconds * 1000)
    return Figure(
        benchmark=NAME,
        name=label,
        value=f"median {statistics.median(times):.0f} ms, max {max(times):.0f} ms (n={runs})",
    )


# python -m gateway, and sys.modules written to the file named by its first argument at exit
_CLI_SAVING_MODULES = """\
import atexit, runpy, sys
out = sys.argv.pop(1)
def save():
    with open(out, "w") as file:
        file.write("\\n".join(sorted(sys.modules)))
atexit.register(save)
sys.argv[0] = "agent-gateway"
runpy.run_module("gateway", run_name="__main__", alter_sys=True)
"""


async def _imported_by_run(config: Path) -> set[str]:
    """Every module ``agent-gateway run`` imported, from ready to its stop (SIGINT)."""
    modules = config.with_suffix(".modules")
    argv = [sys.executable, "-c", _CLI_SAVING_MODULES, str(modules), "run", "--config"]
    started = await _until_ready([*argv, str(config)], "agent-gateway running", "stderr")
    if started.seconds is None:
        raise RuntimeError(f"agent-gateway run did not start: {started.tail}")
    return set(modules.read_text(encoding="utf-8").split())


async def measure(root: Path, *, runs: int, agents: bool = True) -> list[Figure]:
    """``agents``: the installed agents' start-up too (bench/agent_startup.py)."""
    existing = [name for name in platform_modules() if PLATFORMS.runs(name)]
    figures = []
    async with _config(root, existing) as config:
        figures.append(
            await _ready_figure(
                f"agent-gateway run ({', '.join(existing)}) -> ready",
                [sys.executable, "-m", "gateway", "run", "--config", str(config)],
                "agent-gateway running",
                "stderr",
                runs,
            )
        )
    demo = [
        sys.executable,
        "-m",
        "gateway",
        "demo",
        "--data-dir",
        str(root / "demo"),
        "--port",
        "0",
    ]
    figures.append(
        await _ready_figure("agent-gateway demo (console) -> ready", demo, "http", "stdout", runs)
    )
    for module in [*CORE_MODULES, *_platform_import_modules()]:
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"import {module}",
                value=f"{await import_time_ms(module, runs):.0f} ms (cumulative, median of {runs})",
            )
        )
    for name in existing:
        async with _config(root, [name]) as config:
            imported = await _imported_by_run(config)
        strangers = sorted(
            module
            for other, modules in PLATFORM_IMPORTS.items()
            if other != name
            for module in modules
            if module in imported
        )
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"run with {name} only: other platforms imported",
                value=", ".join(strangers) or f"none ({len(imported)} modules imported)",
                target="none",
                met=not strangers,
            )
        )
    if agents:
        figures += await agent_startup.measure(root / "agents", runs=runs)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as root:
        figures = asyncio.run(measure(Path(root), runs=args.runs))
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()
