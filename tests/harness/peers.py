"""Which process holds the other end of a loopback TCP connection (Linux ``/proc``): a fake
server knows a client only by its address and port, a test knows its processes by pid.

    pid_of_port(54321, [a.pid, b.pid, c.pid])   # the one whose socket has local port 54321
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["pid_of_port"]


def _inodes_of_local_port(port: int) -> set[str]:
    """The socket inodes whose local port is ``port`` (IPv4 and IPv6 tables)."""
    inodes: set[str] = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port:
                inodes.add(fields[9])
    return inodes


def pid_of_port(port: int, pids: Iterable[int]) -> int | None:
    """The process of ``pids`` with an open socket whose local port is ``port``, or None
    (the socket closed, or another process holds it)."""
    inodes = _inodes_of_local_port(port)
    if not inodes:
        return None
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        try:
            names = os.listdir(fds)
        except OSError:  # ended
            continue
        for name in names:
            try:
                target = os.readlink(fds / name)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return pid
    return None
