"""HPA scale to zero as Kubernetes 1.37 runs it: the ``ScaledToZero`` condition (kubernetes PRs 135118, 139648).

The cases follow the scenarios of ``pkg/controller/podautoscaler/horizontal_test.go`` for the
condition-based controller ("from zero without condition, FG on", with the condition, with the gate
off, to zero, minReplicas raised while at zero), with the Go functions ``reconcileAutoscaler``,
``shouldComputeMetricsForZeroReplicas``, ``hasObjectOrExternalMetrics`` and
``getScaledToZeroConditionStatus`` as ported in :mod:`planner.autoscaler.horizontal`.
"""

from __future__ import annotations

import pytest

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior
from planner.autoscaler.horizontal import (
    SCALE_TO_ZERO_CONDITION,
    SCALE_TO_ZERO_DISABLED,
    SCALE_TO_ZERO_LEGACY,
    ExternalReading,
    HorizontalController,
    PodMetricsReading,
    has_object_or_external_metrics,
    should_compute_metrics_for_zero_replicas,
)
from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
from planner.autoscaler.keda import KedaController, ScaledObjectSpec, Trigger
from planner.autoscaler.replica_calculator import PodMetric, ready_pods
from planner.autoscaler.versions import ClusterVersions, Version

QUEUE = MetricSpec("External", "queue", MetricTarget("AverageValue", average_value_milli=1000))
PER_POD = MetricSpec("Pods", "qps", MetricTarget("AverageValue", average_value_milli=1000))


def hpa(*metrics, min_replicas=0, max_replicas=10, behavior=None):
    return HorizontalPodAutoscalerSpec("hpa", max_replicas, tuple(metrics or (QUEUE,)), min_replicas, behavior)


def controller(spec=None, **kwargs):
    # No history and a legacy window of 0 let a scale-down act at once.
    return HorizontalController(spec or hpa(), downscale_stabilization_window_s=0.0, recommendations=(), **kwargs)


@pytest.mark.parametrize(
    ("min_replicas", "condition", "can", "expected"),
    [
        (0, False, False, (False, True)),
        (0, True, True, (True, False)),
        (0, True, False, (False, True)),  # scaled to zero, but no Object or External metric to come back on
        (2, True, False, (True, False)),  # minReplicas raised while the HPA held the target at zero
        (2, False, False, (False, True)),  # scaled to zero by hand
    ],
)
def test_should_compute_metrics_for_zero_replicas(min_replicas, condition, can, expected):
    assert should_compute_metrics_for_zero_replicas(min_replicas, condition, can) == expected


def test_has_object_or_external_metrics():
    assert has_object_or_external_metrics(hpa(QUEUE)) and has_object_or_external_metrics(hpa(PER_POD, QUEUE))
    assert not has_object_or_external_metrics(hpa(PER_POD))


@pytest.mark.parametrize(
    ("mode", "condition"),
    [(SCALE_TO_ZERO_CONDITION, False), (SCALE_TO_ZERO_DISABLED, False), (SCALE_TO_ZERO_DISABLED, True)],
)
def test_from_zero_is_disabled_without_the_condition_or_the_gate(mode, condition):
    result = controller(scale_to_zero=mode, scaled_to_zero=condition).reconcile_autoscaler(
        0.0, 0, [ExternalReading((5000,))]
    )
    assert (result.desired_replicas, result.rescale, result.metrics) == (0, False, None)
    assert str(result.scaling_active) == (
        "ScalingActive False ScalingDisabled scaling is disabled since the replica count of the target is zero"
    )
    assert result.scaled_to_zero is None


def test_from_zero_with_the_condition_scales_up_and_clears_it():
    c = controller(scaled_to_zero=True)
    result = c.reconcile_autoscaler(0.0, 0, [ExternalReading((5000,))])
    # ceil(5000 / 1000) = 5, held to max(2 x 0, 4) = 4 by the legacy scale-up limit
    assert (result.metric_desired_replicas, result.desired_replicas) == (5, 4)
    assert str(result.scaled_to_zero) == (
        "ScaledToZero False NotScaledToZero the HPA controller did not scale the workload to zero"
    )
    assert c.scaled_to_zero is False


def test_to_zero_sets_the_condition_and_the_hpa_comes_back():
    c = controller()
    down = c.reconcile_autoscaler(0.0, 3, [ExternalReading((0,))])
    assert down.desired_replicas == 0 and down.rescale
    assert str(down.scaled_to_zero) == "ScaledToZero True ScaledToZero the HPA controller scaled the workload to zero"
    assert down.conditions[-1] == down.scaled_to_zero
    idle = c.reconcile_autoscaler(15.0, 0, [ExternalReading((0,))])
    assert idle.desired_replicas == 0 and not idle.rescale and idle.scaled_to_zero is None and c.scaled_to_zero
    back = c.reconcile_autoscaler(30.0, 0, [ExternalReading((2500,))])
    assert back.desired_replicas == 3 and not c.scaled_to_zero


def test_to_zero_on_a_pods_metric_alone_cannot_come_back():
    # The API server refuses minReplicas 0 without an Object or External metric; the controller agrees.
    c = controller(hpa(PER_POD))
    idle = PodMetricsReading({f"pod-{i}": PodMetric(0) for i in range(2)})
    down = c.reconcile_autoscaler(0.0, 2, [idle], pods=ready_pods(2))
    assert down.desired_replicas == 0 and down.scaled_to_zero.status is False
    stuck = c.reconcile_autoscaler(15.0, 0, [PodMetricsReading({})])
    assert stuck.desired_replicas == 0 and stuck.scaling_active.reason == "ScalingDisabled"


def test_min_replicas_raised_while_at_zero_is_honoured_on_the_way_up():
    # With behavior the scale-up rate path does not apply minReplicas; reconcileAutoscaler raises it after.
    behavior = HorizontalPodAutoscalerBehavior()
    c = controller(hpa(min_replicas=2, behavior=behavior), scaled_to_zero=True)
    result = c.reconcile_autoscaler(0.0, 0, [ExternalReading((500,))])
    assert (result.metric_desired_replicas, result.desired_replicas) == (1, 2)
    assert result.rescale_reason.endswith("above target")
    # Without the condition (scaled to 0 by hand) the same HPA stays at 0.
    manual = controller(hpa(min_replicas=2, behavior=behavior)).reconcile_autoscaler(0.0, 0, [ExternalReading((500,))])
    assert manual.desired_replicas == 0 and manual.scaling_active.reason == "ScalingDisabled"


def test_before_1_36_the_controller_computes_at_zero_whenever_min_is_zero():
    c = controller(scale_to_zero=SCALE_TO_ZERO_LEGACY)
    result = c.reconcile_autoscaler(0.0, 0, [ExternalReading((3000,))])
    assert result.desired_replicas == 3 and result.scaled_to_zero is None
    down = c.reconcile_autoscaler(15.0, 3, [ExternalReading((0,))])
    assert down.desired_replicas == 0 and down.scaled_to_zero is None  # no condition before 1.36


def test_the_gate_off_sets_no_condition():
    down = controller(scale_to_zero=SCALE_TO_ZERO_DISABLED).reconcile_autoscaler(0.0, 3, [ExternalReading((0,))])
    assert down.desired_replicas == 0 and down.scaled_to_zero is None


def test_unknown_mode_is_refused():
    with pytest.raises(Exception, match="scale_to_zero: expected one of"):
        HorizontalController(hpa(), scale_to_zero="beta")


@pytest.mark.parametrize(
    ("minor", "mode"), [(35, SCALE_TO_ZERO_LEGACY), (36, SCALE_TO_ZERO_DISABLED), (37, SCALE_TO_ZERO_CONDITION)]
)
def test_the_mode_follows_the_kubernetes_version(minor, mode):
    assert ClusterVersions(Version(1, minor)).hpa_scale_to_zero_mode == mode


def test_keda_still_moves_between_zero_and_one_itself():
    # KEDA's HPA has minReplicas >= 1; KEDA's operator activates 0 -> 1, then its HPA takes over.
    so = ScaledObjectSpec("chat", (Trigger(0, "prometheus", 5.0, name="q"),), max_replica_count=10)
    keda = KedaController(so)
    assert keda.step(0.0, 0, {0: 12.0}) == 3
    assert keda.controller.scaled_to_zero is False
