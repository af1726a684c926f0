"""The config file as text and raw data: where each key is written, and its references.

:func:`resolve_references` replaces ``${ENV_VAR}`` in every string (``$${X}`` is a literal
``${X}``) and turns each ``<secret>_file`` key into ``<secret>`` with the file's content.
Every problem comes back with the key path it was found at.

:class:`KeyLocator` finds the line of a TOML file on which a dotted key is written.

``tomllib`` keeps no positions, so this scans the text: table headers (``[a.b]``) and key
lines (``key = ``, ``a.b = `` and quoted keys) give each line a full key path. A key path is
then located at the line whose path matches it best: the key itself, else the closest
table or key it lives in (a missing key is reported at its table's header), else the first
line that shares the longest part of its path. Multi-line strings are skipped. Heuristic by
design, and tested as such.

Agent options may be written flat in the project table or under ``agent_options``; a path
through ``agent_options`` is also looked up without that part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["SECRET_KEYS", "KeyLocator", "Loc", "resolve_references"]

Loc = tuple[str | int, ...]

_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_PART = rf"(?:{_BARE}|{_QUOTED})"
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*(?P<key>{_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY_LINE = re.compile(rf"^\s*(?P<key>{_DOTTED})\s*=")
_SPLIT = re.compile(rf"\s*({_PART})\s*(?:\.|$)")
_ALIASES = ("agent_options",)

# each may be given as <key>_file
SECRET_KEYS = frozenset(
    {"token", "bot_token", "app_token", "secret_token", "signing_secret", "store_password"}
)
_ENV_REF = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _split(dotted: str) -> tuple[str, ...]:
    parts = []
    for match in _SPLIT.finditer(dotted):
        part = match.group(1)
        if part[:1] in "\"'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


class KeyLocator:
    """The key paths defined on each line of a TOML text."""

    def __init__(self, text: str) -> None:
        self.entries: list[tuple[tuple[str, ...], int]] = []
        table: tuple[str, ...] = ()
        arrays: dict[tuple[str, ...], int] = {}
        fence: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if fence is not None:
                if line.count(fence) % 2 == 1:
                    fence = None
                continue
            header = _HEADER.match(line)
            if header:
                table = _split(header.group("key"))
                if line.lstrip().startswith("[["):
                    # an array of tables: its Nth header is element N, as pydantic counts
                    index = arrays.get(table, -1) + 1
                    arrays[table] = index
                    table = (*table, str(index))
                self.entries.append((table, number))
                continue
            key_line = _KEY_LINE.match(line)
            if key_line:
                self.entries.append(((*table, *_split(key_line.group("key"))), number))
                rest = line[key_line.end() :]
                for quotes in ('"""', "'''"):
                    if rest.count(quotes) % 2 == 1:
                        fence = quotes

    def line_of(self, loc: Loc) -> int | None:
        """The line that best matches ``loc``, or None when no line shares any of it."""
        path = tuple(str(part) for part in loc)
        candidates = [path]
        for alias in _ALIASES:
            if alias in path:
                candidates.append(tuple(part for part in path if part != alias))
        best: tuple[int, int, int] | None = None  # (contained, shared parts, -line)
        for candidate in candidates:
            for entry, number in self.entries:
                shared = _shared_prefix(entry, candidate)
                if shared == 0:
                    continue
                contained = int(shared == len(entry))
                score = (contained, shared, -number)
                if best is None or score > best:
                    best = score
        return None if best is None else -best[2]


def _shared_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    count = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        count += 1
    return count


# --- references ----------------------------------------------------------------------------


def resolve_references(
    raw: dict[str, Any], env: Mapping[str, str], base_dir: Path | None
) -> tuple[dict[str, Any], list[tuple[Loc, str]]]:
    """``raw`` with references replaced, and the problems found (key path, message)."""
    found: list[tuple[Loc, str]] = []
    resolved = _resolve(raw, (), env, base_dir, found)
    return resolved, found


def _interpolate(value: str, loc: Loc, env: Mapping[str, str], found: list[tuple[Loc, str]]) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return match.group(0)[1:]  # "$${X}" stays literally "${X}"
        if name not in env:
            found.append((loc, f"environment variable {name} is not set"))
            return ""
        return env[name]

    return _ENV_REF.sub(replace, value)


def _resolve(
    data: Any,
    loc: Loc,
    env: Mapping[str, str],
    base_dir: Path | None,
    found: list[tuple[Loc, str]],
) -> Any:
    if isinstance(data, str):
        return _interpolate(data, loc, env, found)
    if isinstance(data, list):
        return [_resolve(item, (*loc, i), env, base_dir, found) for i, item in enumerate(data)]
    if not isinstance(data, dict):
        return data
    resolved: dict[str, Any] = {}
    for key, value in data.items():
        secret = key.removesuffix("_file")
        if key.endswith("_file") and secret in SECRET_KEYS:
            if secret in data:
                found.append(((*loc, key), f"give either {secret} or {key}, not both"))
                continue
            path_text = _resolve(value, (*loc, key), env, base_dir, found)
            if isinstance(path_text, str):
                content = _read_secret_file(path_text, base_dir, (*loc, key), found)
                if content is not None:
                    resolved[secret] = content
                continue
        resolved[key] = _resolve(value, (*loc, key), env, base_dir, found)
    return resolved


def _read_secret_file(
    path_text: str, base_dir: Path | None, loc: Loc, found: list[tuple[Loc, str]]
) -> str | None:
    path = Path(path_text).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
        found.append((loc, f"cannot read secret file {path}: {reason}"))
        return None
