"""What a host has to do, asked in one read-only query: the safety sweep's question (issue 36).

A host is woken by events (a message received here, a NOTIFY from the ledger); a wake-up
lost while its listener was reconnecting is found again by a rare sweep, which asks this one
question instead of every runner looking at its own session (a write: ``claim_next``):

- ``stranded``: sessions with a decision committed and never delivered (no delivery row);
- ``waiting``: sessions with a prompt a runner can take now (queued, not held, none in
  flight: exactly what ``PromptQueue.claim_next`` would claim);
- ``passed``: sessions with a command another host passed (``session_requests``, a shared
  ledger only).

It runs on a reader (``store.readers``), never on the writer: an idle host's sweep waits for
no write and makes none. Each part reads only what is open, by an index that holds only
that: the live interactions (``interactions_live``, partial; the decided ones are among
them), the claimable prompts (``prompts_claimable``, partial), the passed commands (a table
of only those); each row found looks its session up by key for the host. So an idle host's
sweep costs the same with ten sessions or ten thousand: it grows with what is open
(tests/test_host_work_plan.py reads the plans).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.store.database import Conn, Reader, fetch_all

__all__ = ["HostWork", "HostWorkViews"]

# each part starts from the open rows (an index holding only those) and looks their session
# up by key: never a pass over the host's sessions
_ON_HOST = (
    "EXISTS (SELECT 1 FROM sessions s WHERE s.id = {row}.session_id"
    " AND (CAST(? AS TEXT) IS NULL OR s.host = ?))"
)

_STRANDED = (
    "SELECT 'stranded' AS what, i.session_id AS session_id FROM interactions i"
    f" WHERE i.state = 'decided' AND {_ON_HOST.format(row='i')}"
    " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.interaction_id = i.id)"
)
_WAITING = (
    "SELECT 'waiting' AS what, p.session_id AS session_id FROM prompts p"
    f" WHERE p.state = 'queued' AND p.held = 0 AND {_ON_HOST.format(row='p')}"
    " AND NOT EXISTS (SELECT 1 FROM prompts f"
    "                 WHERE f.session_id = p.session_id AND f.state = 'in_flight')"
)
_PASSED = (
    "SELECT 'passed' AS what, r.session_id AS session_id FROM session_requests r"
    f" WHERE {_ON_HOST.format(row='r')}"
)


@dataclass(frozen=True)
class HostWork:
    """The sessions of one host with something to do, each list sorted, no repeats."""

    stranded: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    passed: tuple[str, ...] = ()

    @property
    def nothing(self) -> bool:
        return not (self.stranded or self.waiting or self.passed)


class HostWorkViews:
    """``store.host_work``: the safety sweep's one query, on a read-only connection."""

    def __init__(self, reader: Reader, *, shared: bool) -> None:
        self._reader = reader
        self._shared = shared  # PostgreSQL: session_requests exists (migration 15)

    async def of_host(self, host: str | None) -> HostWork:
        """What ``host``'s runners have to do (None: every session, the one host of a
        SQLite ledger)."""
        parts = [_STRANDED, _WAITING] + ([_PASSED] if self._shared else [])
        params = (host, host) * len(parts)
        statement = " UNION ".join(parts) + " ORDER BY what, session_id"

        def read(conn: Conn) -> HostWork:
            found: dict[str, list[str]] = {"stranded": [], "waiting": [], "passed": []}
            for row in fetch_all(conn, statement, params):
                found[str(row["what"])].append(str(row["session_id"]))
            return HostWork(
                stranded=tuple(found["stranded"]),
                waiting=tuple(found["waiting"]),
                passed=tuple(found["passed"]),
            )

        return await self._reader.read(read, one_statement=True)
