"""``agent-gateway service``: a systemd unit that keeps the gateway running for months.

What a unit for this program must get right, and why:

- ``Environment=PATH=…`` is the PATH of the shell that wrote the unit: a user manager's PATH
  lacks ``~/.local/bin`` and npm's folders, so ``argv = ["codex"]`` would not be found.
- Tokens live in an ``EnvironmentFile`` (mode 0600), never in the unit (which
  ``systemctl show`` prints to anyone); the file is made empty, listing the ``${VARS}`` the
  config names, and never written over.
- ``KillMode=mixed``: ``systemctl stop`` sends SIGTERM to the gateway alone, which stops its
  agents' process groups in order (turns ended, cards edited); only what is left after
  ``TimeoutStopSec`` is killed. That timeout is longer than the gateway's clean stop (the
  platforms' grace for the updates being handled, then the agents' ``stop_grace_seconds``).
- No dependency on ``network-online.target``: the gateway retries its platforms itself
  (gateway/platform_links.py), and a unit that waits for the network may wait forever.
- ``Restart=on-failure``: ``run`` exits non-zero when no platform is left (a revoked token)
  or the config is refused; systemd's rate limit stops a loop of restarts.
- A user unit stops at logout unless lingering is on: the next steps say
  ``loginctl enable-linger``. The system-wide variant runs as a dedicated user.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import ConfigError

__all__ = [
    "UnitChoice",
    "env_file_text",
    "next_steps",
    "referenced_variables",
    "stop_timeout",
    "unit_text",
    "write_new",
]

UNIT_NAME = "agent-gateway.service"
PLATFORM_STOP_GRACE = 10.0  # the platforms' grace for the updates being handled at stop
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, kw_only=True, slots=True)
class UnitChoice:
    argv: tuple[str, ...]  # the program: the installed agent-gateway, or python -m gateway
    config: Path
    env_file: Path
    path: str  # the PATH the agents are found on
    stop_timeout: int  # seconds
    system_user: str | None = None  # the system-wide variant: the dedicated user it runs as


def stop_timeout(stop_grace_seconds: float) -> int:
    """Longer than the gateway's clean stop: the platforms' grace, the agents' grace (each
    agent is stopped side by side), and a margin for the ledger's last writes."""
    return int(PLATFORM_STOP_GRACE + stop_grace_seconds + 15)


def referenced_variables(config_text: str) -> list[str]:
    """The ``${VARS}`` the config reads, in order, each once."""
    return list(dict.fromkeys(_VARIABLE.findall(config_text)))


def _quote(word: str) -> str:
    """A word of ExecStart= as systemd splits it (its quoting is close to the shell's)."""
    if re.fullmatch(r"[A-Za-z0-9_./@%+=:,-]+", word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(choice: UnitChoice) -> str:
    program = " ".join(_quote(w) for w in (*choice.argv, "run", "--config", str(choice.config)))
    lines = [
        "[Unit]",
        "Description=agent-gateway: coding agents driven from chat",
        "# no After=network-online.target: the gateway retries its platforms itself",
        "",
        "[Service]",
        "Type=exec",
    ]
    if choice.system_user is not None:
        lines.append(f"User={choice.system_user}")  # its own primary group
    lines += [
        f"ExecStart={program}",
        "ExecReload=/bin/kill -HUP $MAINPID",
        f"EnvironmentFile={choice.env_file}",
        f'Environment="PATH={choice.path}"',
        "Environment=PYTHONUNBUFFERED=1",
        "Restart=on-failure",
        "RestartSec=5",
        "KillMode=mixed",
        f"TimeoutStopSec={choice.stop_timeout}",
        "",
        "[Install]",
        f"WantedBy={'default.target' if choice.system_user is None else 'multi-user.target'}",
        "",
    ]
    return "\n".join(lines)


def env_file_text(variables: list[str]) -> str:
    lines = [
        "# agent-gateway's secrets, read by its systemd unit (EnvironmentFile=); mode 0600.",
        "# One NAME=value per line, no quotes needed; the config names them as ${NAME}.",
    ]
    lines += [f"{name}=" for name in variables] or ["# (the config names no ${VARIABLE})"]
    return "\n".join(lines) + "\n"


def write_new(path: Path, text: str, *, mode: int) -> bool:
    """Write ``text`` to a new file of ``mode``; False if the file exists (left as it is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return False
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    return True


def next_steps(choice: UnitChoice, unit: Path) -> str:
    if choice.system_user is not None:
        user = choice.system_user
        return "\n".join(
            [
                f"  1. Put the tokens in {choice.env_file} (owned by {user}, mode 0600).",
                f"  2. sudo systemctl daemon-reload && sudo systemctl enable --now {unit.name}",
                f"  3. Its log: journalctl -u {unit.name} -f; after a config change: "
                f"sudo systemctl reload {unit.name}",
            ]
        )
    login = shlex.quote(os.environ.get("USER") or "$USER")
    return "\n".join(
        [
            f"  1. Put the tokens in {choice.env_file} (mode 0600).",
            f"  2. systemctl --user daemon-reload && systemctl --user enable --now {unit.name}",
            f"  3. loginctl enable-linger {login}   (else it stops when you log out)",
            f"  Its log: journalctl --user -u {unit.name} -f; after a config change: "
            f"systemctl --user reload {unit.name}",
        ]
    )
