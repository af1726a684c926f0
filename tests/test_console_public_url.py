"""The console beyond loopback: only behind a TLS proxy, and then by that address only.

``[platforms.console] host = "0.0.0.0"`` would serve the access token and the session cookie
over plain HTTP to the network, so it is refused unless ``public_url = "https://..."`` names
the address people open (a TLS proxy in front of the console). With ``public_url`` the
console answers to that host and origin only, its cookie is ``Secure``, and the address it
prints is the public one.

The refusal is tested at config validation only; the HTTP tests bind 127.0.0.1 (never
another address) with ``public_url`` set, and send the Host and Origin headers that the
proxy and the browser would.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

import aiohttp
import pytest

from gateway.config.model import Config
from gateway.domain import (
    Action,
    Actor,
    AgentKind,
    ConversationRef,
    Effect,
    InteractionKind,
    InteractionRequest,
    InteractionState,
)
from gateway.errors import ConfigError
from gateway.interactions.machine import Interaction
from platforms.console.config import ConsoleConfig
from platforms.registry import parse_config
from tests.console_harness import ConsoleRunning, console_gateway

pytestmark = pytest.mark.timeout(30)

PUBLIC = "gw.example.com"
ALICE = Actor(platform="memory", user_id="alice", display="Alice")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
APPROVAL = InteractionRequest(
    native_key="rpc:1",
    kind=InteractionKind.APPROVAL,
    title="Run a command",
    actions=(
        Action(id="accept", label="Allow once", effect=Effect.ALLOW),
        Action(id="decline", label="Deny", effect=Effect.DENY),
    ),
)


def console_config(data_dir: Path, work_dir: Path, console: str) -> Config:
    text = f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.demo]
work_dir = {json.dumps(str(work_dir))}
agent = "codex-app-server"
argv = ["/nonexistent/codex"]

[projects.demo.auth.memory]
allow_from = ["alice"]

[projects.demo.auth.local]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]

[platforms.console]
identity = "local:alice"
{console}
"""
    return parse_config(text, "console.toml")


# --- the config -------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "gw.internal"])
def test_a_console_beyond_loopback_is_refused_without_public_url(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError) as refused:
        console_config(tmp_path / "data", tmp_path / "work", f"host = {json.dumps(host)}")
    message = str(refused.value)
    assert re.search(r"console\.toml:\d+: platforms\.console\.host: ", message), message
    assert f'"{host}" is not a loopback address' in message
    assert "public_url" in message


def test_public_url_must_be_https(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        console_config(
            tmp_path / "data",
            tmp_path / "work",
            'host = "0.0.0.0"\npublic_url = "http://gw.example.com"',
        )
    assert "platforms.console.public_url: must be an https address" in str(refused.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_public_url(tmp_path: Path, host: str) -> None:
    config = console_config(tmp_path / "data", tmp_path / "work", f"host = {json.dumps(host)}")
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None and settings.public_url is None


def test_beyond_loopback_with_an_https_public_url_is_accepted(tmp_path: Path) -> None:
    config = console_config(
        tmp_path / "data", tmp_path / "work", f'host = "0.0.0.0"\npublic_url = "https://{PUBLIC}"'
    )
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None and settings.public_url == f"https://{PUBLIC}"


# --- over HTTP, on 127.0.0.1 with public_url set -----------------------------------------------


@dataclass
class Front:
    """Requests as the TLS proxy passes them on: to the bound port, with the browser's Host."""

    running: ConsoleRunning
    http: aiohttp.ClientSession

    @property
    def bound(self) -> str:
        return f"http://127.0.0.1:{self.running.console.port}"

    async def get(
        self, path: str, *, host: str = PUBLIC, cookie: str = ""
    ) -> aiohttp.ClientResponse:
        headers = {"Host": host, **({"Cookie": cookie} if cookie else {})}
        return await self.http.get(self.bound + path, headers=headers, allow_redirects=False)


@pytest.fixture
async def front(tmp_path: Path) -> AsyncIterator[Front]:
    work = tmp_path / "work"
    work.mkdir()
    config = console_config(
        tmp_path / "data", work, f'host = "127.0.0.1"\npublic_url = "https://{PUBLIC}"'
    )
    # no cookie jar: the cookie is Secure, and the proxy's side of the connection is plain
    async with (
        console_gateway(config) as running,
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http,
    ):
        yield Front(running=running, http=http)


async def ask(running: ConsoleRunning) -> Interaction:
    gateway = running.gateway
    session = await gateway.store.sessions.create(
        project="demo", agent_kind=AgentKind.CODEX_APP_SERVER, initiator=ALICE
    )
    await gateway.store.sessions.bind(ROOM, session.id)
    await gateway.show_everywhere(session.id)
    epoch = await gateway.store.sessions.begin_epoch(
        session.id, pid=None, pgid=None, process_start_time=None
    )
    return await gateway.broker.open(session.id, epoch, APPROVAL, turn_id=None)


async def log_in(front: Front) -> tuple[str, str]:
    """The token from the printed address; the session cookie and the page's CSRF token."""
    printed = front.running.terminal.getvalue()
    found = re.search(rf"agent-gateway console: https://{re.escape(PUBLIC)}/\?token=(\S+)", printed)
    assert found is not None, printed  # the address people open, not the bound one
    async with await front.get(f"/?token={found.group(1)}") as entered:
        assert entered.status == 303
        [raw] = entered.headers.getall("Set-Cookie")
    cookie = SimpleCookie(raw)
    [(name, morsel)] = cookie.items()
    assert morsel["secure"] and morsel["httponly"] and morsel["samesite"] == "Strict"
    session = f"{name}={morsel.value}"
    async with await front.get("/pending", cookie=session) as page:
        assert page.status == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert csrf is not None
    return session, csrf.group(1)


async def test_the_public_host_and_origin_get_in_and_no_other(front: Front) -> None:
    interaction = await ask(front.running)
    session, csrf = await log_in(front)

    for other in (f"127.0.0.1:{front.running.console.port}", "evil.example.com", f"{PUBLIC}:8443"):
        async with await front.get("/pending", host=other, cookie=session) as refused:
            assert refused.status == 421, other

    allow = front.running.gateway.broker.render(interaction, front.running.console).actions[0]
    assert allow.label == "Allow once"

    async def act(origin: str) -> aiohttp.ClientResponse:
        return await front.http.post(
            f"{front.bound}/i/{interaction.id}/act",
            data={"csrf": csrf, "token": allow.token},
            headers={"Host": PUBLIC, "Cookie": session, "Origin": origin},
            allow_redirects=False,
        )

    for foreign in (f"http://{PUBLIC}", "https://evil.example.com", f"https://{PUBLIC}:8443"):
        async with await act(foreign) as refused:
            assert refused.status == 403, foreign
            assert "was not sent from the console" in await refused.text()
    stored = await front.running.gateway.store.interactions.get(interaction.id)
    assert stored is not None and stored.state is InteractionState.PENDING

    async with await act(f"https://{PUBLIC}") as accepted:
        assert accepted.status == 303
    stored = await front.running.gateway.store.interactions.get(interaction.id)
    assert stored is not None and stored.state is InteractionState.DECIDED
    assert stored.decision is not None and stored.decision.actor.key() == "local:alice"
