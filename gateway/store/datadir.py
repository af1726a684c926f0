"""The data dir: where the ledger and the HMAC key live (DESIGN.md, "Authorization").

It is created 0700, tightened back to 0700 if group or others can reach it, refused if it is
not ours to tighten, and refused if it lies inside (or is) a project's work dir, where an
agent could read or commit the key and the database.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from gateway.errors import StoreError

__all__ = ["check_data_dir", "prepare_data_dir"]


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
