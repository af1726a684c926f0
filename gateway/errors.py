"""The one exception tree of agent-gateway.

    GatewayError
    ├── ConfigError                  the configuration file is invalid (names the key and line)
    ├── AgentError                   something about an agent process or its protocol
    │   ├── AgentStartError          the binary could not be started (missing, not executable)
    │   ├── AgentExitedError         the process ended while we needed it
    │   ├── HandshakeTimeout         the agent never finished its start-up handshake
    │   ├── LineTooLong              a line on stdout exceeded the configured maximum
    │   ├── ProtocolError            the agent broke its protocol (remote misbehaviour)
    │   │   └── MalformedMessage     a line that is not JSON or not a valid message
    │   ├── RemoteError              the agent answered one of our requests with an error
    │   │   └── NativeSessionGone    it no longer knows the session it was asked to resume
    │   └── CodecUsageError          we misused a codec (local misuse, a bug of ours)
    │       ├── AlreadyAnswered      a second answer to one request: the first one's bytes
    │       │                        are already queued, nothing more is written
    │       └── RequestClosed        no open request has this key (the agent closed it)
    ├── InteractionError             the interaction ledger refused a move
    │   ├── IllegalTransition        the state machine has no such move for a live interaction
    │   ├── AlreadyDecided           the compare-and-set lost: someone decided first
    │   ├── InvalidDecision          the decision does not fit the interaction (unknown action,
    │   │                            missing required answer)
    │   │   └── VersionMoved         still pending, but moved (a vote) since it was read
    │   └── UnknownInteraction       no interaction has this id (a typo in /approve ID)
    ├── AuthorizationError           the actor may not do this, or the token is forged/stale
    │   ├── TokenRejected            a button token failed verification (reason: auth.Rejection)
    │   └── SealBroken               a sealed secret answer does not open (another host's key
    │                                differs, or the sealed text was altered: gateway.store.sealing)
    ├── StoreError                   the ledger failed (sqlite3, psycopg errors are chained)
    │   ├── DataDirInUse             another gateway process holds the data dir's lock
    │   └── EpochEnded               a turn refused: its agent's epoch is no longer live
    ├── PlatformError                a chat platform failed (SDK errors are chained)
    └── FileRefused                  a file sent with a message was not saved (over a limit,
                                     a refused type, an inbox reached through a link, a
                                     download that kept failing); its text is for the person

Foreign exceptions (OSError, sqlite3.Error, SDK errors) are translated at the seams with
``raise ... from exc``.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentExitedError",
    "AgentStartError",
    "AlreadyAnswered",
    "AlreadyDecided",
    "AuthorizationError",
    "CodecUsageError",
    "ConfigError",
    "DataDirInUse",
    "EpochEnded",
    "FileRefused",
    "GatewayError",
    "HandshakeTimeout",
    "IllegalTransition",
    "InteractionError",
    "InvalidDecision",
    "LineTooLong",
    "MalformedMessage",
    "NativeSessionGone",
    "PlatformError",
    "ProtocolError",
    "RemoteError",
    "RequestClosed",
    "SealBroken",
    "StoreError",
    "TokenRejected",
    "UnknownInteraction",
    "VersionMoved",
]


class GatewayError(Exception):
    """Base of every error agent-gateway raises on purpose."""


class ConfigError(GatewayError):
    pass


class AgentError(GatewayError):
    pass


class AgentStartError(AgentError):
    pass


class AgentExitedError(AgentError):
    def __init__(self, message: str, *, code: int | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.stderr_tail = stderr_tail


class HandshakeTimeout(AgentError):
    pass


class LineTooLong(AgentError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"agent wrote a line longer than {limit} bytes")
        self.limit = limit


class ProtocolError(AgentError):
    pass


class MalformedMessage(ProtocolError):
    def __init__(self, reason: str, excerpt: str) -> None:
        super().__init__(f"{reason}: {excerpt!r}")
        self.reason = reason
        self.excerpt = excerpt


class RemoteError(AgentError):
    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(f"agent error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class NativeSessionGone(RemoteError):
    """The agent refused to resume the native session it was given: it no longer knows it
    (Codex 0.171 answers ``thread/resume`` -32600 "no rollout found for thread id …"). The
    session cannot go on; a new one can (issue 31)."""


class CodecUsageError(AgentError):
    pass


class AlreadyAnswered(CodecUsageError):
    """The request was answered before: the codec queued that answer's bytes then, and
    writes nothing now. For a caller that repeats a write it could not record, the first
    write is the one that counts."""


class RequestClosed(CodecUsageError):
    """No open request has this key: the agent closed it (or never asked it)."""


class InteractionError(GatewayError):
    pass


class IllegalTransition(InteractionError):
    pass


class AlreadyDecided(InteractionError):
    def __init__(self, interaction_id: str, decided_by: str, state: str) -> None:
        super().__init__(f"interaction {interaction_id} already {state} (by {decided_by})")
        self.interaction_id = interaction_id
        self.decided_by = decided_by
        self.state = state


class InvalidDecision(InteractionError):
    pass


class VersionMoved(InvalidDecision):
    """The interaction is still PENDING at another version (a vote moved it): read it
    again and retry; a person is never asked to "look again" for it."""


class UnknownInteraction(InteractionError):
    def __init__(self, interaction_id: str) -> None:
        super().__init__(f"no interaction {interaction_id}")
        self.interaction_id = interaction_id


class AuthorizationError(GatewayError):
    pass


class TokenRejected(AuthorizationError):
    """A button token is malformed or forged; ``reason`` is a
    ``gateway.action_tokens.Rejection``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class SealBroken(AuthorizationError):
    """A sealed secret answer does not open: another key, another interaction, or altered."""


class StoreError(GatewayError):
    """``outcome_unknown``: a write whose COMMIT was sent and whose answer was lost (the
    connection cut, the deadline passed): it may have committed; read it back, never do it
    again."""

    outcome_unknown: bool = False


class EpochEnded(StoreError):
    """A turn was refused because its runtime epoch is no longer live (the agent exited,
    or the gateway stops): a refusal, not a failure of the ledger."""


class DataDirInUse(StoreError):
    """The data dir is locked by another gateway; ``holder`` says who, as far as it wrote."""

    def __init__(self, message: str, *, holder_pid: int | None) -> None:
        super().__init__(message)
        self.holder_pid = holder_pid


class PlatformError(GatewayError):
    pass


class FileRefused(GatewayError):
    """A file sent with a message was not saved in the session's inbox; nothing of it is
    left half-written, and the message is not sent to the agent without it unless its
    author says so (gateway/sessions/file_choice.py). The text says why, for the person
    who sent it (gateway/sessions/upload_inbox.py). ``again``: fetching it again may
    succeed (a download that kept failing, a platform not connected), unlike a file
    refused for its size or type."""

    def __init__(self, text: str, *, again: bool = False) -> None:
        super().__init__(text)
        self.again = again
