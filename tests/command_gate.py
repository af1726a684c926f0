"""A command of the agent's that runs until the test lets it end: a turn that is running,
with no card waiting, for as long as a test needs, timed by events, never by sleeps.

The model asks for ``cat gate``; :func:`command_gate` makes ``gate`` a FIFO in the agent's
workspace and yields its write end once the command opened it to read (the command runs
then); writing a line ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

__all__ = ["command_gate"]


@asynccontextmanager
async def command_gate(fifo: Path) -> AsyncIterator[int]:
    """The write end of ``fifo``, open once the agent's command reads it (the command is
    running then); a gate never reached is released so that no thread is left blocked."""
    os.mkfifo(fifo)
    opening = asyncio.ensure_future(asyncio.to_thread(os.open, fifo, os.O_WRONLY))
    try:
        fd = await asyncio.wait_for(asyncio.shield(opening), 60)
    except BaseException:
        release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the blocked open return
        with contextlib.suppress(BaseException):
            os.close(await opening)
        os.close(release)
        raise
    try:
        yield fd
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
