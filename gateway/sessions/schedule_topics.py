"""A thread of its own for a schedule (issue 35): "in the schedule's thread where the platform
has threads (one Telegram topic per schedule, not per run)".

Where sessions follow threads (``scope = "thread"``) and the platform may open a thread in
the conversation's channel (``OpensThreads.threads_beside``: a Telegram forum, from any of
its topics; any Slack conversation), a schedule just made gets a thread named after it
("⏰ S1: TEXT": a forum topic, or a Slack message at the top of the channel), opened by the
bot; the schedule's conversation becomes that thread (``ScheduleBook.move_to_thread``,
audited), so each run says "⏰ scheduled: TEXT" there and its fresh session follows the
thread: it never takes over the conversation a person works in. Where no thread can be
opened (the bot may not manage a forum's topics, or the platform refuses) the schedule
stays where it was made and the reply says so; the schedule is made either way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import OpensThreads, ThreadRefused
from gateway.store.schedules import ScheduleRecord
from gateway.store.store import Store

__all__ = ["TOPIC_NOTICE", "open_schedule_thread", "topic_title"]

log = logging.getLogger(__name__)

TOPIC_NOTICE = (
    "⏰ Schedule {label}'s runs speak here, each in a fresh session: what its agent asks"
    " waits here for the project's approvers."
)
NO_TOPIC = (
    "Its runs speak here: I may not open topics in this group (make the bot an admin with"
    " “Manage topics” to give each schedule a topic of its own)."
)
_TITLE_TEXT_CHARS = 60  # of the schedule's text in its topic's name


def topic_title(schedule: ScheduleRecord) -> str:
    """The thread's name (a topic's, a Slack thread's first message): the schedule's label
    and the start of its text, on one line."""
    text = " ".join(schedule.text.split())
    if len(text) > _TITLE_TEXT_CHARS:
        text = text[: _TITLE_TEXT_CHARS - 1] + "…"
    return f"⏰ {schedule.label}: {text}"


async def open_schedule_thread(
    *,
    platform: OpensThreads,
    store: Store,
    schedule: ScheduleRecord,
    actor: Actor,
    say: Callable[[ConversationRef, str], Awaitable[None]],
    link_of: Callable[[ConversationRef], str | None],
) -> str:
    """Open ``schedule``'s thread and move the schedule there; the line its maker is told
    (where its runs speak)."""
    try:
        thread = await platform.open_thread(schedule.conversation, topic_title(schedule))
    except ThreadRefused:
        return NO_TOPIC
    except PlatformError as exc:
        log.warning("schedule %s: no topic opened (%s)", schedule.label, exc)
        return f"Its runs speak here: no thread could be opened for it ({exc})."
    await store.schedules.move_to_thread(schedule.id, thread, actor=actor)
    await say(thread, TOPIC_NOTICE.format(label=schedule.label))
    link = link_of(thread)
    where = link if link is not None else f"thread {thread.thread}"
    return f"Its runs speak in a thread of its own: {where}"
