"""Process groups seen from outside: kernel start times, group signals, leftover clean-up.

An agent runs as the leader of its own process group (see ``adapters/stdio.py``). This module
holds what does not need the running ``AgentProcess``: reading a process's start time and group
from ``/proc``, signalling a whole group, and ending the group of an agent that a crashed
gateway left behind, without ever signalling a process that merely reuses the pid.

    start = read_process_start_time(pid)                     # record pid, pgid, start time
    outcome = await end_leftover_process_group(pid, pgid, start)   # after a crash

``/proc`` is Linux-only; elsewhere start times are None and no leftover is ever found.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal as signals
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = [
    "DEFAULT_STOP_GRACE_SECONDS",
    "LeftoverOutcome",
    "end_leftover_process_group",
    "read_process_start_time",
    "signal_name",
    "signal_process_group",
]

log = logging.getLogger(__name__)

DEFAULT_STOP_GRACE_SECONDS = 5.0
# Only where the kernel cannot tell us (no pidfd) that a process that is not our child exited.
_LEFTOVER_POLL_SECONDS = 0.02


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; a plain description for a number with no name."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True, kw_only=True, slots=True)
class _ProcStat:
    pid: int
    state: str
    pgid: int
    start_time: int


def _read_proc_stat(pid: int) -> _ProcStat | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # Field 2 (comm) is in parentheses and may itself hold spaces and parentheses: the fields
    # after the last ")" start at field 3 (proc(5)).
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return _ProcStat(
            pid=pid, state=fields[0].decode(), pgid=int(fields[2]), start_time=int(fields[19])
        )
    except (IndexError, ValueError):
        return None


def read_process_start_time(pid: int) -> int | None:
    """The kernel start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22).

    A pid is reused once its process is gone; pid plus start time names one process for the
    lifetime of the machine. None when there is no such process (or no /proc).
    """
    stat = _read_proc_stat(pid)
    return None if stat is None else stat.start_time


def _live_group_members(pgid: int) -> list[_ProcStat]:
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            stat = _read_proc_stat(int(entry))
            # A zombie is dead: it only waits for a parent (maybe not us) to reap it.
            if stat is not None and stat.pgid == pgid and stat.state not in ("Z", "X"):
                members.append(stat)
    return members


def signal_process_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to every member of group ``pgid``; an empty group is not an error."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the group is already empty
    except PermissionError:
        log.warning("not allowed to send %s to process group %d", signal_name(sig), pgid)


class LeftoverOutcome(StrEnum):
    NONE_FOUND = "none_found"  # nothing of that process group is alive
    NOT_OURS = "not_ours"  # the pid or group now belongs to another process: left alone
    TERMINATED = "terminated"  # the group ended within the grace period after SIGTERM
    KILLED = "killed"  # the group had to be sent SIGKILL


async def end_leftover_process_group(
    pid: int, pgid: int, start_time: int, grace: float = DEFAULT_STOP_GRACE_SECONDS
) -> LeftoverOutcome:
    """End an agent's process group left over by a gateway that crashed.

    ``pid``, ``pgid`` and ``start_time`` are what an earlier gateway recorded for the agent.
    If ``pid`` is alive with another start time, the pid was reused and nothing is signalled.
    If the agent itself is gone, its children may still run in its group: the kernel keeps a
    group's number from being reused while any member lives, and every member of the agent's
    group started after the agent did, so a member that started earlier means the number now
    names someone else's group, which is then left alone.
    """
    leader_start = read_process_start_time(pid)
    if leader_start is not None and leader_start != start_time:
        return LeftoverOutcome.NOT_OURS
    members = _live_group_members(pgid)
    if not members:
        return LeftoverOutcome.NONE_FOUND
    if any(member.start_time < start_time for member in members):
        return LeftoverOutcome.NOT_OURS
    signal_process_group(pgid, signals.SIGTERM)
    try:
        async with asyncio.timeout(grace):
            # Look again after each exit: a member may have forked before it got SIGTERM.
            while members := _live_group_members(pgid):
                await _process_exit(members[0].pid)
        return LeftoverOutcome.TERMINATED
    except TimeoutError:
        signal_process_group(pgid, signals.SIGKILL)
        return LeftoverOutcome.KILLED


async def _process_exit(pid: int) -> None:
    """Return once ``pid`` has exited; it need not be our child (a pidfd says so)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # a kernel without pidfd: look again a little later
        await asyncio.sleep(_LEFTOVER_POLL_SECONDS)
        return
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, on_readable)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
