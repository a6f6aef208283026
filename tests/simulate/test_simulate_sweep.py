"""Tests for planner.simulate.sweep: the grid, applying a point, the Pareto front, the cheapest meeting a goal."""

from __future__ import annotations

import math

import pytest

from planner.errors import PlannerInputError
from planner.simulate import reference
from planner.simulate.fleet import FleetSpec
from planner.simulate.sweep import (
    GRID_KEYS,
    SweepResult,
    apply_point,
    cheapest_meeting,
    chunk_points,
    expand_grid,
    pareto_front,
    run_chunk,
    summarize,
)
from tests.simulate_helpers import pods_hpa, poisson_trace, scaled_object, write_manifest

IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"


def result(index, attainment, cost):
    return SweepResult(index, (("target", index),), attainment, cost, cost / 4.0, 0, 0, 1, 0, 0)


def test_grid_is_the_cartesian_product_in_documented_key_order():
    points = expand_grid({"warmup_s": [30, 60], "target": [5, 10, 20]})
    assert len(points) == 6
    assert [p.index for p in points] == list(range(6))
    assert points[0].values == (("target", 5.0), ("warmup_s", 30.0))
    assert points[1].as_dict() == {"target": 5.0, "warmup_s": 60.0}
    assert expand_grid({"min_replicas": 2})[0].as_dict() == {"min_replicas": 2}


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"targte": [5]}, "unknown grid key 'targte'"),
        ({"target": []}, "target: expected at least one value"),
        ({"target": [0]}, "target: expected a number > 0"),
        ({"min_replicas": [1.5]}, "min_replicas: expected a whole number"),
        ({"scale_down_window_s": [4000]}, "at most 3600"),
        ({"scale_up_policy": ["Pods:4"]}, "'Pods:4' is not TYPE:VALUE:PERIOD"),
        ({"select_policy": ["Maximum"]}, "select_policy: expected Max, Min or Disabled"),
        ([1, 2], "expected a mapping of grid keys"),
    ],
)
def test_bad_grids_are_named(grid, message):
    with pytest.raises(PlannerInputError, match=message):
        expand_grid(grid, "grid.yaml")


def test_a_point_changes_exactly_what_it_names(tmp_path):
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 10, min_replicas=1, max_replicas=8))
    point = expand_grid(
        {
            "signal": ["sum(vllm:num_requests_waiting)"],
            "target": [7],
            "min_replicas": [2],
            "max_replicas": [5],
            "scale_down_window_s": [120],
            "scale_up_policy": ["Pods:2:30"],
            "select_policy": ["Min"],
            "warmup_s": [90],
            "polling_interval_s": [5],
        }
    )[0]
    config = apply_point(manifest, FleetSpec(), point)
    so = config.autoscaler.scaled_object
    assert so.triggers[0].query == "sum(vllm:num_requests_waiting)" and so.triggers[0].threshold == 7.0
    assert (so.min_replica_count, so.max_replica_count, so.polling_interval_s) == (2, 5, 5.0)
    assert config.autoscaler.hpa.metrics[0].target.average_value_milli == 7000
    assert config.autoscaler.hpa.max_replicas == 5
    behavior = config.autoscaler.hpa.behavior
    assert behavior.scale_down.stabilization_window_seconds == 120
    assert behavior.scale_up.policies[0].type == "Pods" and behavior.scale_up.policies[0].value == 2
    assert behavior.scale_up.select_policy == "Min" and behavior.scale_down.select_policy == "Min"
    assert config.fleet.warmup_s == 90.0
    # The manifest itself is untouched.
    assert manifest.scaled_object.triggers[0].threshold == 10.0


def test_hpa_points_and_invalid_combinations(tmp_path):
    manifest = write_manifest(tmp_path, pods_hpa("chat", "vllm:num_requests_running", 10))
    point = expand_grid({"signal": ["num_requests_waiting"], "target": [4], "max_replicas": [3]})[0]
    config = apply_point(manifest, FleetSpec(), point)
    metric = config.autoscaler.hpa.metrics[0]
    assert (metric.name, metric.target.average_value_milli, config.autoscaler.hpa.max_replicas) == (
        "num_requests_waiting",
        4000,
        3,
    )
    with pytest.raises(PlannerInputError, match=r"grid point 0 \(min_replicas=5, max_replicas=3\)"):
        apply_point(manifest, FleetSpec(), expand_grid({"min_replicas": [5], "max_replicas": [3]})[0])
    with pytest.raises(PlannerInputError, match=r"grid point 0 .*cannot be simulated"):
        apply_point(manifest, FleetSpec(), expand_grid({"signal": ["inferflow_queue_depth"]})[0])
    with pytest.raises(PlannerInputError, match="polling_interval_s applies to a ScaledObject"):
        apply_point(manifest, FleetSpec(), expand_grid({"polling_interval_s": [5]})[0])


def test_pareto_front_keeps_only_undominated_points_cheapest_first():
    results = [
        result(0, 0.90, 10.0),
        result(1, 0.95, 12.0),
        result(2, 0.93, 12.0),
        result(3, 0.99, 20.0),
        result(4, 0.80, 15.0),
        result(5, 0.99, 25.0),
        result(6, 0.90, 10.0),
        result(7, math.nan, 1.0),
    ]
    # No requests (NaN attainment) is no evidence: never on the front.
    assert [r.index for r in pareto_front(results)] == [0, 1, 3]


def test_cheapest_meeting_the_goal():
    results = [result(0, 0.90, 10.0), result(1, 0.995, 14.0), result(2, 0.999, 12.0), result(3, 0.999, 12.0)]
    assert cheapest_meeting(results, 0.99).index == 2
    assert cheapest_meeting(results, 0.9999) is None
    with pytest.raises(PlannerInputError, match="attainment goal"):
        cheapest_meeting(results, 99.0)
    summary = summarize(results, 0.99)
    assert summary["cheapest_meeting_goal"]["index"] == 2 and summary["configurations"] == 4


def test_chunks_cover_every_point_once():
    points = expand_grid({"target": list(range(1, 11))})
    chunks = chunk_points(points, 4)
    assert [len(c) for c in chunks] == [4, 4, 2]
    assert [p.index for c in chunks for p in c] == list(range(10))
    with pytest.raises(PlannerInputError):
        chunk_points(points, 0)


def test_chunks_keep_points_that_can_share_a_fleet_together():
    # warmup_s (last key, fastest) changes the fleet: its values alternate in grid order, so a plain
    # cut would mix them; every chunk must hold one warmup and one minimum only.
    points = expand_grid({"target": [5, 10, 20, 40], "min_replicas": [1, 2], "warmup_s": [30, 120]})
    for chunks in (chunk_points(points, 3), chunk_points(points, n_chunks=4), chunk_points(points, n_chunks=16)):
        assert sorted(p.index for c in chunks for p in c) == list(range(len(points)))
        for chunk in chunks:
            assert len({(p.as_dict()["warmup_s"], p.as_dict()["min_replicas"]) for p in chunk}) == 1
            assert [p.index for p in chunk] == sorted(p.index for p in chunk)
    assert [len(c) for c in chunk_points(points, n_chunks=4)] == [4, 4, 4, 4]  # one per fleet
    assert len(chunk_points(points, n_chunks=16)) == 16  # each fleet's points cut for 16 workers
    assert len(chunk_points(points, n_chunks=1)) == 4  # never fewer than one per fleet
    with pytest.raises(PlannerInputError):
        chunk_points(points, n_chunks=0)


def test_a_chunk_reproduces_the_reference_engine_per_point(tmp_path):
    trace = poisson_trace(lambda t: 3.0 if t < 90 else 15.0, 200.0, 200, 240, seed=3)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 10, max_replicas=6))
    fleet = FleetSpec(warmup_s=30.0)
    points = expand_grid({"target": [5, 20], "scale_down_window_s": [0, 60]})
    results = run_chunk(trace, manifest, fleet, points)
    assert [r.index for r in results] == [0, 1, 2, 3]
    for point, got in zip(points, results, strict=True):
        config = apply_point(manifest, fleet, point)
        want = reference.simulate(trace, config.autoscaler, config.fleet)
        assert got.slo_attainment_frac == pytest.approx(want.slo_attainment_frac, abs=1e-9)
        assert got.cost_usd == pytest.approx(want.cost_usd, abs=1e-9)
        assert (got.scale_events, got.peak_replicas) == (want.scale_events, want.peak_replicas)
    # A lower target buys attainment with replicas.
    assert results[0].cost_usd > results[2].cost_usd


def test_grid_keys_are_documented():
    from planner.simulate import sweep

    for key in GRID_KEYS:
        assert f"``{key}``" in sweep.__doc__


def test_a_chunk_reports_its_configurations_as_they_finish(tmp_path):
    # Targets that part at different times finish as separate paths: several reports, each counted once.
    trace = poisson_trace(lambda t: 2.0 if t < 60 else 20.0, 240.0, 200, 240, seed=6)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 10, max_replicas=8))
    points = expand_grid({"target": [4, 8, 16, 64], "scale_down_window_s": [0, 60]})
    reports: list[int] = []
    results = run_chunk(trace, manifest, FleetSpec(warmup_s=20.0), points, on_done=reports.append)
    assert len(results) == len(points)
    assert sum(reports) == len(points) and len(reports) >= 2 and all(n > 0 for n in reports)
