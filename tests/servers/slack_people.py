"""People, and the payloads Slack sends an app about what they do (sans-IO).

Field names and shapes follow Slack's documented payloads: the Events API's
``event_callback`` wrapper (with ``authorizations``), ``message`` and ``app_mention`` events,
``block_actions`` and ``view_submission`` interactivity payloads and slash-command bodies,
as slack-bolt 1.30 reads them (``slack_bolt.request.internals``). A person's message carries
the ``rich_text`` block Slack's clients add.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.servers.slack_wire import inputs_of, text_of

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_DOMAIN",
    "TEAM_ID",
    "VERIFICATION_TOKEN",
    "Answer",
    "Person",
    "block_actions_payload",
    "event_callback",
    "message_event",
    "required_missing",
    "slash_command_payload",
    "state_values",
    "view_submission_payload",
]

TEAM_ID = "T0FAKE"
TEAM_DOMAIN = "fake"
APP_ID = "A0FAKE"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
VERIFICATION_TOKEN = "fake-verification-token"  # the deprecated field every payload still has

Answer = str | Sequence[str] | None  # text, an option (value or label), options, or nothing

_event_ids = itertools.count(1)
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


@dataclass(frozen=True)
class Person:
    """A member of a workspace (``team``: another team's for a shared channel)."""

    id: str
    name: str
    real_name: str = ""
    team: str = TEAM_ID
    is_bot: bool = False

    def user_json(self) -> dict[str, Any]:
        """As ``users.info`` answers."""
        real = self.real_name or self.name.title()
        return {
            "id": self.id,
            "team_id": self.team,
            "name": self.name,
            "deleted": False,
            "real_name": real,
            "tz": "Europe/London",
            "is_bot": self.is_bot,
            "is_app_user": False,
            "profile": {"real_name": real, "display_name": self.name, "team": self.team},
        }

    def payload_user(self) -> dict[str, Any]:
        """As interactivity payloads name the person."""
        return {"id": self.id, "username": self.name, "name": self.name, "team_id": self.team}


def event_callback(event: dict[str, Any], *, shared: bool = False) -> dict[str, Any]:
    """The Events API wrapper around ``event`` (``shared``: in a Slack Connect channel)."""
    n = next(_event_ids)
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "context_team_id": TEAM_ID,
        "context_enterprise_id": None,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{n:010d}",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": shared,
        "event_context": f"4-fake-{n}",
    }


def _rich_text(text: str) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = []
    position = 0
    for match in _MENTION.finditer(text):
        if match.start() > position:
            elements.append({"type": "text", "text": text[position : match.start()]})
        elements.append({"type": "user", "user_id": match.group(1)})
        position = match.end()
    if position < len(text):
        elements.append({"type": "text", "text": text[position:]})
    return [
        {
            "type": "rich_text",
            "block_id": uuid.uuid4().hex[:5],
            "elements": [{"type": "rich_text_section", "elements": elements}],
        }
    ]


def message_event(
    person: Person,
    *,
    kind: str,
    channel: str,
    channel_type: str,
    text: str,
    ts: str,
    thread_ts: str | None = None,
    parent_user_id: str | None = None,
) -> dict[str, Any]:
    """A person's ``message`` (``kind="message"``) or ``app_mention`` event."""
    event: dict[str, Any] = {
        "type": kind,
        "user": person.id,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel": channel,
        "team": person.team,
        "client_msg_id": str(uuid.uuid4()),
        "blocks": _rich_text(text),
    }
    if person.team != TEAM_ID:
        event["user_team"] = person.team
        event["source_team"] = person.team
    if kind == "message":
        event["channel_type"] = channel_type
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
        if parent_user_id is not None:
            event["parent_user_id"] = parent_user_id
    return event


def block_actions_payload(
    person: Person,
    *,
    channel: dict[str, Any],
    message: dict[str, Any],
    block: dict[str, Any],
    element: dict[str, Any],
    trigger_id: str,
    response_url: str,
    action_ts: str,
) -> dict[str, Any]:
    """A click of ``element`` (a button) in ``block`` of the bot's ``message``."""
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message["ts"],
        "channel_id": channel["id"],
        "is_ephemeral": False,
    }
    if message.get("thread_ts"):
        container["thread_ts"] = message["thread_ts"]
    action: dict[str, Any] = {
        "type": element["type"],
        "action_id": element["action_id"],
        "block_id": block["block_id"],
        "text": element.get("text"),
        "action_ts": action_ts,
    }
    for key in ("value", "style", "url"):
        if key in element:
            action[key] = element[key]
    return {
        "type": "block_actions",
        "user": person.payload_user(),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id,
        "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel["id"], "name": channel.get("name") or "directmessage"},
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [action],
    }


def _option(element: dict[str, Any], wanted: str, where: str) -> dict[str, Any]:
    options = element.get("options") or [
        o for group in element.get("option_groups") or [] for o in group.get("options") or []
    ]
    found = [o for o in options if o.get("value") == wanted] or [
        o for o in options if text_of(o.get("text")) == wanted
    ]
    if len(found) != 1:
        raise AssertionError(f"{where}: no single option {wanted!r} among {options}")
    return dict(found[0])


def _input_key(block: dict[str, Any], answers: Mapping[str, Answer]) -> str | None:
    for key in (block.get("block_id"), text_of(block.get("label"))):
        if key in answers:
            return str(key)
    return None


def state_values(blocks: list[dict[str, Any]], answers: Mapping[str, Answer]) -> dict[str, Any]:
    """``view.state.values`` of a modal answered with ``answers``.

    ``answers`` are keyed by an input's ``block_id`` or its label; a text input takes a
    string, a single choice the value or label of an option, a multiple choice a list of
    them. Inputs left out are empty, as Slack sends them. An unknown key is the test's
    mistake (AssertionError).
    """
    values: dict[str, Any] = {}
    used: set[str] = set()
    for block, element in inputs_of(blocks):
        key = _input_key(block, answers)
        answer = answers.get(key) if key is not None else None
        if key is not None:
            used.add(key)
        kind = element["type"]
        state: dict[str, Any] = {"type": kind}
        where = f"input {block['block_id']}"
        if kind in ("radio_buttons", "static_select"):
            if answer is not None and not isinstance(answer, str):
                raise AssertionError(f"{where} takes one option, not {answer!r}")
            state["selected_option"] = _option(element, answer, where) if answer else None
        elif kind in ("checkboxes", "multi_static_select"):
            chosen = [answer] if isinstance(answer, str) else list(answer or [])
            state["selected_options"] = [_option(element, a, where) for a in chosen]
        else:
            if answer is not None and not isinstance(answer, str):
                raise AssertionError(f"{where} takes text, not {answer!r}")
            state["value"] = answer if answer else None
        values[block["block_id"]] = {element["action_id"]: state}
    unknown = set(answers) - used
    if unknown:
        raise AssertionError(f"no input for {sorted(unknown)} in the modal")
    return values


def required_missing(blocks: list[dict[str, Any]], values: dict[str, Any]) -> list[str]:
    """The block_ids of required inputs left empty: Slack's client will not submit then."""
    missing = []
    for block, element in inputs_of(blocks):
        if block.get("optional", False):
            continue
        state = values[block["block_id"]][element["action_id"]]
        answered = state.get("value") or state.get("selected_option")
        if not (answered or state.get("selected_options")):
            missing.append(block["block_id"])
    return missing


def view_submission_payload(
    person: Person, *, view: dict[str, Any], values: dict[str, Any], trigger_id: str
) -> dict[str, Any]:
    """The submission of the open modal ``view`` (as Slack stores it) with ``values``."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "user": person.payload_user(),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id,
        "view": {**view, "state": {"values": values}},
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def slash_command_payload(
    person: Person,
    *,
    channel: dict[str, Any],
    command: str,
    text: str,
    trigger_id: str,
    response_url: str,
) -> dict[str, str]:
    """A slash command's fields (form fields over HTTP, the same keys in Socket Mode)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "team_domain": TEAM_DOMAIN,
        "channel_id": channel["id"],
        "channel_name": channel.get("name") or "directmessage",
        "user_id": person.id,
        "user_name": person.name,
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }
