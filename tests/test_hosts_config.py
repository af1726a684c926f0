"""Several hosts, one config (issue 19, design point 1): ``[projects.X] host``, the shared
``[gateway] hmac_key_file``, and ``check --host`` through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.hmac_key import HMAC_KEY_BYTES, read_hmac_key
from gateway.config.model import check_config
from gateway.errors import ConfigError
from platforms.registry import parse_config

STORE = 'store = "postgresql://gateway@127.0.0.1:5432/ledger"'
ACP = Path(__file__).parent / "agents" / "acp_scripted.py"


def _text(tmp_path: Path, *, store: bool, key: bool, hosts: tuple[str | None, str | None]) -> str:
    """Two projects, p and q, each on the host given (None: no host key)."""
    gateway = [f"data_dir = {json.dumps(str(tmp_path / 'data'))}"]
    if store:
        gateway.append(STORE)
    if key:
        gateway.append(f"hmac_key_file = {json.dumps(str(tmp_path / 'hmac.key'))}")
    projects = ""
    for name, host in zip(("p", "q"), hosts, strict=True):
        work = tmp_path / f"work-{name}"
        work.mkdir(exist_ok=True)
        projects += f"""
[projects.{name}]
work_dir = {json.dumps(str(work))}
agent = "acp"
argv = {json.dumps([sys.executable, str(ACP)])}
{"" if host is None else f'host = "{host}"'}

[projects.{name}.auth.memory]
allow_from = ["*"]
"""
    return "[gateway]\n" + "\n".join(gateway) + "\n" + projects + "\n[platforms.memory]\n"


def _refusal(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "gw.toml", env={})
    return str(caught.value)


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(needle))


def _write_key(tmp_path: Path, data: bytes | None = None, mode: int = 0o600) -> Path:
    path = tmp_path / "hmac.key"
    path.write_bytes(os.urandom(HMAC_KEY_BYTES) if data is None else data)
    path.chmod(mode)
    return path


def test_host_without_a_shared_store_is_refused_naming_the_key_and_line(tmp_path: Path) -> None:
    text = _text(tmp_path, store=False, key=False, hosts=("a", None))
    message = _refusal(text)
    assert (
        f"gw.toml:{_line(text, 'host = ')}: projects.p.host: host needs a shared store: "
        'set [gateway] store = "postgresql://…"' in message
    )
    assert "projects.q" not in message


def test_a_postgresql_store_needs_every_projects_host_and_the_key_file(tmp_path: Path) -> None:
    text = _text(tmp_path, store=True, key=False, hosts=("a", None))
    message = _refusal(text)
    # a key that is not written is named at the line of its table
    assert f"gw.toml:{_line(text, '[projects.q]')}: projects.q.host: required" in message
    assert f"gw.toml:{_line(text, '[gateway]')}: gateway.hmac_key_file: required" in message
    assert "projects.p.host" not in message


def test_a_config_of_two_hosts_says_which_projects_each_runs(tmp_path: Path) -> None:
    config = parse_config(_text(tmp_path, store=True, key=True, hosts=("a", "b")), env={})
    assert list(config.projects_on("a")) == ["p"]
    assert list(config.projects_on("b")) == ["q"]
    assert config.projects_on("c") == {}
    assert config.gateway.hmac_key_file == tmp_path / "hmac.key"
    # a single-host config: every project runs wherever the gateway runs
    single = parse_config(_text(tmp_path, store=False, key=False, hosts=(None, None)), env={})
    assert list(single.projects_on("anything")) == ["p", "q"]


@pytest.mark.parametrize(
    ("data", "mode", "said"),
    [
        (None, 0o600, None),
        (b"short", 0o600, "is not 32 bytes"),
        (None, 0o640, "is readable by others: chmod 600 it"),
    ],
    ids=["good", "wrong-size", "readable-by-others"],
)
def test_the_shared_key_file_is_read_never_made(
    tmp_path: Path, data: bytes | None, mode: int, said: str | None
) -> None:
    missing = tmp_path / "hmac.key"
    with pytest.raises(ConfigError, match="does not exist: copy the one the other hosts use"):
        read_hmac_key(missing)
    assert not missing.exists()  # never created
    path = _write_key(tmp_path, data, mode)
    if said is None:
        assert read_hmac_key(path) == path.read_bytes()
    else:
        with pytest.raises(ConfigError, match=said):
            read_hmac_key(path)
        config = parse_config(_text(tmp_path, store=True, key=True, hosts=("a", "b")), env={})
        [problem] = check_config(config, "a")
        assert problem.key == "gateway.hmac_key_file" and said in str(problem)


def _check(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_probes_only_this_hosts_projects_and_names_those_skipped(tmp_path: Path) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(_text(tmp_path, store=True, key=True, hosts=("a", "b")))
    _write_key(tmp_path)
    (tmp_path / "work-q").rmdir()  # b's work dir is on b: a does not look for it
    done = _check(config, "--host", "a")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "p: acp via" in done.stdout
    assert "q: acp via" not in done.stdout
    assert "host a: skipped, run elsewhere: q (host b)" in done.stdout
    assert "config OK" in done.stdout
    done = _check(config, "--host", "b")
    assert done.returncode == 1
    assert "projects.q.work_dir:" in done.stdout and "is not a directory" in done.stdout
    assert "skipped, run elsewhere: p (host a)" in done.stdout
    # without --host: the machine's hostname, which runs neither project here
    done = _check(config)
    assert "skipped, run elsewhere: p (host a), q (host b)" in done.stdout
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_refuses_a_host_name_that_is_not_one(tmp_path: Path) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(_text(tmp_path, store=False, key=False, hosts=(None, None)))
    done = _check(config, "--host", "a b")
    assert done.returncode == 2
    assert "--host" in done.stderr
