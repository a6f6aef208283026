"""Tests for planner.workflows.flapping: pinned fleets, the trigger's recommendation curve and its fixed points."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.errors import PlannerInputError
from planner.readers.fleet import read_fleet
from planner.readers.manifest import load_autoscaler
from planner.readers.trace import read_trace
from planner.simulate import simulate
from planner.workflows.flapping import (
    fixed_points,
    full_batch_kv_usage_frac,
    highest_scaling_kv_threshold_frac,
    mean_tokens_held,
    pinned,
    recommendation_curve,
    same_tokens_kv_threshold_frac,
    trigger_threshold,
    with_threshold,
)
from planner.workflows.lab import fleet_with
from tests.conftest import DATA_DIR

MANIFESTS = DATA_DIR / "manifests"
KV_AVG = MANIFESTS / "lab" / "flapping-kv-avg.yaml"


@pytest.fixture(scope="module")
def rig():
    return read_trace(DATA_DIR / "traces" / "steady-0.6rps-12min.csv"), read_fleet(
        DATA_DIR / "fleets" / "seed003-rig.yaml"
    )


def test_pinned_fixes_both_bounds_and_the_fleet_never_moves(rig):
    trace, fleet = rig
    autoscaler = pinned(load_autoscaler(MANIFESTS / "flapping-waiting.yaml"), 2)
    assert (autoscaler.hpa.min_replicas, autoscaler.hpa.max_replicas) == (2, 2)
    assert (autoscaler.scaled_object.min_replica_count, autoscaler.scaled_object.max_replica_count) == (2, 2)
    run = simulate(trace, autoscaler, fleet, duration_s=300.0)
    assert run.scale_events == 0 and (run.timeseries["replicas_requested"] == 2).all()


def test_waiting_and_averaged_kv_have_no_fixed_point_and_the_kv_sum_has_one(rig):
    trace, fleet = rig
    paths = {
        "waiting": MANIFESTS / "flapping-waiting.yaml",
        "kv-sum": MANIFESTS / "flapping-kv-sum.yaml",
        "kv-avg": KV_AVG,
    }
    curves = {
        name: recommendation_curve(trace, load_autoscaler(path), fleet, [1, 2, 3], from_s=240.0, to_s=720.0)
        for name, path in paths.items()
    }
    waiting, kv_sum, kv_avg = curves["waiting"], curves["kv-sum"], curves["kv-avg"]
    # One replica cannot drain 0.6 req/s, so the queue grows and asks for the maximum; two empty it.
    assert waiting.desired_replicas.tolist() == [3, 1, 1]
    assert waiting.query_value.iloc[1:].tolist() == [0.0, 0.0]
    # The summed KV cache is the work in flight, nearly the same at every size: it asks for 2 everywhere.
    assert kv_sum.desired_replicas.tolist() == [2, 2, 2]
    assert kv_sum.query_value.max() / kv_sum.query_value.min() < 1.1
    # Averaging divides that total by the replicas: 2 asks for 1.
    assert kv_avg.desired_replicas.tolist() == [2, 1, 1]
    assert kv_avg.query_value.iloc[1] == pytest.approx(kv_sum.query_value.iloc[1] / 2)
    assert fixed_points(waiting) == [] and fixed_points(kv_avg) == [] and fixed_points(kv_sum) == [2]


def test_fixed_points_are_the_sizes_that_ask_for_themselves():
    curve = pd.DataFrame({"replicas": [1, 2, 3, 4], "desired_replicas": [3, 2, 3, 4]})
    assert fixed_points(curve) == [2, 3, 4]


def test_recommendation_curve_refuses_what_it_cannot_read(rig):
    trace, fleet = rig
    gpu_hpa = load_autoscaler(MANIFESTS / "lab" / "growth-gpu-util.yaml")
    with pytest.raises(PlannerInputError, match="External metric with an AverageValue target"):
        recommendation_curve(trace, gpu_hpa, fleet, [1], from_s=0.0, to_s=60.0)
    waiting = load_autoscaler(MANIFESTS / "flapping-waiting.yaml")
    with pytest.raises(PlannerInputError, match="from_s < to_s"):
        recommendation_curve(trace, waiting, fleet, [1], from_s=60.0, to_s=60.0)
    with pytest.raises(PlannerInputError, match="replica count 0"):
        recommendation_curve(trace, waiting, fleet, [0], from_s=0.0, to_s=60.0)


SEED_LOG_KV_TOKENS = 257_584  # seed 003's vLLM log on its A10 pod


def test_a_full_batch_fills_the_rig_but_not_the_real_cache():
    held = mean_tokens_held(100, 900)
    assert held == 550.0
    assert full_batch_kv_usage_frac(32, held, 20_000) == pytest.approx(0.88)
    assert full_batch_kv_usage_frac(32, held, SEED_LOG_KV_TOKENS) == pytest.approx(0.0683, abs=1e-4)
    assert full_batch_kv_usage_frac(1024, 1000, 20_000) == 1.0  # the cache binds before the batch limit
    # A saturated replica asks for more only above the tolerance: 0.8 is the rig's ceiling exactly.
    assert highest_scaling_kv_threshold_frac(0.88) == pytest.approx(0.8)
    assert highest_scaling_kv_threshold_frac(0.0683) < 0.8 / 10


def test_the_seeds_kv_trigger_never_fires_on_the_real_cache_and_the_same_tokens_do(rig):
    trace, fleet = rig
    kv_sum = load_autoscaler(MANIFESTS / "flapping-kv-sum.yaml")
    real = fleet_with(fleet, kv_tokens=SEED_LOG_KV_TOKENS)
    never = simulate(trace, kv_sum, real, duration_s=900.0)
    assert never.scale_events == 0 and never.peak_replicas == 1 and never.slo_attainment_frac < 0.5
    assert never.timeseries["signal"].max() < highest_scaling_kv_threshold_frac(0.08)
    threshold = same_tokens_kv_threshold_frac(trigger_threshold(kv_sum), fleet.replica.kv_tokens, SEED_LOG_KV_TOKENS)
    assert threshold == pytest.approx(0.0621, abs=1e-4)
    rescaled = with_threshold(kv_sum, real, threshold)
    assert trigger_threshold(rescaled) == 0.062  # the HPA keeps thousandths
    on_rig, at_real = (
        simulate(trace, kv_sum, fleet, duration_s=900.0),
        simulate(trace, rescaled, real, duration_s=900.0),
    )
    assert at_real.events == on_rig.events and at_real.flap_cycles == 0
    assert at_real.slo_attainment_frac == pytest.approx(on_rig.slo_attainment_frac, abs=0.01)
    curve = recommendation_curve(trace, rescaled, real, [1, 2, 3], from_s=240.0, to_s=720.0)
    assert fixed_points(curve) == [2]


def test_with_threshold_needs_an_average_value_trigger(rig):
    _, fleet = rig
    with pytest.raises(PlannerInputError, match="AverageValue"):
        with_threshold(load_autoscaler(MANIFESTS / "lab" / "growth-gpu-util.yaml"), fleet, 50.0)
