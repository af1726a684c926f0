"""Where the ledger lives on PostgreSQL, as the configuration names it: a libpq URL, checked
and shown without its password. psycopg is imported only where a store URL is set, so that a
SQLite gateway never loads it."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.errors import StoreError

__all__ = ["PgTarget", "check_url", "describe", "is_postgresql_url"]


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
