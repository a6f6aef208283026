"""Tests for planner.simulate.control: what the simulator hands the exact controllers."""

from __future__ import annotations

import numpy as np
import pytest

from planner.autoscaler.replica_calculator import POD_RUNNING, Pod
from planner.errors import PlannerInputError
from planner.simulate.control import Control
from planner.simulate.metrics import COLUMNS, MetricStore
from tests.simulate_helpers import pods_hpa, scaled_object, write_manifest


def _store(waiting_per_pod, now_s=15.0):
    store = MetricStore()
    rows = np.zeros((len(waiting_per_pod), len(COLUMNS)))
    rows[:, COLUMNS.index("num_requests_waiting")] = waiting_per_pod
    store.record(now_s, list(range(len(waiting_per_pod))), rows, list(range(len(waiting_per_pod))))
    return store


def _pods(ready, warming, now_s=15.0):
    pods = [
        Pod(f"pod-{p}", phase=POD_RUNNING, ready=True, start_time_s=-1000.0, ready_transition_s=-900.0)
        for p in range(ready)
    ]
    pods += [
        Pod(
            f"pod-{ready + p}", phase=POD_RUNNING, ready=False, start_time_s=now_s - 5.0, ready_transition_s=now_s - 5.0
        )
        for p in range(warming)
    ]
    return pods


def test_pods_metric_with_an_unready_pod_counts_it_as_zero_on_scale_up(tmp_path):
    control = Control(write_manifest(tmp_path, pods_hpa("chat", "vllm:num_requests_waiting", 10)))
    # Two Ready pods at 30 waiting each, one warming pod with no series: (30 + 30 + 0) / 3 / 10 = 2x of 3 pods.
    wanted = control.decide(15.0, 1.0, 3, lambda: _pods(2, 1), 2, _store([30.0, 30.0]))
    assert wanted == 6


def test_nothing_runs_off_the_sync_grid(tmp_path):
    control = Control(write_manifest(tmp_path, pods_hpa("chat", "vllm:num_requests_waiting", 10)))
    called = []
    wanted = control.decide(16.0, 1.0, 3, lambda: called.append(1) or _pods(3, 0), 3, _store([30.0] * 3))
    assert wanted == 3 and not called


def test_keda_polls_and_the_hpa_reconciles_on_their_own_periods(tmp_path):
    control = Control(
        write_manifest(tmp_path, scaled_object("chat", "sum(vllm:num_requests_waiting)", 5, polling_s=30))
    )
    assert control.is_due(30.0, 1.0) == (True, True)
    assert control.is_due(15.0, 1.0) == (False, True)
    assert control.is_due(10.0, 1.0) == (False, False)
    # sum(waiting) = 40 over a 5 per replica AverageValue target asks for 8; without spec.behavior the
    # controller's legacy limit allows max(2 x 2, 4) = 4 in one step.
    assert control.decide(30.0, 1.0, 2, lambda: _pods(2, 0, 30.0), 2, _store([20.0, 20.0], 30.0)) == 4


def test_a_keda_query_returning_several_series_is_a_scaler_error_and_the_hpa_holds(tmp_path):
    control = Control(write_manifest(tmp_path, scaled_object("chat", "vllm:num_requests_waiting", 5)))
    assert control.decide(15.0, 1.0, 2, lambda: _pods(2, 0), 2, _store([20.0, 20.0])) == 2
    # With one pod the bare selector is one series, and the HPA acts on it.
    assert control.decide(30.0, 1.0, 1, lambda: _pods(1, 0, 30.0), 1, _store([20.0], 30.0)) == 4


def test_resource_metrics_are_refused_with_the_mapping_hint(tmp_path, shared_dir):
    from planner.readers.manifest import load_autoscaler

    with pytest.raises(PlannerInputError, match="Resource metric cpu") as error:
        Control(load_autoscaler(shared_dir / "real-world" / "manifests" / "18-llm-serving-infra-hpa-cpu.yaml"))
    assert "signals" in str(error.value)


def test_a_mapped_metric_name_is_simulated(tmp_path):
    control = Control(
        write_manifest(tmp_path, pods_hpa("chat", "my_queue_depth", 10)), {"my_queue_depth": "num_requests_waiting"}
    )
    # Three times the target asks for 6; the legacy scale-up limit allows max(2 x 2, 4) = 4.
    assert control.decide(15.0, 1.0, 2, lambda: _pods(2, 0), 2, _store([30.0, 30.0])) == 4


def test_a_real_cron_scaled_object_is_driven_by_the_wall_clock(shared_dir):
    # manifests-2/02: a queue trigger (mapped to a simulated signal) and a cron floor of 10 on weekdays
    # 08:00-18:00 in Dublin, minReplicaCount 0, maxReplicaCount 10.
    from planner.readers.manifest import load_autoscaler
    from planner.simulate.fleet import DEFAULT_START_EPOCH_S

    autoscaler = load_autoscaler(shared_dir / "real-world/manifests-2/02-tazmainian-keda-queue-plus-cron-min0.yaml")
    signals = {"sum(gpu_job_queue_depth) or vector(0)": "sum(vllm:num_requests_waiting)"}
    control = Control(autoscaler, signals, start_epoch_s=DEFAULT_START_EPOCH_S)  # Monday 00:00 UTC
    store = _store([])
    assert control.queries.keys() == {0}  # the cron trigger reads no query
    assert control.decide(7 * 3600.0, 1.0, 0, lambda: [], 0, store) == 0  # before 08:00: nothing active
    # 08:00: KEDA activates 0 -> 1, the HPA's first step toward 10 is limited to max(2 x 1, 4)
    assert control.decide(8 * 3600.0, 1.0, 0, lambda: _pods(1, 0, 8 * 3600.0), 0, store) == 4
    saturday = Control(autoscaler, signals, start_epoch_s=DEFAULT_START_EPOCH_S + 5 * 86400)
    assert saturday.decide(8 * 3600.0, 1.0, 0, lambda: [], 0, store) == 0


def test_a_cron_trigger_keda_would_not_build_is_refused_naming_the_file(tmp_path):
    from tests.simulate_helpers import cron_scaled_object

    text = cron_scaled_object("chat", "sum(vllm:num_requests_waiting)", 4, [("0 8 * * *", "0 8 * * *", "UTC", 2)])
    autoscaler = write_manifest(tmp_path, text)
    with pytest.raises(PlannerInputError, match=r"autoscaler\.yaml: spec\.triggers\[1\]\.metadata\.end: start and end"):
        Control(autoscaler)
