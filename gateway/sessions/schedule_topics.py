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

A schedule of the config file (``[[projects.X.schedule]]``) gets its thread at its first run
(:func:`configured_thread`), on the host that claimed the run, kept in a column of its own
(``own_thread``, migration 24) that the start-up sync leaves alone unless the file names
another conversation; the column is taken by compare-and-set, so two hosts never keep two
threads (a thread opened by the one that lost is closed where the platform can).

A schedule deleted says so in its own thread (:func:`say_deleted`; a config entry removed
also where it has none), and its own Telegram topic is closed where the bot may
(``closeForumTopic``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import ClosesThreads, OpensThreads, ThreadRefused
from gateway.store.schedules import ScheduleRecord
from gateway.store.store import Store

__all__ = [
    "TOPIC_NOTICE",
    "configured_thread",
    "deleted_words",
    "open_schedule_thread",
    "say_deleted",
    "topic_title",
]

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


async def configured_thread(
    *,
    platform: OpensThreads,
    store: Store,
    schedule: ScheduleRecord,
    say: Callable[[ConversationRef, str], Awaitable[None]],
    refused: Callable[[], None] = lambda: None,
) -> ScheduleRecord:
    """A config file's schedule with no thread yet gets one in the conversation the file
    names (its first run); the schedule as it is then (unchanged where none could be
    opened: its runs speak in that conversation, and a later run tries again; ``refused``
    is called where the platform refused it: the bot may not open threads there)."""
    home = schedule.home
    try:
        thread = await platform.open_thread(home, topic_title(schedule))
    except PlatformError as exc:  # ThreadRefused included: no right to manage topics
        log.info("schedule %s: no thread opened in %s (%s)", schedule.label, home.key(), exc)
        if isinstance(exc, ThreadRefused):
            refused()
        return schedule
    taken = await store.schedules.take_thread(schedule, thread, actor="config")
    if taken is None:  # another host's run took the column first: its thread is the one
        log.info("schedule %s: another host opened its thread first", schedule.label)
        if isinstance(platform, ClosesThreads):
            try:
                await platform.close_thread(thread)
            except PlatformError as exc:
                log.info("schedule %s: a spare thread not closed (%s)", schedule.label, exc)
        again = await store.schedules.get(schedule.id)
        return schedule if again is None else again
    await say(thread, TOPIC_NOTICE.format(label=schedule.label))
    return taken


def deleted_words(schedule: ScheduleRecord, by: str) -> str:
    return f"⏰ Schedule {schedule.label} deleted by {by}: no more runs come."


async def say_deleted(
    *,
    platform: object,
    schedule: ScheduleRecord,
    by: str,
    say: Callable[[ConversationRef, str], Awaitable[None]],
    anywhere: bool = False,
) -> None:
    """Say in the thread of its own a deleted schedule's runs spoke in that no more come,
    and close it where it is a Telegram topic the bot may close (else it is left open, as
    it was). Not said where it has no thread of its own (its runs spoke where it was made,
    and the person who deleted it is answered there) unless ``anywhere`` (a config entry
    removed: no one was answered)."""
    if schedule.own_thread is None and not anywhere:
        return
    await say(schedule.conversation, deleted_words(schedule, by))
    if schedule.own_thread is None or not isinstance(platform, ClosesThreads):
        return
    try:
        await platform.close_thread(schedule.conversation)
    except PlatformError as exc:
        log.info("schedule %s: its topic left open (%s)", schedule.label, exc)
