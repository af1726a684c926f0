"""A session's record as the ledger would give it, for the pure tests that need one."""

from __future__ import annotations

from datetime import datetime

from gateway.domain import AgentKind
from gateway.session_record import SessionRecord

__all__ = ["session_record"]


def session_record(
    *,
    created_at: datetime,
    id: str = "s1",
    project: str = "demo",
    agent_kind: AgentKind = AgentKind.CODEX_APP_SERVER,
    closed_at: datetime | None = None,
    name: str | None = None,
) -> SessionRecord:
    """A session with one runtime started, its queue not held (closed at ``closed_at``)."""
    return SessionRecord(
        id=id,
        project=project,
        agent_kind=agent_kind,
        native_session_id=None,
        created_at=created_at,
        current_epoch=1,
        closed_at=closed_at,
        close_reason=None,
        queue_paused=False,
        queue_pause_reason=None,
        name=name,
    )
