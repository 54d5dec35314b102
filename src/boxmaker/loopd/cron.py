"""The cron matcher: five-field UTC schedules, parsed once and matched against minutes (M5d section 4.2).

A schedule is five whitespace-separated fields, ``minute hour day-of-month month day-of-week``, read in
UTC. Each field is a comma list of items; an item is one of::

    *          every value of the field
    n          one value
    n-m        n to m inclusive (n <= m)
    */s        every s-th value counting from the field's first value
    n-m/s      every s-th value from n to m

Ranges: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-7 where both 0 and 7 are
Sunday. ``*/s`` counts from the field's first value, so day-of-month ``*/7`` is 1, 8, 15, 22, 29 and
month ``*/5`` is January, June, November (DESIGN 7). ``n/s`` is refused (write ``n-m/s``), and so are
names (``MON``, ``JAN``), nicknames (``@daily``), empty items, step 0, backwards ranges and values out of
range: `CronError` names the field and what is wrong.

Days follow POSIX (DESIGN 7 and 11): a field is *restricted* unless it is exactly ``*``; when both
day-of-month and day-of-week are restricted a day matches if either matches, otherwise only the
restricted one (if any) counts.

Pure: no I/O and no clock; times are passed in as aware datetimes.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from boxmaker.proto.errors import BoxmakerError

#: The fields in order, with their first and last values.
FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)

#: How far `next_run` looks ahead, in days (five years, leap days included).
HORIZON_DAYS = 5 * 366

_NUMBER = re.compile(r"[0-9]+\Z")
_MINUTE = dt.timedelta(minutes=1)


class CronError(BoxmakerError):
    """Raised by `parse` when a schedule is not a valid five-field crontab line.

    The sentence names the field and the problem, e.g. ``day-of-week: 8 is out of range 0-7``; problems
    with the whole line name ``schedule``.
    """

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule (see the module docstring for the rules).

    Attributes:
        text: the schedule as written.
        minutes: 0-59. hours: 0-23. days: days of the month, 1-31. months: 1-12.
        weekdays: days of the week, 0-6 with 0 = Sunday (a written 7 is stored as 0).
        days_restricted: day-of-month was not written as ``*``.
        weekdays_restricted: day-of-week was not written as ``*``.
    """

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool


def parse(text: str) -> Schedule:
    """Parse a five-field UTC crontab schedule such as ``"0 7 * * 1-5"``.

    Raises:
        CronError: naming the field and what is wrong (``hour: 24 is out of range 0-23``,
            ``schedule: expected 5 fields ... got 6``).
    """
    fields = text.split()
    if len(fields) == 1 and fields[0].startswith("@"):
        raise CronError("schedule", f"nicknames such as {fields[0]!r} are not supported; write five fields")
    if len(fields) != len(FIELDS):
        names = " ".join(name for name, _, _ in FIELDS)
        raise CronError("schedule", f"expected 5 fields ({names}), got {len(fields)}")
    values = [
        _field(written, name, low, high) for written, (name, low, high) in zip(fields, FIELDS, strict=True)
    ]
    return Schedule(
        text=text,
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=frozenset(v % 7 for v in values[4]),
        days_restricted=fields[2] != "*",
        weekdays_restricted=fields[4] != "*",
    )


def _field(written: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in written.split(","):
        if not item:
            raise CronError(name, f"empty item in {written!r}")
        values.update(_item(item, name, low, high))
    return frozenset(values)


def _item(item: str, name: str, low: int, high: int) -> range:
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        step = _number(step_text, name, item, "step")
        if step == 0:
            raise CronError(name, f"step 0 in {item!r}; a step is at least 1")
    if base == "*":
        return range(low, high + 1, step)
    if base.startswith("-"):
        raise CronError(name, f"{item!r} is not a value or a range (values are {low}-{high}; no negatives)")
    first_text, dash, last_text = base.partition("-")
    first = _value(first_text, name, item, low, high)
    if not dash:
        if slash:
            raise CronError(name, f"{item!r} has a step without a range; write {first}-{high}/{step}")
        return range(first, first + 1)
    last = _value(last_text, name, item, low, high)
    if first > last:
        raise CronError(name, f"range {first}-{last} runs backwards")
    return range(first, last + 1, step)


def _number(text: str, name: str, item: str, what: str) -> int:
    if not _NUMBER.match(text):
        shown = f"{text!r}" if text else "nothing"
        raise CronError(
            name, f"{what} {shown} in {item!r} is not a number (names such as MON are not supported)"
        )
    return int(text)


def _value(text: str, name: str, item: str, low: int, high: int) -> int:
    value = _number(text, name, item, "value")
    if not low <= value <= high:
        raise CronError(name, f"{value} is out of range {low}-{high}")
    return value


def _utc_minute(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no time zone")
    return moment.astimezone(dt.UTC).replace(second=0, microsecond=0)


def day_matches(schedule: Schedule, day: dt.date) -> bool:
    """True when `day` (a UTC calendar day) is one of the schedule's days: its month and, by POSIX,
    its day-of-month and day-of-week (either, when both are restricted)."""
    if day.month not in schedule.months:
        return False
    by_date = day.day in schedule.days
    by_weekday = (day.weekday() + 1) % 7 in schedule.weekdays  # Python: Monday 0; cron: Sunday 0
    if schedule.days_restricted and schedule.weekdays_restricted:
        return by_date or by_weekday
    return by_date and by_weekday  # an unrestricted field holds every value


def due(schedule: Schedule, minute: dt.datetime) -> bool:
    """True when the schedule fires in `minute` (an aware datetime, read in UTC; seconds ignored).

    Raises:
        ValueError: when `minute` is naive.
    """
    at = _utc_minute(minute)
    return at.minute in schedule.minutes and at.hour in schedule.hours and day_matches(schedule, at.date())


def next_run(schedule: Schedule, after: dt.datetime) -> dt.datetime | None:
    """The first due minute strictly after `after` (aware), as an aware UTC datetime.

    Walks day by day and picks the first hour and minute of a matching day, so a year costs at most
    366 day checks. Returns None when nothing is due within `HORIZON_DAYS` (``0 0 30 2 *``).

    Raises:
        ValueError: when `after` is naive.
    """
    start = _utc_minute(after) + _MINUTE
    hours = sorted(schedule.hours)
    minutes = sorted(schedule.minutes)
    day = start.date()
    for _ in range(HORIZON_DAYS + 1):
        if day_matches(schedule, day):
            found = _first_in_day(day, hours, minutes, start)
            if found is not None:
                return found
        day += dt.timedelta(days=1)
    return None


def _first_in_day(
    day: dt.date, hours: list[int], minutes: list[int], start: dt.datetime
) -> dt.datetime | None:
    for hour in hours:
        for minute in minutes:
            moment = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)
            if moment >= start:
                return moment
    return None
