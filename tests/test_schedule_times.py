"""When a schedule is due (gateway/schedule_times.py): cron as Debian cron reads it across
daylight-saving changes, the words of /every and /at, and the decision of a due run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.schedule_times import (
    DueKind,
    ScheduleTimeError,
    cron_of,
    due_now,
    next_after,
    parse_at,
    shortest_gap,
    split_every,
    zone_of,
)

BERLIN = zone_of("Europe/Berlin")
NEW_YORK = zone_of("America/New_York")


def runs(cron: str, zone_name: str, start: datetime, count: int) -> list[datetime]:
    zone = zone_of(zone_name)
    found: list[datetime] = []
    at = start
    for _ in range(count):
        at = next_after(cron, zone, at)
        found.append(at)
    return found


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_a_fixed_hour_in_the_skipped_hour_runs_once_right_after_spring_forward() -> None:
    # Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC)
    assert runs("30 2 * * *", "Europe/Berlin", utc(2026, 3, 27, 12), 3) == [
        utc(2026, 3, 28, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 0),  # the skipped 02:30: 03:00 CEST, right after the change
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]


def test_a_fixed_hour_in_the_repeated_hour_runs_once_at_fall_back() -> None:
    # Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 happens twice
    assert runs("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 0, 30),  # the first 02:30 (CEST), not the second
        utc(2026, 10, 26, 1, 30),  # 02:30 CET
    ]


def test_an_every_half_hour_job_follows_the_wall_clock_in_both_changes() -> None:
    fall = runs("*/30 * * * *", "Europe/Berlin", utc(2026, 10, 24, 23, 45), 5)
    assert fall == [
        utc(2026, 10, 25, 0, 0),  # 02:00 CEST
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST
        utc(2026, 10, 25, 1, 0),  # 02:00 CET, the hour again
        utc(2026, 10, 25, 1, 30),  # 02:30 CET
        utc(2026, 10, 25, 2, 0),  # 03:00 CET
    ]
    spring = runs("*/30 * * * *", "Europe/Berlin", utc(2026, 3, 29, 0, 15), 3)
    assert spring == [utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 30)]


def test_weekdays_at_nine_in_new_york_move_with_its_offset() -> None:
    # New York springs forward on 2026-03-08: 09:00 is 14:00 UTC before, 13:00 after
    assert runs("0 9 * * 1-5", "America/New_York", utc(2026, 3, 5, 15), 3) == [
        utc(2026, 3, 6, 14),
        utc(2026, 3, 9, 13),
        utc(2026, 3, 10, 13),
    ]


@pytest.mark.parametrize(
    ("typed", "named"),
    [
        ("61 * * * *", "the minute field `61`"),
        ("0 25 * * *", "the hour field `25`"),
        ("0 9 31 2 *", "the day-of-month field `31`"),
        ("0 9 * 13 *", "the month field `13`"),
        ("0 9 * * mon-fry", "the day-of-week field `mon-fry`"),
        ("0 9 * *", "five fields"),
        ("@yearly", "unknown cron macro"),
    ],
)
def test_a_bad_cron_expression_names_the_field(typed: str, named: str) -> None:
    with pytest.raises(ScheduleTimeError, match=named):
        cron_of(typed)


def test_macros_and_aliases_are_shown_back_as_cron() -> None:
    assert cron_of("@hourly") == "0 * * * *"
    assert cron_of("@daily") == "0 0 * * *"
    assert cron_of("@weekly") == "0 0 * * 0"
    assert cron_of("weekdays") == "0 9 * * 1-5"
    assert cron_of("0  9 * *  1-5") == "0 9 * * 1-5"


def test_every_splits_the_expression_from_the_prompt() -> None:
    assert split_every("0 9 * * 1-5 run the tests and say what broke") == (
        "0 9 * * 1-5",
        "run the tests and say what broke",
    )
    assert split_every("@daily summarize the open PRs") == ("@daily", "summarize the open PRs")
    assert split_every("weekdays   check CI") == ("weekdays", "check CI")
    assert split_every("0 9 * *") == ("0 9 * *", "")


def test_the_shortest_gap_sees_a_burst_inside_a_daily_schedule() -> None:
    start = utc(2026, 1, 1)
    assert shortest_gap("* 9 * * *", BERLIN, start) == timedelta(minutes=1)
    assert shortest_gap("*/10 * * * *", BERLIN, start) == timedelta(minutes=10)
    assert shortest_gap("0 9 * * 1-5", BERLIN, start) == timedelta(days=1)


def test_at_reads_a_clock_time_a_date_and_a_delay() -> None:
    now = utc(2026, 6, 1, 10, 0)  # 12:00 in Berlin
    assert parse_at("13:15 deploy the docs", zone=BERLIN, now=now) == (
        utc(2026, 6, 1, 11, 15),
        "deploy the docs",
    )
    # a time already past today is tomorrow's
    assert parse_at("09:00 standup notes", zone=BERLIN, now=now)[0] == utc(2026, 6, 2, 7, 0)
    assert parse_at("2026-07-01 08:30 quarterly report", zone=BERLIN, now=now) == (
        utc(2026, 7, 1, 6, 30),
        "quarterly report",
    )
    assert parse_at("in 2h rerun the flaky test", zone=BERLIN, now=now) == (
        utc(2026, 6, 1, 12, 0),
        "rerun the flaky test",
    )
    assert parse_at("in 1h30m x", zone=BERLIN, now=now)[0] == utc(2026, 6, 1, 11, 30)


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("", "say when"),
        ("tomorrow do it", "not a time"),
        ("in soon do it", "not a duration"),
        ("in 0m do it", "more than nothing"),
        ("2026-05-01 08:00 too late", "has passed"),
        ("2026-02-30 08:00 no such day", "2026-02-30 08:00 is no valid date"),
        ("2026-07-01 do it", "needs a time"),
    ],
)
def test_at_refuses_what_it_cannot_read(typed: str, said: str) -> None:
    with pytest.raises(ScheduleTimeError, match=said):
        parse_at(typed, zone=BERLIN, now=utc(2026, 6, 1, 10))


def test_an_unknown_zone_is_named() -> None:
    with pytest.raises(ScheduleTimeError, match="Mars/Olympus"):
        zone_of("Mars/Olympus")


def test_a_due_run_inside_the_grace_runs_once_and_skips_the_missed_ones_between() -> None:
    due_at = utc(2026, 6, 1, 7, 0)  # 09:00 Berlin
    on_time = due_now(
        due_at=due_at, now=due_at, grace=timedelta(hours=1), cron="0 9 * * *", zone=BERLIN
    )
    assert (on_time.kind, on_time.next_at) == (DueKind.RUN, utc(2026, 6, 2, 7, 0))
    # every host was down for three days: the last stored one is missed, the next is tomorrow
    late = due_now(
        due_at=due_at,
        now=utc(2026, 6, 4, 8, 0),
        grace=timedelta(hours=1),
        cron="0 9 * * *",
        zone=BERLIN,
    )
    assert (late.kind, late.next_at) == (DueKind.MISSED, utc(2026, 6, 5, 7, 0))
    caught_up = due_now(
        due_at=due_at,
        now=due_at + timedelta(minutes=40),
        grace=timedelta(hours=1),
        cron="0 9 * * *",
        zone=BERLIN,
    )
    assert caught_up.kind is DueKind.RUN
    once = due_now(due_at=due_at, now=due_at, grace=timedelta(0), cron=None, zone=BERLIN)
    assert (once.kind, once.next_at) == (DueKind.RUN, None)
    early = due_now(
        due_at=due_at, now=due_at - timedelta(seconds=1), grace=timedelta(0), cron=None, zone=BERLIN
    )
    assert early.kind is DueKind.NOT_YET
