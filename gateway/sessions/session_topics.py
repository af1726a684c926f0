"""``/new`` where a new session gets a thread of its own: a Telegram forum's General topic.

Where sessions follow threads (``scope = "thread"``) and the platform can open one beside the
conversation (``OpensThreads``: a forum's General topic), ``/new [NAME]`` opens a topic named
NAME (by default "Session N", N the project's sessions so far plus one), makes the new session
routed by it and named so, and posts the session's first notice there; the session's cards,
forms and notices follow it into its topic, as for any topic. The session in General, if any,
is left as it is: a topic beside it is a new session, not a replacement.

Bad input (a name ``/name`` would refuse) and a platform that refuses (the bot may not manage
topics) are said, and nothing is made: no topic, no session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import OpensThreads, ThreadRefused
from gateway.sessions.session_names import new_name_problem
from gateway.store.store import Store

__all__ = ["FIRST_NOTICE", "open_session_thread"]

log = logging.getLogger(__name__)

FIRST_NOTICE = "🧵 New session “{name}”: write here, and the agent starts with your first message."


async def open_session_thread(
    *,
    platform: OpensThreads,
    config: Config,
    store: Store,
    project: str,
    actor: Actor,
    here: ConversationRef,
    args: str,
    host: str | None,
    say: Callable[[ConversationRef, str], Awaitable[None]],
    link_of: Callable[[ConversationRef], str | None],
) -> str:
    """``/new ARGS`` by ``actor`` in ``here`` (where ``platform.opens_threads(here)``): the
    topic opened and its session made, or why not; what ``here`` is told."""
    name = args.strip()
    if not name:
        name = f"Session {len(await store.session_index.of_project(project)) + 1}"
    problem = new_name_problem(name)
    if problem is not None:
        return problem
    try:
        thread = await platform.open_thread(here, name)
    except ThreadRefused as exc:
        return str(exc)
    except PlatformError as exc:
        log.warning("conversation %s: no topic opened (%s)", here.key(), exc)
        return f"No topic could be opened ({exc}). Nothing was changed; try /new again later."
    settings = config.projects[project]
    session, _ = await store.sessions.create_routed(
        thread,
        replacing=None,
        project=project,
        agent_kind=settings.agent,
        initiator=actor,
        host=host,
        shown_in=thread,
    )
    await store.sessions.set_name(session.id, name)
    await store.audit.record(
        "session.thread_opened",
        actor=actor,
        session_id=session.id,
        details={"name": name, "thread": thread.key()},
    )
    await say(thread, FIRST_NOTICE.format(name=name))
    link = link_of(thread)
    where = link if link is not None else f"thread {thread.thread}"
    return f"🧵 Opened a topic for the new session “{name}”: {where}"
