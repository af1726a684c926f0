"""``/name TEXT``: what a person calls a session, checked (purely) before anything changes.

A name is how a person finds the session again (``/sessions``, ``/switch NAME``) and what
``/status`` shows: one short line of printable text. It is refused, with the reason, when it
is empty, longer than :data:`MAX_NAME_CHARS`, holds a control character (a newline, an
escape sequence: it would break the lines it is shown in), or is only digits (``/switch 3``
means the third session listed, never a session named "3").
"""

from __future__ import annotations

import unicodedata

from gateway.domain import Actor
from gateway.session_record import SessionRecord
from gateway.store.store import Store

__all__ = ["MAX_NAME_CHARS", "name_new_session", "name_problem", "name_session", "new_name_problem"]

MAX_NAME_CHARS = 80


def name_problem(text: str) -> str | None:
    """Why ``text`` cannot name a session, said to the person; None when it can."""
    if not text:
        return "Usage: /name TEXT (a short name for this session)."
    if len(text) > MAX_NAME_CHARS:
        return (
            f"That name is {len(text)} characters long; a session's name is at most "
            f"{MAX_NAME_CHARS}. Nothing was changed."
        )
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        return (
            "A session's name is one line of text, without control characters. Nothing was changed."
        )
    if text.isdigit():
        return (
            "A session's name cannot be only digits: /switch N means the Nth session listed. "
            "Nothing was changed."
        )
    return None


def new_name_problem(text: str) -> str | None:
    """Why ``text`` cannot name the session ``/new NAME`` starts, said as ``/new`` takes it."""
    problem = name_problem(text)
    if problem is None:
        return None
    return problem.replace("/name TEXT", "/new NAME").replace(
        "a short name for this session", "a short name for the new session"
    )


async def name_new_session(store: Store, session: SessionRecord, name: str, actor: Actor) -> None:
    """The name ``/new NAME`` gave the session it made (checked by :func:`new_name_problem`),
    recorded and audited."""
    await store.sessions.set_name(session.id, name)
    await store.audit.record(
        "session.named", actor=actor, session_id=session.id, details={"name": name, "was": None}
    )


async def name_session(store: Store, session: SessionRecord, text: str, actor: Actor) -> str:
    """``/name TEXT`` by ``actor`` in a conversation of ``session``: the name recorded and
    audited, and what the person is told (with no text: the name it has)."""
    text = text.strip()
    if not text and session.name:
        return f"This session is named “{session.name}”. /name TEXT renames it."
    problem = name_problem(text)
    if problem is not None:
        return problem
    await store.sessions.set_name(session.id, text)
    await store.audit.record(
        "session.named",
        actor=actor,
        session_id=session.id,
        details={"name": text, "was": session.name},
    )
    return f"This session is now named “{text}”: /switch {text} finds it again."
