"""Tests for planner.workflows.forecast_comparison: strategies replayed alike, priced at the attainment goal."""

from __future__ import annotations

import dataclasses

import pytest

from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan
from planner.simulate import fast
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.sweep import SweepResult
from planner.vllm.forecast import FORECAST_METHODS, Forecast
from planner.workflows.forecast_comparison import (
    REACTIVE,
    _generated,
    compare_forecasts,
    default_forecasts,
    gpu_hours_at_attainment,
)
from tests.simulate_helpers import poisson_trace

PERIOD_S = 7200.0  # a two-hour "day", so two periods replay in seconds
FLEET = FleetSpec(replica=ReplicaSpec(max_num_seqs=16, fixed_ms=20.0, per_sequence_ms=1.0), warmup_s=300.0, tick_s=5.0)
PLAN = ScalingPlan(
    target_name="chat", concurrency_target=8, warmup_s=300, max_output_tokens=1024, itl_ms=50, max_replicas=20
)
SEASONAL = Forecast("seasonal_naive", period_s=PERIOD_S, lead_s=300)


def _rate(t_s: float) -> float:
    # Each period: quiet, a 15-minute climb to 4 req/s at 50 min, 20 minutes there, quiet again.
    m = t_s % PERIOD_S
    if 3000 <= m < 3900:
        return 0.3 + 3.7 * (m - 3000) / 900
    return 4.0 if 3900 <= m < 5100 else 0.3


@pytest.fixture(scope="module")
def trace():
    return poisson_trace(_rate, 2 * PERIOD_S, 200, 150, seed=3, tick_s=5.0)


def _run(index: int, attainment: float, gpu_hours: float) -> SweepResult:
    return SweepResult(index, (("target", index),), attainment, 4 * gpu_hours, gpu_hours, 0, 0, 1, 0, 0)


def test_gpu_hours_are_read_off_the_curve_between_the_runs_bracketing_the_goal():
    runs = [_run(0, 0.999, 30.0), _run(1, 0.98, 20.0), _run(2, 0.90, 12.0), _run(3, 0.70, 10.0)]
    value, bracket, note = gpu_hours_at_attainment(runs, 0.96)
    # Between 0.90 (12 h) and 0.98 (20 h): three quarters of the way, 18 h.
    assert value == pytest.approx(18.0) and bracket == (12.0, 20.0) and note == ""
    assert gpu_hours_at_attainment(runs, 0.98)[0] == pytest.approx(20.0)
    assert gpu_hours_at_attainment(runs, 1.0) == (
        None,
        None,
        "no target reaches the goal (99.90 % at most): add a lower target fraction",
    )
    assert gpu_hours_at_attainment(runs, 0.5)[2].startswith("every target meets the goal")


def test_one_default_forecast_per_method_leading_by_the_warmup():
    forecasts = default_forecasts(240.0)
    assert sorted(forecasts) == sorted(FORECAST_METHODS)
    assert forecasts["seasonal_naive"].lead_s == 240.0 and forecasts["predict_linear"].ahead_s == 240.0


def test_the_seasonal_trigger_scales_ahead_of_the_second_climb_only(trace):
    # Known answer: over the first period it has nothing to read and the fleet is the reactive one's; in the
    # second it reads the first period one lead ahead, so it adds the first replica exactly a period less a
    # lead after reactive scaling did in the first period (the same in-flight reading, on the same 15 s sync).
    reactive = fast.simulate(trace, _generated(PLAN), FLEET)
    seasonal = fast.simulate(trace, _generated(dataclasses.replace(PLAN, forecast=SEASONAL)), FLEET)
    first = reactive.timeseries["t_s"] <= PERIOD_S
    assert (
        reactive.timeseries["replicas_requested"][first].tolist()
        == seasonal.timeseries["replicas_requested"][first].tolist()
    )

    def first_up(outcome, after_s: float):
        return next((t, a, b) for t, a, b in outcome.events if b > a and t > after_s)

    t_s, _, _ = first_up(reactive, 0.0)
    assert first_up(seasonal, PERIOD_S) == (t_s + PERIOD_S - SEASONAL.lead_s, 1, 2)
    assert first_up(seasonal, PERIOD_S)[0] < first_up(reactive, PERIOD_S)[0]


def test_every_strategy_is_priced_at_the_goal_from_its_own_runs(trace):
    comparison = compare_forecasts(
        trace,
        PLAN,
        FLEET,
        0.97,
        forecasts={"seasonal_naive": SEASONAL},
        target_fracs=(0.5, 1.0, 1.75),
        extra={"floor_of_three": lambda plan: _generated(dataclasses.replace(plan, min_replicas=3))},
    )
    names = [strategy.name for strategy in comparison.strategies]
    assert names == [REACTIVE, "seasonal_naive", "floor_of_three"]
    for strategy in comparison.strategies:
        assert [dict(run.values)["target"] for run in strategy.runs] == [4.0, 8.0, 14.0]
        value, bracket, note = gpu_hours_at_attainment(strategy.runs, 0.97)
        assert (strategy.gpu_hours_at_goal, strategy.bracket_gpu_hours, strategy.note) == (value, bracket, note)
        if strategy.name != "floor_of_three":  # three replicas always meet the goal here
            assert value is not None and min(bracket) <= value <= max(bracket)
    assert comparison.strategy("floor_of_three").note.startswith("every target meets the goal")
    # Each run is what the engine gives that autoscaler alone.
    seasonal = comparison.strategy("seasonal_naive")
    alone = fast.simulate(
        trace, _generated(dataclasses.replace(PLAN, concurrency_target=14.0, forecast=SEASONAL)), FLEET
    )
    assert seasonal.runs[-1].gpu_hours == alone.gpu_hours
    assert seasonal.runs[-1].slo_attainment_frac == alone.slo_attainment_frac
    # At the loosest target the seasonal trigger's head start buys attainment the reactive one misses.
    assert seasonal.runs[-1].slo_attainment_frac > comparison.strategy(REACTIVE).runs[-1].slo_attainment_frac
    assert "offset 1h55m" in seasonal.query
    summary = comparison.as_dict()
    reactive = summary["strategies"][0]["gpu_hours_at_goal"]
    saving = summary["strategies"][1]["saving_vs_reactive_frac"]
    assert saving == pytest.approx(1 - comparison.strategies[1].gpu_hours_at_goal / reactive)


def test_a_seasonal_forecast_shorter_than_its_replay_says_so(trace):
    comparison = compare_forecasts(
        trace, PLAN, FLEET, 0.97, forecasts={"seasonal_naive": Forecast("seasonal_naive")}, target_fracs=(1.0,)
    )
    assert "nothing to read" in comparison.strategy("seasonal_naive").note
    assert comparison.strategy("seasonal_naive").runs[0].gpu_hours == comparison.strategy(REACTIVE).runs[0].gpu_hours


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_fracs": (0.5, 0.0)}, "target fractions"),
        ({"target_fracs": ()}, "target fractions"),
        ({"forecasts": {"x": "max_over_time"}}, "expected a Forecast"),
        ({"extra": {REACTIVE: _generated}}, "named twice"),
    ],
)
def test_bad_arguments_are_refused_by_name(trace, kwargs, message):
    with pytest.raises(PlannerInputError, match=message):
        compare_forecasts(trace, PLAN, FLEET, 0.97, **kwargs)
    with pytest.raises(PlannerInputError, match="attainment goal"):
        compare_forecasts(trace, PLAN, FLEET, 1.5)
