"""The throwaway PostgreSQL cluster (tests/pg_cluster.py) that the ledger's PostgreSQL tests use."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.pg_cluster import PgCluster, find_pg_bindir, fresh_database, throwaway_cluster


async def test_the_cluster_answers_on_its_socket_and_nowhere_else(pg_cluster: PgCluster) -> None:
    async with await psycopg.AsyncConnection.connect(pg_cluster.dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT 1")
        assert await cur.fetchone() == (1,)
        cur = await conn.execute("SHOW listen_addresses")
        assert await cur.fetchone() == ("",)  # no TCP port
        cur = await conn.execute("SELECT current_user")
        assert await cur.fetchone() == (pg_cluster.user,)
    assert (Path(pg_cluster.host) / f".s.PGSQL.{pg_cluster.port}").is_socket()


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody has reaped yet has stopped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "zombie" not in state


def test_a_cluster_leaves_no_server_and_no_files_behind(pg_cluster: PgCluster) -> None:
    bindir = find_pg_bindir()  # pg_cluster ran: the binaries are there
    assert bindir is not None
    with throwaway_cluster(bindir, port=5433) as cluster:
        root = Path(cluster.host)
        pid = int((root / "data" / "postmaster.pid").read_text().split()[0])
        assert _running(pid)
        with psycopg.connect(cluster.dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert not _running(pid)
    assert not root.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.dsn, connect_timeout=2)


def test_a_fresh_database_is_empty_and_dropped_after(pg_cluster: PgCluster) -> None:
    with fresh_database(pg_cluster) as first, fresh_database(pg_cluster) as second:
        assert first.dbname != second.dbname
        with psycopg.connect(first.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE notes (body text)")
            conn.execute("INSERT INTO notes VALUES ('only here')")
            with psycopg.connect(second.dsn) as other:  # another database sees none of it
                found = other.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'notes'")
                assert found.fetchone() == (0,)
    with psycopg.connect(pg_cluster.dsn) as admin:
        names = admin.execute(
            "SELECT count(*) FROM pg_database WHERE datname IN (%s, %s)",
            (first.dbname, second.dbname),
        ).fetchone()
    assert names == (0,)


_KILLED_HOLDER = """
import os, signal, sys
from pathlib import Path
from tests.pg_cluster import throwaway_cluster
with throwaway_cluster(Path(sys.argv[1]), port=5434) as cluster:
    root = Path(cluster.host)
    postmaster = (root / "data" / "postmaster.pid").read_text().split()[0]
    print(root, postmaster, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no finally runs
"""


def _watchdog_of(root: Path) -> int | None:
    """The pid of the process whose command line names ``root`` and runs Python's ``-c``;
    None once it has ended (it may end between a look at ``root`` and this one)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-c" in argv and str(root).encode() in argv:
            return int(entry.name)
    return None


def _wait_ended(pid: int) -> None:
    """Wait for ``pid`` (not our child) to end: its pidfd becomes readable then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        readable, _, _ = select.select([fd], [], [], 60)
        assert readable, f"process {pid} still runs"
    finally:
        os.close(fd)


def test_a_cluster_whose_starter_is_killed_is_stopped_and_removed(pg_cluster: PgCluster) -> None:
    bindir = find_pg_bindir()
    assert bindir is not None
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_HOLDER, str(bindir)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    root_name, postmaster = done.stdout.split()
    root = Path(root_name)
    watchdog = _watchdog_of(root) if root.exists() else None
    if watchdog is not None:
        _wait_ended(watchdog)
    assert not _running(int(postmaster))
    assert not root.exists()
