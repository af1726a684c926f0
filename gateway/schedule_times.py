"""When a schedule is due (issue 35): cron expressions, ``/at`` times, time zones and the
claim of a due run, as plain functions of plain data.

A repeating schedule is a five-field cron expression (``minute hour day-of-month month
day-of-week``), one of the macros ``@hourly``/``@daily``/``@midnight``/``@weekly``, or one of a
small fixed table of words (:data:`ALIASES`), always shown back as the cron it stands for.
There is no free-form parser of our own: the expression is cronsim's (a well-kept library that
follows Debian cron's daylight-saving rules, docs/decisions.md), read in the schedule's zone:

- a fixed-hour job whose time falls in the hour a spring-forward skips runs once, right after
  the change (``30 2 * * *`` in Europe/Berlin on the last Sunday of March: 03:00 CEST);
- a fixed-hour job whose time falls in the hour a fall-back repeats runs once, the first time;
- a job that runs every hour or more often (``*/30 * * * *``) follows the wall clock: it runs
  in both copies of a repeated hour, and not in a skipped one.

Every instant leaves here aware and in UTC: due times are stored as instants, and a claim
compares the stored value (gateway/store/schedules.py).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from gateway.wording import named

__all__ = [
    "ALIASES",
    "CRON_FIELDS",
    "Due",
    "DueKind",
    "ScheduleTimeError",
    "cron_of",
    "due_now",
    "next_after",
    "parse_at",
    "shortest_gap",
    "split_every",
    "zone_of",
]

CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")

# the macros cron knows and a few words people type; each is shown back as its cron
ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "hourly": "0 * * * *",
    "daily": "0 9 * * *",
    "weekly": "0 9 * * 1",
    "weekdays": "0 9 * * 1-5",
}

# cronsim's messages name the field in its own words
_CRONSIM_FIELD = {
    "Bad minute": 0,
    "Bad hour": 1,
    "Bad day-of-month": 2,
    "Bad month": 3,
    "Bad day-of-week": 4,
}
_GAP_SAMPLES = 200  # the runs looked at for the shortest gap between two runs


class ScheduleTimeError(ValueError):
    """A cron expression, a time or a zone that cannot be used; the message says which part
    and why, in words a person reads in chat."""


def zone_of(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (``Europe/Berlin``, ``UTC``); zone data from the system, else
    from the ``tzdata`` package."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        close = difflib.get_close_matches(name, available_timezones(), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]!r}?" if close else "an IANA name such as Europe/Berlin"
        raise ScheduleTimeError(f"unknown time zone {name!r} ({hint})") from exc


def cron_of(expression: str) -> str:
    """The five-field cron ``expression`` stands for (a macro or an alias replaced), checked:
    ScheduleTimeError names the field that is wrong."""
    text = " ".join(expression.split())
    cron = ALIASES.get(text.lower(), text)
    fields = cron.split(" ")
    if text.startswith("@") and text.lower() not in ALIASES:
        raise ScheduleTimeError(
            f"unknown cron macro {named(text)}: use @hourly, @daily, @weekly or five fields"
        )
    if len(fields) != len(CRON_FIELDS):
        raise ScheduleTimeError(
            f"a cron expression has five fields ({' '.join(CRON_FIELDS)}), not {len(fields)}:"
            f" {named(text)}"
        )
    try:
        CronSim(cron, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        index = _CRONSIM_FIELD.get(str(exc))
        if index is None:
            raise ScheduleTimeError(f"not a valid cron expression: {named(text)} ({exc})") from exc
        raise ScheduleTimeError(
            f"the {CRON_FIELDS[index]} field {named(fields[index])} is not valid in {named(cron)}"
        ) from exc
    return cron


def split_every(text: str) -> tuple[str, str]:
    """``/every``'s argument: (the cron expression as typed, the prompt text). A macro or an
    alias is one word; otherwise the first five words are the expression."""
    words = text.split(maxsplit=1)
    if not words:
        return "", ""
    if words[0].startswith("@") or words[0].lower() in ALIASES:
        return words[0], words[1].strip() if len(words) > 1 else ""
    parts = text.split(maxsplit=len(CRON_FIELDS))
    return " ".join(parts[: len(CRON_FIELDS)]), (
        parts[len(CRON_FIELDS)].strip() if len(parts) > len(CRON_FIELDS) else ""
    )


def next_after(cron: str, zone: ZoneInfo, after: datetime) -> datetime:
    """The first instant strictly after ``after`` at which ``cron`` fires in ``zone`` (UTC)."""
    start = after.astimezone(zone).replace(second=0, microsecond=0)
    for fired in CronSim(cron, start):
        instant = fired.astimezone(UTC)
        if instant > after:
            return instant
    raise ScheduleTimeError(f"{cron!r} never fires")  # pragma: no cover - cronsim refuses these


def shortest_gap(cron: str, zone: ZoneInfo, after: datetime) -> timedelta:
    """The shortest time between two runs among the next few hundred (the minimum interval's
    check: ``* 9 * * *`` runs every minute for an hour, though only once a day)."""
    runs = CronSim(cron, after.astimezone(zone))
    previous = next(runs).astimezone(UTC)
    shortest = timedelta.max
    for _ in range(_GAP_SAMPLES):
        current = next(runs).astimezone(UTC)
        shortest = min(shortest, current - previous)
        previous = current
    return shortest


_AT_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")
_AT_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_AT_IN = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?")


def parse_at(text: str, *, zone: ZoneInfo, now: datetime) -> tuple[datetime, str]:
    """``/at``'s argument: (the instant, the prompt text). WHEN is ``HH:MM`` (the next such
    time in ``zone``), ``YYYY-MM-DD HH:MM`` (in ``zone``), or ``in`` and a duration (``in 2h``,
    ``in 90m``, ``in 1d``, ``in 1h30m``). A time already past is refused."""
    words = text.split()
    if not words:
        raise ScheduleTimeError("say when: HH:MM, YYYY-MM-DD HH:MM or in 2h")
    if words[0].lower() == "in":
        amount = words[1].lower() if len(words) > 1 else ""
        match = _AT_IN.fullmatch(amount)
        if not amount or match is None:
            raise ScheduleTimeError(f"not a duration: {named(amount)} (e.g. in 2h, in 90m, in 1d)")
        days, hours, minutes = (int(part or 0) for part in match.groups())
        delay = timedelta(days=days, hours=hours, minutes=minutes)
        if delay <= timedelta(0):
            raise ScheduleTimeError("the delay must be more than nothing (e.g. in 2h)")
        return now + delay, _rest(text, 2)
    date_match = _AT_DATE.fullmatch(words[0])
    if date_match is not None:
        clock = _AT_CLOCK.fullmatch(words[1]) if len(words) > 1 else None
        if clock is None:
            raise ScheduleTimeError("a date needs a time: YYYY-MM-DD HH:MM")
        year, month, day = (int(part) for part in date_match.groups())
        local = _local(year, month, day, clock, zone)
        if local <= now:
            raise ScheduleTimeError(f"{words[0]} {words[1]} ({zone.key}) has passed")
        return local, _rest(text, 2)
    clock = _AT_CLOCK.fullmatch(words[0])
    if clock is None:
        raise ScheduleTimeError(f"not a time: {named(words[0])} (HH:MM, YYYY-MM-DD HH:MM or in 2h)")
    today = now.astimezone(zone).date()
    instant = _local(today.year, today.month, today.day, clock, zone)
    if instant <= now:
        tomorrow = today + timedelta(days=1)
        instant = _local(tomorrow.year, tomorrow.month, tomorrow.day, clock, zone)
    return instant, _rest(text, 1)


def _local(year: int, month: int, day: int, clock: re.Match[str], zone: ZoneInfo) -> datetime:
    hour, minute = int(clock.group(1)), int(clock.group(2))
    try:
        local = datetime(year, month, day, hour, minute, tzinfo=zone)
    except ValueError as exc:
        what = "time" if hour > 23 or minute > 59 else "date"
        said = f"{year:04d}-{month:02d}-{day:02d} " if what == "date" else ""
        raise ScheduleTimeError(f"{said}{hour:02d}:{minute:02d} is no valid {what}") from exc
    return local.astimezone(UTC)


def _rest(text: str, words: int) -> str:
    parts = text.split(maxsplit=words)
    return parts[words].strip() if len(parts) > words else ""


class DueKind(StrEnum):
    NOT_YET = "not_yet"
    RUN = "run"  # due, on time or within the grace period
    MISSED = "missed"  # due longer ago than the grace period: recorded as skipped


@dataclass(frozen=True, kw_only=True, slots=True)
class Due:
    """What a schedule whose stored next time is ``due_at`` does at ``now``."""

    kind: DueKind
    due_at: datetime  # the run's instant: the stored next time
    next_at: datetime | None  # the next time to store; None: a one-off, done


def due_now(
    *,
    due_at: datetime,
    now: datetime,
    grace: timedelta,
    cron: str | None,
    zone: ZoneInfo,
) -> Due:
    """Decide purely: run, skip as missed, or wait. Of every run missed while no host was up,
    at most one (the last stored) is caught up, and only within ``grace``; the next time is
    the first after ``now``, so the missed ones in between are not run at all."""
    if due_at > now:
        return Due(kind=DueKind.NOT_YET, due_at=due_at, next_at=due_at)
    kind = DueKind.RUN if now - due_at <= grace else DueKind.MISSED
    following = next_after(cron, zone, now) if cron is not None else None
    return Due(kind=kind, due_at=due_at, next_at=following)
