"""The cron matcher (M5d section 4.2; DESIGN 7 and 11): a table of cases, every refusal by field, and
property tests against a deliberately naive reading of the same rules written here."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.loopd.cron import HORIZON_DAYS, CronError, Schedule, due, next_run, parse

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


# The table -------------------------------------------------------------------------------------------

CASES = [
    # (schedule, minute, due)
    ("0 7 * * *", "2026-03-04T07:00", True),
    ("0 7 * * *", "2026-03-04T07:01", False),
    ("0 7 * * *", "2026-03-04T08:00", False),
    ("0 7 1 * 1", "2026-06-01T07:00", True),  # the 1st (a Monday too)
    ("0 7 1 * 1", "2026-07-01T07:00", True),  # the 1st, a Wednesday
    ("0 7 1 * 1", "2026-07-06T07:00", True),  # a Monday, the 6th
    ("0 7 1 * 1", "2026-07-07T07:00", False),  # a Tuesday, the 7th
    ("0 0 */7 * *", "2026-01-01T00:00", True),
    ("0 0 */7 * *", "2026-01-08T00:00", True),
    ("0 0 */7 * *", "2026-01-29T00:00", True),
    ("0 0 */7 * *", "2026-01-07T00:00", False),
    ("0 0 */7 * *", "2026-01-31T00:00", False),
    ("0 0 1 */5 *", "2026-01-01T00:00", True),
    ("0 0 1 */5 *", "2026-06-01T00:00", True),
    ("0 0 1 */5 *", "2026-11-01T00:00", True),
    ("0 0 1 */5 *", "2026-05-01T00:00", False),
    ("*/15 9-17 * * 1-5", "2026-07-06T09:00", True),  # Monday
    ("*/15 9-17 * * 1-5", "2026-07-10T17:45", True),  # Friday
    ("*/15 9-17 * * 1-5", "2026-07-10T17:50", False),
    ("*/15 9-17 * * 1-5", "2026-07-10T18:00", False),
    ("*/15 9-17 * * 1-5", "2026-07-11T12:00", False),  # Saturday
    ("*/15 9-17 * * 1-5", "2026-07-12T12:00", False),  # Sunday
    ("0 0 * * 7", "2026-07-12T00:00", True),  # Sunday
    ("0 0 * * 0", "2026-07-12T00:00", True),
    ("0 0 * * 7", "2026-07-13T00:00", False),
    ("0 0 * * 6-7", "2026-07-11T00:00", True),  # Saturday
    ("1,15 * * * *", "2026-07-13T05:01", True),
    ("1,15 * * * *", "2026-07-13T05:15", True),
    ("1,15 * * * *", "2026-07-13T05:14", False),
    ("10-50/20 * * * *", "2026-07-13T05:10", True),
    ("10-50/20 * * * *", "2026-07-13T05:30", True),
    ("10-50/20 * * * *", "2026-07-13T05:50", True),
    ("10-50/20 * * * *", "2026-07-13T05:20", False),
    ("10-50/20 * * * *", "2026-07-13T05:00", False),
    ("0 12 29 2 *", "2028-02-29T12:00", True),
    ("30 23 31 12 *", "2026-12-31T23:30", True),
    ("0-5,58-59 * * * *", "2026-12-31T23:59", True),
]


@pytest.mark.parametrize(("text", "minute", "expected"), CASES)
def test_the_table(text: str, minute: str, expected: bool) -> None:
    assert due(parse(text), at(minute)) is expected


def test_seconds_are_ignored_and_other_zones_read_as_utc() -> None:
    schedule = parse("0 7 * * *")
    assert due(schedule, at("2026-03-04T07:00:59.999"))
    plus_two = dt.datetime(2026, 3, 4, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert due(schedule, plus_two)


def test_a_naive_minute_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        due(parse("* * * * *"), dt.datetime(2026, 1, 1))


def test_parsed_fields() -> None:
    schedule = parse(" 0  0 */7\t1,6-12/3 7 ")
    assert schedule.days == frozenset({1, 8, 15, 22, 29})
    assert schedule.months == frozenset({1, 6, 9, 12})
    assert schedule.weekdays == frozenset({0})
    assert schedule.days_restricted
    assert schedule.weekdays_restricted
    assert schedule.text == " 0  0 */7\t1,6-12/3 7 "
    plain = parse("* * * * *")
    assert not plain.days_restricted
    assert not plain.weekdays_restricted
    assert plain.weekdays == frozenset(range(7))
    assert parse("0 0 1 */5 *").months == frozenset({1, 6, 11})


def test_only_the_restricted_day_field_counts() -> None:
    by_date = parse("0 0 13 * *")
    by_weekday = parse("0 0 * * 5")
    friday_13 = at("2026-03-13T00:00")
    friday_20 = at("2026-03-20T00:00")
    assert due(by_date, friday_13)
    assert not due(by_date, friday_20)
    assert due(by_weekday, friday_20)
    assert due(parse("0 0 13 * 5"), friday_20)  # both restricted: either
    assert due(parse("0 0 */1 * 5"), at("2026-03-21T00:00"))  # "*/1" is restricted, and every day


# Refusals ----------------------------------------------------------------------------------------------

REFUSALS = [
    ("60 * * * *", "minute: 60 is out of range 0-59"),
    ("* 24 * * *", "hour: 24 is out of range 0-23"),
    ("* * 0 * *", "day-of-month: 0 is out of range 1-31"),
    ("* * 32 * *", "day-of-month: 32 is out of range 1-31"),
    ("* * * 0 *", "month: 0 is out of range 1-12"),
    ("* * * 13 *", "month: 13 is out of range 1-12"),
    ("* * * * 8", "day-of-week: 8 is out of range 0-7"),
    ("* 17-9 * * *", "hour: range 17-9 runs backwards"),
    ("*/0 * * * *", "minute: step 0 in '*/0'; a step is at least 1"),
    ("* * * 1-12/0 *", "month: step 0 in '1-12/0'; a step is at least 1"),
    ("1,,2 * * * *", "minute: empty item in '1,,2'"),
    ("* 1, * * *", "hour: empty item in '1,'"),
    (
        "* * * * MON",
        "day-of-week: value 'MON' in 'MON' is not a number (names such as MON are not supported)",
    ),
    ("* * * JAN *", "month: value 'JAN' in 'JAN' is not a number (names such as MON are not supported)"),
    ("* * 1-x * *", "day-of-month: value 'x' in '1-x' is not a number (names such as MON are not supported)"),
    (
        "* * -5 * *",
        "day-of-month: '-5' is not a value or a range (values are 1-31; no negatives)",
    ),
    ("*/x * * * *", "minute: step 'x' in '*/x' is not a number (names such as MON are not supported)"),
    ("*/ * * * *", "minute: step nothing in '*/' is not a number (names such as MON are not supported)"),
    ("* * ² * *", "day-of-month: value '²' in '²' is not a number (names such as MON are not supported)"),
    ("5/15 * * * *", "minute: '5/15' has a step without a range; write 5-59/15"),
    ("* * * * 1/2", "day-of-week: '1/2' has a step without a range; write 1-7/2"),
    ("@daily", "schedule: nicknames such as '@daily' are not supported; write five fields"),
    ("0 0 * * * *", "schedule: expected 5 fields (minute hour day-of-month month day-of-week), got 6"),
    ("0 0 * *", "schedule: expected 5 fields (minute hour day-of-month month day-of-week), got 4"),
    ("", "schedule: expected 5 fields (minute hour day-of-month month day-of-week), got 0"),
]


@pytest.mark.parametrize(("text", "sentence"), REFUSALS)
def test_refusals_name_the_field(text: str, sentence: str) -> None:
    with pytest.raises(CronError) as caught:
        parse(text)
    assert str(caught.value) == sentence
    assert caught.value.field == sentence.partition(":")[0]


# next_run ---------------------------------------------------------------------------------------------


def test_next_run_examples() -> None:
    assert next_run(parse("0 7 * * *"), at("2026-03-04T07:00")) == at("2026-03-05T07:00")
    assert next_run(parse("0 7 * * *"), at("2026-03-04T06:59:30")) == at("2026-03-04T07:00")
    assert next_run(parse("*/15 9-17 * * 1-5"), at("2026-07-10T17:45")) == at("2026-07-13T09:00")
    assert next_run(parse("0 0 29 2 *"), at("2026-03-01T00:00")) == at("2028-02-29T00:00")
    assert next_run(parse("0 0 1 1 *"), at("2026-12-31T23:59:59")) == at("2027-01-01T00:00")


@pytest.mark.parametrize("text", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"])
def test_next_run_none_when_never_due(text: str) -> None:
    assert next_run(parse(text), at("2026-01-01T00:00")) is None


def test_next_run_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="naive"):
        next_run(parse("* * * * *"), dt.datetime(2026, 1, 1))


# A naive reading of the same rules, written independently ---------------------------------------------

LIMITS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def naive_item(item: str, value: int, low: int) -> bool:
    """Does one item of a field hold `value`? Read straight from the rules, with no sets."""
    step = 1
    if "/" in item:
        item, step_text = item.split("/")
        step = int(step_text)
    if item == "*":
        return (value - low) % step == 0
    if "-" in item:
        first, last = (int(part) for part in item.split("-"))
        return first <= value <= last and (value - first) % step == 0
    return value == int(item)


def naive_field(field: str, value: int, index: int) -> bool:
    low = LIMITS[index][0]
    values = [value, 7] if index == 4 and value == 0 else [value]  # Sunday is 0 and 7
    return any(naive_item(item, v, low) for item in field.split(",") for v in values)


def naive_day(text: str, day: dt.date) -> bool:
    fields = text.split()
    if not naive_field(fields[3], day.month, 3):
        return False
    weekday = day.isoweekday() % 7  # isoweekday: Monday 1 .. Sunday 7
    date_ok = naive_field(fields[2], day.day, 2)
    weekday_ok = naive_field(fields[4], weekday, 4)
    if fields[2] != "*" and fields[4] != "*":
        return date_ok or weekday_ok
    if fields[2] != "*":
        return date_ok
    if fields[4] != "*":
        return weekday_ok
    return True


def naive_due(text: str, minute: dt.datetime) -> bool:
    fields = text.split()
    return (
        naive_field(fields[0], minute.minute, 0)
        and naive_field(fields[1], minute.hour, 1)
        and naive_day(text, minute.date())
    )


@st.composite
def field_text(draw: st.DrawFn, index: int) -> str:
    low, high = LIMITS[index]
    if draw(st.booleans()):
        return "*"
    items = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["n", "range", "star-step", "range-step"]))
        first = draw(st.integers(low, high))
        last = draw(st.integers(first, high))
        step = draw(st.integers(1, high + 2))
        items.append(
            {
                "n": f"{first}",
                "range": f"{first}-{last}",
                "star-step": f"*/{step}",
                "range-step": f"{first}-{last}/{step}",
            }[kind]
        )
    return ",".join(items)


@st.composite
def schedule_text(draw: st.DrawFn) -> str:
    return " ".join(draw(field_text(i)) for i in range(5))


YEAR_START = at("2028-01-01T00:00")  # a leap year


@settings(max_examples=50, deadline=None)
@given(schedule_text(), st.integers(0, 59))
def test_due_agrees_with_the_naive_reading_over_a_year(text: str, probe: int) -> None:
    """Every day of a leap year, every hour of it at a varying minute, and every minute of its first
    day and of 2 July: `due` and the naive reading agree."""
    schedule = parse(text)
    for index in range(366):
        day = YEAR_START + dt.timedelta(days=index)
        minutes = (
            range(1440)
            if index % 183 == 0
            else [h * 60 + (probe + 7 * index + 13 * h) % 60 for h in range(24)]
        )
        for offset in minutes:
            moment = day + dt.timedelta(minutes=offset)
            assert due(schedule, moment) is naive_due(text, moment), moment


def test_due_agrees_with_the_naive_reading_over_every_minute_of_a_year() -> None:
    text = "*/15 9-17 1,15 */5 1-5,7"
    schedule = parse(text)
    moment, end = YEAR_START, YEAR_START + dt.timedelta(days=366)
    while moment < end:
        assert due(schedule, moment) is naive_due(text, moment), moment
        moment += dt.timedelta(minutes=1)


@settings(max_examples=80, deadline=None)
@given(schedule_text(), st.integers(0, 4 * 366 * 1440), st.integers(0, 59))
def test_next_run_agrees_with_stepping_minute_by_minute(text: str, start: int, second: int) -> None:
    """Within three days of a random start, `next_run` is the first minute the naive reading finds."""
    schedule = parse(text)
    after = YEAR_START + dt.timedelta(minutes=start, seconds=second)
    found = next_run(schedule, after)
    moment = after.replace(second=0) + dt.timedelta(minutes=1)
    window_end = moment + dt.timedelta(days=3)
    while moment < window_end and not naive_due(text, moment):
        moment += dt.timedelta(minutes=1)
    if moment < window_end:
        assert found == moment
    else:
        assert found is None or found >= window_end


@settings(max_examples=80, deadline=None)
@given(schedule_text(), st.integers(0, 4 * 366 * 1440))
def test_next_run_skips_no_matching_day(text: str, start: int) -> None:
    """Far away too: `next_run` is due, and no day between the start and it is one of the days."""
    schedule = parse(text)
    after = YEAR_START + dt.timedelta(minutes=start)
    found = next_run(schedule, after)
    if found is None:
        day, end = after.date() + dt.timedelta(days=1), after.date() + dt.timedelta(days=5 * 365)
    else:
        assert found > after
        assert naive_due(text, found)
        day, end = after.date() + dt.timedelta(days=1), found.date()
    while day < end:
        assert not naive_day(text, day), day
        day += dt.timedelta(days=1)


def test_schedule_is_a_frozen_value() -> None:
    schedule = parse("0 0 * * *")
    assert isinstance(schedule, Schedule)
    assert schedule == parse("0 0 * * *")
    with pytest.raises(AttributeError):
        schedule.text = "x"  # type: ignore[misc]


# What the mutation run found untested (docs/mutation.md) -------------------------------------------


def test_next_run_is_a_whole_utc_minute_whatever_the_local_zone() -> None:
    after = dt.datetime(2026, 9, 24, 21, 2, 7, 123456, tzinfo=dt.UTC)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "Asia/Tokyo")
        time.tzset()
        try:
            found = next_run(parse("0 6 * * *"), after)
            assert due(parse("0 21 * * *"), dt.datetime(2026, 9, 24, 21, 0, 59, tzinfo=dt.UTC))
        finally:
            patch.undo()
            time.tzset()
    assert found == dt.datetime(2026, 9, 25, 6, 0, tzinfo=dt.UTC)
    assert (found.second, found.microsecond, found.utcoffset()) == (0, 0, dt.timedelta(0))
    assert next_run(parse("* * * * *"), after) == dt.datetime(2026, 9, 24, 21, 3, tzinfo=dt.UTC)


def test_next_run_looks_exactly_horizon_days_ahead() -> None:
    """A leap day after a century year without one (2100) is the rarest date: found on the last day
    of the horizon, not one day past it."""
    leap = dt.datetime(2104, 2, 29, tzinfo=dt.UTC)
    schedule = parse("0 0 29 2 *")
    on_the_last_day = leap - dt.timedelta(days=HORIZON_DAYS, minutes=1)
    assert next_run(schedule, on_the_last_day) == leap
    assert next_run(schedule, on_the_last_day - dt.timedelta(days=1)) is None
