"""Typed access to the fields of a decoded JSON object, for codecs.

A codec reads agent messages field by field; these helpers narrow ``JsonValue`` to what the
schema says and turn a missing or mistyped REQUIRED field into
:class:`gateway.errors.MalformedMessage` (remote misbehaviour), with a bounded excerpt.
Optional fields that are absent, null or of the wrong type read as ``None``.
"""

from __future__ import annotations

import json

from adapters.jsonrpc import JsonObject, JsonValue, excerpt
from gateway.errors import MalformedMessage

__all__ = [
    "as_object",
    "get_array",
    "get_bool",
    "get_int",
    "get_object",
    "get_strings",
    "get_text",
    "require_object",
    "require_text",
]


def _excerpt_of(value: JsonValue) -> str:
    try:
        return excerpt(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return excerpt(repr(value))


def as_object(value: JsonValue, *, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise MalformedMessage(f"{where} is not a JSON object", _excerpt_of(value))
    return value


def get_text(obj: JsonObject, key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def require_text(obj: JsonObject, key: str, *, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise MalformedMessage(f"{where}: {key!r} is missing or not a string", _excerpt_of(obj))
    return value


def get_int(obj: JsonObject, key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def get_bool(obj: JsonObject, key: str, default: bool = False) -> bool:
    value = obj.get(key)
    return value if isinstance(value, bool) else default


def get_object(obj: JsonObject, key: str) -> JsonObject | None:
    value = obj.get(key)
    return value if isinstance(value, dict) else None


def require_object(obj: JsonObject, key: str, *, where: str) -> JsonObject:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise MalformedMessage(f"{where}: {key!r} is missing or not an object", _excerpt_of(obj))
    return value


def get_array(obj: JsonObject, key: str) -> list[JsonValue] | None:
    value = obj.get(key)
    return value if isinstance(value, list) else None


def get_strings(obj: JsonObject, key: str) -> tuple[str, ...]:
    """The strings of an array field (other elements are skipped); () when absent."""
    return tuple(item for item in get_array(obj, key) or () if isinstance(item, str))
