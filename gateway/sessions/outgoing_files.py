"""A file the agent asks to send (``send_file``): opened first, then checked where it is.

The order is the point (DESIGN.md, "Beyond the approval": nothing leaves unseen): resolving
a path and then opening it lets a link be swapped in between, so the file is opened first
and the check is made on what was opened. On Linux the path is opened ``O_PATH`` (no read,
no side effect: a FIFO does not block, a device is not touched), the kernel says where that
descriptor really is (``/proc/self/fd/N``), and only a regular file inside the session's work
dir is then opened for reading, through the same descriptor (the same inode, whatever
happens to the path meanwhile). Elsewhere the path is opened ``O_NOFOLLOW | O_NONBLOCK`` and
its inode compared with the resolved path's. A link inside the work dir to a file inside it
is followed; a link that points out, ``..`` that climbs out, an absolute path elsewhere are
refused, and the agent is told why.

The bytes are read at once (up to the limit), so what a person approves is what is sent.
:func:`ask_reasons` says why a person should look first where no rule says so: a dotfile,
anything under ``.git/``, a file larger than the project's ``ask_above``, and a file with
hard links (the kernel cannot say where its other names are: one may be outside).
"""

from __future__ import annotations

import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gateway.domain import OutgoingFile
from gateway.wording import file_size

__all__ = [
    "PICTURE_TYPES",
    "PREVIEW_LINES",
    "OpenedFile",
    "SendRefused",
    "ask_reasons",
    "open_in_work_dir",
    "sniff_type",
]

PREVIEW_LINES = 12
_PREVIEW_CHARS = 1500
_SNIFF_BYTES = 8192
PICTURE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_HAS_O_PATH = hasattr(os, "O_PATH") and Path("/proc/self/fd").is_dir()


class SendRefused(Exception):
    """The file is not sent; ``str(exc)`` is what the agent reads."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenedFile:
    relative: str  # where it really is, relative to the work dir
    content: bytes
    media_type: str
    preview: str | None  # the first lines of a text file
    links: int = 1  # its names (hard links): another one may lie outside the work dir

    @property
    def name(self) -> str:
        return self.relative.rsplit("/", 1)[-1]

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def is_picture(self) -> bool:
        return self.media_type in PICTURE_TYPES

    def detail(self, *, caption: str | None, reason: str | None) -> OutgoingFile:
        return OutgoingFile(
            path=self.relative,
            size=self.size,
            media_type=self.media_type,
            preview=self.preview,
            caption=caption,
            reason=reason,
        )


def sniff_type(name: str, head: bytes) -> tuple[str, str | None]:
    """The media type from the first bytes (pictures by their signature, text by decoding),
    else from the name; and for text, its first lines."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png", None
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg", None
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif", None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp", None
    guessed = mimetypes.guess_type(name, strict=False)[0]
    if b"\x00" not in head:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError as exc:
            # a multi-byte character cut at the end of the sample is still text
            text = head[: exc.start].decode("utf-8") if exc.start > len(head) - 4 else ""
            if not text:
                return guessed or "application/octet-stream", None
        lines = text.splitlines()[:PREVIEW_LINES]
        preview = "\n".join(lines)[:_PREVIEW_CHARS]
        if guessed is None or not guessed.startswith("text/"):
            guessed = guessed if guessed in ("application/json", "application/xml") else None
        return guessed or "text/plain", preview or None
    return guessed or "application/octet-stream", None


def _inside(root: str, real: str) -> str | None:
    """``real`` relative to ``root``, or None when it is not inside it."""
    if real == root or os.path.commonpath([root, real]) != root:
        return None
    return os.path.relpath(real, root)


def _refuse_outside(requested: str) -> SendRefused:
    return SendRefused(
        f"not sent: {requested} is outside this session's working directory (a link that "
        "points out of it counts as outside); only files of the working directory can be sent"
    )


def _open_linux(candidate: str, requested: str, root: str) -> tuple[int, str, os.stat_result]:
    where = os.open(candidate, os.O_PATH | os.O_CLOEXEC)
    try:
        real = os.readlink(f"/proc/self/fd/{where}")
        relative = _inside(root, real)
        if relative is None:
            raise _refuse_outside(requested)
        status = os.fstat(where)
        if not stat.S_ISREG(status.st_mode):
            raise SendRefused(f"not sent: {requested} is not a regular file")
        if status.st_nlink == 0:
            raise SendRefused(f"not sent: {requested} was deleted")
        reading = os.open(
            f"/proc/self/fd/{where}", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
        )
    finally:
        os.close(where)
    return reading, relative, status


def _open_portable(candidate: str, requested: str, root: str) -> tuple[int, str, os.stat_result]:
    real = os.path.realpath(candidate)
    relative = _inside(root, real)
    if relative is None:
        raise _refuse_outside(requested)
    reading = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    status = os.fstat(reading)
    named = os.stat(real)
    if (status.st_dev, status.st_ino) != (named.st_dev, named.st_ino):
        os.close(reading)
        raise SendRefused(f"not sent: {requested} changed while it was opened; try again")
    if not stat.S_ISREG(status.st_mode):
        os.close(reading)
        raise SendRefused(f"not sent: {requested} is not a regular file")
    return reading, relative, status


def open_in_work_dir(work_dir: Path, requested: str, *, max_bytes: int) -> OpenedFile:
    """Open ``requested`` (relative to ``work_dir``, or absolute inside it) and read it.
    Raises :class:`SendRefused`, whose text the agent reads."""
    root = os.path.realpath(work_dir)
    candidate = requested if os.path.isabs(requested) else os.path.join(root, requested)
    try:
        if _HAS_O_PATH:
            reading, relative, status = _open_linux(candidate, requested, root)
        else:  # pragma: no cover - not Linux
            reading, relative, status = _open_portable(candidate, requested, root)
    except FileNotFoundError as exc:
        raise SendRefused(
            f"not sent: there is no file {requested} in the working directory"
        ) from exc
    except PermissionError as exc:
        raise SendRefused(f"not sent: {requested} cannot be read ({exc.strerror})") from exc
    except OSError as exc:
        raise SendRefused(f"not sent: {requested} cannot be opened ({exc.strerror})") from exc
    try:
        if status.st_size > max_bytes:
            raise SendRefused(
                f"not sent: {requested} is {file_size(status.st_size)}, more than the "
                f"{file_size(max_bytes)} a file sent to the chat may have"
            )
        with os.fdopen(reading, "rb", closefd=False) as file:
            content = file.read(max_bytes + 1)
    finally:
        os.close(reading)
    if len(content) > max_bytes:
        raise SendRefused(f"not sent: {requested} grew past {file_size(max_bytes)} while read")
    media_type, preview = sniff_type(relative, content[:_SNIFF_BYTES])
    return OpenedFile(
        relative=relative,
        content=content,
        media_type=media_type,
        preview=preview,
        links=status.st_nlink,
    )


def ask_reasons(opened: OpenedFile, *, ask_above: int) -> tuple[str, ...]:
    """Why a person should look before this file goes, where no rule says (issue 33)."""
    parts = opened.relative.split(os.sep)
    reasons: list[str] = []
    if ".git" in parts[:-1] or parts[-1] == ".git":
        reasons.append("it is under .git/")
    elif any(part.startswith(".") for part in parts):
        reasons.append("it is a hidden file (a dotfile: they often hold settings and secrets)")
    if opened.size > ask_above:
        reasons.append(f"it is larger than {file_size(ask_above)}")
    if opened.links > 1:  # a hard link is the same file as its other names, wherever they are
        reasons.append("it has other names (hard links), which may lie outside the work dir")
    return tuple(reasons)
