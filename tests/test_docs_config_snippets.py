"""Every config snippet in the README and the guides is read by the real config model
(issue 37): a key renamed in the code and left in a guide fails here, not in a reader's
first hour. A snippet is often part of a file (one platform's table, the ``[gateway]`` keys
of a procedure): it is completed with what a whole file needs (a data dir, a project, the
people of each platform it turns on), its ``${VARIABLES}`` given and the files it names
made, then parsed as ``check`` parses a file."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from platforms.registry import parse_config

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```toml\n(.*?)^\1```", re.S | re.M)


def snippets() -> list[tuple[str, str]]:
    found = []
    for path in GUIDES:
        if path.name == "decisions.md":  # the record of what was decided, not a guide
            continue
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            indent = len(match.group(1))
            body = "\n".join(line[indent:] for line in match.group(2).splitlines())
            line = text[: match.start()].count("\n") + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", body))
    return found


def _merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _toml(data: dict[str, Any], prefix: str = "") -> str:
    """Enough of a TOML writer for a config: tables, strings, numbers, booleans, lists."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        raise TypeError(type(v))

    plain = [f'"{k}" = {value(v)}' for k, v in data.items() if not isinstance(v, dict)]
    out = ([f"[{prefix}]"] if prefix and plain else []) + plain
    for key, table in data.items():
        if isinstance(table, dict):
            out.append(_toml(table, f"{prefix}.{key}" if prefix else f'"{key}"'))
    return "\n".join(out)


@pytest.mark.parametrize(("where", "snippet"), snippets(), ids=[w for w, _ in snippets()])
def test_a_config_snippet_of_the_guides_is_read_by_the_config_model(
    where: str, snippet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    given = tomllib.loads(snippet)
    for key, path in re.findall(r'^\s*(\w+_file)\s*=\s*"([^"]+)"', snippet, re.M):
        made = Path(path).expanduser()
        made.parent.mkdir(parents=True, exist_ok=True)
        made.write_bytes(b"\x01" * 32 if key == "hmac_key_file" else b"secret-from-a-file\n")
        made.chmod(0o600)
    base: dict[str, Any] = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "projects": {"main": {"work_dir": str(tmp_path / "work"), "agent": "codex-app-server"}},
    }
    data = _merged(base, given)
    if "projects" in given:  # the snippet's own projects, not the stand-in
        data["projects"] = given["projects"]
    store = "store" in data.get("gateway", {})
    for project in data["projects"].values():
        project.setdefault("work_dir", str(tmp_path / "work"))
        project.setdefault("agent", "codex-app-server")
        if store:
            project.setdefault("host", "here")
        auth = project.setdefault("auth", {})
        for platform in data.get("platforms", {}) or {"memory": {}}:
            auth.setdefault("local" if platform == "console" else platform, {"allow_from": ["1"]})
    data.setdefault("platforms", {"memory": {}})
    if store:
        data["gateway"].setdefault("hmac_key_file", str(tmp_path / "hmac.key"))
        (tmp_path / "hmac.key").write_bytes(b"\x01" * 32)
    env = {name: f"{name.lower()}-value" for name in re.findall(r"\$\{(\w+)\}", snippet)}
    env.update({"TELEGRAM_BOT_TOKEN": "123456789:AAsecret", "DISCORD_BOT_TOKEN": "a.b.c"})
    parse_config(_toml(data), where, env=env)


def test_the_guides_have_config_snippets() -> None:
    named = {where.split(":")[0] for where, _ in snippets()}
    assert {"docs/telegram.md", "docs/operations.md", "docs/discord.md"} <= named
