"""What every agent codec offers the runtime: the sans-IO contract.

A codec turns the agent's output lines into :mod:`gateway.events` and the core's commands into
lines for the agent, and does no IO of its own (STYLE.md, principle 1). One runtime
(:class:`adapters.runtime.AgentRuntime`) drives any codec over any agent process:

    events = codec.start()                 # events known before any line (may be empty)
    write(codec.data_to_send())            # e.g. Codex `initialize`
    for line in agent_stdout:              # a line without its newline
        events = codec.feed(line)          # never raises for one bad line (a Warning event);
        write(codec.data_to_send())        #   raises AgentError only when the session is over
    codec.send(command)                    # CodecUsageError for local misuse, nothing queued
    write(codec.data_to_send())

The session has started (the runtime's handshake is over) when the codec has emitted
:class:`gateway.events.SessionStarted`. Lines from ``data_to_send`` carry no line terminator
and never contain a newline. Implemented by :class:`adapters.codex_app_server.CodexAppServerCodec`.
"""

from __future__ import annotations

from typing import Protocol

from gateway.events import AgentCommand, AgentEvent, Capabilities

__all__ = ["AgentCodec"]


class AgentCodec(Protocol):
    @property
    def capabilities(self) -> Capabilities:
        """What the agent behind this codec can do, known before it starts."""
        ...

    def start(self) -> list[AgentEvent] | None:
        """Queue the opening lines; return events known up front (or None for none)."""
        ...

    def feed(self, line: bytes) -> list[AgentEvent]:
        """The events one line from the agent stands for."""
        ...

    def send(self, command: AgentCommand) -> None:
        """Queue the lines for a command of the core."""
        ...

    def data_to_send(self) -> list[bytes]:
        """Drain the queued lines, oldest first."""
        ...
