"""``/switch NAME|N``: continue an earlier session (issue 31).

In a conversation with one session at a time (``scope = "channel"`` or ``"user"``, or the
session was this thread's own) the route is pointed at the earlier session: the current one
ends as ``/new`` ends it, the earlier one is taken up again, and the next message starts its
agent with the session's native id (Codex ``thread/resume``, Claude ``--resume``, OpenCode's
session id, ACP ``session/load``), days later or after a restart alike. Where sessions
follow threads (``scope = "thread"``), a session of another thread is not pulled here: the
person is told which thread holds it.

A session whose agent cannot be resumed here is said to be gone, plainly, and nothing
changes: its host no longer runs the project (its native session is a file on that
machine), or the project now runs another agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.config.model import Config, SessionScope
from gateway.domain import Actor, ConversationRef
from gateway.session_record import SessionRecord
from gateway.sessions.routing import route_key
from gateway.sessions.session_list import Listed, find_session, visible
from gateway.store.store import Store
from gateway.timeline import EntryKind

__all__ = ["ANSWER_START_CHARS", "last_exchange", "switch_session"]

ANSWER_START_CHARS = 300  # how much of the last answer is shown again
PROMPT_CHARS = 300

# ends the current session's agent where it runs (this host's runner, or a request to the
# host that runs it), once the session is closed in the ledger
Retire = Callable[[SessionRecord, str], Awaitable[None]]
# shows a session's open requests in a conversation it is now bound to
ShowHere = Callable[[SessionRecord, ConversationRef], Awaitable[None]]
# the address of a conversation on its platform, where it has one (gateway/platform.py
# LinksConversations)
LinkOf = Callable[[ConversationRef], str | None]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def last_exchange(store: Store, session_id: str) -> str:
    """The person's last message to the session and the start of the answer, from the
    ledger; or that no earlier text is kept."""
    for turn in reversed(await store.timeline.of_session(session_id, turns=10)):
        if turn.prompt is None:
            continue
        said = _clip(turn.prompt.text, PROMPT_CHARS)
        lines = [
            "Last exchange:",
            f"{turn.prompt.author.display or turn.prompt.author.user_id}: {said}",
        ]
        answer = "\n".join(e.text for e in turn.entries if e.kind is EntryKind.TEXT and e.text)
        lines.append(
            f"Agent: {_clip(answer, ANSWER_START_CHARS)}" if answer else "Agent: (no text kept)"
        )
        return "\n".join(lines)
    return "No earlier text of this session is kept."


def _gone(config: Config, session: SessionRecord, host: str | None) -> str | None:
    """Why the session's agent cannot be resumed here, or None."""
    settings = config.projects.get(session.project)
    title = f"Session {session.title}"
    if settings is None:
        return f"{title} is gone: its project {session.project} is no longer configured."
    if session.host != host:
        where = f"host {session.host}" if session.host else "this machine"
        return (
            f"{title} is gone: its agent's session was kept on {where}, which no longer runs "
            f"project {session.project}."
        )
    if settings.agent is not session.agent_kind:
        return (
            f"{title} is gone: it ran {session.agent_kind.value}, and project "
            f"{session.project} now runs {settings.agent.value}."
        )
    return None


async def switch_session(
    *,
    config: Config,
    store: Store,
    project: str,
    actor: Actor,
    here: ConversationRef,
    spec: str,
    current: SessionRecord | None,
    host: str | None,
    retire: Retire,
    show_here: ShowHere,
    link_of: LinkOf,
) -> str:
    """``/switch spec`` by ``actor`` in ``here``; returns what the person is told.
    ``host``: the host new sessions of the project run on (None: a single-host ledger)."""
    summaries = await store.session_index.of_project(project)
    listed = visible(
        config, project, actor, here, summaries, current=None if current is None else current.id
    )
    found = find_session(listed, spec)
    if isinstance(found, str):
        return found + " Nothing was changed."
    target = found.summary.session
    if found.current:
        return f"This conversation is already on session {target.title}."
    if not found.may_open:
        return (
            f"Session {target.title} was held in another conversation: it is listed to you, "
            "not opened here. Nothing was changed."
        )
    gone = _gone(config, target, host)
    if gone is not None:
        return f"{gone} Nothing was changed; your next message here starts a new session."
    settings = config.projects[project]
    if settings.scope is SessionScope.THREAD and here not in found.summary.conversations:
        return _elsewhere(found, link_of)
    return await _reroute(store, settings.scope, actor, here, found, current, retire, show_here)


def _elsewhere(found: Listed, link_of: LinkOf) -> str:
    """A session that follows another thread: where to continue it (never pulled here)."""
    target = found.summary.session
    threads = [c for c in found.summary.conversations if c.thread]
    where = threads[0] if threads else found.summary.conversations[0]
    link = link_of(where)
    if link is not None:
        place = f"its own thread: {link}"
    else:
        place = f"thread {where.thread}" if where.thread else f"channel {where.channel}"
        place += " of this channel"
    return f"Session {target.title} follows {place} — continue it there. Nothing was changed here."


async def _reroute(
    store: Store,
    scope: SessionScope,
    actor: Actor,
    here: ConversationRef,
    found: Listed,
    current: SessionRecord | None,
    retire: Retire,
    show_here: ShowHere,
) -> str:
    target = found.summary.session
    if current is not None and not current.is_closed:
        reason = f"/switch by {actor.key()} to {target.id}"
        await store.sessions.close(current.id, reason=reason)
        await retire(current, reason)
    if target.is_closed:
        target = await store.sessions.reopen(target.id)
    await store.sessions.route(route_key(scope, here, actor), target.id)
    await show_here(target, here)
    await store.audit.record(
        "session.switched",
        actor=actor,
        session_id=target.id,
        details={
            "conversation": here.key(),
            "from": None if current is None else current.id,
        },
    )
    resumes = (
        "your next message continues it"
        if target.native_session_id
        else "its agent had not started: your next message starts it"
    )
    head = (
        f"↪ Switched to session {target.title} (project {target.project}, "
        f"{target.agent_kind.value}): {resumes}."
    )
    return f"{head}\n{await last_exchange(store, target.id)}"
