"""The inbox: where files a person sends are saved, inside the session's work dir (issue 32).

The work dir belongs to the agent, which may have made any part of the inbox's path a symlink
(to ``~/.ssh``, to ``/etc``): this is hostile ground. So:

- the inbox is reached from the work dir one folder at a time, each opened relative to the
  one before with ``O_NOFOLLOW | O_DIRECTORY`` (a link anywhere on the way refuses the save:
  nothing is written through it), a missing folder made relative to its parent;
- every file is created relative to the inbox's descriptor with ``O_CREAT | O_EXCL |
  O_NOFOLLOW``: never through a link, never over an existing file;
- a file is written to a temporary name first (``.partial-…``), then linked to its final
  name (``link`` without overwrite: a name taken is tried again as "name (2)") and the
  temporary name removed: a file over its limit, a cut download or a refused type leaves
  nothing behind;
- the name as sent is made safe (:func:`safe_name`): no separators, NUL or control
  characters, no leading dot (nothing hidden, no ``.gitignore`` of its own), at most
  :data:`NAME_MAX_BYTES`; two files of one name (or of names equal but for case, on a file
  system that folds case) land as distinct files;
- a ``.gitignore`` of ``*`` is put in the inbox, so that an upload is never committed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import unicodedata
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path, PurePosixPath

from gateway.attachments import SNIFF_BYTES, SavedFile, sniff_media_type
from gateway.errors import FileRefused
from gateway.sessions.file_checks import too_big_file, type_refused

__all__ = ["GITIGNORE", "NAME_MAX_BYTES", "UploadInbox", "safe_name"]

NAME_MAX_BYTES = 120  # UTF-8 bytes of a saved name, well under every file system's 255
GITIGNORE = "# files sent to the agent from chat (agent-gateway): never committed\n*\n"
_FALLBACK = "file"
# separators, and the comma: ``codex exec --image`` splits its value at commas (seen on 0.171)
_REPLACED = frozenset("/\\,")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_TRIES = 1000  # names "x (2)" … tried before giving up


def safe_name(sent: str) -> str:
    """A file name made of ``sent`` that is safe to create in the inbox: one component, no
    NUL, separator, comma or control character, not hidden, not "." or "..", at most
    :data:`NAME_MAX_BYTES` bytes with its extension kept. Never empty."""
    name = unicodedata.normalize("NFC", sent)
    name = "".join(
        "_" if ch in _REPLACED or unicodedata.category(ch)[0] == "C" else ch for ch in name
    )
    name = name.strip().lstrip(".").strip()
    if not name.strip("._ "):
        return _FALLBACK
    return _shortened(name, NAME_MAX_BYTES)


def _shortened(name: str, limit: int) -> str:
    if len(name.encode()) <= limit:
        return name
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or len(extension.encode()) > 16:
        stem, extension = name, ""
    tail = f".{extension}" if extension else ""
    room = limit - len(tail.encode())
    while len(stem.encode()) > room:
        stem = stem[:-1]
    return stem.rstrip() + tail


def _numbered(name: str, n: int) -> str:
    """``name`` as the ``n``-th of its kind: "report (2).pdf"."""
    if n == 1:
        return name
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem:
        stem, extension = name, ""
    tail = f".{extension}" if extension else ""
    suffix = f" ({n})"
    return _shortened(stem, NAME_MAX_BYTES - len((suffix + tail).encode())) + suffix + tail


class UploadInbox:
    """The inbox folder ``relative`` inside ``work_dir``; see the module's docstring."""

    def __init__(self, work_dir: Path, relative: Path) -> None:
        parts = PurePosixPath(relative).parts
        if relative.is_absolute() or not parts or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"the inbox {relative} is not a folder inside the work dir")
        self.work_dir = work_dir
        self.relative = relative
        self.path = work_dir / relative

    async def save(
        self,
        name: str,
        chunks: AsyncIterator[bytes],
        *,
        max_bytes: int,
        refuse_type: Callable[[str], bool] = lambda media_type: False,
    ) -> SavedFile:
        """Save the bytes ``chunks`` yields as a new file named after ``name``.

        Raises :class:`FileRefused` (nothing left behind) past ``max_bytes``, for a type
        ``refuse_type`` refuses (sniffed from the first bytes), or when the inbox cannot be
        reached without following a link. An exception of ``chunks`` (a cut download) goes
        through as it is, nothing left behind either.
        """
        with self._opened() as inbox:
            partial = f".partial-{uuid.uuid4().hex}"
            fd = os.open(partial, _NEW_FILE, 0o600, dir_fd=inbox)
            try:
                size, media_type = await self._write(fd, name, chunks, max_bytes, refuse_type)
                os.close(fd)
                fd = -1
                final = self._link(inbox, partial, safe_name(name))
            except OSError as exc:  # a full disk, a quota: said, nothing left behind
                raise FileRefused(f"{name!r} could not be saved in the inbox: {exc}") from exc
            finally:
                if fd >= 0:
                    os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(partial, dir_fd=inbox)
        return SavedFile(path=self.path / final, name=name, media_type=media_type, size=size)

    def discard(self, saved: SavedFile) -> None:
        """Remove a file this inbox saved (the rest of its prompt was refused), by its name
        in the inbox reached as for a save; a file gone or an inbox no longer reachable
        without a link is left alone."""
        if saved.path.parent != self.path:
            return
        with contextlib.suppress(FileRefused, OSError), self._opened() as inbox:
            os.unlink(saved.path.name, dir_fd=inbox)

    async def _write(
        self,
        fd: int,
        name: str,
        chunks: AsyncIterator[bytes],
        max_bytes: int,
        refuse_type: Callable[[str], bool],
    ) -> tuple[int, str]:
        size = 0
        head = b""
        media_type: str | None = None
        async for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise FileRefused(too_big_file(name, None, max_bytes))
            if media_type is None:
                head += chunk
                if len(head) >= SNIFF_BYTES:
                    media_type = self._checked_type(name, head, refuse_type)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
        if media_type is None:
            media_type = self._checked_type(name, head, refuse_type)
        return size, media_type

    @staticmethod
    def _checked_type(name: str, head: bytes, refuse_type: Callable[[str], bool]) -> str:
        media_type = sniff_media_type(head[:SNIFF_BYTES])
        if refuse_type(media_type):
            raise FileRefused(type_refused(name, media_type))
        return media_type

    @staticmethod
    def _link(inbox: int, partial: str, name: str) -> str:
        """Give the written file its final name without ever replacing a file: ``link``
        fails on a name taken, and the next number is tried."""
        for n in range(1, _MAX_TRIES + 1):
            candidate = _numbered(name, n)
            try:
                os.link(
                    partial, candidate, src_dir_fd=inbox, dst_dir_fd=inbox, follow_symlinks=False
                )
            except FileExistsError:
                continue
            return candidate
        raise FileRefused(f"the inbox already holds {_MAX_TRIES} files named {name!r}")

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The inbox's descriptor, reached from the work dir without following a link, made
        where missing, with its ``.gitignore``."""
        try:
            fd = os.open(self.work_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise FileRefused(f"the work dir {self.work_dir} cannot be opened: {exc}") from exc
        try:
            for part in PurePosixPath(self.relative).parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        raise FileRefused(
                            f"{self.relative} in the work dir is reached through a link or is "
                            "not a folder: no file is saved through it (make it a plain folder)"
                        ) from exc
                    raise FileRefused(f"the inbox {self.relative} cannot be opened: {exc}") from exc
                os.close(fd)
                fd = inner
            _write_gitignore(fd)
            yield fd
        finally:
            os.close(fd)


def _write_gitignore(inbox: int) -> None:
    try:
        fd = os.open(".gitignore", _NEW_FILE, 0o600, dir_fd=inbox)
    except FileExistsError:
        return  # there already (or something in its place, which is not followed)
    try:
        os.write(fd, GITIGNORE.encode())
    finally:
        os.close(fd)
