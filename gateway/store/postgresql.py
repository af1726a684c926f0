"""The ledger's PostgreSQL connection: psycopg 3, sync, on the store's own thread.

:class:`PgConn` is what a store closure gets on PostgreSQL: ``execute`` takes the store's
SQLite-spelled text and runs it as :func:`~gateway.store.dialect.to_postgresql` rewrites
it; rows come back as dicts (``dict_row``), which the decoders index by name as they do
``sqlite3.Row``. The connection is in autocommit mode: the runner's BEGIN and COMMIT are
the transactions, as on SQLite.

The password never travels in the URL (a URL with one is refused, naming
``store_password``): it is the ``password`` keyword, and what is shown of the target is
:func:`describe` (libpq's parsed conninfo, the password left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from gateway.errors import StoreError
from gateway.store.database import Cursor
from gateway.store.dialect import to_postgresql

__all__ = ["PgConn", "PgTarget", "check_url", "describe", "is_postgresql_url"]

CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True, kw_only=True, slots=True)
class PgTarget:
    """Where the ledger lives on PostgreSQL: a libpq URL without a password, and the
    password apart (never in ``repr``, so never in a log line or a traceback's locals)."""

    url: str
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_url(self.url)

    def __str__(self) -> str:
        return describe(self.url)


def is_postgresql_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def check_url(url: str) -> None:
    """Refuse a URL that libpq cannot parse or that carries a password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StoreError(f"the store URL is not a PostgreSQL URL: {exc}") from None
    if "password" in parts:
        raise StoreError(
            'the store URL carries a password: put it in store_password ("${ENV}")'
            " or store_password_file instead"
        )


def describe(url: str) -> str:
    """The target as it may be logged or shown: ``user@host:port/dbname``, no password."""
    parts = conninfo_to_dict(url)
    parts.pop("password", None)
    user = parts.get("user", "")
    where = f"{parts.get('host', '')}:{parts.get('port', '5432')}/{parts.get('dbname', '')}"
    return f"postgresql {user}@{where}" if user else f"postgresql {where}"


class PgConn:
    """A psycopg connection in autocommit mode, speaking the store's SQL (see the module)."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]], target: PgTarget) -> None:
        self.raw = conn
        self._target = target
        self._read_only = False
        # statements sent, each waiting for its answer: the network round trips (the
        # runner's BEGIN and COMMIT included; bench.interactions reports them)
        self.round_trips = 0

    @classmethod
    def connect(cls, target: PgTarget, *, read_only: bool = False) -> PgConn:
        """On the runner's thread (the connection belongs to it)."""
        extra: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
        if target.password is not None:
            extra["password"] = target.password
        if read_only:
            extra["options"] = "-c default_transaction_read_only=on"
        conn = psycopg.connect(target.url, autocommit=True, row_factory=dict_row, **extra)
        made = cls(conn, target)
        made._read_only = read_only
        return made

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    @property
    def backend_pid(self) -> int:
        return self.raw.info.backend_pid

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        if self.raw.broken and sql.startswith("BEGIN"):
            # cut in an earlier call (the server rolled back what was not committed): a new
            # connection at the start of this call, one attempt (its failure: StoreError)
            self.raw = PgConn.connect(self._target, read_only=self._read_only).raw
        self.round_trips += 1
        return self.raw.execute(to_postgresql(sql), parameters)

    def close(self) -> None:
        self.raw.close()
