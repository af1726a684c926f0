"""``[gateway] store``: the ledger on PostgreSQL chosen in the config (issue 18), its password
kept out of the URL, the logs and the config's repr, and the ledger commands on it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.config.model import Config
from gateway.domain import AgentKind, InteractionKind, InteractionRequest
from gateway.errors import ConfigError
from gateway.store.store import Store
from platforms.registry import load_config
from tests.console_harness import CONSOLE_TABLES
from tests.pg_cluster import PgCluster
from tests.test_cli_logging import DEBUG_LINE, console_serves, run_until

PASSWORD = "s3cret-pg-password-77"  # the throwaway cluster trusts the role: any password works


def _config(tmp_path: Path, gateway_lines: str) -> Path:
    """With a store: the project on host "a" and the hosts' key file (issue 19), which a
    PostgreSQL store requires."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = tmp_path / "gateway.toml"
    shared = "store =" in gateway_lines
    key = f"hmac_key_file = {json.dumps(str(tmp_path / 'hmac.key'))}" if shared else ""
    path.write_text(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
log_level = "debug"
{gateway_lines}
{key}

[projects.p]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
{'host = "a"' if shared else ""}

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    )
    return path


def _load(path: Path, env: dict[str, str] | None = None) -> Config:
    return load_config(path, env=env or {})


def test_no_store_is_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    assert _load(_config(tmp_path, "")).gateway.ledger_target() is None


def test_the_password_comes_from_the_environment_and_is_never_shown(tmp_path: Path) -> None:
    lines = 'store = "postgresql://gateway@db.example:5433/ledger"\nstore_password = "${PGPW}"'
    config = _load(_config(tmp_path, lines), {"PGPW": PASSWORD})
    target = config.gateway.ledger_target()
    assert target is not None and target.password == PASSWORD
    assert PASSWORD not in repr(config) and PASSWORD not in repr(target)
    assert str(target) == "postgresql gateway@db.example:5433/ledger"


def test_the_password_comes_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "pg-password"
    secret.write_text(PASSWORD + "\n")
    lines = (
        'store = "postgresql://gateway@db.example/ledger"\n'
        f"store_password_file = {json.dumps(str(secret))}"
    )
    target = _load(_config(tmp_path, lines)).gateway.ledger_target()
    assert target is not None and target.password == PASSWORD


def test_a_url_with_a_password_is_refused_naming_store_password(tmp_path: Path) -> None:
    lines = f'store = "postgresql://gateway:{PASSWORD}@db.example/ledger"'
    with pytest.raises(ConfigError) as refused:
        _load(_config(tmp_path, lines))
    assert "store_password" in str(refused.value)
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize("store", ["ledger.sqlite3", "mysql://x@y/z"], ids=["path", "mysql"])
def test_a_store_that_is_not_a_postgresql_url_is_refused(tmp_path: Path, store: str) -> None:
    with pytest.raises(ConfigError, match="postgresql://"):
        _load(_config(tmp_path, f"store = {json.dumps(store)}"))


def test_a_password_without_a_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="store_password"):
        _load(_config(tmp_path, f'store_password = "{PASSWORD}"'))


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )


async def test_the_ledger_commands_read_postgresql_and_never_log_the_password(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    lines = f"store = {json.dumps(pg_database.dsn)}\nstore_password = " + '"${PGPW}"'
    config_path = _config(tmp_path, lines)
    target = PgTarget(url=pg_database.dsn, password=PASSWORD)
    async with Store.open(tmp_path / "data", postgresql=target) as store:
        session = await store.sessions.create(project="p", agent_kind=AgentKind.CODEX_APP_SERVER)
        epoch = await store.sessions.begin_epoch(
            session.id, pid=None, pgid=None, process_start_time=None
        )
        request = InteractionRequest(
            native_key="rpc:0", kind=InteractionKind.APPROVAL, title="Run a command"
        )
        opened = await store.interactions.create(session.id, epoch, request)
    assert not (tmp_path / "data" / "ledger.sqlite3").exists()

    listed = _cli("ledger", "--config", str(config_path), env={"PGPW": PASSWORD})
    assert listed.returncode == 0, listed.stderr
    assert "Pending (1)" in listed.stdout and opened.interaction.id in listed.stdout
    exported = _cli(
        "audit", "--config", str(config_path), "--since", "2000-01-01", env={"PGPW": PASSWORD}
    )
    assert exported.returncode == 0, exported.stderr
    [record] = [json.loads(line) for line in exported.stdout.splitlines()]
    assert record["interaction"] == opened.interaction.id
    for done in (listed, exported):
        assert PASSWORD not in done.stdout + done.stderr


async def test_a_gateway_on_postgresql_never_writes_the_password_at_debug(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    secret = tmp_path / "pg-password"
    secret.write_text(PASSWORD + "\n")
    work = tmp_path / "work"
    work.mkdir()
    key = tmp_path / "hmac.key"  # a PostgreSQL store: the hosts' key, each project's host
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
log_level = "debug"
store = {json.dumps(pg_database.dsn)}
store_password_file = {json.dumps(str(secret))}
hmac_key_file = {json.dumps(str(key))}

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
argv = ["/nonexistent/codex"]
host = {json.dumps(socket.gethostname())}

{CONSOLE_TABLES}
"""
    )
    output = await run_until(config, console_serves)
    assert f"ledger postgresql gateway@{pg_database.host}:" in output, output
    assert DEBUG_LINE.search(output), output
    assert PASSWORD not in output
    assert not (tmp_path / "data" / "ledger.sqlite3").exists()
