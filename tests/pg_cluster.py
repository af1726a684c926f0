"""A throwaway PostgreSQL cluster for tests and benchmarks (issue 18).

``initdb`` and ``pg_ctl`` from Debian's ``postgresql`` package (``/usr/lib/postgresql/*/bin``,
the newest version; ``AGENT_GATEWAY_PG_BINDIR`` names another directory) make a cluster in a
temp dir, listening only on a Unix socket in that dir (``listen_addresses = ''``: no TCP port),
with trust authentication for the role ``gateway`` (its superuser). It is stopped and removed
when the ``with`` block (or the test session) ends: no service is left running, even when
the process that started it is killed (a watchdog process waits on a pipe from it).

initdb refuses to run as root: as root, the cluster is made and run by the ``postgres``
system user (created by the Debian package), through ``runuser``, in a temp dir it owns.

The ``pg_cluster`` fixture (session-scoped) skips when the binaries are missing, and fails
instead under ``AGENT_GATEWAY_REQUIRE_REAL_AGENTS=1``, as the real-agent fixtures do
(tests/conftest.py); ``scripts/setup.sh`` installs the package.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

import psycopg
import pytest

__all__ = [
    "PgCluster",
    "find_pg_bindir",
    "fresh_database",
    "pg_cluster",
    "pg_database",
    "throwaway_cluster",
]

ROLE = "gateway"
DATABASE = "postgres"
SERVICE_USER = "postgres"  # the Debian package's system user: who runs the server as root
PG_LIB = Path("/usr/lib/postgresql")
REQUIRE_REAL = os.environ.get("AGENT_GATEWAY_REQUIRE_REAL_AGENTS") == "1"


@dataclass(frozen=True, slots=True)
class PgCluster:
    """A running cluster: connect as ``user`` to ``dbname`` through the socket in ``host``."""

    host: str  # the directory holding the Unix socket
    port: int  # names the socket file (.s.PGSQL.<port>); nothing listens on TCP
    user: str = ROLE
    dbname: str = DATABASE

    @property
    def dsn(self) -> str:
        """A libpq URL both asyncpg and psycopg take: the socket dir as ``host=``."""
        return f"postgresql://{self.user}@/{self.dbname}?host={quote(self.host)}&port={self.port}"

    def dsn_for(self, dbname: str) -> str:
        return f"postgresql://{self.user}@/{dbname}?host={quote(self.host)}&port={self.port}"


def find_pg_bindir() -> Path | None:
    """The directory with ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    configured = os.environ.get("AGENT_GATEWAY_PG_BINDIR")
    candidates = [Path(configured)] if configured else _installed_bindirs()
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def _installed_bindirs() -> list[Path]:
    if not PG_LIB.is_dir():
        return []
    versions = [p for p in PG_LIB.iterdir() if p.name.isdigit()]
    return [p / "bin" for p in sorted(versions, key=lambda p: int(p.name), reverse=True)]


@contextlib.contextmanager
def throwaway_cluster(bindir: Path, *, port: int = 5432) -> Iterator[PgCluster]:
    """initdb + pg_ctl start in a fresh temp dir; pg_ctl stop and remove it at the end."""
    as_root = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="agpg-"))  # short: a socket path has ~107 bytes
    try:
        root.chmod(0o700)
        if as_root:
            owner = pwd.getpwnam(SERVICE_USER)
            os.chown(root, owner.pw_uid, owner.pw_gid)
        data, log = root / "data", root / "server.log"

        def run(*argv: str) -> None:
            command = ["runuser", "-u", SERVICE_USER, "--", *argv] if as_root else list(argv)
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                detail = (done.stderr or done.stdout).strip()
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RuntimeError(f"{Path(argv[0]).name} failed: {detail}\n{tail}".rstrip())

        run(
            str(bindir / "initdb"),
            "--pgdata",
            str(data),
            "--username",
            ROLE,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--no-locale",
            "--no-sync",
            "--no-instructions",
        )
        server_options = (
            f"-c listen_addresses='' -c unix_socket_directories='{root}' -p {port}"
            " -c fsync=off -c full_page_writes=off"
        )
        pg_ctl = str(bindir / "pg_ctl")
        # -w: pg_ctl returns once the server accepts connections (it waits on the server)
        run(pg_ctl, "--pgdata", str(data), "--log", str(log), "-w", "-o", server_options, "start")
        stop = [pg_ctl, "--pgdata", str(data), "-w", "-m", "immediate", "stop"]
        watchdog = _watchdog(
            ["runuser", "-u", SERVICE_USER, "--", *stop] if as_root else stop, root
        )
        try:
            yield PgCluster(host=str(root), port=port)
        finally:
            try:
                run(pg_ctl, "--pgdata", str(data), "-w", "-m", "fast", "stop")
            finally:
                _release(watchdog)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Stops the cluster and removes its dir once its stdin ends: when the process that started
# the cluster ends, however it ends (a SIGKILLed pytest runs no finally), the pipe closes.
_WATCHDOG = """
import json, shutil, subprocess, sys
sys.stdin.buffer.read()
subprocess.run(json.loads(sys.argv[1]), capture_output=True, check=False)
shutil.rmtree(sys.argv[2], ignore_errors=True)
"""


def _watchdog(stop: list[str], root: Path) -> subprocess.Popen[bytes]:
    """A process of its own session that ends the cluster if this process dies first."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, json.dumps(stop), str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C to the tests' group does not end it early
    )


def _release(watchdog: subprocess.Popen[bytes]) -> None:
    """The cluster was stopped here: let the watchdog go (it finds nothing left to stop)."""
    assert watchdog.stdin is not None
    watchdog.stdin.close()
    watchdog.wait()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One throwaway cluster for the test session (see the module's docstring)."""
    bindir = find_pg_bindir()
    if bindir is None:
        message = (
            "PostgreSQL's initdb/pg_ctl not found under /usr/lib/postgresql/*/bin"
            " (set AGENT_GATEWAY_PG_BINDIR or run scripts/setup.sh as root)"
        )
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    with throwaway_cluster(bindir) as cluster:
        yield cluster


_numbers = itertools.count(1)


@contextlib.contextmanager
def fresh_database(cluster: PgCluster, *, template: str | None = None) -> Iterator[PgCluster]:
    """An empty database of its own on ``cluster`` (``CREATE DATABASE``; a copy of
    ``template`` if given), dropped at the end even while a connection to it is still open."""
    name = f"t{os.getpid()}_{next(_numbers)}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(cluster.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield PgCluster(host=cluster.host, port=cluster.port, user=cluster.user, dbname=name)
    finally:
        with psycopg.connect(cluster.dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def pg_database(pg_cluster: PgCluster) -> Iterator[PgCluster]:
    """An empty database for one test, on the session's cluster (its ``dsn`` names it)."""
    with fresh_database(pg_cluster) as database:
        yield database


@contextlib.contextmanager
def bench_ledger(prefix: str, refuse: Callable[[str], NoReturn]) -> Iterator[tuple[Path, str]]:
    """A bench's working dir and the DSN of a throwaway cluster, both gone at the end;
    ``refuse`` (argparse's ``parser.error``) where PostgreSQL is not installed."""
    bindir = find_pg_bindir()
    if bindir is None:
        refuse("needs PostgreSQL (scripts/setup.sh)")
    with tempfile.TemporaryDirectory(prefix=prefix) as root, throwaway_cluster(bindir) as cluster:
        yield Path(root), cluster.dsn
