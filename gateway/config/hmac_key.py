"""The HMAC key that signs every button: made once per data dir, or one file shared by
every host of a ledger. Never logged."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from gateway.errors import ConfigError

__all__ = ["HMAC_KEY_BYTES", "HMAC_KEY_FILE", "load_or_create_hmac_key", "read_hmac_key"]

HMAC_KEY_BYTES = 32
HMAC_KEY_FILE = "hmac.key"


def load_or_create_hmac_key(data_dir: Path) -> bytes:
    """The gateway's HMAC key: 32 random bytes in ``<data_dir>/hmac.key`` (0600).

    Created on first start (the data dir too, 0700). An existing key that others may read,
    or of the wrong size, is refused rather than used or replaced. The key is never logged.
    """
    path = data_dir / HMAC_KEY_FILE
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():
            _create_key_file(path)
    except OSError as exc:
        raise ConfigError(f"cannot use HMAC key {path}: {exc.strerror or exc}") from exc
    try:
        return _read_key_file(path, wrong_size=": remove it")
    except FileNotFoundError as exc:  # removed since it was made or found
        raise ConfigError(f"cannot use HMAC key {path}: {exc.strerror or exc}") from exc


def read_hmac_key(path: Path) -> bytes:
    """The HMAC key every host shares (``[gateway] hmac_key_file``): read, never created,
    since a key made here would not be the one the other hosts sign with. Refused if it is
    missing, readable by others, or not :data:`HMAC_KEY_BYTES` long. Never logged."""
    try:
        return _read_key_file(path)
    except FileNotFoundError as exc:
        raise ConfigError(
            f"HMAC key {path} does not exist: copy the one the other hosts use (or, for the "
            f"first host, write {HMAC_KEY_BYTES} random bytes, mode 600)"
        ) from exc


def _read_key_file(path: Path, *, wrong_size: str = "") -> bytes:
    """The key in ``path``: a regular file nobody else may read, of :data:`HMAC_KEY_BYTES`
    (``wrong_size`` ends the refusal of another length). FileNotFoundError passes through;
    every other failure is a ConfigError naming the file."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"HMAC key {path} is not a regular file")
        if info.st_mode & 0o077:
            raise ConfigError(f"HMAC key {path} is readable by others: chmod 600 it")
        key = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot use HMAC key {path}: {exc.strerror or exc}") from exc
    if len(key) != HMAC_KEY_BYTES:
        raise ConfigError(f"HMAC key {path} is not {HMAC_KEY_BYTES} bytes{wrong_size}")
    return key


def _create_key_file(path: Path) -> None:
    """Write a new key to a temporary file, then link it into place (first writer wins)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_bytes(HMAC_KEY_BYTES))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
    finally:
        temporary.unlink(missing_ok=True)
