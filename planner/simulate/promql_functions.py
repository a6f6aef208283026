"""The ``promql_functions`` module is PromQL's arithmetic, ported from Prometheus' Go source.

Each function computes what its Go twin computes, in the same floating-point
operations in the same order, so the results are equal bit for bit (Python
floats and Go's ``float64`` are both IEEE 754 doubles; neither fuses a multiply
and an add on the machines the planner runs on). Times are integer
milliseconds, as Prometheus keeps them; values are floats.

Sources, ``prometheus/prometheus``:

* ``promql/functions.go``: ``extrapolatedRate`` (``rate``/``increase``),
  ``linearRegression`` and ``funcPredictLinear``, ``funcHoltWinters`` (2.x;
  ``funcDoubleExponentialSmoothing`` in 3.x, the same arithmetic),
  ``kahanSumInc``, ``funcMaxOverTime``, ``funcAvgOverTime``;
* ``promql/engine.go``: the ``sum`` and ``avg`` aggregations, and the
  ``SubqueryExpr`` case of ``eval`` (which step timestamps a subquery holds);
* ``promql/quantile.go``: ``bucketQuantile``, ``coalesceBuckets``,
  ``ensureMonotonic`` and (3.x) ``correctPrecisionErrors``.

Where the two majors differ, ``major`` selects: 2 is the arithmetic of
Prometheus 2.42 (Debian 12's ``prometheus`` package, whose ``promtool`` the tests
hold these to), 3 that of Prometheus 3. Their differences that reach a value:

* selection: 2.x ranges and subqueries are closed, ``[t - range, t]``; 3.x
  left-open, ``(t - range, t]`` (a sample exactly ``range`` old is in 2.x's
  window and not in 3.x's) - :func:`subquery_steps_ms` and the store's windows;
* ``rate``: 2.x moves the start to the counter's zero point before checking
  the extrapolation threshold, 3.x after (:func:`extrapolated_rate`);
* ``sum``/``avg``: 2.42 adds left to right and averages incrementally
  (``mean += v/n - mean/n``); 3.x compensates the sums (Kahan-Neumaier) and
  divides once (the simulator's own aggregation, see
  :mod:`planner.simulate.metrics`, rounds as the interpreter's ``sum`` does);
* ``histogram_quantile``: 3.x first snaps bucket counts within a relative
  1e-12 of the one below to it (``correctPrecisionErrors``);
* the function's name: ``holt_winters`` in 2.x, ``double_exponential_smoothing``
  in 3.x (where it needs ``--enable-feature=promql-experimental-functions``).

Nothing here reads a clock or a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "avg_over_time",
    "bucket_quantile",
    "double_exponential_smoothing",
    "extrapolated_rate",
    "go_avg",
    "go_sum",
    "kahan_sum_inc",
    "linear_regression",
    "predict_linear",
    "subquery_steps_ms",
]


def kahan_sum_inc(inc: float, total: float, c: float) -> tuple[float, float]:
    """One step of Prometheus' ``kahanSumInc`` (Kahan-Neumaier): ``(new total, new compensation)``."""
    t = total + inc
    if math.isinf(t):
        c = 0.0
    elif abs(total) >= abs(inc):
        c += (total - t) + inc
    else:
        c += (inc - t) + total
    return t, c


def extrapolated_rate(
    times_ms: Sequence[int],
    values: Sequence[float],
    range_start_ms: int,
    range_end_ms: int,
    range_s: float,
    *,
    is_counter: bool = True,
    is_rate: bool = True,
    major: int = 2,
) -> float | None:
    """``rate`` (``is_rate``) or ``increase`` of one series, as ``extrapolatedRate`` computes it.

    Parameters
    ----------
    times_ms, values : sequence
        The series' samples in the range, oldest first. [ms], [counter units]
    range_start_ms, range_end_ms : int
        ``eval time - range - offset`` and ``eval time - offset``. [ms]
    range_s : float
        The selector's range (``ms.Range.Seconds()``). [s]
    is_counter, is_rate : bool
        Counter resets and the zero point apply; divide by the range.
    major : int
        2 or 3 (where they differ: the module docstring).

    Returns
    -------
    float or None
        ``None`` for fewer than two samples (Prometheus drops the series).
    """
    n = len(values)
    if n < 2:
        return None
    result = values[-1] - values[0]
    if is_counter:
        previous = values[0]
        for value in values[1:]:
            if value < previous:
                result += previous
            previous = value
    duration_to_start_s = float(times_ms[0] - range_start_ms) / 1000
    duration_to_end_s = float(range_end_ms - times_ms[-1]) / 1000
    sampled_s = float(times_ms[-1] - times_ms[0]) / 1000
    average_gap_s = sampled_s / float(n - 1)
    threshold_s = average_gap_s * 1.1
    if major == 2:
        if is_counter and result > 0 and values[0] >= 0:
            to_zero_s = sampled_s * (values[0] / result)
            if to_zero_s < duration_to_start_s:
                duration_to_start_s = to_zero_s
        extrapolate_to_s = sampled_s
        extrapolate_to_s += duration_to_start_s if duration_to_start_s < threshold_s else average_gap_s / 2
        extrapolate_to_s += duration_to_end_s if duration_to_end_s < threshold_s else average_gap_s / 2
        factor = extrapolate_to_s / sampled_s
    else:
        if duration_to_start_s >= threshold_s:
            duration_to_start_s = average_gap_s / 2
        if is_counter:
            to_zero_s = duration_to_start_s
            if result > 0 and values[0] >= 0:
                to_zero_s = sampled_s * (values[0] / result)
            if to_zero_s < duration_to_start_s:
                duration_to_start_s = to_zero_s
        if duration_to_end_s >= threshold_s:
            duration_to_end_s = average_gap_s / 2
        factor = (sampled_s + duration_to_start_s + duration_to_end_s) / sampled_s
    if is_rate:
        factor /= range_s
    return result * factor


def linear_regression(times_ms: Sequence[int], values: Sequence[float], intercept_ms: int) -> tuple[float, float]:
    """Least-squares ``(slope, intercept)`` with x in seconds from ``intercept_ms``, as ``linearRegression``.

    The four sums are Kahan-Neumaier compensated; a series whose values are
    all equal has slope 0 and intercept that value (NaN for an infinite one).
    Units: slope [value/s], intercept [value].
    """
    n = 0.0
    sum_x = c_x = sum_y = c_y = sum_xy = c_xy = sum_x2 = c_x2 = 0.0
    init_y = values[0]
    const_y = True
    for i, (t_ms, y) in enumerate(zip(times_ms, values, strict=True)):
        if const_y and i > 0 and y != init_y:
            const_y = False
        n += 1.0
        x = float(t_ms - intercept_ms) / 1e3
        sum_x, c_x = kahan_sum_inc(x, sum_x, c_x)
        sum_y, c_y = kahan_sum_inc(y, sum_y, c_y)
        sum_xy, c_xy = kahan_sum_inc(x * y, sum_xy, c_xy)
        sum_x2, c_x2 = kahan_sum_inc(x * x, sum_x2, c_x2)
    if const_y:
        if math.isinf(init_y):
            return math.nan, math.nan
        return 0.0, init_y
    sum_x += c_x
    sum_y += c_y
    sum_xy += c_xy
    sum_x2 += c_x2
    cov_xy = sum_xy - sum_x * sum_y / n
    var_x = sum_x2 - sum_x * sum_x / n
    slope = cov_xy / var_x
    intercept = sum_y / n - slope * sum_x / n
    return slope, intercept


def predict_linear(times_ms: Sequence[int], values: Sequence[float], eval_ms: int, ahead_s: float) -> float | None:
    """``predict_linear(v[range], ahead_s)`` of one series at ``eval_ms``, as ``funcPredictLinear``.

    The regression's intercept is taken at the evaluation time itself, also
    when the range selector carries an ``offset``: ``predict_linear(x[1h]
    offset 1d, 600)`` extrapolates the line a day and ten minutes past its
    samples. ``None`` for fewer than two samples.
    """
    if len(values) < 2:
        return None
    slope, intercept = linear_regression(times_ms, values, eval_ms)
    return slope * ahead_s + intercept


def double_exponential_smoothing(values: Sequence[float], smoothing: float, trend: float) -> float | None:
    """``holt_winters``/``double_exponential_smoothing(v[range], sf, tf)`` of one series.

    The level after Holt's linear smoothing of the samples in order: the
    level starts at the first value and the trend at the first difference.
    It smooths; it does not look ahead. ``None`` for fewer than two samples.
    ``smoothing`` and ``trend`` are the factors sf and tf, each in (0, 1)
    (Prometheus refuses others; :func:`planner.simulate.metrics.parse_query` does too).
    """
    n = len(values)
    if n < 2:
        return None
    s0 = 0.0
    s1 = values[0]
    b = values[1] - values[0]
    for i in range(1, n):
        x = smoothing * values[i]
        # calcTrendValue(i - 1, ...): the first step keeps the seed trend.
        if i - 1 != 0:
            b = trend * (s1 - s0) + (1 - trend) * b
        y = (1 - smoothing) * (s1 + b)
        s0, s1 = s1, x + y
    return s1


def avg_over_time(values: Sequence[float], *, major: int = 2) -> float:
    """``avg_over_time`` of one series' samples (at least one).

    2.42: an incremental mean, ``mean += v/n - mean/n``, Kahan-compensated;
    3.x: the compensated sum divided once (incremental only past an overflow).
    """
    if major == 2:
        mean = c = count = 0.0
        for value in values:
            count += 1
            mean, c = kahan_sum_inc(value / count - mean / count, mean, c)
        return mean if math.isinf(mean) else mean + c
    total, c, count = values[0], 0.0, 1.0
    mean = 0.0
    incremental = False
    for i, value in enumerate(values[1:]):
        count = float(i + 2)
        if not incremental:
            new_total, new_c = kahan_sum_inc(value, total, c)
            if not math.isinf(new_total):
                total, c = new_total, new_c
                continue
            incremental = True
            mean = total / (count - 1)
            c /= count - 1
        q = (count - 1) / count
        mean, c = kahan_sum_inc(value / count, q * mean, q * c)
    if incremental:
        return mean + c
    return total / count + c / count


def go_sum(values: Sequence[float]) -> float:
    """The ``sum`` aggregation of Prometheus 2.42 over one group, in the series' order: left to right."""
    total = values[0]
    for value in values[1:]:
        total += value
    return total


def go_avg(values: Sequence[float]) -> float:
    """The ``avg`` aggregation of Prometheus 2.42 over one group: the incremental mean ``mean += v/n - mean/n``."""
    mean = values[0]
    count = 1.0
    for value in values[1:]:
        count += 1
        if math.isinf(mean):
            if math.isinf(value) and (mean > 0) == (value > 0):
                continue  # the mean stays that infinity
            if not math.isinf(value) and not math.isnan(value):
                continue
        mean += value / count - mean / count
    return mean


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]], *, major: int = 2) -> float:
    """``histogram_quantile(q, ...)`` of one classic histogram, as ``bucketQuantile``.

    Parameters
    ----------
    q : float
        The quantile, 0-1 (NaN -> NaN, below 0 -> -Inf, above 1 -> +Inf).
    buckets : sequence of (upper bound, cumulative count)
        The ``le`` buckets of one series group, in any order.
    major : int
        2 or 3 (3.x first corrects precision errors, see the module docstring).

    Returns
    -------
    float
        Interpolated linearly inside the bucket the rank falls in (from 0 in
        the lowest bucket when its bound is positive); the second-highest
        bound when it falls in the ``+Inf`` bucket; NaN without a ``+Inf``
        bucket, with fewer than two buckets, or without observations.
    """
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = [[upper, count] for upper, count in sorted(buckets, key=lambda b: b[0])]
    if not ordered or not math.isinf(ordered[-1][0]) or ordered[-1][0] < 0:
        return math.nan
    coalesced = [ordered[0]]
    for upper, count in ordered[1:]:
        if upper == coalesced[-1][0]:
            coalesced[-1][1] += count
        else:
            coalesced.append([upper, count])
    if major != 2:
        previous = coalesced[0][1]
        for bucket in coalesced[1:]:
            delta = abs(bucket[1] - previous)
            if delta == 0:
                continue
            if delta / bucket[1] <= 1e-12:
                bucket[1] = previous
            else:
                previous = bucket[1]
    highest = coalesced[0][1]
    for bucket in coalesced[1:]:
        if bucket[1] > highest:
            highest = bucket[1]
        elif bucket[1] < highest:
            bucket[1] = highest
    if len(coalesced) < 2:
        return math.nan
    observations = coalesced[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    # sort.Search over all but the +Inf bucket: the first whose count reaches the rank.
    b = next((i for i in range(len(coalesced) - 1) if coalesced[i][1] >= rank), len(coalesced) - 1)
    if b == len(coalesced) - 1:
        return coalesced[-2][0]
    if b == 0 and coalesced[0][0] <= 0:
        return coalesced[0][0]
    bucket_start = 0.0
    bucket_end = coalesced[b][0]
    count = coalesced[b][1]
    if b > 0:
        bucket_start = coalesced[b - 1][0]
        count -= coalesced[b - 1][1]
        rank -= coalesced[b - 1][1]
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


def subquery_steps_ms(eval_ms: int, range_ms: int, step_ms: int, offset_ms: int = 0, *, major: int = 2) -> range:
    """The step timestamps a subquery ``expr[range:step] offset d`` evaluated at ``eval_ms`` holds. [ms]

    Steps are multiples of ``step_ms`` (aligned to the epoch, not to the
    evaluation time) from the first one at or after (2.x; after, 3.x)
    ``eval_ms - offset_ms - range_ms`` up to ``eval_ms - offset_ms``.
    """
    if step_ms <= 0:
        raise ValueError("a subquery step must be positive")
    lower = eval_ms - offset_ms - range_ms
    # Go's integer division truncates toward zero.
    quotient = abs(lower) // step_ms * (1 if lower >= 0 else -1)
    start = step_ms * quotient
    if start < lower or (major != 2 and start == lower):
        start += step_ms
    return range(start, eval_ms - offset_ms + 1, step_ms)
