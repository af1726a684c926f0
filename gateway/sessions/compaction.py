"""/compact: the agent's own compaction of its context, asked from a chat (issue 31).

Only an agent that compacts on request offers it (``Capabilities.compact``: Codex
``thread/compact/start``; Claude Code's own ``/compact`` command, which 2.1.197 takes as a
stream-json user message; OpenCode's ``POST /session/{id}/summarize``); ACP and codex exec
get "not offered by this agent". A
compaction is a turn of its own in the session's runner: it runs before the next queued
message (after the running turn, never into it), is recorded as a turn without a prompt,
and is reported where it was asked when it ends.
"""

from __future__ import annotations

from gateway.domain import AgentKind, ConversationRef, TurnStatus
from gateway.sessions.outbound import Notifier

__all__ = ["COMPACTING_WORDS", "Compaction", "compaction_offered", "ended_words"]

COMPACTING_WORDS = "🗜 Compacting the agent's context: it runs before your next message."
# the agents whose adapter compacts on request (their Capabilities.compact)
_COMPACTS = frozenset({AgentKind.CODEX_APP_SERVER, AgentKind.CLAUDE_CODE, AgentKind.OPENCODE})


def compaction_offered(agent: AgentKind) -> str | None:
    """None when ``agent`` compacts on request; else what /compact answers."""
    if agent in _COMPACTS:
        return None
    return f"/compact is not offered by this agent ({agent}): nothing was changed."


def ended_words(status: TurnStatus, error: str | None) -> str:
    if status is TurnStatus.COMPLETED:
        return "🗜 Compacted: the agent goes on from a summary of this conversation."
    if status is TurnStatus.INTERRUPTED:
        return "⏹ The compaction was stopped; the context is as it was."
    return f"⚠ The compaction failed: {error or 'no reason given'}"


class Compaction:
    """The /compact asked of one session's runner: asked, then running, then reported."""

    def __init__(self, notifier: Notifier) -> None:
        self._notifier = notifier
        self._asked: list[ConversationRef] = []  # where to report it, in order, once each
        self._running: list[ConversationRef] = []

    def ask(self, conversation: ConversationRef) -> None:
        if conversation not in self._asked:
            self._asked.append(conversation)

    def take(self) -> bool:
        """A compaction is asked: it starts now (True), reported where it was asked."""
        if not self._asked:
            return False
        self._running, self._asked = self._asked, []
        return True

    async def ended(self, status: TurnStatus, error: str | None) -> bool:
        """A turn ended: True if it was the compaction, reported where it was asked."""
        running, self._running = self._running, []
        if running:
            await self._notifier.send(running, ended_words(status, error))
        return bool(running)
