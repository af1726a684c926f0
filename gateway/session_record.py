"""A session as the ledger keeps it: what the platforms, the console and the core all read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.domain import Actor, AgentKind

__all__ = ["SessionRecord"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRecord:
    id: str
    project: str
    agent_kind: AgentKind
    native_session_id: str | None  # what a resume needs (Codex thread id, Claude session id)
    created_at: datetime
    current_epoch: int  # 0 until the first runtime starts
    closed_at: datetime | None  # set by /new or close: the session takes no more prompts
    close_reason: str | None
    queue_paused: bool  # some queued prompts are held (/stop, a restart, a failed start)
    queue_pause_reason: str | None  # why they are held
    initiator: Actor | None = None  # who started it: the default approver
    # the host that runs its agents (issue 19); None: this machine (a single-host ledger)
    host: str | None = None
    name: str | None = None  # what a person called it (/name), None until then

    @property
    def title(self) -> str:
        """How a person tells it apart: its name, else its id."""
        return self.name or self.id

    @property
    def is_closed(self) -> bool:
        return self.closed_at is not None
