"""Tests for planner.simulate.promql_functions: Prometheus' arithmetic on cases worked by hand.

``tests/vllm/test_promql_promtool.py`` holds the same functions to promtool 2.42 on generated samples;
these pin the special cases and the places where Prometheus 2 and 3 differ.
"""

from __future__ import annotations

import math

import pytest

from planner.simulate import promql_functions as F


def test_sum_and_avg_are_prometheus_2s_left_to_right_and_incremental():
    # promtool 2.42 prints avg of 1, 2, 4 as 2.333333333333333 (not 7/3 = 2.3333333333333335).
    assert F.go_avg([1.0, 2.0, 4.0]) == 2.333333333333333 != 7 / 3
    assert F.go_sum([0.1, 0.2, 0.3]) == (0.1 + 0.2) + 0.3
    assert F.go_avg([math.inf, 5.0]) == math.inf  # an infinite mean stays, as Prometheus keeps it


def test_kahan_compensation_recovers_what_plain_addition_loses():
    total = c = 0.0
    for value in (1e16, 1.0, -1e16):
        total, c = F.kahan_sum_inc(value, total, c)
    assert total + c == 1.0 and (1e16 + 1.0) - 1e16 == 0.0


def test_rate_extrapolates_to_the_window_edges():
    # Counter +10 every 15 s from t = 15 to 300 s, window (0, 300]: the first sample is 15 s in, one gap
    # (threshold 16.5 s), so the window is extrapolated to 300 s: 190 over 285 s sampled -> 200 / 300 s.
    times = list(range(15_000, 300_001, 15_000))
    values = [10.0 * k for k in range(1, len(times) + 1)]
    assert F.extrapolated_rate(times, values, 0, 300_000, 300.0) == pytest.approx(200 / 300, abs=1e-15)
    assert F.extrapolated_rate(times, values, 0, 300_000, 300.0, is_rate=False) == pytest.approx(200.0)
    assert F.extrapolated_rate(times[:1], values[:1], 0, 300_000, 300.0) is None


def test_the_zero_point_is_checked_before_the_threshold_in_2_and_after_in_3():
    # Samples 90..180 s of a counter that reads 1 at 90 s and grows 4 per 15 s: the zero point is 3.75 s
    # before the first sample; the start is 90 s away (past the 16.5 s threshold).
    times = list(range(90_000, 180_001, 15_000))
    values = [1.0 + 4 * k for k in range(len(times))]
    sampled, increase = 90.0, values[-1] - values[0]
    two = F.extrapolated_rate(times, values, 0, 180_000, 180.0, is_rate=False, major=2)
    three = F.extrapolated_rate(times, values, 0, 180_000, 180.0, is_rate=False, major=3)
    # 2.x: start moves to the zero point (3.75 s < threshold), so extrapolate by 3.75 s;
    # 3.x: past the threshold -> half a gap (7.5 s), then the zero point, 3.75 s, is shorter still: 3.75 s.
    assert two == pytest.approx(increase * (sampled + 3.75) / sampled)
    assert three == pytest.approx(increase * (sampled + 3.75) / sampled)
    # A zero point between half a gap and the threshold: 2.x extrapolates to it, 3.x only half a gap.
    values = [3.0 + 4 * k for k in range(len(times))]  # zero point 11.25 s before the first sample
    increase = values[-1] - values[0]
    two = F.extrapolated_rate(times, values, 0, 180_000, 180.0, is_rate=False, major=2)
    three = F.extrapolated_rate(times, values, 0, 180_000, 180.0, is_rate=False, major=3)
    assert two == pytest.approx(increase * (sampled + 11.25) / sampled)
    assert three == pytest.approx(increase * (sampled + 7.5) / sampled)


def test_linear_regression_and_predict_linear_take_the_intercept_at_the_evaluation_time():
    times = [0, 60_000, 120_000]
    assert F.linear_regression(times, [1.0, 3.0, 5.0], 120_000) == (pytest.approx(2 / 60), pytest.approx(5.0))
    assert F.predict_linear(times, [1.0, 3.0, 5.0], 180_000, 60.0) == pytest.approx(9.0)  # 1 min later + 1 min
    assert F.linear_regression(times, [7.0, 7.0, 7.0], 0) == (0.0, 7.0)  # constant: exactly flat
    assert all(math.isnan(v) for v in F.linear_regression(times, [math.inf] * 3, 0))
    assert F.predict_linear(times[:1], [1.0], 0, 60.0) is None


def test_double_exponential_smoothing_needs_two_points():
    assert F.double_exponential_smoothing([2.0, 4.0, 8.0], 0.5, 0.5) == 7.0
    assert F.double_exponential_smoothing([2.0, 4.0], 0.5, 0.5) == 4.0  # the first step keeps the seed trend
    assert F.double_exponential_smoothing([3.0], 0.5, 0.5) is None


def test_avg_over_time_is_incremental_in_2_and_a_compensated_sum_in_3():
    assert F.avg_over_time([1.0, 2.0, 4.0], major=2) == 2.333333333333333
    assert F.avg_over_time([1.0, 2.0, 4.0], major=3) == 7 / 3


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, [(0.1, 10.0), (0.5, 30.0), (math.inf, 40.0)], 0.3),  # rank 20 in (0.1, 0.5]: 0.1 + 0.4 * 10/20
        (0.2, [(0.1, 10.0), (0.5, 30.0), (math.inf, 40.0)], 0.08),  # in the lowest bucket: from 0
        (0.9, [(0.1, 10.0), (0.5, 30.0), (math.inf, 40.0)], 0.5),  # in +Inf: the highest finite bound
        (0.5, [(math.inf, 40.0), (0.5, 30.0), (0.1, 10.0)], 0.3),  # any order
        (0.5, [(0.1, 10.0), (0.5, 5.0), (1.0, 30.0), (math.inf, 40.0)], 0.75),  # monotonic forced: 0.5 counts 10
        (0.5, [(0.1, 10.0), (0.5, 30.0)], math.nan),  # no +Inf bucket
        (0.5, [(0.1, 0.0), (math.inf, 0.0)], math.nan),  # no observations
        (0.5, [(math.inf, 4.0)], math.nan),  # one bucket
        (-0.1, [(0.1, 10.0), (math.inf, 40.0)], -math.inf),
        (1.1, [(0.1, 10.0), (math.inf, 40.0)], math.inf),
        (math.nan, [(0.1, 10.0), (math.inf, 40.0)], math.nan),
        (0.1, [(-1.0, 10.0), (0.5, 30.0), (math.inf, 40.0)], -1.0),  # lowest bound <= 0: the bound itself
    ],
)
def test_bucket_quantile(q, buckets, expected):
    value = F.bucket_quantile(q, buckets)
    assert (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected)


def test_prometheus_3_snaps_counts_within_a_relative_1e_12_before_interpolating():
    buckets = [(1.0, 1e13), (2.0, 1e13 + 1), (math.inf, 2e13)]
    # Rank 1e13 + 0.5. 2.x: the +1 in (1, 2] is a real observation, half of it below the rank; 3.x treats it
    # as rounding noise, so the rank falls in +Inf and the answer is the highest finite bound.
    assert F.bucket_quantile(0.5 + 0.25e-13, buckets, major=2) == pytest.approx(1.5, abs=1e-2)
    assert F.bucket_quantile(0.5 + 0.25e-13, buckets, major=3) == 2.0


@pytest.mark.parametrize(
    ("args", "major", "steps"),
    [
        ((120_000, 120_000, 60_000, 0), 2, [0, 60_000, 120_000]),  # closed: the step at t - range is in
        ((120_000, 120_000, 60_000, 0), 3, [60_000, 120_000]),  # left-open: it is not
        ((125_000, 120_000, 60_000, 0), 2, [60_000, 120_000]),  # aligned to multiples of the step
        ((125_000, 60_000, 60_000, 30_000), 3, [60_000]),  # offset moves the window back
        ((30_000, 120_000, 60_000, 0), 2, [-60_000, 0]),  # before t = 0, Go's truncating division
    ],
)
def test_subquery_steps(args, major, steps):
    assert list(F.subquery_steps_ms(*args, major=major)) == steps
