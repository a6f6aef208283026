"""Tests for planner.autoscaler.cron_scaler: KEDA's cron scaler, on KEDA's own test cases.

``pkg/scalers/cron_scaler_test.go`` checks activity and value against the machine's clock ("if today is
Thursday ..."); here each of those checks runs at fixed instants across a whole week, with the answer KEDA's
test expects at that instant. The fixed-clock cases (2025-01-23 02:02 UTC, a Thursday) are from the version of
the test with an injected clock.
"""

from __future__ import annotations

import bisect
import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.autoscaler.cron_scaler import (
    OVERLAP_FROM_S,
    CronMetadata,
    CronReading,
    activity_steps,
    build_cron_scaler,
    cron_metric_name,
    cron_problems,
    cron_reading,
    cron_reading_runs,
    first_overlap_s,
    is_active,
)
from planner.errors import PlannerInputError

VALID = CronMetadata(timezone="Etc/UTC", start="0 0 * * Thu", end="59 23 * * Thu", desired_replicas="10")
VALID_EVEN_HOURS = CronMetadata(timezone="Etc/UTC", start="0 */2 * * *", end="0 1-23/2 * * *", desired_replicas="10")
CROSSING_MIDNIGHT = CronMetadata(timezone="Etc/UTC", start="59 23 * * Thu", end="0 1 * * Thu", desired_replicas="10")
KEDA_CLOCK_S = datetime(2025, 1, 23, 2, 2, tzinfo=UTC).timestamp()

# TestCronParseMetadata: (metadata, isError)
PARSE_CASES = [
    (CronMetadata(), True),
    (VALID, False),
    (VALID_EVEN_HOURS, False),
    (CronMetadata(timezone="Asia/Kolkata", start="30 * * * *", end="45 * * * *"), True),
    (CronMetadata(start="30 * * * *", end="45 * * * *", desired_replicas="10"), True),
    (CronMetadata(timezone="Asia/Kolkata", start="30-33 * * * *", end="45 * * * *", desired_replicas="10"), False),
    (CronMetadata(timezone="Asia/Kolkata", start="30 * * * *", end="45-50 * * * *", desired_replicas="10"), False),
    (CronMetadata(timezone="Asia/Kolkata", start="-30 * * * *", end="45 * * * *", desired_replicas="10"), True),
    (CronMetadata(timezone="Asia/Kolkata", start="30 * * * *", end="-50 * * * *", desired_replicas="10"), True),
    (CronMetadata(timezone="Asia/Kolkata", start="30 * * * *", end="50 * * -3 *", desired_replicas="10"), True),
    (CronMetadata(timezone="Asia/Kolkata", start="30 * * * *", end="30 * * * *", desired_replicas="10"), True),
]


@pytest.mark.parametrize(("metadata", "is_error"), PARSE_CASES)
def test_parse_metadata_as_keda(metadata, is_error):
    assert bool(cron_problems(metadata)) == is_error
    if is_error:
        with pytest.raises(PlannerInputError, match=r"^metadata\.(start|end|timezone|desiredReplicas): "):
            build_cron_scaler(metadata)
    else:
        assert build_cron_scaler(metadata).desired_replicas == 10


@pytest.mark.parametrize(
    ("metadata", "index", "name"),
    [(VALID, 0, "s0-cron-Etc-UTC-00xxThu-5923xxThu"), (VALID_EVEN_HOURS, 1, "s1-cron-Etc-UTC-0xSl2xxx-01-23Sl2xxx")],
)
def test_metric_name_as_keda(metadata, index, name):
    # TestCronGetMetricSpecForScaling
    assert cron_metric_name(index, metadata) == name


def _week():
    """Every 20 minutes of the week of 2024-01-01 (a Monday), UTC."""
    monday = datetime(2024, 1, 1, tzinfo=UTC)
    return [monday + timedelta(minutes=20 * k) for k in range(7 * 24 * 3)]


def test_is_active_and_metrics_on_thursday_as_keda():
    # TestIsActive / TestGetMetrics: active, and 10, on Thursday (until the 23:59 end); else inactive and 0.
    scaler = build_cron_scaler(VALID)
    for when in _week():
        thursday = when.weekday() == 3
        expected = CronReading(10.0, True) if thursday else CronReading(0.0, False)
        assert cron_reading(scaler, when.timestamp()) == expected, when


def test_is_active_in_even_hours_as_keda():
    # TestIsActiveRange / TestGetMetricsRange: active, and 10, in even hours; else inactive and 0.
    scaler = build_cron_scaler(VALID_EVEN_HOURS)
    for when in _week():
        expected = CronReading(10.0, True) if when.hour % 2 == 0 else CronReading(0.0, False)
        assert cron_reading(scaler, when.timestamp()) == expected, when


def test_fixed_clock_cases_as_keda():
    assert is_active(build_cron_scaler(VALID), KEDA_CLOCK_S)
    assert not is_active(build_cron_scaler(CROSSING_MIDNIGHT), KEDA_CLOCK_S)
    assert is_active(build_cron_scaler(VALID_EVEN_HOURS), KEDA_CLOCK_S)
    assert cron_reading(build_cron_scaler(VALID), KEDA_CLOCK_S).value == 10.0
    assert cron_reading(build_cron_scaler(VALID_EVEN_HOURS), KEDA_CLOCK_S).value == 10.0


def test_window_is_start_inclusive_end_exclusive_to_the_second():
    scaler = build_cron_scaler(CronMetadata("0 8 * * *", "0 18 * * *", "UTC", "4"))
    eight, six = datetime(2024, 1, 1, 8, tzinfo=UTC).timestamp(), datetime(2024, 1, 1, 18, tzinfo=UTC).timestamp()
    assert [is_active(scaler, t) for t in (eight - 1, eight - 0.001, eight, eight + 0.5)] == [False, False, True, True]
    assert [is_active(scaler, t) for t in (six - 1, six - 0.001, six, six + 1)] == [True, True, False, False]


def test_window_that_wraps_midnight():
    scaler = build_cron_scaler(CronMetadata("0 22 * * *", "0 6 * * *", "UTC", "3"))
    day = datetime(2024, 1, 2, tzinfo=UTC)
    active = {hour: is_active(scaler, (day + timedelta(hours=hour, minutes=30)).timestamp()) for hour in range(24)}
    assert [hour for hour, on in active.items() if on] == [0, 1, 2, 3, 4, 5, 22, 23]


def test_zone_and_daylight_saving():
    # 08:00-18:00 in Dublin is 08:00-18:00 UTC in January (GMT) and 07:00-17:00 UTC in July (IST).
    scaler = build_cron_scaler(CronMetadata("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", "10"))
    for month, opens in ((1, 8), (7, 7)):
        day = datetime(2024, month, 3, tzinfo=UTC)  # a Wednesday both times
        assert not is_active(scaler, (day + timedelta(hours=opens, seconds=-1)).timestamp())
        assert is_active(scaler, (day + timedelta(hours=opens)).timestamp())
        assert is_active(scaler, (day + timedelta(hours=opens + 10, seconds=-1)).timestamp())
        assert not is_active(scaler, (day + timedelta(hours=opens + 10)).timestamp())
    saturday = datetime(2024, 1, 6, 12, tzinfo=UTC).timestamp()
    assert cron_reading(scaler, saturday) == CronReading(0.0, False)


def test_unknown_zone_fails_each_query():
    scaler = build_cron_scaler(CronMetadata("0 8 * * *", "0 18 * * *", "Europe/Dublyn", "4"))  # builds: KEDA too
    reading = cron_reading(scaler, KEDA_CLOCK_S)
    assert reading == CronReading(0.0, False, "unable to load timezone: unknown time zone Europe/Dublyn")


def test_desired_replicas_read_as_keda_reads_an_int64():
    for text, ok in (("10", True), ("-3", True), ("0", False), ("10.0", False), ("+3", False), ("010", False)):
        metadata = CronMetadata("0 8 * * *", "0 18 * * *", "UTC", text)
        assert (not cron_problems(metadata)) == ok, text


def test_first_overlap():
    weekdays = build_cron_scaler(CronMetadata("0 8 * * 1-5", "0 18 * * 1-5", "UTC", "4"))
    lunch = build_cron_scaler(CronMetadata("0 12 * * *", "0 14 * * *", "UTC", "8"))
    night = build_cron_scaler(CronMetadata("0 22 * * *", "0 6 * * *", "UTC", "2"))
    monday = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    year_s = 366 * 86400.0
    assert first_overlap_s(weekdays, lunch, monday, monday + year_s) == monday + 12 * 3600
    assert first_overlap_s(weekdays, night, monday, monday + year_s) is None
    assert first_overlap_s(lunch, night, monday, monday + year_s) is None


def _first_overlap_by_walking(a, b, from_s, to_s, max_steps):
    # The two triggers' steps merged in time order; the first instant at which both are active.
    steps_a, until_a = activity_steps(a, from_s, to_s, max_steps)
    steps_b, until_b = activity_steps(b, from_s, to_s, max_steps)
    until = min(until_a, until_b, to_s)
    i = j = 0
    while i < len(steps_a) and j < len(steps_b):
        t = max(steps_a[i][0], steps_b[j][0])
        if t > until:
            return None
        if steps_a[i][1] and steps_b[j][1]:
            return t
        end_a = steps_a[i + 1][0] if i + 1 < len(steps_a) else float("inf")
        end_b = steps_b[j + 1][0] if j + 1 < len(steps_b) else float("inf")
        if end_a == end_b == float("inf"):
            return None
        if end_a <= end_b:
            i += 1
        if end_b <= end_a:
            j += 1
    return None


WINDOWS = [
    CronMetadata("0 12 * * *", "0 14 * * *", "UTC", "2"),
    CronMetadata("0 14 * * *", "0 18 * * 1-5", "UTC", "3"),  # opens as the one above closes
    CronMetadata("0 8 * * 1-5", "0 12 * * *", "Europe/Dublin", "4"),
    CronMetadata("30 22 * * *", "0 6 * * 0,6", "America/New_York", "5"),  # wraps midnight, closes on weekends
    CronMetadata("*/20 * * * *", "*/45 9-17 * * *", "Australia/Lord_Howe", "6"),  # 30 min daylight saving
    CronMetadata("15 3 1 * *", "0 0 * * 3", "UTC", "7"),
    CronMetadata("59 23 * * 4", "0 1 * * 4", "Europe/Dublin", "8"),
    CronMetadata("0 1 * * 4", "59 23 * * 4", "UTC", "9"),
]
SPANS = [  # (offset from the Monday, span, steps followed)
    (0.0, 30 * 86400.0, 20_000),
    (86400.0 * 3 + 0.5, 9 * 86400.0, 20_000),
    (3600.0 * 13, 600.0, 20_000),
    (0.0, 366 * 86400.0, 3),
    (86400.0 * 40, 60 * 86400.0, 50),
]


@pytest.mark.parametrize(("offset_s", "span_s", "max_steps"), SPANS)
def test_the_first_overlap_is_what_walking_both_triggers_steps_finds(offset_s, span_s, max_steps):
    # first_overlap_s searches joined intervals; walking the merged steps one by one is its specification.
    scalers = [build_cron_scaler(metadata) for metadata in WINDOWS]
    from_s = OVERLAP_FROM_S + offset_s
    found = 0
    for a, b in itertools.product(scalers, repeat=2):
        expected = _first_overlap_by_walking(a, b, from_s, from_s + span_s, max_steps)
        assert first_overlap_s(a, b, from_s, from_s + span_s, max_steps) == expected, (a, b)
        found += expected is not None
    assert 0 < found < len(scalers) ** 2


RUN_CASES = [
    # (start, end, zone, desired), each from a run start with a daylight-saving change or a quirk in it
    (CronMetadata("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", "4"), "2024-03-29T00:00:00"),
    (CronMetadata("30 0 * * *", "30 1 * * *", "Europe/London", "3"), "2024-03-30T12:00:00"),  # end skipped
    (CronMetadata("0 1 * * SUN", "0 2 * * SUN", "America/New_York", "2"), "2024-11-03T00:00:00"),  # 01:00 twice
    (CronMetadata("0 22 * * *", "0 6 * * *", "UTC", "2"), "2024-01-01T00:00:00"),  # wraps midnight
    (CronMetadata("*/7 * * * *", "*/11 * * * *", "Australia/Lord_Howe", "5"), "2024-04-06T14:00:00"),  # 30 min DST
    (CronMetadata("0 0 * * SUN", "0 2 * * SUN", "America/Sao_Paulo", "-2"), "2018-11-03T00:00:00"),  # no midnight
    (CronMetadata("0 8 * * *", "0 18 * * *", "Europe/Dublyn", "4"), "2024-01-01T00:00:00"),  # fails throughout
]


@pytest.mark.parametrize(("metadata", "start"), RUN_CASES)
@pytest.mark.parametrize("tick_s", [60.0, 7.5])
def test_reading_runs_give_the_reading_at_every_tick(metadata, start, tick_s):
    scaler = build_cron_scaler(metadata)
    epoch_s = datetime.fromisoformat(start).replace(tzinfo=UTC).timestamp()
    n_ticks = int(2 * 86400 / tick_s)
    runs = cron_reading_runs(scaler, epoch_s, tick_s, n_ticks)
    firsts = [k for k, _ in runs]
    assert firsts[0] == 0 and firsts == sorted(set(firsts)) and firsts[-1] < n_ticks
    assert all(a[1] != b[1] for a, b in itertools.pairwise(runs))  # runs of equal readings are merged
    # Every tick of a 60 s grid; on the 7.5 s grid, the ticks either side of each change and a stride.
    ticks = set(range(0, n_ticks, 1 if tick_s == 60.0 else 97)) | {k for f in firsts[1:] for k in (f - 1, f)}
    for k in sorted(ticks):
        expected = cron_reading(scaler, epoch_s + k * tick_s)
        assert runs[bisect.bisect_right(firsts, k) - 1][1] == expected, (k, expected)
    if metadata.timezone != "Europe/Dublyn":
        assert len(runs) >= 2  # the window opens or closes within the two days


@settings(max_examples=4)
@given(
    windows=st.lists(
        st.tuples(st.integers(0, 59), st.integers(0, 23), st.integers(0, 6), st.integers(10, 3000), st.booleans()),
        min_size=2,
        max_size=2,
    )
)
def test_the_first_overlap_is_the_first_minute_both_windows_are_open(windows):
    # Firings fall on whole minutes and activity holds from one firing to the next, so scanning the minutes
    # of a week with KEDA's own activity test finds what first_overlap_s finds from the firings alone.
    monday = OVERLAP_FROM_S
    scalers = []
    for minute, hour, day, length, every_day in windows:
        stop = (hour * 60 + minute + length) % 1440
        days, end_days = ("*", "*") if every_day else (str(day), str((day + (hour * 60 + minute + length) // 1440) % 7))
        scalers.append(
            build_cron_scaler(
                CronMetadata(
                    f"{minute} {hour} * * {days}", f"{stop % 60} {stop // 60} * * {end_days}", "Europe/Dublin", "2"
                )
            )
        )
    span_s = 7 * 86400.0
    both = next(
        (monday + m * 60.0 for m in range(10080) if all(is_active(s, monday + m * 60.0) for s in scalers)), None
    )
    assert first_overlap_s(scalers[0], scalers[1], monday, monday + span_s - 60.0) == both
