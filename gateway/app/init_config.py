"""``agent-gateway init``: a first config that works, for one platform and one agent.

A newcomer who copies config.example.toml meets every option at once, four platforms turned
on, and a data dir that lies inside their work dir when they run it from their home. ``init``
writes only what their choice needs: one project, one platform, its tokens as environment
references (never a secret in the file), the person's id where given, and a data dir outside
the work dir; then it prints the three next steps. It never overwrites a file (exclusive
create), and it refuses a work dir that holds the data dir (the agent may write anywhere
under its work dir: the ledger and the key that signs buttons must not be in reach).
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import ConfigError

__all__ = [
    "AGENTS",
    "PLATFORMS",
    "InitChoice",
    "config_text",
    "default_config_path",
    "default_data_dir",
    "next_steps",
    "write",
]

# the agent people name -> (the project's agent kind, its argv, the variable its key is in)
AGENTS: dict[str, tuple[str, str, str]] = {
    "codex": ("codex-app-server", "codex", "OPENAI_API_KEY"),
    "claude": ("claude-code", "claude", "ANTHROPIC_API_KEY"),
    "opencode": ("opencode", "opencode", ""),
    "codex-acp": ("acp", "codex-acp", "OPENAI_API_KEY"),
}
PLATFORMS = ("telegram", "slack", "discord", "console")


@dataclass(frozen=True, kw_only=True, slots=True)
class InitChoice:
    platform: str
    agent: str
    work_dir: Path
    data_dir: Path
    user_id: str | None = None  # the person's id on the platform (allow_from, approvers)
    project: str = "main"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agent-gateway" / "config.toml"


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "agent-gateway"


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string


def config_text(choice: InitChoice) -> str:
    """The config for ``choice``: valid as written once the tokens are in the environment
    (and, without ``user_id``, once the person's id is in allow_from)."""
    if choice.platform not in PLATFORMS:
        raise ConfigError(f"--platform: one of {', '.join(PLATFORMS)}")
    if choice.agent not in AGENTS:
        raise ConfigError(f"--agent: one of {', '.join(AGENTS)}")
    work, data = choice.work_dir.expanduser().resolve(), choice.data_dir.expanduser().resolve()
    if data == work or work in data.parents:
        raise ConfigError(
            f"the work dir {work} holds the data dir {data}: the agent may write anywhere "
            "under its work dir. Give it a project folder (--work-dir ~/src/myproject), or "
            "put the data dir elsewhere (--data-dir)"
        )
    kind, argv, key = AGENTS[choice.agent]
    name = choice.project
    lines = [
        "# Written by `agent-gateway init`; config.example.toml documents every key.",
        "[gateway]",
        f"data_dir = {_toml(str(data))}",
        "",
        f"[projects.{name}]",
        "# The folder the agent works in: it may read and write anything under it.",
        f"work_dir = {_toml(str(work))}",
        f'agent = "{kind}"',
        f"argv = [{_toml(argv)}]",
    ]
    if key:
        lines.append(f"env_allowlist = [{_toml(key)}]  # passed on to the agent")
    lines += ["", *_auth(choice), "", *_platform(choice)]
    return "\n".join(lines) + "\n"


def _auth(choice: InitChoice) -> list[str]:
    table = "local" if choice.platform == "console" else choice.platform
    head = f"[projects.{choice.project}.auth.{table}]"
    who = choice.user_id or (getpass.getuser() if choice.platform == "console" else None)
    if who is None:
        return [
            head,
            f"# Your {choice.platform.title()} user id: {_HOW_TO_FIND_ID[choice.platform]}",
            "allow_from = []",
            "approvers = []",
        ]
    return [head, f"allow_from = [{_toml(who)}]", f"approvers = [{_toml(who)}]"]


_HOW_TO_FIND_ID = {
    "telegram": "send any message to @userinfobot, which answers with it.",
    "slack": "your profile, ⋮, Copy member ID (U…).",
    "discord": "Settings, Advanced, Developer Mode on; then right-click your name, Copy User ID.",
}


def _platform(choice: InitChoice) -> list[str]:
    match choice.platform:
        case "telegram":
            return ["[platforms.telegram]", 'token = "${TELEGRAM_BOT_TOKEN}"']
        case "slack":
            return [
                "[platforms.slack]",
                'bot_token = "${SLACK_BOT_TOKEN}"',
                'app_token = "${SLACK_APP_TOKEN}"',
                "# Your workspace's id (T…), in place of this one: `check` names the team the",
                "# token belongs to.",
                'team_id = "T0000000000"',
            ]
        case "discord":
            return ["[platforms.discord]", 'token = "${DISCORD_BOT_TOKEN}"']
        case _:
            who = choice.user_id or getpass.getuser()
            return ["[platforms.console]", f"identity = {_toml('local:' + who)}"]


def next_steps(choice: InitChoice, path: Path) -> str:
    """The three steps after ``init``, in order."""
    check = f"agent-gateway check --config {path}"
    _, argv, key = AGENTS[choice.agent]
    agent = f"`{argv}` on your PATH" + (f", with {key} exported" if key else "")
    make = {
        "telegram": "create the bot: in Telegram, talk to @BotFather, /newbot; copy its token",
        "slack": "create the app: `agent-gateway slack-manifest`, then docs/slack.md",
        "discord": "create the bot: docs/discord.md, then `agent-gateway discord-invite`",
        "console": f"install the agent ({agent})",
    }[choice.platform]
    export = {
        "telegram": "export TELEGRAM_BOT_TOKEN=…",
        "slack": "export SLACK_BOT_TOKEN=… SLACK_APP_TOKEN=…; set team_id",
        "discord": "export DISCORD_BOT_TOKEN=…",
        "console": "nothing to export for the console",
    }[choice.platform]
    id_note = (
        ""
        if choice.user_id or choice.platform == "console"
        else f"; put your user id in allow_from ({_HOW_TO_FIND_ID[choice.platform]})"
    )
    return (
        f"Wrote {path}. Next:\n"
        f"  1. {make}\n"
        f"  2. {export}{id_note}\n"
        f"  3. {check}\n"
        f"     then the same with run. The agent: {agent}."
    )


def write(path: Path, text: str) -> None:
    """Create ``path`` with ``text``, readable by its owner only; never over a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(f"{path} exists: not overwritten (--config another path)") from None
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
