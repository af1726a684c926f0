"""The lease holder's arithmetic (gateway/store/lease_timing.py): no database, no clock but the
test's."""

from __future__ import annotations

import pytest

from gateway.store.lease_timing import LeaseTiming


def test_a_lease_not_yet_granted_is_not_held_and_is_asked_for_at_once() -> None:
    timing = LeaseTiming(ttl=9.0)
    assert not timing.holds(0.0)
    assert timing.deadline() is None
    assert timing.renew_in(0.0) == 0.0


def test_the_deadline_is_the_send_time_plus_the_ttl_less_one_period() -> None:
    timing = LeaseTiming(ttl=9.0)
    timing.granted(sent_at=100.0)  # the answer came later: the send time counts
    assert timing.period == 3.0
    assert timing.deadline() == 106.0
    assert timing.holds(105.999)
    assert not timing.holds(106.0)  # before the database's expiry at about 109


def test_renews_are_due_every_third_of_the_lease() -> None:
    timing = LeaseTiming(ttl=9.0)
    timing.granted(sent_at=100.0)
    assert timing.renew_in(101.0) == 2.0
    assert timing.renew_in(104.0) == 0.0
    timing.granted(sent_at=103.0)
    assert timing.renew_in(103.5) == 2.5
    assert timing.deadline() == 109.0


def test_a_refused_renew_loses_the_lease_before_its_deadline() -> None:
    timing = LeaseTiming(ttl=9.0)
    timing.granted(sent_at=100.0)
    timing.refused()
    assert not timing.holds(100.1)
    assert timing.deadline() is None
    timing.granted(sent_at=200.0)  # acquired again: held again
    assert timing.holds(200.1)


def test_a_lease_without_time_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LeaseTiming(ttl=0)


def test_a_renew_that_found_no_database_is_tried_again_until_the_deadline() -> None:
    timing = LeaseTiming(ttl=9.0)
    timing.granted(sent_at=100.0)  # the deadline is 106
    assert timing.retry_in(103.0) == pytest.approx(0.3)  # a tenth of a period
    assert timing.retry_in(105.9) == pytest.approx(0.1)  # never past the deadline
    assert timing.retry_in(106.0) is None  # no time left: lost
    assert LeaseTiming(ttl=60.0).retry_in(0.0) is None  # never held
    timing.granted(sent_at=200.0)
    assert timing.retry_in(201.0) == pytest.approx(0.3)
    timing.refused()  # the fence moved: lost at once, nothing tried again
    assert timing.retry_in(201.0) is None


def test_the_pause_between_two_attempts_is_half_a_second_at_most() -> None:
    timing = LeaseTiming(ttl=60.0)
    timing.granted(sent_at=0.0)
    assert timing.retry_in(1.0) == 0.5
