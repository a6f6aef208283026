"""Tests for planner.autoscaler.cron_schedule: robfig/cron v3's parser and Next, as KEDA's cron scaler uses them.

The Next cases are robfig/cron's own (``spec_test.go`` ``TestNext``, seconds first, in America/New_York for
the daylight-saving ones), with v3's expectation where v3 changed one (``*/5`` with a step drops the star, so
day of month and day of week combine as OR).
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from planner.autoscaler.cron_schedule import (
    STAR_BIT,
    CronSyntaxError,
    load_location,
    next_fire_s,
    parse_cron_schedule,
    timezone_problem,
)
from planner.errors import PlannerInputError

NEW_YORK = ZoneInfo("America/New_York")


def _instant(text: str) -> tuple[float, object]:
    """robfig's getTime: a UTC wall time, or an ISO time with offset read in America/New_York."""
    for layout in ("%a %b %d %H:%M %Y", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(text, layout).replace(tzinfo=UTC).timestamp(), UTC
        except ValueError:
            pass
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").timestamp(), NEW_YORK


ROBFIG_NEXT = [
    # Simple cases
    ("Mon Jul 9 14:45 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59:59 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    # Wrap around hours
    ("Mon Jul 9 15:45 2012", "0 20-35/15 * * *", "Mon Jul 9 16:20 2012"),
    # Wrap around days
    ("Mon Jul 9 23:46 2012", "0 */15 * * *", "Tue Jul 10 00:00 2012"),
    ("Mon Jul 9 23:45 2012", "0 20-35/15 * * *", "Tue Jul 10 00:20 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * * *", "Tue Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 * *", "Tue Jul 10 01:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 10-12 * *", "Tue Jul 10 10:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 */2 * *", "Thu Jul 11 01:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 * *", "Wed Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 Jul *", "Wed Jul 10 00:20:15 2012"),
    # Wrap around months
    ("Mon Jul 9 23:35 2012", "0 0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 */5 Apr,Aug,Oct Mon", "Wed Aug 1 00:00 2012"),  # v3: no star after a step
    ("Mon Jul 9 23:35 2012", "0 0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
    # Wrap around years
    ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
    # Wrap around minute, hour, day, month, and year
    ("Mon Dec 31 23:59:45 2012", "0 * * * * *", "Tue Jan 1 00:00:00 2013"),
    # Leap year
    ("Mon Jul 9 23:35 2012", "0 0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
    # Daylight savings time 2am EST (-5) -> 3am EDT (-4)
    ("2012-03-11T00:00:00-0500", "0 30 2 11 Mar ?", "2013-03-11T02:30:00-0400"),
    ("2012-03-11T00:00:00-0500", "0 0 * * * ?", "2012-03-11T01:00:00-0500"),
    ("2012-03-11T01:00:00-0500", "0 0 * * * ?", "2012-03-11T03:00:00-0400"),
    ("2012-03-11T03:00:00-0400", "0 0 * * * ?", "2012-03-11T04:00:00-0400"),
    ("2012-03-11T04:00:00-0400", "0 0 * * * ?", "2012-03-11T05:00:00-0400"),
    ("2012-03-11T00:00:00-0500", "0 0 1 * * ?", "2012-03-11T01:00:00-0500"),
    ("2012-03-11T01:00:00-0500", "0 0 1 * * ?", "2012-03-12T01:00:00-0400"),
    ("2012-03-11T00:00:00-0500", "0 0 2 * * ?", "2012-03-12T02:00:00-0400"),  # skipped
    # Daylight savings time 2am EDT (-4) => 1am EST (-5)
    ("2012-11-04T00:00:00-0400", "0 30 2 04 Nov ?", "2012-11-04T02:30:00-0500"),
    ("2012-11-04T01:45:00-0400", "0 30 1 04 Nov ?", "2012-11-04T01:30:00-0500"),
    ("2012-11-04T00:00:00-0400", "0 0 * * * ?", "2012-11-04T01:00:00-0400"),
    ("2012-11-04T01:00:00-0400", "0 0 * * * ?", "2012-11-04T01:00:00-0500"),
    ("2012-11-04T01:00:00-0500", "0 0 * * * ?", "2012-11-04T02:00:00-0500"),
    ("2012-11-04T00:00:00-0400", "0 0 1 * * ?", "2012-11-04T01:00:00-0400"),  # runs twice
    ("2012-11-04T01:00:00-0400", "0 0 1 * * ?", "2012-11-04T01:00:00-0500"),
    ("2012-11-04T01:00:00-0500", "0 0 1 * * ?", "2012-11-05T01:00:00-0500"),
    ("2012-11-04T00:00:00-0400", "0 0 2 * * ?", "2012-11-04T02:00:00-0500"),
    ("2012-11-04T02:00:00-0500", "0 0 2 * * ?", "2012-11-05T02:00:00-0500"),
    ("2012-11-04T00:00:00-0400", "0 0 3 * * ?", "2012-11-04T03:00:00-0500"),
    ("2012-11-04T03:00:00-0500", "0 0 3 * * ?", "2012-11-05T03:00:00-0500"),
    # Unsatisfiable
    ("Mon Jul 9 23:35 2012", "0 0 0 30 Feb ?", ""),
    ("Mon Jul 9 23:35 2012", "0 0 0 31 Apr ?", ""),
]


@pytest.mark.parametrize(("now", "spec", "expected"), ROBFIG_NEXT)
def test_next_matches_robfig(now, spec, expected):
    now_s, zone = _instant(now)
    got = next_fire_s(parse_cron_schedule(spec, seconds=True), now_s, zone)
    assert got == (None if not expected else _instant(expected)[0])


def test_next_with_fixed_offset_zone():
    # robfig TestNextWithTz: the instant's own zone (+05:30) is the schedule's.
    zone = datetime.strptime("+0530", "%z").tzinfo
    assert zone is not None
    for now in ("2016-01-03T13:09:03+0530", "2016-01-03T04:09:03+0530", "2016-01-03T14:00:00+0530"):
        got = next_fire_s(parse_cron_schedule("0 14 14 * * *", seconds=True), _instant(now)[0], zone)
        assert got == datetime.strptime("2016-01-03T14:14:00+0530", "%Y-%m-%dT%H:%M:%S%z").timestamp()


def test_next_is_strictly_after_now_to_the_second():
    schedule = parse_cron_schedule("0 8 * * *")
    eight = datetime(2024, 1, 1, 8, tzinfo=UTC).timestamp()
    assert next_fire_s(schedule, eight - 0.5, UTC) == eight
    assert next_fire_s(schedule, eight, UTC) == eight + 86400
    assert next_fire_s(schedule, eight + 0.999, UTC) == eight + 86400


def test_five_fields_as_keda_parses_them():
    schedule = parse_cron_schedule("30 8 * * MON-FRI")
    assert schedule.second == 1  # seconds default to 0
    assert schedule.minute == 1 << 30 and schedule.hour == 1 << 8
    assert schedule.dow == sum(1 << day for day in range(1, 6))
    assert schedule.dom & STAR_BIT and schedule.month & STAR_BIT
    assert parse_cron_schedule("0 0 * jan,Dec sun").month == (1 << 1) | (1 << 12)
    assert parse_cron_schedule("0 0 ? * *").dom & STAR_BIT  # ? is a star
    assert parse_cron_schedule("0 */6 * * *").hour == sum(1 << h for h in (0, 6, 12, 18))
    assert parse_cron_schedule("0 5/6 * * *").hour == sum(1 << h for h in (5, 11, 17, 23))  # N/step is N-max/step
    assert parse_cron_schedule("0,,15 * * * *").minute == (1 << 0) | (1 << 15)  # empty list items dropped


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty spec string"),
        ("xyz", "expected exactly 5 fields, found 1: [xyz]"),
        ("0 0 8 * * *", "expected exactly 5 fields, found 6: [0 0 8 * * *]"),
        ("60 0 * * *", "end of range (60) above maximum (59): 60"),
        ("0 24 * * *", "end of range (24) above maximum (23): 24"),
        ("0 0 * * XYZ", "failed to parse int from XYZ"),
        ("0 0 * * 7", "end of range (7) above maximum (6): 7"),  # robfig has no 7 for Sunday
        ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("-30 * * * *", "failed to parse int from "),
        ("50 * * -3 *", "failed to parse int from "),
        ("0 5-2 * * *", "beginning of range (5) beyond end of range (2): 5-2"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("@daily", "parser does not accept descriptors: @daily"),
        ("0 0 L * *", "failed to parse int from L"),
        ("TZ=Mars/Base 0 8 * * *", "provided bad location Mars/Base: unknown time zone Mars/Base"),
    ],
)
def test_refused_as_robfig_refuses(spec, message):
    with pytest.raises(CronSyntaxError) as raised:
        parse_cron_schedule(spec)
    assert str(raised.value).startswith(message)


def test_tz_prefix_overrides_the_zone_asked_in():
    schedule = parse_cron_schedule("CRON_TZ=Asia/Kolkata 0 9 * * *")
    assert schedule.location == "Asia/Kolkata"
    now_s = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    assert next_fire_s(schedule, now_s, UTC) == datetime(2024, 1, 1, 3, 30, tzinfo=UTC).timestamp()


def test_load_location_as_go_does():
    assert load_location("UTC") is UTC and load_location("") is UTC
    assert load_location("Local") is UTC  # KEDA's operator image sets no zone
    assert str(load_location("Europe/Dublin")) == "Europe/Dublin"
    for bad, message in (("Europe/Dublyn", "unknown time zone Europe/Dublyn"), ("../etc", "invalid location name")):
        with pytest.raises(PlannerInputError, match=message):
            load_location(bad)
    assert timezone_problem("europe/dublin") == "unknown time zone europe/dublin"  # names are case-sensitive
    assert timezone_problem("Asia/Kolkata") is None


def _steps_only(t, value, loc, bits, step_s, wrap):
    # robfig's loop over one clock field, one step at a time: what the jump in _step_to_match must equal.
    field = {3600: "hour", 60: "minute", 1: "second"}[step_s]
    while True:
        t += step_s
        lt = datetime.fromtimestamp(t, loc)
        if getattr(lt, field) == 0:
            return t, lt, True
        if (1 << getattr(lt, field)) & bits:
            return t, lt, False


STEPPED_SPECS = [
    "0 30 2 * * *",  # in the hour a spring change skips
    "0 0 1 * * Sun",  # the hour an autumn change repeats
    "0 */7 * * * *",
    "30 59 23 * * *",
    "0 15,45 0-3 * * *",
    "0 0 0 * * *",
    "7 3 9-17/4 * * 1-5",
    "0 0 12 29 Feb *",
]
STEPPED_ZONES = ["UTC", "America/New_York", "Europe/Dublin", "Australia/Lord_Howe", "America/Sao_Paulo", "Asia/Kolkata"]


@pytest.mark.parametrize("zone_name", STEPPED_ZONES)
def test_next_jumps_where_robfig_steps_and_lands_on_the_same_second(zone_name, monkeypatch):
    # Instants around the daylight-saving changes of 2018 and 2024 and at odd seconds of ordinary days.
    import planner.autoscaler.cron_schedule as cron_schedule

    zone = ZoneInfo(zone_name)
    starts = [datetime(2024, m, d, tzinfo=UTC).timestamp() for m, d in ((3, 9), (3, 30), (4, 6), (10, 26), (11, 2))]
    starts += [datetime(2018, 11, 3, tzinfo=UTC).timestamp(), datetime(2024, 2, 28, tzinfo=UTC).timestamp()]
    instants = [s + k * 3271.7 for s in starts for k in range(0, 60)]
    schedules = [parse_cron_schedule(spec, seconds=True) for spec in STEPPED_SPECS]
    jumped = [next_fire_s(schedule, now, zone) for schedule in schedules for now in instants]
    monkeypatch.setattr(cron_schedule, "_step_to_match", _steps_only)
    stepped = [next_fire_s(schedule, now, zone) for schedule in schedules for now in instants]
    assert jumped == stepped
    assert None not in jumped
