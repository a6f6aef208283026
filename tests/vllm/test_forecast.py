"""Tests for planner.vllm.forecast: the forecast queries, and their values on fixtures with known answers."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.simulate.metrics import COLUMNS, MetricStore, parse_query
from planner.vllm import forecast as forecast_module
from planner.vllm.forecast import FORECAST_METHODS, Forecast, forecast_query, promql_duration, signal_query

MATCH = '{namespace="llm",model_name="chat"}'


def _store(running, waiting=None, completed=None, step_s: float = 15.0, pods=(0,)) -> MetricStore:
    """One scrape every ``step_s`` from t = 0; each pod gets the same columns (a fleet of identical pods)."""
    store = MetricStore()
    n = len(running)
    waiting = np.zeros(n) if waiting is None else np.asarray(waiting, dtype=float)
    completed = np.zeros(n) if completed is None else np.asarray(completed, dtype=float)
    for k in range(n):
        rows = np.zeros((len(pods), len(COLUMNS)))
        rows[:, COLUMNS.index("num_requests_running")] = running[k]
        rows[:, COLUMNS.index("num_requests_waiting")] = waiting[k]
        rows[:, COLUMNS.index("request_success_total")] = completed[k]
        store.record(step_s * k, list(pods), rows, list(pods))
    return store


def _value(text: str, store: MetricStore, t_s: float, major: int = 3) -> float:
    value, error = parse_query(text).scalar(store, t_s, prometheus_major=major)
    assert error is None and value is not None, text
    return value


def test_the_docstring_examples_hold():
    assert doctest.testmod(forecast_module).failed == 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(86_400, "1d"), (86_100, "23h55m"), (604_800 - 240, "6d23h56m"), (300, "5m"), (0.25, "250ms"), (3661, "1h1m1s")],
)
def test_durations_are_written_largest_unit_first(seconds, text):
    assert promql_duration(seconds) == text
    assert parse_query(f"sum(vllm:num_requests_running offset {text})").history_s == pytest.approx(seconds + 300)


def test_a_lead_folds_into_a_positive_offset():
    query = forecast_query(Forecast("seasonal_naive", period_s=604_800, lead_s=240), "in_flight", MATCH)
    assert query == (
        f"(sum(vllm:num_requests_running{MATCH} offset 6d23h56m) + "
        f"sum(vllm:num_requests_waiting{MATCH} offset 6d23h56m)) or vector(0)"
    )
    rate = forecast_query(Forecast("seasonal_naive", lead_s=600), "request_rate", MATCH, rate_window_s=120)
    assert rate == f"(sum(rate(vllm:request_success_total{MATCH}[2m] offset 23h50m))) or vector(0)"


def test_each_method_writes_its_function_and_prometheus_2_says_holt_winters():
    texts = {
        method: forecast_query(Forecast(method, ahead_s=240, window_s=900, step_s=30), "request_rate", MATCH)
        for method in FORECAST_METHODS
    }
    base = signal_query("request_rate", MATCH)
    assert texts["predict_linear"] == f"predict_linear(({base})[15m:30s], 240) or vector(0)"
    assert texts["max_over_time"] == f"max_over_time(({base})[15m:30s]) or vector(0)"
    assert (
        texts["double_exponential_smoothing"]
        == f"double_exponential_smoothing(({base})[15m:30s], 0.3, 0.3) or vector(0)"
    )
    two = forecast_query(Forecast("double_exponential_smoothing"), "in_flight", prometheus_major=2)
    assert two.startswith("holt_winters((sum(vllm:num_requests_running)")
    for text in [*texts.values(), two]:
        parse_query(text)  # the simulator reads what the planner writes


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"method": "arima"}, "method"),
        ({"method": "seasonal_naive", "lead_s": 86_400}, "lead_s"),
        ({"method": "seasonal_naive", "lead_s": -1}, "lead_s"),
        ({"method": "predict_linear", "window_s": 0}, "window_s"),
        ({"method": "max_over_time", "step_s": 3600, "window_s": 600}, "step_s"),
        ({"method": "double_exponential_smoothing", "smoothing_frac": 1.0}, "smoothing_frac"),
        ({"method": "double_exponential_smoothing", "trend_frac": 0.0}, "trend_frac"),
        ({"method": "predict_linear", "window_s": 0.0001, "step_s": 0.0001}, "milliseconds"),
    ],
)
def test_bad_parameters_are_refused_by_name(fields, named):
    with pytest.raises(PlannerInputError, match=named):
        Forecast(**fields)


def test_an_unknown_signal_or_major_is_refused():
    with pytest.raises(PlannerInputError, match="signal"):
        forecast_query(Forecast("max_over_time"), "kv")
    with pytest.raises(PlannerInputError, match="prometheus_major"):
        forecast_query(Forecast("max_over_time"), prometheus_major=4)


# ---- known answers ----------------------------------------------------------------------------------


def test_seasonal_naive_reads_yesterday_lead_seconds_ahead():
    # In flight = the scrape's index, so a value names its own time: at t it is t / 15.
    n = (86_400 + 3600) // 15 + 1
    store = _store(np.arange(n, dtype=float), np.ones(n), pods=(0, 1))
    t_s = 86_400 + 1800.0
    query = forecast_query(Forecast("seasonal_naive", lead_s=300), "in_flight")
    # offset 23h55m reads t - 86100 s = 2100 s: running 140 and waiting 1 on each of the two pods.
    assert _value(query, store, t_s) == 2 * (2100 / 15 + 1) == _value(query, store, t_s, major=2)
    # Before a day has passed there is nothing to read: vector(0), and the reactive trigger decides.
    assert _value(query, store, 3600.0) == 0.0


def test_predict_linear_extrapolates_a_straight_ramp_exactly():
    # In flight grows by 2 per minute: 30 minutes of points give the line itself, read 5 minutes ahead.
    n = 3600 // 15 + 1
    store = _store(2 * np.arange(n) / 4)  # 0.5 per 15 s = 2 per minute
    query = forecast_query(Forecast("predict_linear", window_s=1800, step_s=60, ahead_s=300), "in_flight")
    t_s = 3000.0
    assert _value(query, store, t_s) == pytest.approx(2 * (t_s + 300) / 60, abs=1e-9)
    assert _value(query, store, t_s, major=2) == pytest.approx(2 * (t_s + 300) / 60, abs=1e-9)


def test_max_over_time_holds_the_window_peak_and_3_drops_the_boundary_point_2_keeps():
    n = 3600 // 15 + 1
    running = np.full(n, 5.0)
    running[60] = 50.0  # a peak at t = 900 s
    store = _store(running)
    query = forecast_query(Forecast("max_over_time", window_s=1800, step_s=60), "in_flight")
    assert _value(query, store, 2640.0) == 50.0  # steps 900..2640 s: the peak's minute is inside
    # At 2700 s the window starts exactly at the peak's step: Prometheus 2 keeps it, 3 does not.
    assert _value(query, store, 2700.0, major=2) == 50.0
    assert _value(query, store, 2700.0) == 5.0


def test_holt_winters_smooths_as_worked_by_hand():
    # Three points 2, 4, 8 (a minute apart) with factors 0.5, 0.5: level 2 trend 2; then 4; then 0.5*8 +
    # 0.5*(4 + (0.5*(4-2) + 0.5*2)) = 7.
    store = _store(np.repeat([2.0, 4.0, 8.0], 4)[:9], step_s=15.0)
    query = "double_exponential_smoothing((sum(vllm:num_requests_running))[2m30s:1m], 0.5, 0.5)"
    assert _value(query, store, 120.0) == 7.0
    # Over [2m:1m] Prometheus 2 keeps the step at t = 0 (closed); 3 drops it and smooths 4, 8 alone: 8.
    two_minutes = query.replace("2m30s", "2m").replace("double_exponential_smoothing", "holt_winters")
    assert _value(two_minutes, store, 120.0, major=2) == 7.0
    assert _value(two_minutes, store, 120.0) == 8.0


def test_request_rate_forecasts_read_completions_per_second():
    # 3 completions every 15 s: 0.2 per second, flat, so every method forecasts 0.2 once it has history.
    n = 7200 // 15 + 1
    store = _store(np.zeros(n), completed=3.0 * np.arange(n))
    for method in FORECAST_METHODS[1:]:
        query = forecast_query(Forecast(method, ahead_s=600), "request_rate")
        assert _value(query, store, 7200.0) == pytest.approx(0.2, abs=1e-12), method
