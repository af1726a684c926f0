"""A Telegram webhook behind a load balancer on several hosts (issue 19): a host that cannot
act now (it lost its host lease: the ledger out of its reach here, through a proxy the test
cuts) answers every
update 503, so Telegram gives it again and the balancer to a host that can; the message is
taken once, by the healthy host, and nobody is told "try again"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.pg_proxy import PgProxy
from tests.pg_cluster import PgCluster
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import ALICE
from tests.telegram_hosts_harness import through, two_telegram_hosts

pytestmark = pytest.mark.timeout(120)

LEASE = 3.0  # seconds: b is fenced within it once its renews fail


async def test_an_update_reaching_a_host_that_cannot_act_is_left_to_the_host_that_can(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster
) -> None:
    async with (
        PgProxy(pg_database) as proxy,
        two_telegram_hosts(
            fake_telegram,
            tmp_path,
            pg_database.dsn,
            requests={},
            lease_seconds=LEASE,
            store_b=proxy.dsn,
        ) as (a, b),
    ):
        proxy.refuse = True  # b is cut off from the ledger: its renews fail to its deadline
        proxy.cut()
        await b.gateway.lease_lost.wait()
        assert b.gateway.fenced

        await through(b).say(ALICE, "hello from the road")
        await fake_telegram.wait_for(lambda: 503 in fake_telegram.webhook_deliveries)
        through(a)  # the balancer sends the retry to a, which takes it
        await fake_telegram.wait_for(
            lambda: any(
                "echo: hello from the road" in m.text for m in fake_telegram.bot_messages(ALICE.id)
            )
        )
        deliveries = fake_telegram.webhook_deliveries
        assert deliveries[-1] == 200 and set(deliveries[:-1]) == {503}
        texts = [m.text for m in fake_telegram.bot_messages(ALICE.id)]
        assert sum("echo: hello from the road" in t for t in texts) == 1  # taken once
        assert not any("try again" in t or "unreachable" in t for t in texts)

        proxy.refuse = False  # b, back, starts over and takes updates again
        await b.gateway.started_over.wait()
        await through(b).say(ALICE, "and now through b")
        await fake_telegram.wait_for(
            lambda: any(
                "echo: and now through b" in m.text for m in fake_telegram.bot_messages(ALICE.id)
            )
        )
        assert fake_telegram.webhook_deliveries[-1] == 200
