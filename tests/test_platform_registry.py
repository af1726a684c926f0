"""The platform registry: a config imports only the platforms it names, and reading it (check)
imports no platform SDK; only ``run`` brings a platform's SDK in, and only its own.

The real command line runs in a subprocess, as ``python -m gateway`` (``runpy``), and writes
the names in its ``sys.modules`` to a file when it exits. (``-X importtime`` would not do: it
leaves out modules imported by ``importlib.import_module``, as the registry imports them.)
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from platforms.registry import PLATFORMS
from tests.servers.fake_telegram import TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 45.0
# what a platform's config module may bring in besides the standard library and gateway
PYDANTIC = frozenset(
    {"pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection"}
)
# chat SDKs that a config with only Telegram must not import (not installed here: an attempt
# to import one would end the command, which its exit code shows)
OTHER_SDKS = ("slack_bolt", "slack_sdk", "discord")


# python -m gateway, and sys.modules written to the file named by its first argument at exit
CLI = (
    "import atexit, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "def save():\n"
    "    with open(out, 'w') as file:\n"
    "        file.write('\\n'.join(sorted(sys.modules)))\n"
    "atexit.register(save)\n"
    "sys.argv[0] = 'agent-gateway'\n"
    "runpy.run_module('gateway', run_name='__main__', alter_sys=True)\n"
)


def _cli(modules: Path, *args: str) -> list[str]:
    """The argv of ``agent-gateway *args`` that leaves its modules' names in ``modules``."""
    return [sys.executable, "-c", CLI, str(modules), *args]


def _under(modules: set[str], package: str) -> set[str]:
    return {name for name in modules if name == package or name.startswith(f"{package}.")}


def _config(tmp_path: Path, tables: str, auth: str = "telegram") -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.p]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
argv = [{json.dumps(sys.executable)}]

[projects.p.auth.{auth}]
allow_from = ["*"]
{tables}
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("name", PLATFORMS.names())
def test_a_platform_config_module_imports_only_pydantic_and_gateway(name: str) -> None:
    module = PLATFORMS.entry(name).config
    code = (
        "import sys; before = set(sys.modules); "
        f"import {module}; print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    imported = set(done.stdout.split())
    assert module in imported
    foreign = {
        name
        for name in imported
        if name.split(".")[0] not in sys.stdlib_module_names | PYDANTIC | {"gateway", "platforms"}
        and not name.startswith("_sysconfigdata")
    }
    assert foreign == set()
    assert _under(imported, "platforms") == {"platforms", f"platforms.{name}", module}


async def test_check_with_only_telegram_reads_its_config_without_its_sdk(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:  # check asks it which bot the token is
        table = f'[platforms.telegram]\ntoken = "{TOKEN}"\nbase_url = "{fake.base_url}"\n'
        path = _config(tmp_path, table)
        modules = tmp_path / "modules"
        proc = await asyncio.create_subprocess_exec(
            *_cli(modules, "check", "--config", str(path)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=ROOT,
        )
        async with asyncio.timeout(60):
            out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()
    assert "config OK" in out.decode()
    imported = set(modules.read_text().split())
    assert "platforms.telegram.config" in imported  # validated by its own model
    assert _under(imported, "telegram") == set()  # python-telegram-bot
    assert _under(imported, "platforms") == {
        "platforms",
        "platforms.registry",
        "platforms.telegram",
        "platforms.telegram.config",
        "platforms.telegram.probe",  # getMe, with aiohttp (the core's)
    }
    assert not any(_under(imported, sdk) for sdk in (*OTHER_SDKS, "httpx"))


async def _imported_until_running(config: Path, modules: Path) -> tuple[int, set[str], str]:
    """Run ``agent-gateway run`` until it logs that it runs, then stop it with SIGINT: its
    exit code, the modules it imported, and its stderr."""
    process = await asyncio.create_subprocess_exec(
        *_cli(modules, "run", "--config", str(config)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=ROOT,
    )
    assert process.stderr is not None
    lines: list[str] = []
    running = asyncio.Event()

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for raw in process.stderr:  # drained throughout: a full pipe would block it
            lines.append(raw.decode(errors="replace"))
            if "agent-gateway running" in lines[-1]:
                running.set()

    async with asyncio.TaskGroup() as tasks:
        reading = tasks.create_task(read_stderr())
        waiting = tasks.create_task(running.wait())
        try:
            async with asyncio.timeout(DEADLINE):
                await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
    async with asyncio.timeout(DEADLINE):
        code = await process.wait()
    log = "".join(lines)
    assert running.is_set(), log
    return code, set((await asyncio.to_thread(modules.read_text)).split()), log


async def test_run_with_only_telegram_imports_no_other_platform(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        path = _config(
            tmp_path,
            f'[platforms.telegram]\ntoken = "{TOKEN}"\nbase_url = "{fake.base_url}"\n'
            "poll_timeout_seconds = 1\n",
        )
        code, imported, log = await _imported_until_running(path, tmp_path / "modules")
    assert code == 0, log
    assert "telegram" in imported and "platforms.telegram.platform" in imported
    others = [f"platforms.{name}" for name in PLATFORMS.names() if name != "telegram"]
    assert [module for module in (*others, *OTHER_SDKS) if _under(imported, module)] == []


def test_run_refuses_a_config_with_no_platform_it_starts(tmp_path: Path) -> None:
    path = _config(tmp_path, "[platforms.memory]\n", auth="memory")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "no chat platform to run (memory: for tests and embedding)" in done.stderr
    assert "add one of: console, telegram, slack" in done.stderr


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_the_core_config_code_names_no_platform() -> None:
    names = {*PLATFORMS.names(), *PLATFORMS.auth_tables(), "slack", "discord"}
    # a word of its own: "~/.local/share" names no platform
    word = re.compile(rf"(?<![./])\b({'|'.join(sorted(names))})\b", re.IGNORECASE)
    named = [
        f"{path}:{line}: {text!r}"
        for path in (
            "gateway/config/model.py",
            "gateway/config/sources.py",
            "gateway/config/platform_tables.py",
        )
        for line, text in _string_constants(ROOT / path)
        if word.search(text)
    ]
    assert named == []


def test_every_platform_the_registry_builds_has_every_method_of_the_contract() -> None:
    """A method added to the Platform protocol must be added to every platform: the
    registry imports factories by name, so the type checker never sees this."""
    import importlib
    import inspect

    from gateway.platform import Platform

    members = [
        name
        for name, value in vars(Platform).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]
    assert "mark_queued" in members and "send_card" in members
    for name in PLATFORMS.names():
        factory = PLATFORMS.entry(name).factory
        if factory is None:
            continue
        module, _, attribute = factory.partition(":")
        cls = getattr(importlib.import_module(module), attribute)
        for member in members:
            method = getattr(cls, member, None)
            assert method is not None, f"{name} has no {member}"
            wanted = inspect.iscoroutinefunction(getattr(Platform, member))
            assert inspect.iscoroutinefunction(method) == wanted, f"{name}.{member}"
