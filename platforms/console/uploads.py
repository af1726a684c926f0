"""Files picked in the console's message box (issue 32), kept until the agent's turn.

The browser posts them with the message (``multipart/form-data``; aiohttp spools each file
field to a temporary file, never the whole file in memory). Each is copied, in chunks, into
the console's own spool folder (a private temporary folder of this process) under a random
name, which is its reference; :meth:`Uploads.fetch` streams it back when the host that runs
the session fetches it (the console runs in that process). The spool is removed when the
console closes: a prompt still held then loses its console files, and is refused with the
reason when it is resumed.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import IO

from gateway.attachments import InboundAttachment
from gateway.errors import PlatformError

__all__ = ["CHUNK_BYTES", "MAX_UPLOAD_BYTES", "Uploads"]

CHUNK_BYTES = 256 * 1024
# what one posted message may carry (the projects' own limits are checked by the gateway)
MAX_UPLOAD_BYTES = 256 * 1024 * 1024


class Uploads:
    def __init__(self) -> None:
        self._spool: Path | None = None

    def keep(self, name: str, data: IO[bytes]) -> InboundAttachment:
        """Copy a posted file into the spool; its attachment (its size counted)."""
        if self._spool is None:
            self._spool = Path(tempfile.mkdtemp(prefix="agent-gateway-console-"))
        reference = secrets.token_hex(16)
        size = 0
        with (self._spool / reference).open("xb") as out:
            while chunk := data.read(CHUNK_BYTES):
                out.write(chunk)
                size += len(chunk)
        return InboundAttachment(name=name or "file", reference=reference, size=size)

    async def fetch(self, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
        reference = attachment.reference
        if self._spool is None or not reference.isalnum():
            raise PlatformError("the console no longer has this file (the gateway restarted)")
        try:
            source = (self._spool / reference).open("rb")
        except FileNotFoundError:
            raise PlatformError(
                "the console no longer has this file (the gateway restarted)"
            ) from None
        with source:
            while chunk := source.read(CHUNK_BYTES):
                yield chunk

    def close(self) -> None:
        if self._spool is not None:
            shutil.rmtree(self._spool, ignore_errors=True)
            self._spool = None
