"""What the fake Discord checks in a body, sans IO: the limits that answer 50035.

:func:`check_message` reads a message body (create, edit, interaction message, followup) and
:func:`check_modal` a modal (callback type 9); :func:`check_commands` an application command
list. Each returns the ``errors`` Discord would list, empty when the body is valid;
:class:`DiscordError` carries an HTTP status, a JSON error code and message as Discord
answers them (``{"code": 50035, "message": "Invalid Form Body", "errors": ...}``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

__all__ = [
    "BUTTON",
    "CHECKBOX_GROUP",
    "LABEL",
    "RADIO_GROUP",
    "ROW",
    "SELECT",
    "TEXT_DISPLAY",
    "TEXT_INPUT",
    "DiscordError",
    "check_choices",
    "check_commands",
    "check_message",
    "check_modal",
    "pings",
    "walk_components",
]

ROW, BUTTON, SELECT, TEXT_INPUT, TEXT_DISPLAY, LABEL, RADIO_GROUP, CHECKBOX_GROUP = (
    1,
    2,
    3,
    4,
    10,
    18,
    21,
    22,
)
_SELECTS = {3, 5, 6, 7, 8}


class DiscordError(Exception):
    """A refusal as Discord answers it: HTTP ``status`` and ``{"code", "message"[, "errors"]}``."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        errors: dict[str, str] | None = None,
        *,
        retry_after: float = 0.0,
    ) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors or {}
        self.retry_after = retry_after  # a 429's seconds to wait

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.status == 429:
            body.update(retry_after=self.retry_after, **{"global": False})
        if self.errors:
            body["errors"] = {
                path: {"_errors": [{"code": "BASE_TYPE_INVALID", "message": text}]}
                for path, text in self.errors.items()
            }
        return body

    @classmethod
    def invalid(cls, errors: dict[str, str]) -> DiscordError:
        return cls(400, 50035, "Invalid Form Body", errors)


def _too_long(errors: dict[str, str], path: str, value: Any, limit: int) -> None:
    if isinstance(value, str) and len(value) > limit:
        errors[path] = f"Must be {limit} or fewer in length."


def _iso8601(stamp: Any) -> bool:
    """An embed's ``timestamp``: ISO 8601 with its offset (Discord shows it in each reader's
    zone, so a time without one has no meaning)."""
    if not isinstance(stamp, str):
        return False
    try:
        return datetime.fromisoformat(stamp).tzinfo is not None
    except ValueError:
        return False


def check_message(body: dict[str, Any]) -> dict[str, str]:
    """The 50035 errors of a message body (content, embeds, components)."""
    errors: dict[str, str] = {}
    _too_long(errors, "content", body.get("content"), 2000)
    embeds = body.get("embeds") or []
    if len(embeds) > 10:
        errors["embeds"] = "Must be 10 or fewer in length."
    total = 0
    for i, embed in enumerate(embeds):
        for key, limit in (("title", 256), ("description", 4096)):
            _too_long(errors, f"embeds.{i}.{key}", embed.get(key), limit)
            total += len(embed.get(key) or "")
        footer = embed.get("footer") or {}
        _too_long(errors, f"embeds.{i}.footer.text", footer.get("text"), 2048)
        total += len(footer.get("text") or "")
        author = embed.get("author") or {}
        _too_long(errors, f"embeds.{i}.author.name", author.get("name"), 256)
        total += len(author.get("name") or "")
        stamp = embed.get("timestamp")
        if stamp is not None and not _iso8601(stamp):
            errors[f"embeds.{i}.timestamp"] = f"Could not parse {stamp!r}. Should be ISO8601."
        fields = embed.get("fields") or []
        if len(fields) > 25:
            errors[f"embeds.{i}.fields"] = "Must be 25 or fewer in length."
        for j, fld in enumerate(fields):
            _too_long(errors, f"embeds.{i}.fields.{j}.name", fld.get("name"), 256)
            _too_long(errors, f"embeds.{i}.fields.{j}.value", fld.get("value"), 1024)
            total += len(fld.get("name") or "") + len(fld.get("value") or "")
    if total > 6000:
        errors["embeds"] = "Embed size exceeds maximum size of 6000"
    _check_rows(errors, body.get("components") or [])
    return errors


def _check_rows(errors: dict[str, str], rows: list[dict[str, Any]]) -> None:
    if len(rows) > 5:
        errors["components"] = "Must be 5 or fewer in length."
    for i, row in enumerate(rows):
        if row.get("type") != ROW:
            continue  # components v2 are not checked
        children = row.get("components") or []
        if len(children) > 5:
            errors[f"components.{i}.components"] = "Must be 5 or fewer in length."
        if any(c.get("type") in _SELECTS for c in children) and len(children) > 1:
            errors[f"components.{i}.components"] = "A select menu fills its action row."
        for j, child in enumerate(children):
            _check_item(errors, f"components.{i}.components.{j}", child)


def _check_item(errors: dict[str, str], path: str, item: dict[str, Any]) -> None:
    _too_long(errors, f"{path}.custom_id", item.get("custom_id"), 100)
    kind = item.get("type")
    if kind == BUTTON:
        _too_long(errors, f"{path}.label", item.get("label"), 80)
        if item.get("style") != 5 and not item.get("custom_id"):
            errors[f"{path}.custom_id"] = "This field is required"
    elif kind in _SELECTS:
        options = item.get("options") or []
        if len(options) > 25:
            errors[f"{path}.options"] = "Must be 25 or fewer in length."
        for k, option in enumerate(options):
            _too_long(errors, f"{path}.options.{k}.label", option.get("label"), 100)
    elif kind == TEXT_INPUT:
        _too_long(errors, f"{path}.label", item.get("label"), 45)
        _too_long(errors, f"{path}.value", item.get("value"), 4000)
        if (item.get("max_length") or 0) > 4000:
            errors[f"{path}.max_length"] = "int value should be less than or equal to 4000."
    elif kind == RADIO_GROUP:
        count = len(item.get("options") or [])
        if not 2 <= count <= 10:
            errors[f"{path}.options"] = "Must be between 2 and 10 in length."
    elif kind == CHECKBOX_GROUP:
        count = len(item.get("options") or [])
        if not 1 <= count <= 10:
            errors[f"{path}.options"] = "Must be between 1 and 10 in length."
        if (item.get("max_values") or 0) > 10:
            errors[f"{path}.max_values"] = "int value should be less than or equal to 10."


def check_modal(data: dict[str, Any]) -> dict[str, str]:
    """The 50035 errors of a modal (title, custom_id, ≤5 components, labels and their items)."""
    errors: dict[str, str] = {}
    _too_long(errors, "data.title", data.get("title"), 45)
    if not data.get("title"):
        errors["data.title"] = "This field is required"
    _too_long(errors, "data.custom_id", data.get("custom_id"), 100)
    components = data.get("components") or []
    if not 1 <= len(components) <= 5:
        errors["data.components"] = "Must be between 1 and 5 in length."
    for i, top in enumerate(components):
        path = f"data.components.{i}"
        kind = top.get("type")
        if kind == ROW:
            children = top.get("components") or []
            if len(children) != 1 or children[0].get("type") != TEXT_INPUT:
                errors[path] = "A modal's action row holds one text input."
            for j, child in enumerate(children):
                _check_item(errors, f"{path}.components.{j}", child)
        elif kind == LABEL:
            _too_long(errors, f"{path}.label", top.get("label"), 45)
            _too_long(errors, f"{path}.description", top.get("description"), 100)
            child = top.get("component") or {}
            if child.get("type") not in {TEXT_INPUT, RADIO_GROUP, CHECKBOX_GROUP, *_SELECTS}:
                errors[f"{path}.component"] = "Component type not allowed in a label."
            _check_item(errors, f"{path}.component", child)
        elif kind != TEXT_DISPLAY:
            errors[f"{path}.type"] = f"Component type {kind} not allowed in a modal."
    return errors


def check_commands(commands: Any) -> dict[str, str]:
    """The 50035 errors of a bulk overwrite of application commands."""
    if not isinstance(commands, list):
        return {"_": "Expected an array."}
    errors: dict[str, str] = {}
    if len(commands) > 100:
        errors["_"] = "Must be 100 or fewer in length."
    for i, command in enumerate(commands):
        name = command.get("name") or ""
        if not 1 <= len(name) <= 32 or name != name.lower():
            errors[f"{i}.name"] = "Invalid command name."
        if command.get("type", 1) == 1:
            description = command.get("description") or ""
            if not 1 <= len(description) <= 100:
                errors[f"{i}.description"] = "Must be between 1 and 100 in length."
        options = command.get("options") or []
        if len(options) > 25:
            errors[f"{i}.options"] = "Must be 25 or fewer in length."
        optional = False
        for j, option in enumerate(options):
            where = f"{i}.options.{j}"
            option_name = option.get("name") or ""
            if not 1 <= len(option_name) <= 32 or option_name != option_name.lower():
                errors[f"{where}.name"] = "Invalid command name."
            if not 1 <= len(option.get("description") or "") <= 100:
                errors[f"{where}.description"] = "Must be between 1 and 100 in length."
            if option.get("required") and optional:
                errors[f"{where}.required"] = (
                    "Required options must be placed before non-required options"
                )
            optional = optional or not option.get("required")
            if option.get("autocomplete") and option.get("choices"):
                errors[f"{where}.autocomplete"] = "Autocomplete cannot be set with choices"
    return errors


def check_choices(data: Any) -> dict[str, str]:
    """The 50035 errors of an autocomplete answer (callback type 8)."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list):
        return {"choices": "This field is required"}
    errors: dict[str, str] = {}
    if len(choices) > 25:
        errors["choices"] = "Must be 25 or fewer in length."
    for i, choice in enumerate(choices):
        if not 1 <= len(str(choice.get("name") or "")) <= 100:
            errors[f"choices.{i}.name"] = "Must be between 1 and 100 in length."
        if not 1 <= len(str(choice.get("value") or "")) <= 100:
            errors[f"choices.{i}.value"] = "Must be between 1 and 100 in length."
    return errors


def walk_components(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every component in a tree (rows, labels, and what they hold), depth first."""
    found: list[dict[str, Any]] = []
    for component in components:
        found.append(component)
        found.extend(walk_components(component.get("components") or []))
        if isinstance(component.get("component"), dict):
            found.extend(walk_components([component["component"]]))
    return found


_MENTION = re.compile(r"<@!?(\d+)>|<@&(\d+)>|@(everyone|here)")


def pings(content: str, allowed_mentions: dict[str, Any] | None) -> list[str]:
    """Whom a new message's content notifies, as Discord applies ``allowed_mentions``: user
    ids, ``role:<id>``, ``@everyone``/``@here`` (embeds never ping; no ``allowed_mentions``
    lets every mention ping)."""
    rules = allowed_mentions
    parse = {"users", "roles", "everyone"} if rules is None else set(rules.get("parse") or [])
    users = set() if rules is None else {str(u) for u in rules.get("users") or []}
    roles = set() if rules is None else {str(r) for r in rules.get("roles") or []}
    found: list[str] = []
    for match in _MENTION.finditer(content or ""):
        user, role, everyone = match.groups()
        if user and ("users" in parse or user in users):
            found.append(user)
        elif role and ("roles" in parse or role in roles):
            found.append(f"role:{role}")
        elif everyone and "everyone" in parse:
            found.append(f"@{everyone}")
    return list(dict.fromkeys(found))
