"""Which session ``/switch SPEC`` means (gateway/sessions/session_list.py), pure."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.sessions.session_list import Listed, find_session
from gateway.store.session_index import SessionSummary
from tests.session_records import session_record

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def listed(number: int, session_id: str, name: str | None = None) -> Listed:
    session = session_record(id=session_id, created_at=NOW, name=name)
    summary = SessionSummary(
        session=session, conversations=(), last_activity=NOW, turn_running=False, waiting=0
    )
    return Listed(number=number, summary=summary, may_open=True, current=False)


def test_an_id_of_digits_only_is_an_id_and_a_small_number_a_place_in_the_list() -> None:
    """A session id is ten characters drawn from 32, digits among them: one in about a
    hundred thousand is all digits (a test met one), and ``/switch`` with it meant a place
    in the list ("No session 1768986892")."""
    sessions = [listed(1, "k3xq8m2p9a"), listed(2, "1768986892", name="nightly")]
    by_id = find_session(sessions, "1768986892")
    assert isinstance(by_id, Listed) and by_id.number == 2
    first = find_session(sessions, "1")
    assert isinstance(first, Listed) and first.summary.session.id == "k3xq8m2p9a"
    assert find_session(sessions, "3") == "No session 3: /sessions lists sessions 1 to 2."
    named = find_session(sessions, "Nightly")
    assert isinstance(named, Listed) and named.number == 2
