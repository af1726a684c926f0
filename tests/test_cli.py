"""The command line, run as a user runs it: ``python -m gateway ...`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.domain import AgentKind, InteractionKind, InteractionRequest
from gateway.store.store import Store


def _config(
    tmp_path: Path, argv: list[str], extra: str = "", agent: str = "codex-app-server"
) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.p]
work_dir = {json.dumps(str(work))}
agent = "{agent}"
argv = {json.dumps(argv)}
{extra}

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    )
    return path


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


@pytest.mark.real_agent("codex")
def test_check_probes_the_agent_version(codex_bin: str, tmp_path: Path) -> None:
    done = _cli("check", "--config", str(_config(tmp_path, [codex_bin])))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "codex-cli 0.171.0" in done.stdout
    assert "config OK" in done.stdout


@pytest.mark.real_agent("opencode")
def test_check_probes_opencode_and_refuses_codex_options_for_it(
    opencode_bin: str, tmp_path: Path
) -> None:
    done = _cli("check", "--config", str(_config(tmp_path, [opencode_bin], agent="opencode")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1.18.33" in done.stdout and "config OK" in done.stdout
    wrong = _config(tmp_path, [opencode_bin], 'sandbox = "read-only"', agent="opencode")
    done = _cli("check", "--config", str(wrong))
    assert done.returncode != 0
    assert "projects.p.agent_options.sandbox" in done.stdout + done.stderr
    assert "does not apply to agent opencode" in done.stdout + done.stderr


def test_check_asks_an_acp_agent_initialize(tmp_path: Path) -> None:
    agent = Path(__file__).parent / "agents" / "acp_scripted.py"
    path = _config(tmp_path, [sys.executable, str(agent)])
    path.write_text(path.read_text().replace('"codex-app-server"', '"acp"'))
    done = _cli("check", "--config", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "p: acp via" in done.stdout
    assert "acp-scripted 0.0.1 (ACP v1, loads sessions)" in done.stdout


def test_check_names_the_key_and_line_of_a_bad_value(tmp_path: Path) -> None:
    path = _config(tmp_path, ["codex"], extra='sandbox = "danger-full-access"')
    done = _cli("check", "--config", str(path))
    assert done.returncode == 2
    assert "sandbox" in done.stderr and "gateway.toml:" in done.stderr
    assert "allow_dangerous" in done.stderr


def test_check_names_the_key_and_line_of_a_platform_table_problem(tmp_path: Path) -> None:
    path = _config(tmp_path, ["codex"])
    with path.open("a") as file:
        file.write('\n[platforms.console]\nidentity = "local:alice"\nhots = "x"\n')
        file.write("\n[platforms.matrix]\n")  # no such platform
    lines = path.read_text().splitlines()
    done = _cli("check", "--config", str(path))
    assert done.returncode == 2
    hots, matrix = lines.index('hots = "x"') + 1, lines.index("[platforms.matrix]") + 1
    assert f"gateway.toml:{hots}: platforms.console.hots: unknown key" in done.stderr
    assert f"gateway.toml:{matrix}: platforms.matrix: unknown platform" in done.stderr


def test_check_reports_a_missing_agent_binary(tmp_path: Path) -> None:
    done = _cli("check", "--config", str(_config(tmp_path, [str(tmp_path / "no-codex")])))
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert said.count("no-codex") == 1, said  # said once, not again by a probe
    assert "not found" in said and "1 problem(s)" in said


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_check_reports_every_project_even_after_one_fails_or_hangs(tmp_path: Path) -> None:
    """Each project gets its line, OK or its problem; a probe that hangs is one problem
    among others, stopped after --probe-timeout, not a traceback that ends the check."""
    fails = _script(tmp_path / "fails", 'echo "cannot load my config" >&2; exit 3')
    hangs = _script(tmp_path / "hangs", "exec sleep 600")
    works = _script(tmp_path / "works", 'echo "fake-codex 0.171.0"')
    work = tmp_path / "work"
    work.mkdir()
    projects = "".join(
        f"""
[projects.{name}]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
argv = [{json.dumps(argv)}]
auth.memory = {{ allow_from = ["*"] }}
"""
        for name, argv in (("first", fails), ("second", hangs), ("third", works))
    )
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"[gateway]\ndata_dir = {json.dumps(str(tmp_path / 'data'))}\n{projects}\n"
        "[platforms.memory]\n"
    )

    done = _cli("check", "--config", str(config), "--probe-timeout", "0.5")

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        f"first: codex-app-server via {fails}: FAILED: {fails} --version failed: exited with "
        "code 3; stderr ends with: cannot load my config",
        f"second: codex-app-server via {hangs}: FAILED: {hangs} --version did not answer "
        "within 0.5 s",
        f"third: codex-app-server via {works}: fake-codex 0.171.0",
        "2 problem(s)",
    ], done.stdout
    assert "Traceback" not in done.stderr, done.stderr


async def test_ledger_lists_pending_interactions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Store.open(data) as store:
        session = await store.sessions.create(project="p", agent_kind=AgentKind.CODEX_APP_SERVER)
        epoch = await store.sessions.begin_epoch(
            session.id, pid=None, pgid=None, process_start_time=None
        )
        request = InteractionRequest(
            native_key="rpc:0", kind=InteractionKind.APPROVAL, title="Run a command"
        )
        opened = await store.interactions.create(session.id, epoch, request)
    done = _cli("ledger", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "Pending (1)" in done.stdout
    assert opened.interaction.id in done.stdout and "Run a command" in done.stdout
