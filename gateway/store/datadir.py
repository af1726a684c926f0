"""The data dir: where the ledger and the HMAC key live (DESIGN.md, "Authorization").

It is created 0700, tightened back to 0700 if group or others can reach it, refused if it is
not ours to tighten, and refused if it lies inside (or is) a project's work dir, where an
agent could read or commit the key and the database.

One gateway at a time (DESIGN.md, "Storage"): :func:`hold_data_dir` takes an exclusive
``flock`` on ``gateway.lock`` in the data dir for as long as the gateway runs, and writes who
holds it (pid, host, command, start time) into that file, so that a second gateway is refused
with a message naming the first, before its recovery could end the first one's agents. The
kernel drops the lock when the holder's process ends, however it ends (a crash leaves a
stale description in the file, overwritten by the next holder; the file itself is never
deleted, since a lock on a deleted file would not exclude a gateway that opens a new one).
The descriptor is not inherited by agent processes (``O_CLOEXEC``), which outlive a crashed
gateway. Readers (``agent-gateway ledger``) do not take the lock: SQLite's WAL lets them read
beside the writer.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from gateway.errors import DataDirInUse, StoreError

__all__ = ["LOCK_FILE", "check_data_dir", "hold_data_dir", "prepare_data_dir"]

log = logging.getLogger(__name__)

LOCK_FILE = "gateway.lock"
_HOLDER_MAX_BYTES = 4096


def check_data_dir(data_dir: Path, work_dirs: Iterable[Path]) -> None:
    """Raise StoreError if ``data_dir`` is, or lies inside, any of ``work_dirs``.

    Paths are compared after resolving symlinks, so a link into a work dir is caught too.
    The data dir need not exist yet.
    """
    data = data_dir.expanduser().resolve()
    for work_dir in work_dirs:
        work = work_dir.expanduser().resolve()
        if data == work or work in data.parents:
            raise StoreError(
                f"data dir {data} lies inside the project work dir {work}: an agent working "
                "there could read the ledger and the HMAC key; choose a data dir outside "
                "every project's work dir"
            )


def prepare_data_dir(data_dir: Path) -> Path:
    """Create ``data_dir`` with mode 0700 (or tighten it to 0700); return it resolved."""
    path = data_dir.expanduser().resolve()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise StoreError(f"cannot create the data dir {path}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"data dir {path} exists and is not a directory")
    if stat.S_IMODE(info.st_mode) & 0o077:
        if info.st_uid != os.getuid():
            raise StoreError(
                f"data dir {path} is open to group or others (mode "
                f"{stat.S_IMODE(info.st_mode):o}) and belongs to another user; refusing it"
            )
        try:
            path.chmod(0o700)
        except OSError as exc:
            raise StoreError(f"cannot restrict the data dir {path} to 0700: {exc}") from exc
    return path


@contextmanager
def hold_data_dir(data_dir: Path, *, work_dirs: Iterable[Path] = ()) -> Iterator[Path]:
    """Hold the data dir's exclusive lock for the block; yield the data dir, resolved.

    The data dir is checked (:func:`check_data_dir`) and prepared (:func:`prepare_data_dir`)
    first. Raises :class:`DataDirInUse` naming the holder if another gateway has it.
    """
    check_data_dir(data_dir, work_dirs)
    path = prepare_data_dir(data_dir)
    lock = path / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open the data dir's lock file {lock}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(path, _read_holder(fd)) from None
        except OSError as exc:
            raise StoreError(f"cannot lock the data dir {path}: {exc}") from exc
        _write_holder(fd, lock)
        log.debug("data dir %s locked by this process (pid %d)", path, os.getpid())
        try:
            yield path
        finally:
            # a clean stop leaves no description of a holder behind (best effort: the lock
            # itself goes with the descriptor)
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
    finally:
        os.close(fd)


def _write_holder(fd: int, lock: Path) -> None:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv)[:300],
        "started": datetime.now(UTC).astimezone().isoformat(timespec="seconds"),
    }
    data = json.dumps(holder).encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError as exc:
        raise StoreError(f"cannot write the data dir's lock file {lock}: {exc}") from exc


def _read_holder(fd: int) -> dict[str, object]:
    try:
        raw = os.pread(fd, _HOLDER_MAX_BYTES, 0)
        holder = json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _in_use(path: Path, holder: dict[str, object]) -> DataDirInUse:
    pid = holder.get("pid")
    pid = pid if isinstance(pid, int) else None
    if pid is None:
        who = "another agent-gateway (it has not recorded its pid)"
    else:
        who = f"agent-gateway pid {pid}"
        if holder.get("host"):
            who += f" on {holder['host']}"
        details = [str(holder[key]) for key in ("started", "command") if holder.get(key)]
        if details:
            who += f" (started {': '.join(details)})"
    return DataDirInUse(
        f"data dir {path} is in use by {who}; stop that gateway first, or give this one "
        "another data_dir",
        holder_pid=pid,
    )
