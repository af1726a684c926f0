"""``[platforms.console]``: the web console's settings and their help.

Imported by ``agent-gateway check`` whenever a config has this table, so it imports pydantic
and ``gateway`` only, never aiohttp (which ``run`` imports with the platform).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo

from gateway.config.platform_tables import (
    NonEmpty,
    PlatformConfig,
    PlatformTable,
    known_auth_tables,
)
from gateway.config.sources import Loc
from gateway.domain import Actor

__all__ = ["HELP", "TABLE", "ConsoleConfig", "is_loopback"]

HELP = """\
[platforms.console]
# The local web console. Its address with the access token is printed at start, to a terminal.
# The address it listens on: loopback (127.0.0.1, ::1, localhost) unless public_url is set.
# The console speaks plain HTTP; any other address would send its access token and session
# cookie over the network in clear, and is refused without public_url.
host = "127.0.0.1"
# 0: a free port, printed at start.
port = 0
# Only to reach the console from other machines: the https address people open, served by a
# TLS proxy in front of host:port (no path). The console then answers to that host and origin
# only (the proxy must pass the browser's Host header on; nginx: proxy_set_header Host $host),
# its session cookie is Secure, and the printed address is this one.
# public_url = "https://gateway.example.com"
# Who the console acts as, "<platform>:<user id>"; the same allow_from and approvers rules
# apply to it: "telegram:<id>" (checked against [projects.<name>.auth.telegram]), or
# "local:<name>" for a person who has no chat account (checked against
# [projects.<name>.auth.local]).
identity = "local:alice"
# The access token is kept in the data dir (console-token, mode 0600); `agent-gateway
# console-url --config …` prints the address with it. true: the same token across restarts
# (a bookmark keeps working; `agent-gateway console-token --rotate` changes it); false: a
# new one at each start. It is printed only to a terminal (never to a log or the journal).
fixed_token = false
"""


def _identity(value: str, info: ValidationInfo) -> str:
    platform, colon, user_id = value.partition(":")
    if not colon or not platform or not user_id or re.search(r"\s", value):
        raise ValueError('should be "<platform>:<user id>", such as "local:alice"')
    known = known_auth_tables(info)
    if platform not in known:
        raise ValueError(f"unknown platform {platform!r}; one of {', '.join(sorted(known))}")
    return value


def _public_url(value: str) -> str:
    if not re.fullmatch(r"https://[^\s/?#@]+/?", value):
        raise ValueError(
            'must be an https address with no path, such as "https://gw.example.com" (the '
            "access token and the session cookie never cross a network in clear)"
        )
    return value


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ConsoleConfig(PlatformConfig):
    host: NonEmpty = "127.0.0.1"  # any other than loopback needs public_url
    port: int = Field(default=0, ge=0, le=65535)  # 0: a free port, printed at start
    identity: Annotated[str, AfterValidator(_identity)]
    # the https address people open, served by a TLS proxy in front of host:port
    public_url: Annotated[str, AfterValidator(_public_url)] | None = None
    fixed_token: bool = False  # keep the access token across restarts (token_file.py)

    def actor(self) -> Actor:
        """Who the console acts as: the same approver rules apply to it."""
        platform, _, user_id = self.identity.partition(":")
        return Actor(platform=platform, user_id=user_id)

    def auth_table(self, platform: str) -> str:
        """The console's people are checked against the auth table of its identity."""
        return self.actor().platform

    def problems(self) -> list[tuple[Loc, str]]:
        if self.public_url is not None or is_loopback(self.host):
            return []
        return [
            (
                ("host",),
                f'"{self.host}" is not a loopback address: the console would serve its '
                "access token and session cookie over plain HTTP to the network. Listen on "
                '127.0.0.1, or put a TLS proxy in front and set public_url = "https://..." '
                "to the address people open",
            )
        ]


TABLE = PlatformTable(model=ConsoleConfig, help=HELP)
