"""A leased receiver follows its host's own lease (issue 19, design point 6): two Gateway
objects on the real PostgreSQL cluster, each with a Telegram platform on one fake Telegram.
The host that polls and then loses its host lease (frozen: ``LeaseHolder.pause``, the
tests' SIGSTOP; the ledger unreachable takes the same path) stops polling and lets the
receiver lease go at once; the other host polls, and the first stands by once it started
over. A clean stop lets the lease go too. The same with Discord's gateway connection, closed
and later opened again by one process's client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from pydantic import SecretStr

from gateway.config.model import Config
from gateway.platform import Platform, connected
from gateway.sessions.engine import Gateway
from gateway.sessions.receivers import ReceiverLease
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DiscordPlatform
from platforms.memory.platform import MemoryPlatform
from platforms.telegram.config import TelegramConfig
from platforms.telegram.platform import TelegramPlatform
from tests.hosts_harness import two_hosts
from tests.pg_cluster import PgCluster
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_discord import ALICE, APP_ID, FakeDiscord
from tests.servers.fake_discord import TOKEN as DISCORD_TOKEN
from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import Person, message_update, private_chat

LEASE = 5.0  # seconds: a renewer stalled past its deadline (two thirds of the lease) on
# a loaded machine would lose a lease by itself
LEASE_NAME = "telegram:999000"  # the fake bot's id
POLLED = Person(4242, "Polly")


def telegram_on(fake: FakeTelegram) -> TelegramPlatform:
    return TelegramPlatform(
        TelegramConfig(token=TOKEN, base_url=fake.base_url, poll_timeout_seconds=2)
    )


def discord_on(fake: FakeDiscord) -> DiscordPlatform:
    return DiscordPlatform(
        DiscordConfig(
            token=SecretStr(DISCORD_TOKEN),
            application_id=APP_ID,
            channels=(fake.general.id,),
            api_base_url=fake.api_base,
            gateway_url=fake.gateway_url,
        )
    )


@asynccontextmanager
async def host(
    config: Config, tmp_path: Path, name: str, platform: TelegramPlatform | DiscordPlatform
) -> AsyncIterator[Gateway]:
    """Host ``name`` of ``config`` running, with the memory platform and ``platform``."""
    platform.lease_receiving()  # what `run` does on a shared ledger (lease_receivers)
    platforms: dict[str, Platform] = {
        "memory": MemoryPlatform(id_prefix=f"{name}-"),
        platform.name: platform,
    }
    async with (
        connected(platforms),
        Gateway(
            config,
            platforms=platforms,
            launcher=ScriptedLauncher(REQUESTS),
            data_dir=tmp_path / f"data-{name}",
            host=name,
        ) as gateway,
    ):
        yield gateway


def receiver(gateway: Gateway, name: str = LEASE_NAME) -> ReceiverLease:
    return gateway.receivers[name]


async def test_a_host_that_loses_its_lease_stops_polling_and_another_polls(
    tmp_path: Path, pg_database: PgCluster, fake_telegram: FakeTelegram
) -> None:
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)
    async with host(config, tmp_path, "a", telegram_on(fake_telegram)) as a:
        await receiver(a).receiving.wait()
        async with host(config, tmp_path, "b", telegram_on(fake_telegram)) as b:
            assert not receiver(b).receiving.is_set()
            lease_a = a.host_lease
            assert lease_a is not None
            lease_a.pause()  # a is frozen: its host lease lapses
            await receiver(a).idle.wait()  # a polls no more, its receiver lease let go
            await receiver(b).receiving.wait()  # b polls
            assert a.fenced
            lease_a.resume()
            await a.started_over.wait()
            assert not receiver(a).receiving.is_set()  # b holds it: a stands by
        # b stopped cleanly: its receiver lease let go, a polls again
        await receiver(a).receiving.wait()
    assert fake_telegram.conflicts <= 2  # each handover ends the last long poll at most


async def test_discord_the_connection_moves_to_the_other_host_and_back_in_one_process(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    """The connection closed when a's host lease is lost, b connects; b stops, and a (the
    same discord.py client, logged in all along) connects again and takes events."""
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)
    lease = f"discord:{APP_ID}"
    async with FakeDiscord() as fake:
        async with host(config, tmp_path, "a", discord_on(fake)) as a:
            await receiver(a, lease).receiving.wait()
            await fake.wait_for(lambda: fake.live_connections == 1)
            async with host(config, tmp_path, "b", discord_on(fake)) as b:
                assert not receiver(b, lease).receiving.is_set()
                lease_a = a.host_lease
                assert lease_a is not None
                lease_a.pause()
                await receiver(a, lease).idle.wait()
                await receiver(b, lease).receiving.wait()
                lease_a.resume()
                await a.started_over.wait()
                await fake.wait_for(lambda: fake.identified == 2 and fake.live_connections == 1)
            await receiver(a, lease).receiving.wait()  # b let it go as it stopped
            await fake.wait_for(lambda: fake.identified == 3 and fake.live_connections == 1)
            asked = await fake.slash(ALICE, fake.general, "help")
            await fake.wait_for(lambda: asked.callback is not None)
            assert asked.refused == []


async def test_a_host_that_cannot_reach_telegram_leaves_the_polling_to_one_that_can(
    tmp_path: Path, pg_database: PgCluster, fake_telegram: FakeTelegram
) -> None:
    """Issue 30: a's network loses Telegram while b's does not. a stops polling and lets the
    receiver lease go, b polls and takes the updates; a does not ask for the lease while
    Telegram does not answer it, and stands by once it does (b holds the lease)."""
    config = two_hosts(tmp_path, pg_database.dsn, lease_seconds=LEASE)

    def via(name: str) -> TelegramPlatform:
        return TelegramPlatform(
            TelegramConfig(
                token=TOKEN, base_url=fake_telegram.via_url(name), poll_timeout_seconds=2
            )
        )

    async with host(config, tmp_path, "a", via("a")) as a:
        await receiver(a).receiving.wait()
        async with host(config, tmp_path, "b", via("b")) as b:
            fake_telegram.cut_off.add("a")
            await receiver(a).idle.wait()  # a let it go, its host lease kept
            await receiver(b).receiving.wait()
            assert not a.fenced
            chat = private_chat(POLLED)
            pushed = await fake_telegram.push(message_update(fake_telegram, chat, POLLED, "hi"))
            # taken and confirmed: by b, since every call of a is answered 502
            await fake_telegram.wait_for(lambda: pushed not in fake_telegram.unconfirmed)
            fake_telegram.cut_off.clear()
            telegram_a = a.platforms["telegram"]
            assert isinstance(telegram_a, TelegramPlatform)
            await telegram_a.health.answers()  # a hears Telegram again: it stands by
            assert receiver(b).receiving.is_set() and not receiver(a).receiving.is_set()
