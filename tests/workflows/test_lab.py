"""Tests for planner.workflows.lab: configurations replayed on one trace, tabulated, and written as ScaledObjects."""

from __future__ import annotations

import pytest

from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscaler
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.workflows.lab import (
    SIGNAL_QUERIES,
    configuration_table,
    fleet_with,
    run_configurations,
    scaled_object_yaml,
)
from tests.simulate_helpers import steady_trace

SMALL = FleetSpec(
    replica=ReplicaSpec(fixed_ms=6.0, per_sequence_ms=0.25, max_num_seqs=16, kv_tokens=100_000),
    warmup_s=30.0,
    ttft_slo_s=2.0,
)


def _autoscaler(tmp_path, name, **options):
    path = tmp_path / f"{name}.yaml"
    path.write_text(scaled_object_yaml(**options))
    return load_autoscaler(path)


def test_fleet_with_replaces_fleet_and_replica_fields_and_keeps_the_rest():
    fleet = fleet_with(SMALL, warmup_s=180.0, max_num_seqs=32, usd_per_gpu_hour=2.5)
    assert (fleet.warmup_s, fleet.replica.max_num_seqs, fleet.usd_per_gpu_hour) == (180.0, 32, 2.5)
    assert fleet.replica.fixed_ms == 6.0 and fleet.ttft_slo_s == 2.0
    assert SMALL.warmup_s == 30.0  # the original is untouched


def test_fleet_with_names_an_unknown_parameter():
    with pytest.raises(PlannerInputError, match="fleet parameter 'warmup_seconds'"):
        fleet_with(SMALL, warmup_seconds=10.0)


def test_scaled_object_yaml_reads_back_as_the_setting_asked_for(tmp_path):
    autoscaler = _autoscaler(
        tmp_path, "so", signal="waiting requests", target=7, min_replicas=1, max_replicas=3, scale_down_window_s=0
    )
    assert autoscaler.kind == "ScaledObject"
    assert (autoscaler.hpa.min_replicas, autoscaler.hpa.max_replicas) == (1, 3)
    assert autoscaler.hpa.metrics[0].target.average_value_milli == 7000
    assert autoscaler.scaled_object.triggers[0].query == SIGNAL_QUERIES["waiting requests"]
    assert autoscaler.hpa.behavior.scale_down.stabilization_window_seconds == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"signal": "queue", "target": 7}, "signal 'queue'"),
        ({"signal": "waiting requests", "target": 0}, "target"),
        ({"signal": "waiting requests", "target": 7, "min_replicas": 4, "max_replicas": 3}, "min_replicas 4"),
    ],
)
def test_scaled_object_yaml_refuses_a_bad_setting(options, message):
    with pytest.raises(PlannerInputError, match=message):
        scaled_object_yaml(**options)


def test_every_offered_signal_is_one_the_simulator_reads(tmp_path):
    trace = steady_trace(4.0, 60.0, 100, 50)
    for i, signal in enumerate(SIGNAL_QUERIES):
        run = simulate(trace, _autoscaler(tmp_path, f"s{i}", signal=signal, target=5), SMALL, duration_s=60.0)
        assert run.timeseries["signal"].notna().any(), signal


def test_runs_share_the_trace_and_the_table_has_one_row_each(tmp_path):
    trace = steady_trace(8.0, 120.0, 100, 200)
    autoscalers = {
        "floor 1": _autoscaler(tmp_path, "a", signal="requests in flight", target=4, min_replicas=1),
        "floor 3": _autoscaler(tmp_path, "b", signal="requests in flight", target=4, min_replicas=3),
    }
    runs = run_configurations(trace, autoscalers, SMALL, duration_s=150.0)
    assert list(runs) == ["floor 1", "floor 3"]
    for label, autoscaler in autoscalers.items():
        alone = simulate(trace, autoscaler, SMALL, duration_s=150.0)
        assert runs[label].summary() == alone.summary()
    table = configuration_table(runs, window_s=(0.0, 60.0))
    assert list(table.index) == ["floor 1", "floor 3"]
    row = table.loc["floor 3"]
    run = runs["floor 3"]
    assert row.cost_usd == run.cost_usd and row.peak_replicas == run.peak_replicas
    assert row.window_attainment_frac == run.attainment_between(0.0, 60.0)
    assert row.mean_replicas == pytest.approx(run.timeseries["replicas_live"].mean())
    assert "window_attainment_frac" not in configuration_table(runs).columns
