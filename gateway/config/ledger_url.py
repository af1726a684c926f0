"""Where the ledger lives on PostgreSQL, as the configuration names it: a libpq URL, checked
and shown without its password. psycopg is imported only where a store URL is set, so that a
SQLite gateway never loads it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gateway.errors import StoreError

__all__ = ["PgPool", "PgTarget", "PgTimeouts", "check_url", "describe", "is_postgresql_url"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PgTimeouts:
    """How long the ledger may take, in seconds (``[gateway] store_*_seconds``).

    The server ends a statement past ``statement`` and a wait for a lock past ``lock``, and
    closes a session left inside a transaction past ``idle_in_transaction`` (a peer frozen
    mid-transaction holds its locks until then). A connection attempt gives up after
    ``connect``. TCP keepalives and a user timeout find a peer that went away without a word;
    a server that is reachable but does not answer (a frozen backend, a network that holds
    the packets) is found by the client's own deadline, :attr:`call_deadline`, after which
    the call is given up and its connection replaced.
    """

    statement: float = 10.0
    lock: float = 5.0
    idle_in_transaction: float = 10.0
    connect: float = 5.0

    @property
    def call_deadline(self) -> float:
        """The most one store call may wait for the server: a little past ``statement``, so
        that the server's own timeout, which leaves the connection usable, comes first."""
        return self.statement + max(1.0, self.statement / 4)

    def connect_options(self) -> dict[str, Any]:
        """libpq's connection parameters for these timeouts (psycopg's ``connect`` keywords)."""
        millis = {
            "statement_timeout": self.statement,
            "lock_timeout": self.lock,
            "idle_in_transaction_session_timeout": self.idle_in_transaction,
        }
        keepalive = max(1, round(self.connect))
        return {
            "options": " ".join(f"-c {name}={round(s * 1000)}" for name, s in millis.items()),
            # libpq takes whole seconds; below 2 it waits 2
            "connect_timeout": max(2, round(self.connect)),
            "keepalives": 1,
            "keepalives_idle": keepalive,
            "keepalives_interval": keepalive,
            "keepalives_count": 3,
            # sent data unacknowledged this long: the connection is dead
            "tcp_user_timeout": round(self.call_deadline * 1000),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class PgPool:
    """How many connections a host's store holds (``[gateway] store_pool_size`` and
    ``store_read_pool_size``, issue 36): ``writers`` for its store calls (so many run side by
    side), ``readers`` (read-only) for what people look at (the console, ``/pending``, the
    audit export). Besides them a host holds ``FIXED`` more of its own (gateway/store/budget.py):
    the budget of ``hosts x (writers + readers + FIXED)`` stays under the server's
    ``max_connections`` (docs/deploy.md). The defaults fit 4 hosts in PostgreSQL's default 100."""

    writers: int = 6
    readers: int = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class PgTarget:
    """Where the ledger lives on PostgreSQL: a libpq URL without a password, and the
    password apart (never in ``repr``, so never in a log line or a traceback's locals)."""

    url: str
    password: str | None = field(default=None, repr=False)
    timeouts: PgTimeouts = field(default_factory=PgTimeouts)
    pool: PgPool = field(default_factory=PgPool)

    def connect_options(self, *, read_only: bool = False) -> dict[str, Any]:
        """Every keyword psycopg's ``connect`` takes for this target but the URL: the
        password, the timeouts, and for a read-only connection its default."""
        extra = self.timeouts.connect_options()
        if self.password is not None:
            extra["password"] = self.password
        if read_only:
            extra["options"] = f"{extra['options']} -c default_transaction_read_only=on"
        return extra

    def for_a_command(self) -> PgTarget:
        """This target with one writer and one reader: what a command (``ledger``, ``audit``,
        ``prune``) needs, one call at a time, beside running hosts' pools."""
        return replace(self, pool=PgPool(writers=1, readers=1))

    def __post_init__(self) -> None:
        check_url(self.url)

    def __str__(self) -> str:
        return describe(self.url)


def is_postgresql_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def check_url(url: str) -> None:
    """Refuse a URL that libpq cannot parse or that carries a password."""
    import psycopg  # only where a store is set
    from psycopg.conninfo import conninfo_to_dict

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
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(url)
    parts.pop("password", None)
    user = parts.get("user", "")
    where = f"{parts.get('host', '')}:{parts.get('port', '5432')}/{parts.get('dbname', '')}"
    return f"postgresql {user}@{where}" if user else f"postgresql {where}"
