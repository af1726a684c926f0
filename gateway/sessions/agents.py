"""What the core needs from a running agent, whatever its protocol.

The core never imports an adapter: ``agent-gateway run`` injects an :class:`AgentLauncher`
(adapters/launch.py) that turns a project's configuration into a running agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gateway.config.model import ProjectConfig
from gateway.events import AgentCommand, AgentEvent, Capabilities, SessionStarted

__all__ = [
    "AgentLauncher",
    "GatewayMcpServer",
    "ReattachesAgents",
    "RunningAgent",
    "SavesPermissions",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayMcpServer:
    """The gateway's own MCP server (``agent-gateway mcp``: ``send_file``), as an agent's
    MCP config names it: a stdio command and its env (the socket and this process's token).
    The launcher writes it into the agent's own MCP configuration, the tool pre-allowed
    there, so that the gateway's policy is the one decision (issue 33)."""

    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ("send_file",)
    # the gateway session it serves: where several sessions share one agent server (an
    # attached OpenCode), each gives the server under a name of its own
    session_id: str = ""


class RunningAgent(Protocol):
    """One runtime instance (one epoch) of a session's agent, started and handshaken."""

    @property
    def pid(self) -> int | None: ...

    @property
    def pgid(self) -> int | None: ...

    @property
    def start_time(self) -> int | None: ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def started(self) -> SessionStarted:
        """What the handshake established: native session id, version, policy in force."""
        ...

    async def send(self, command: AgentCommand) -> None: ...

    def events(self) -> AsyncIterator[AgentEvent]:
        """Every event after the handshake; ends after the final ``AgentExited``."""
        ...

    async def stop(self) -> None:
        """End the agent now (the last resort of /stop); ``AgentExited`` follows."""
        ...


@runtime_checkable
class SavesPermissions(Protocol):
    """A running agent whose server may keep "always" as saved permissions of its own
    (OpenCode's ``/api/permission/saved``), which revoking a grant deletes."""

    async def remove_saved_permissions(
        self, permission: str | None, resources: Sequence[str]
    ) -> list[str]:
        """Delete the saved permissions allowing ``permission`` (any, where None) on one of
        ``resources``; the ids deleted."""
        ...


class AgentLauncher(Protocol):
    def launch(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AbstractAsyncContextManager[RunningAgent]:
        """Start the project's agent (resuming ``resume_native_id`` when given), with the
        gateway's MCP server in its MCP config where the agent takes one."""
        ...

    async def end_leftover(self, *, pid: int, pgid: int | None, start_time: int | None) -> str:
        """End an agent process a crashed gateway left behind, only if it is still the same
        process (pid and start time match); returns what was done, for the audit log."""
        ...


@runtime_checkable
class ReattachesAgents(Protocol):
    """What a launcher also does for a project whose agent server outlives the gateway
    (an attached OpenCode ``url``): say what the server still asks, so that a restart keeps
    those requests pending instead of orphaning them. The core checks for it; a launcher
    without it is still an :class:`AgentLauncher`."""

    async def still_asked(self, project: ProjectConfig, native_session_id: str) -> frozenset[str]:
        """The native keys of the session's requests the server still lists; GatewayError
        (an AgentError) when it cannot be asked."""
        ...
