"""The ledger's two backends for the store tests: ``ledger`` is parametrized ``sqlite`` /
``postgresql`` (issue 18), so a test that opens its store through :func:`open_store` runs on
both.

On PostgreSQL each test gets a database of its own, a copy (``CREATE DATABASE ... TEMPLATE``)
of ``ledger_template``, which is migrated once per test session (per xdist worker) on the
session's throwaway cluster (tests/pg_cluster.py): no test migrates, none sees another's rows.
Without PostgreSQL installed the ``postgresql`` cases skip, and fail under
``AGENT_GATEWAY_REQUIRE_REAL_AGENTS=1``, as the cluster does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.store.database import utc_now
from gateway.store.dialect import POSTGRESQL
from gateway.store.migrations import MIGRATIONS, apply_migrations
from gateway.store.postgresql import PgConn
from gateway.store.store import Store
from tests.pg_cluster import PgCluster, fresh_database

__all__ = ["BACKENDS", "ledger", "ledger_template", "open_store"]

BACKENDS = ("sqlite", "postgresql")
TEMPLATE = "ledger_template"


@pytest.fixture(scope="session")
def ledger_template(pg_cluster: PgCluster) -> str:
    """A database migrated to the newest schema, copied for each PostgreSQL test."""
    with contextlib.closing(PgConn.connect(PgTarget(url=pg_cluster.dsn))) as admin:
        admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
    target = PgTarget(url=pg_cluster.dsn_for(TEMPLATE))
    with contextlib.closing(PgConn.connect(target)) as conn:
        apply_migrations(
            conn, MIGRATIONS, now=utc_now().isoformat(), dialect=POSTGRESQL, errors=(Exception,)
        )
    return TEMPLATE


@pytest.fixture(params=BACKENDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[PgTarget | None]:
    """None: SQLite in the test's data dir; else a fresh, migrated PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    template: str = request.getfixturevalue("ledger_template")
    with fresh_database(cluster, template=template) as database:
        yield PgTarget(url=database.dsn)


@contextlib.asynccontextmanager
async def open_store(
    ledger: PgTarget | None, data_dir: Path, **options: Any
) -> AsyncIterator[Store]:
    async with Store.open(data_dir, postgresql=ledger, **options) as store:
        yield store
