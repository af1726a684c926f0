"""Two gateway hosts on one PostgreSQL ledger, each with the real Telegram platform in webhook
mode on its own socket (any host behind a load balancer takes an update), one bot: the test is
the load balancer, pointing the fake Bot API's webhook at the host that takes the next update
(:func:`through`). The project "demo" runs on host "a"; host "b" runs no agent."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.model import Config
from gateway.domain import InteractionRequest
from gateway.sessions.engine import Gateway
from platforms.registry import parse_config
from platforms.telegram.config import TelegramConfig
from platforms.telegram.platform import TelegramPlatform
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.telegram_harness import OnTelegram, telegram_config_text

__all__ = ["HOOK_SECRET", "Host", "through", "two_telegram_hosts"]

HOOK_SECRET = "hook-Secret_for-both-hosts"


@dataclass
class Host:
    telegram: OnTelegram
    url: str  # where the load balancer sends its updates

    @property
    def gateway(self) -> Gateway:
        return self.telegram.gateway


def _config(
    fake: FakeTelegram,
    tmp_path: Path,
    dsn: str,
    url: str,
    more: str,
    telegram: str,
    lease_seconds: float | None,
) -> Config:
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    (tmp_path / "work").mkdir()
    text = telegram_config_text(
        fake,
        tmp_path / "data",
        work_dir=tmp_path / "work",
        telegram=f'mode = "webhook"\nwebhook_url = "{url}"\nsecret_token = "{HOOK_SECRET}"\n'
        + telegram,
    )
    shared = f"[gateway]\nstore = {json.dumps(dsn)}\nhmac_key_file = {json.dumps(str(key))}\n"
    if lease_seconds is not None:
        shared += f"host_lease_seconds = {lease_seconds}\n"
    text = text.replace("[gateway]\n", shared, 1)
    text = text.replace("[projects.demo]\n", '[projects.demo]\nhost = "a"\n', 1) + more
    return parse_config(text, "hosts-telegram.toml")


@asynccontextmanager
async def two_telegram_hosts(
    fake: FakeTelegram,
    tmp_path: Path,
    dsn: str,
    more: str = "",
    telegram: str = "",
    *,
    requests: Mapping[str, InteractionRequest],
    lease_seconds: float | None = None,
    store_b: str | None = None,
) -> AsyncIterator[tuple[Host, Host]]:
    """Hosts "a" and "b" on one config (``more``: appended to it; ``lease_seconds``: their
    host lease), one bot, one ledger (``store_b``: how b reaches it, a proxy a test cuts);
    each takes webhook updates on its own socket, around the scripted agent asking
    ``requests``."""
    async with AsyncExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(2)]
        urls = []
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
            urls.append(f"http://127.0.0.1:{sock.getsockname()[1]}/telegram/hook")
        config = _config(fake, tmp_path, dsn, urls[0], more, telegram, lease_seconds)
        settings = config.platforms.get("telegram", TelegramConfig)
        assert settings is not None
        hosts = []
        configs = [config, config if store_b is None else with_store(config, store_b)]
        for name, sock, url, config in zip("ab", sockets, urls, configs, strict=True):
            platform = TelegramPlatform(settings, webhook_socket=sock)
            telegram = await stack.enter_async_context(platform)
            launcher = ScriptedLauncher(dict(requests))
            gateway = await stack.enter_async_context(
                Gateway(
                    config,
                    platforms={"telegram": telegram},
                    launcher=launcher,
                    data_dir=tmp_path / f"data-{name}",
                    host=name,
                )
            )
            await fake.wait_for(lambda: fake.webhook)  # this host registered the webhook
            hosts.append(
                Host(
                    OnTelegram(gateway=gateway, telegram=telegram, fake=fake, launcher=launcher),
                    url,
                )
            )
        yield hosts[0], hosts[1]


def with_store(config: Config, store: str) -> Config:
    """``config`` with its ledger reached at ``store``."""
    gateway = config.gateway.model_copy(update={"store": store})
    return config.model_copy(update={"gateway": gateway})


def through(host: Host) -> OnTelegram:
    """The next update goes to ``host`` (the load balancer's choice)."""
    fake = host.telegram.fake
    assert fake.webhook is not None
    fake.webhook["url"] = host.url
    return host.telegram
