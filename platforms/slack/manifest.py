"""The Slack app manifest ``agent-gateway slack-manifest`` prints (pure, no SDK).

Pasted into "Create New App → From an app manifest" on api.slack.com/apps, it asks for what
the platform uses and nothing more: the bot's scopes (post and edit its messages, ephemeral
answers, files for what is too long for a card, DMs, reading the channels and DMs it is in,
names of people), the events it takes (messages in channels, private channels and DMs, and
mentions), interactivity (buttons, modals), the slash command, and Socket Mode, or in HTTP
mode the request URL for events, interactivity and the command.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BOT_EVENTS", "BOT_SCOPES", "manifest", "manifest_json"]

BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "im:write",
    "chat:write",
    "commands",
    "files:write",
    "files:read",  # the files people send the agent (issue 32): url_private needs it
    "users:read",
    "reactions:write",  # the mark on a message queued behind a card (mark_queued)
)
BOT_EVENTS = ("app_mention", "message.channels", "message.groups", "message.im")


def manifest(
    *, name: str = "Agent Gateway", command: str = "/agent", request_url: str | None = None
) -> dict[str, Any]:
    """The manifest; ``request_url`` (HTTP mode) turns Socket Mode off."""
    slash: dict[str, Any] = {
        "command": command,
        "description": "Talk to the agent gateway: stop, new, status, help",
        "usage_hint": (
            "stop | new | status | pending | sessions | switch NAME|N | name TEXT"
            " | every CRON TEXT | at WHEN TEXT | schedules | help"
        ),
        "should_escape": False,
    }
    events: dict[str, Any] = {"bot_events": list(BOT_EVENTS)}
    interactivity: dict[str, Any] = {"is_enabled": True}
    if request_url is not None:
        slash["url"] = request_url
        events["request_url"] = request_url
        interactivity["request_url"] = request_url
    return {
        "display_information": {
            "name": name,
            "description": "Approve a coding agent's commands and answer its questions",
        },
        "features": {
            "bot_user": {"display_name": name, "always_online": True},
            "slash_commands": [slash],
            "app_home": {"messages_tab_enabled": True, "messages_tab_read_only_enabled": False},
        },
        "oauth_config": {"scopes": {"bot": list(BOT_SCOPES)}},
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": request_url is None,
            "token_rotation_enabled": False,
        },
    }


def manifest_json(**options: Any) -> str:
    return json.dumps(manifest(**options), indent=2)
