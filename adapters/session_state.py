"""The session state of a long-lived codec (Claude Code stream-json, Codex app-server).

Each codec names its own states and moves in a table over ``StrEnum``\\ s, since their
handshakes differ (``initialize`` then the permission mode, or ``initialize`` then the
thread). :class:`SessionState` walks that table the way h11's ``ConnectionState`` does:

- a move the table does not have is the agent's fault (:class:`ProtocolError`), except
  ``start()`` out of place, which is ours (:class:`CodecUsageError`);
- any failure leaves the machine in the ERROR state, which refuses more input;
- commands are taken only in the READY state.

Sans-IO: no asyncio, no subprocess.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Generic, NoReturn, TypeVar

from gateway.errors import AgentError, CodecUsageError, ProtocolError

__all__ = ["SessionState"]

StateT = TypeVar("StateT", bound=StrEnum)
MoveT = TypeVar("MoveT", bound=StrEnum)


class SessionState(Generic[StateT, MoveT]):
    """Where a codec's session is, by ``transitions``; ``failure`` once it is in ERROR."""

    def __init__(
        self,
        transitions: Mapping[tuple[StateT, MoveT], StateT],
        *,
        new: StateT,
        ready: StateT,
        error: StateT,
        start: MoveT,
    ) -> None:
        self._transitions = transitions
        self._ready = ready
        self._error = error
        self._start = start
        self._state = new
        self._failure: AgentError | None = None

    @property
    def state(self) -> StateT:
        return self._state

    @property
    def failure(self) -> AgentError | None:
        """What put the session in ERROR (None before)."""
        return self._failure

    def move(self, move: MoveT) -> None:
        target = self._transitions.get((self._state, move))
        if target is None:
            if move is self._start:
                raise CodecUsageError(f"start() in state {self._state}")
            self.fail(ProtocolError(f"unexpected {move} in state {self._state}"))
        self._state = target

    def fail(self, error: AgentError) -> NoReturn:
        """Enter ERROR and raise ``error``: the session cannot go on."""
        self._state = self._error
        self._failure = error
        raise error

    def check_send(self, command: object) -> None:
        """Commands wait for the end of the handshake (CodecUsageError before)."""
        if self._state is not self._ready:
            raise CodecUsageError(f"cannot send {type(command).__name__} in state {self._state}")

    def check_feed(self) -> None:
        """A failed session takes no more input (ProtocolError)."""
        if self._state is self._error:
            raise ProtocolError(
                f"the codec failed earlier and takes no more input: {self._failure}"
            )
