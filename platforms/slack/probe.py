"""What ``agent-gateway check`` asks Slack before anything runs, without slack-sdk or bolt.

A new user pastes the manifest, installs the app and puts two tokens in the config; what
can still be wrong is only seen by asking Slack, and is said here in words, one line each:

- the bot token: ``auth.test`` answers (else: refused, and why; or Slack unreachable at the
  configured ``base_url``), and its team is ``team_id``;
- its scopes: Slack names a token's scopes on every answer (the ``x-oauth-scopes``
  header); each scope the manifest asks for and the token lacks is named (the app was
  installed before the manifest asked for it: reinstall);
- Socket Mode: ``apps.connections.open`` with the app token answers (else Socket Mode is off
  on the app's page, or the app token is not of this app). The URL it hands out is never
  used and expires.

Event subscriptions cannot be read back with either token; the manifest has them, and a
missing one shows as messages the app never hears (docs/decisions.md, Slack check). Only
aiohttp (already the gateway's) is imported: ``check`` loads no SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

from platforms.slack.config import SlackConfig
from platforms.slack.manifest import BOT_SCOPES

__all__ = ["Probed", "check", "probe"]

_BOT_TOKEN_REFUSED = {
    "invalid_auth": "Slack does not know it (copy the Bot User OAuth Token again)",
    "not_authed": "no token reached Slack",
    "token_revoked": "it was revoked (install the app again and copy the new token)",
    "token_expired": "it expired",
    "account_inactive": "the app's account is deactivated",
    "not_allowed_token_type": "it is not a bot token",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Probed:
    """What Slack said: the problems (each a line to print) and, if none, what works."""

    problems: tuple[str, ...]
    summary: str = ""


async def _call(
    session: aiohttp.ClientSession, url: str, token: str
) -> tuple[dict[str, Any], str | None]:
    """The method's JSON answer and the token's scopes (None if Slack did not name them)."""
    async with session.post(url, headers={"Authorization": f"Bearer {token}"}) as reply:
        scopes = reply.headers.get("x-oauth-scopes")
        try:
            body = await reply.json(content_type=None)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {"ok": False, "error": f"HTTP {reply.status}"}
        return body, scopes


async def probe(settings: SlackConfig, *, seconds: float = 10.0) -> Probed:
    """Ask Slack what the config's tokens may do; the problems, in the order to fix them."""
    base = settings.api_url
    problems: list[str] = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as http:
            me, scopes = await _call(
                http, base + "auth.test", settings.bot_token.get_secret_value()
            )
            if not me.get("ok"):
                error = str(me.get("error") or "refused")
                why = _BOT_TOKEN_REFUSED.get(error, "Slack refused it")
                return Probed(problems=(f"slack: bot_token: {why} ({error})",))
            team = str(me.get("team_id") or "")
            if team != settings.team_id:
                problems.append(
                    f"slack: team_id: the bot token is of team {team}, not {settings.team_id}"
                )
            granted = {s.strip() for s in (scopes or "").split(",") if s.strip()}
            missing = [scope for scope in BOT_SCOPES if scope not in granted]
            if scopes is not None and missing:
                problems.append(
                    f"slack: the bot token lacks the scope(s) {', '.join(missing)}: add them "
                    "under OAuth & Permissions (or paste agent-gateway slack-manifest again), "
                    "then reinstall the app and copy its new bot token"
                )
            socket = ""
            if settings.mode == "socket" and settings.app_token is not None:
                opened, _ = await _call(
                    http, base + "apps.connections.open", settings.app_token.get_secret_value()
                )
                if opened.get("ok"):
                    socket = "; Socket Mode on"
                else:
                    error = str(opened.get("error") or "refused")
                    problems.append(
                        f"slack: Socket Mode: apps.connections.open refused the app token "
                        f"({error}): turn Socket Mode on in the app's settings, and check "
                        "that app_token is an app-level token of this app with "
                        "connections:write"
                    )
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Probed(problems=(f"slack: {base} unreachable ({type(exc).__name__})",))
    if problems:
        return Probed(problems=tuple(problems))
    name = str(me.get("user") or me.get("user_id") or "")
    scoped = "; scopes OK" if scopes is not None else "; scopes not named by Slack"
    return Probed(problems=(), summary=f"slack: OK (team {team}, bot @{name}{scoped}{socket})")


async def check(settings: SlackConfig) -> tuple[bool, list[str]]:
    """For ``agent-gateway check`` (the registry's ``probe``): OK, and the lines to print."""
    probed = await probe(settings)
    if probed.problems:
        return False, list(probed.problems)
    return True, [probed.summary]
