"""``/sessions`` and which session ``/switch NAME|N`` means: decided purely on the ledger's
summaries (gateway/store/session_index.py).

Who sees what (docs/decisions.md, issue 31): a person sees this conversation's sessions
(shown here, or talked to here); a project's approver sees every session of the project.
A session may be *opened* here (``/switch``) only if it was shown or talked to in this
channel (this conversation, or another thread of the same channel, whose people are the
people here); a session of another channel or of someone's direct messages is listed to an
approver, never opened here, so that what it says is never shown to people who could not
read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.config.access import may_decide
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef
from gateway.store.session_index import SessionSummary

__all__ = ["PAGE_SIZE", "Listed", "find_session", "sessions_page", "state_words", "visible"]

PAGE_SIZE = 10


@dataclass(frozen=True, kw_only=True, slots=True)
class Listed:
    """A session as one person sees it from one conversation."""

    number: int  # its place in the list, from 1: what /switch N takes
    summary: SessionSummary
    may_open: bool  # it may be continued here (else only listed)
    current: bool  # the session this conversation is on now


def _same_channel(a: ConversationRef, b: ConversationRef) -> bool:
    return (a.platform, a.space, a.channel) == (b.platform, b.space, b.channel)


def visible(
    config: Config,
    project: str,
    actor: Actor,
    here: ConversationRef,
    summaries: Sequence[SessionSummary],
    *,
    current: str | None,
) -> list[Listed]:
    """What ``actor`` sees from ``here`` of ``project``'s sessions (``summaries``, newest
    first), numbered; ``current``: the id of the session this conversation is on."""
    approver = may_decide(config, project, actor, None)
    listed: list[Listed] = []
    for summary in summaries:
        ours = here in summary.conversations or summary.session.id == current
        if not ours and not approver:
            continue
        may_open = ours or any(_same_channel(here, c) for c in summary.conversations)
        listed.append(
            Listed(
                number=len(listed) + 1,
                summary=summary,
                may_open=may_open,
                current=summary.session.id == current,
            )
        )
    return listed


def state_words(summary: SessionSummary) -> str:
    """A session's state as a person says it: working, waiting for you, idle, ended."""
    if summary.session.is_closed:
        return "ended"
    if summary.waiting:
        return "waiting for you"
    return "working" if summary.turn_running else "idle"


def _line(entry: Listed) -> str:
    summary = entry.summary
    session = summary.session
    name = f"“{session.name}” ({session.id})" if session.name else session.id
    parts = [
        f"{entry.number}. {name}",
        session.project,
        session.agent_kind.value,
        state_words(summary),
        f"last active {summary.last_activity:%Y-%m-%d %H:%M} UTC",
    ]
    if summary.waiting:
        parts.append(f"{summary.waiting} waiting")
    if entry.current:
        parts.append("current here")
    elif not entry.may_open:
        parts.append("listed only: held in another conversation")
    return " · ".join(parts)


def sessions_page(listed: Sequence[Listed], page_arg: str) -> str:
    """``/sessions [page]``: one page of ten, newest first, and how to see more."""
    if not listed:
        return "No sessions here yet: send a message to start one."
    pages = (len(listed) + PAGE_SIZE - 1) // PAGE_SIZE
    page_arg = page_arg.strip()
    if page_arg and (not page_arg.isdigit() or not 1 <= int(page_arg) <= pages):
        return f"No page {page_arg}: /sessions 1 to /sessions {pages}."
    page = int(page_arg) if page_arg else 1
    shown = listed[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    head = f"Sessions {shown[0].number} to {shown[-1].number} of {len(listed)}, newest first:"
    lines = [head, *(_line(entry) for entry in shown)]
    if page < pages:
        lines.append(f"More: /sessions {page + 1}.")
    lines.append("Continue one here: /switch NAME or /switch N.")
    return "\n".join(lines)


def find_session(listed: Sequence[Listed], spec: str) -> Listed | str:
    """The session ``/switch spec`` means (its number, its name or its id, any case), or
    what the person is told when it means none or several."""
    spec = spec.strip()
    if not spec:
        return "Usage: /switch NAME or /switch N (the number /sessions shows)."
    # an id first: one may be all digits (its ten characters drawn from 32, digits among them)
    by_id = [e for e in listed if e.summary.session.id == spec]
    if by_id:
        return by_id[0]
    if spec.isdigit():
        number = int(spec)
        if not 1 <= number <= len(listed):
            count = "no session" if not listed else f"sessions 1 to {len(listed)}"
            return f"No session {number}: /sessions lists {count}."
        return listed[number - 1]
    named = [e for e in listed if (e.summary.session.name or "").casefold() == spec.casefold()]
    if len(named) == 1:
        return named[0]
    if named:
        numbers = ", ".join(str(e.number) for e in named)
        return f"Several sessions are named “{spec}” ({numbers}): /switch N picks one."
    return f"No session named “{spec}” that you can see here: /sessions lists them."
