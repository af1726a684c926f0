"""The console's front door: access token, browser sessions, CSRF, Host and Origin checks.

Pure decisions on plain values; ``server.py`` does the IO.

- The access token (256 random bits) is made when the console starts and printed once to
  the terminal, never logged. A request that presents it as ``?token=`` (compared in
  constant time) opens a *browser session*: a random id kept in an HttpOnly, SameSite=Strict
  cookie. The browser is then sent to the same address without the token, so that it stays
  out of the history and of Referer headers.
- Every other request needs the cookie of a live browser session; anything else is refused
  with 401. A wrong token is refused the same way (and never opens a session).
- Every POST carries the session's CSRF token in a hidden field, and its Origin (or, when a
  browser sends none, its Referer) must be the console's own origin.
- The Host header must name the console by ``localhost`` or an IP address, with the console's
  port: a page of another site whose DNS name was re-pointed at 127.0.0.1 (DNS rebinding)
  is refused.
- Behind a TLS proxy (``public_url = "https://gw.example.com"``, a :class:`PublicAddress`)
  the console is reached by that address only: the Host header must be exactly its host (and
  port), an Origin exactly its origin, and the session cookie is ``Secure``. The proxy must
  pass the browser's Host header on (nginx: ``proxy_set_header Host $host``).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["BrowserSession", "Guard", "Notice", "PublicAddress", "host_allowed", "origin_allowed"]

MAX_BROWSER_SESSIONS = 64  # the oldest is forgotten past this (its browser must log in again)
MAX_NOTICES = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class Notice:
    """What a POST answered, shown once on the page a browser without script comes back to:
    a refusal next to the form it concerns (``about``: ``"i-<interaction id>"`` for a card,
    ``"say"`` for the message box), a success at the top of the page."""

    text: str
    refused: bool = False
    about: str | None = None


@dataclass(kw_only=True, slots=True)
class BrowserSession:
    """One browser that presented the access token."""

    id: str
    csrf: str
    notices: list[Notice] = field(default_factory=list)  # shown once, after a redirect

    def notify(self, text: str, *, refused: bool = False, about: str | None = None) -> None:
        self.notices.append(Notice(text=text, refused=refused, about=about))
        del self.notices[:-MAX_NOTICES]

    def take_notices(self) -> list[Notice]:
        taken, self.notices = self.notices, []
        return taken


class Guard:
    """The access token and the browser sessions it opened (in memory: a restart logs out).

    With ``current`` (the data dir's token file, token_file.py), the token is read again at
    each login: one rotated while the console runs is the only one taken from then on, and
    the browser sessions the old one opened are closed."""

    def __init__(
        self, token: str | None = None, *, current: Callable[[], str | None] | None = None
    ) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._current = current
        self._sessions: OrderedDict[str, BrowserSession] = OrderedDict()

    def _follow_rotation(self) -> None:
        if self._current is None:
            return
        token = self._current()
        if token is not None and token != self.token:
            self.token = token
            self._sessions.clear()  # opened with the old token: logged out

    def open_session(self, presented: str) -> BrowserSession | None:
        """A new browser session if ``presented`` is the access token, else None."""
        self._follow_rotation()
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            return None
        session = BrowserSession(id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32))
        self._sessions[session.id] = session
        while len(self._sessions) > MAX_BROWSER_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def session(self, cookie: str | None) -> BrowserSession | None:
        if not cookie:
            return None
        self._follow_rotation()
        return self._sessions.get(cookie)

    @staticmethod
    def csrf_ok(session: BrowserSession, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(
            presented.encode(), session.csrf.encode()
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class PublicAddress:
    """The https address in front of the console (``public_url``): its only name."""

    host: str  # lower case; an IPv6 address without brackets
    port: int = 443

    @classmethod
    def parse(cls, url: str) -> PublicAddress:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"not an https address: {url!r}")
        return cls(host=parts.hostname, port=parts.port or 443)

    @property
    def origin(self) -> str:
        """What a browser sends as Origin from a page of this address."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}" + ("" if self.port == 443 else f":{self.port}")

    @property
    def url(self) -> str:
        return f"{self.origin}/"

    def named_by(self, host_header: str) -> bool:
        name, given_port = _split_host(host_header)
        return name == self.host and (given_port or 443) == self.port


def _split_host(host: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(f"//{host}")
        return (parts.hostname or ""), parts.port
    except ValueError:
        return "", None


def host_allowed(host_header: str | None, port: int, public: PublicAddress | None = None) -> bool:
    """True when the Host header names this console: its public address if it has one,
    else localhost or an IP literal with our port."""
    if not host_header:
        return False
    if public is not None:
        return public.named_by(host_header)
    name, given_port = _split_host(host_header)
    if given_port != port:
        return False
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def origin_allowed(
    origin: str | None,
    referer: str | None,
    host_header: str | None,
    public: PublicAddress | None = None,
) -> bool:
    """A POST came from a page of this console: its Origin (else Referer) is our origin
    (the public address's, if it has one, else ``http://<Host>``)."""
    if not host_header:
        return False
    expected = public.origin if public is not None else f"http://{host_header}"
    if origin is not None:
        return origin != "null" and hmac.compare_digest(origin.encode(), expected.encode())
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}" == expected
    return False
