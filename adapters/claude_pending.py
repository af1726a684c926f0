"""The table of Claude Code ``can_use_tool`` requests the gateway turned into interactions.

One entry per open request: its control ``request_id`` (the key the answer must go back
under), the reply that encodes a decision (:mod:`adapters.claude_replies`), the
``tool_use_id`` whose ``tool_result`` confirms the answer, and whether we answered. How an
entry closes (DESIGN.md, "three facts": the agent's word is the resolution):

- the ``tool_result`` with its ``tool_use_id``: ANSWERED if we answered, else the agent went
  on without us (CANCELLED_BY_AGENT);
- ``control_cancel_request``: CANCELLED_BY_AGENT, even if our answer crossed it;
- a request without a ``tool_use_id`` (none recorded in 2.1.197, allowed by the SDK types):
  the first message after our answer;
- the end of the turn: whatever is still open, by the same rule as a tool result.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.claude_replies import Reply
from gateway.domain import Resolution
from gateway.events import InteractionClosed

__all__ = ["OpenRequest", "OpenRequests"]


@dataclass(kw_only=True, slots=True)
class OpenRequest:
    request_id: str
    reply: Reply
    tool_use_id: str | None
    answered: bool = False


class OpenRequests:
    def __init__(self) -> None:
        self._open: dict[str, OpenRequest] = {}  # native key -> request
        self._by_tool_use: dict[str, str] = {}  # tool_use_id -> native key
        self._answered_unlinked: list[str] = []  # answered keys with no tool_use_id

    def keys(self) -> tuple[str, ...]:
        return tuple(self._open)

    def get(self, key: str) -> OpenRequest | None:
        return self._open.get(key)

    def add(self, key: str, opened: OpenRequest) -> bool:
        """Record a new request; False (and nothing changes) for one already open."""
        if key in self._open:
            return False
        self._open[key] = opened
        if opened.tool_use_id is not None:
            self._by_tool_use[opened.tool_use_id] = key
        return True

    def answered(self, key: str) -> None:
        opened = self._open[key]
        opened.answered = True
        if opened.tool_use_id is None:
            self._answered_unlinked.append(key)

    def close(self, key: str, how: Resolution | None = None) -> InteractionClosed | None:
        opened = self._open.pop(key, None)
        if opened is None:
            return None
        if opened.tool_use_id is not None:
            self._by_tool_use.pop(opened.tool_use_id, None)
        if how is None:
            how = Resolution.ANSWERED if opened.answered else Resolution.CANCELLED_BY_AGENT
        return InteractionClosed(native_key=key, how=how)

    def close_tool_use(self, tool_use_id: str) -> InteractionClosed | None:
        key = self._by_tool_use.get(tool_use_id)
        return None if key is None else self.close(key)

    def close_answered_unlinked(self) -> list[InteractionClosed]:
        keys, self._answered_unlinked = self._answered_unlinked, []
        return [closed for key in keys if (closed := self.close(key)) is not None]

    def close_all(self) -> list[InteractionClosed]:
        return [closed for key in list(self._open) if (closed := self.close(key)) is not None]
