"""Tests for planner.flapping: pinned fleets, the trigger's recommendation curve and its fixed points."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.errors import PlannerInputError
from planner.flapping import fixed_points, pinned, recommendation_curve
from planner.readers.fleet import read_fleet
from planner.readers.manifest import load_autoscaler
from planner.readers.trace import read_trace
from planner.simulate.reference import simulate
from tests.conftest import DATA_DIR

MANIFESTS = DATA_DIR / "manifests"
KV_AVG = MANIFESTS / "lab" / "flapping-kv-avg.yaml"


@pytest.fixture(scope="module")
def rig():
    return read_trace(DATA_DIR / "traces" / "steady-0.6rps-12min.csv"), read_fleet(
        DATA_DIR / "fleets" / "seed003-rig.yaml")


def test_pinned_fixes_both_bounds_and_the_fleet_never_moves(rig):
    trace, fleet = rig
    autoscaler = pinned(load_autoscaler(MANIFESTS / "flapping-waiting.yaml"), 2)
    assert (autoscaler.hpa.min_replicas, autoscaler.hpa.max_replicas) == (2, 2)
    assert (autoscaler.scaled_object.min_replica_count, autoscaler.scaled_object.max_replica_count) == (2, 2)
    run = simulate(trace, autoscaler, fleet, duration_s=300.0)
    assert run.scale_events == 0 and (run.timeseries["replicas_requested"] == 2).all()


def test_waiting_and_averaged_kv_have_no_fixed_point_and_the_kv_sum_has_one(rig):
    trace, fleet = rig
    paths = {"waiting": MANIFESTS / "flapping-waiting.yaml", "kv-sum": MANIFESTS / "flapping-kv-sum.yaml",
             "kv-avg": KV_AVG}
    curves = {name: recommendation_curve(trace, load_autoscaler(path), fleet, [1, 2, 3], from_s=240.0, to_s=720.0)
              for name, path in paths.items()}
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
