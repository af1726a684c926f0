"""How a Claude Code session is started: the argv of ``claude -p`` in stream-json mode.

Claude Code 2.1.197 (``../shared/protocols/claude-2.1.197-help.txt``; the flags the
claude-agent-sdk passes in ``_internal/transport/subprocess_cli.py``)::

    <command> -p --input-format stream-json --output-format stream-json --verbose
           --permission-prompt-tool stdio --permission-mode MODE
           [--include-partial-messages] [--model M] [--allowedTools a,b]
           [--disallowedTools c,d] (--session-id=UUID | --resume=ID) [extra args...]

- ``--permission-prompt-tool stdio`` is what makes the CLI ask us (``can_use_tool`` control
  requests); without it every tool that needs a permission is silently denied.
- ``--session-id=<uuid>`` names a new session up front, so the gateway knows its native id
  before the CLI says anything (it sends no ``system/init`` until the first user message);
  ``--resume=<id>`` continues one after a restart. Both in the ``=`` form, which always binds
  the value to the flag.
- An agent never approves itself (DESIGN.md, Authorization): ``bypassPermissions`` (no
  checks at all) and ``auto`` (a model classifier approves) are refused unless the project
  opts in with ``allow_dangerous``. Extra args may not override the flags the gateway's
  correctness depends on.

Misconfiguration raises :class:`gateway.errors.ConfigError`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Final

from gateway.errors import ConfigError

__all__ = [
    "DANGEROUS_PERMISSION_MODES",
    "PERMISSION_MODES",
    "PROTECTED_FLAGS",
    "ClaudeLaunch",
]

PERMISSION_MODES: Final = frozenset(
    {"default", "acceptEdits", "plan", "dontAsk", "auto", "bypassPermissions"}
)
DANGEROUS_PERMISSION_MODES: Final = frozenset({"bypassPermissions", "auto"})

# Flags the gateway sets itself; an extra arg naming one of them is refused.
PROTECTED_FLAGS: Final = frozenset(
    {
        "-p",
        "--print",
        "--input-format",
        "--output-format",
        "--verbose",
        "--permission-prompt-tool",
        "--permission-mode",
        "--dangerously-skip-permissions",
        "--allow-dangerously-skip-permissions",
        "--include-partial-messages",
        "--session-id",
        "-r",
        "--resume",
        "-c",
        "--continue",
        "--fork-session",
        "--model",
        "--allowedTools",
        "--allowed-tools",
        "--disallowedTools",
        "--disallowed-tools",
        "--replay-user-messages",
        "--bg",
        "--background",
        "--remote-control",
    }
)


def _new_session_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaudeLaunch:
    """Everything that decides the ``claude`` command line of one session.

    ``session_id`` names a new session (``--session-id``), or with ``resume`` an existing one
    (``--resume``). The codec (:class:`adapters.claude_code.ClaudeCodeCodec`) reads the same
    object: it knows the session id and the permission mode it asked for.
    """

    command: tuple[str, ...] = ("claude",)  # the binary, or an argv prefix (["npx", "claude"])
    permission_mode: str = "default"
    allow_dangerous: bool = False
    model: str | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    # a file holding the gateway's MCP server (``--mcp-config``: a file, 0600, rather than
    # JSON in the argv, which every local user can read in /proc; issue 33)
    mcp_config: str | None = None
    session_id: str = field(default_factory=_new_session_id)
    resume: bool = False
    include_partial_messages: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.command, str) or not self.command:
            raise ConfigError("the claude command must be a non-empty list of arguments")
        if self.permission_mode not in PERMISSION_MODES:
            known = ", ".join(sorted(PERMISSION_MODES))
            raise ConfigError(f"unknown Claude permission mode {self.permission_mode!r} ({known})")
        if self.permission_mode in DANGEROUS_PERMISSION_MODES and not self.allow_dangerous:
            raise ConfigError(
                f"Claude permission mode {self.permission_mode!r} lets the agent act without a "
                "person's approval; it is refused unless the project sets allow_dangerous"
            )
        if not self.session_id or self.session_id.startswith("-"):
            raise ConfigError(f"invalid Claude session id {self.session_id!r}")
        if not self.resume:
            try:
                uuid.UUID(self.session_id)
            except ValueError:
                raise ConfigError(
                    f"a new Claude session id must be a UUID, not {self.session_id!r}"
                ) from None
        for arg in self.extra_args:
            flag = arg.split("=", 1)[0]
            if flag in PROTECTED_FLAGS:
                raise ConfigError(f"extra Claude argument {flag} would override the gateway's own")
        for tool in (*self.allowed_tools, *self.disallowed_tools):
            if not tool.strip() or "," in tool:
                raise ConfigError(f"invalid Claude tool rule {tool!r}")

    def argv(self) -> list[str]:
        argv = [
            *self.command,
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
            self.permission_mode,
        ]
        if self.include_partial_messages:
            argv.append("--include-partial-messages")
        if self.model is not None:
            argv += ["--model", self.model]
        if self.allowed_tools:
            argv += ["--allowedTools", ",".join(self.allowed_tools)]
        if self.disallowed_tools:
            argv += ["--disallowedTools", ",".join(self.disallowed_tools)]
        if self.mcp_config is not None:
            argv += ["--mcp-config", self.mcp_config]
        flag = "--resume" if self.resume else "--session-id"
        argv.append(f"{flag}={self.session_id}")
        return [*argv, *self.extra_args]

    def resumed(self, session_id: str | None = None) -> ClaudeLaunch:
        """The same launch, resuming ``session_id`` (default: this one) in a new process."""
        return replace(self, session_id=session_id or self.session_id, resume=True)
