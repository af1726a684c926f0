"""A store call cancelled at any point leaves the ledger usable for the next one.

aiosqlite ran each statement on its thread (the store has a runner of its own since): a task
cancelled while it waited for its BEGIN did not stop the BEGIN. Found by the benchmarks
(bench/): a card refresh cancelled at shutdown left a transaction open, and the runner's next
write failed with "cannot start a transaction within a transaction".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.store.store import Store

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("yields", [0, 1, 2, 3, 4, 5])
async def test_a_write_cancelled_midway_leaves_no_transaction_open(
    tmp_path: Path, yields: int
) -> None:
    async with Store.open(tmp_path / "data") as store:
        task = asyncio.create_task(store.audit.record("test.cancelled"))
        for _ in range(yields):  # cancel it at a different await each time
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await store.audit.record("test.after")  # raised StoreError before the fix
        assert [entry.event for entry in await store.audit.entries(event="test.after")] == [
            "test.after"
        ]
