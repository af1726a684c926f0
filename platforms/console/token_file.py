"""The console's access token and address, kept in the data dir (issue 37).

A bookmark must outlive a restart, and a gateway under systemd has no terminal to print its
token to (the journal is a log, and the token is never written to a log). So the token the
console accepts is the one in ``<data dir>/console-token`` (0600, in the 0700 data dir):
with ``fixed_token = true`` it is made once and kept, else a new one replaces it at each
start. ``agent-gateway console-url`` prints the address with it (the address the console
last served on is kept beside it, in ``console-address``: not a secret);
``agent-gateway console-token --rotate`` writes a new one, which a running console reads at
the next login and which logs out the browsers the old one opened.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from gateway.errors import ConfigError

__all__ = ["ADDRESS_FILE", "TOKEN_FILE", "TokenFile"]

TOKEN_FILE = "console-token"
ADDRESS_FILE = "console-address"


def _write(path: Path, text: str, mode: int) -> None:
    """Replace ``path`` whole (a reader sees the old text or the new, never half)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class TokenFile:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / TOKEN_FILE
        self.address_path = data_dir / ADDRESS_FILE
        self._stamp: int | None = None
        self._token: str | None = None

    def read(self) -> str | None:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.path}: {exc.strerror}") from exc
        return token or None

    def current(self) -> str | None:
        """:meth:`read`, again only when the file changed (asked at every request)."""
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if stamp != self._stamp:
            self._stamp, self._token = stamp, self.read()
        return self._token

    def start(self, *, keep: bool) -> str:
        """The token for this start: the kept one if ``keep`` and there is one, else new."""
        kept = self.read() if keep else None
        return kept if kept is not None else self.rotate()

    def rotate(self) -> str:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        _write(self.path, token + "\n", 0o600)
        return token

    def served_at(self, url: str) -> None:
        _write(self.address_path, url + "\n", 0o644)

    def address(self) -> str | None:
        try:
            return self.address_path.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None
