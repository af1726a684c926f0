"""How many PostgreSQL connections a host holds, and whether the server has room for them
(issue 36).

A host's store holds ``store_pool_size`` writers and ``store_read_pool_size`` readers
(:class:`~gateway.config.ledger_url.PgPool`), and the host :data:`FIXED` more of its own,
plus one per receiver it holds by lease (a Telegram bot that polls, a Discord bot). Every host
on one server needs ``hosts x (writers + readers + FIXED + leased receivers)`` connections
under its ``max_connections`` less the ones reserved for superusers (docs/deploy.md). A host
that starts where there is no room for its budget says so in its log (:func:`room_problem`);
PostgreSQL itself refuses the connection past the limit ("too many clients already").
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config.ledger_url import PgPool
from gateway.store.database import Conn, fetch_one

__all__ = ["FIXED", "ServerRoom", "host_budget", "read_room", "room_problem"]

# a host's connections besides its store's pools: the click pre-check's reader
# (store.peek), the host's lease, the reaper's, the LISTEN for wake-ups, the bot budgets'
FIXED = 5


def host_budget(pool: PgPool, *, leased_receivers: int = 0) -> int:
    """The connections one host holds at most."""
    return pool.writers + pool.readers + FIXED + leased_receivers


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerRoom:
    """What the server allows and what is connected now (client backends, this host's
    included): on the whole server, and on the ledger's database (``database_limit``: its
    ``CONNECTION LIMIT``, -1 for none)."""

    max_connections: int
    reserved: int  # superuser_reserved_connections (+ reserved_connections, PostgreSQL 16)
    in_use: int
    database_limit: int = -1
    database_in_use: int = 0


def read_room(conn: Conn) -> ServerRoom:
    """A store closure (one statement): the server's limits and its client connections."""
    row = fetch_one(
        conn,
        "SELECT current_setting('max_connections')::int AS max_connections,"
        " current_setting('superuser_reserved_connections')::int"
        " + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved,"
        " (SELECT count(*) FROM pg_stat_activity"
        "  WHERE backend_type = 'client backend')::int AS in_use,"
        " (SELECT datconnlimit FROM pg_database"
        "  WHERE datname = current_database())::int AS database_limit,"
        " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        "  AND datname = current_database())::int AS database_in_use",
    )
    assert row is not None  # a SELECT without FROM has its row
    return ServerRoom(
        max_connections=row["max_connections"],
        reserved=row["reserved"],
        in_use=row["in_use"],
        database_limit=row["database_limit"],
        database_in_use=row["database_in_use"],
    )


def room_problem(
    room: ServerRoom, pool: PgPool, *, leased_receivers: int, open_now: int
) -> str | None:
    """What to warn of when this host's budget does not fit in what the server (or the
    ledger's database) has left (``open_now``: this host's connections already counted in
    ``room``'s), or None."""
    budget = host_budget(pool, leased_receivers=leased_receivers)
    allowed = room.max_connections - room.reserved
    limits = [
        (
            allowed,
            room.in_use,
            f"max_connections {room.max_connections} less {room.reserved} reserved",
        )
    ]
    if room.database_limit >= 0:
        limits.append(
            (room.database_limit, room.database_in_use, "the database's CONNECTION LIMIT")
        )
    for limit, in_use, what in limits:
        others = max(0, in_use - open_now)
        if others + budget > limit:
            return (
                f"the PostgreSQL ledger allows {limit} connections ({what}), {others} are held"
                f" by others, and this host needs up to {budget} (store_pool_size"
                f" {pool.writers} + store_read_pool_size {pool.readers} +"
                f" {FIXED + leased_receivers} of its own): lower store_pool_size or"
                " store_read_pool_size, or raise the limit (docs/deploy.md)"
            )
    return None
