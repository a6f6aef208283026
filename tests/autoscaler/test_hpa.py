"""Tests for planner.autoscaler.replica_calculator: cases transcribed from Kubernetes' replica_calculator_test.go.

Each case id names its source test. The fixture below rebuilds what the Go
test client returns: ``current_replicas`` pods (more if ``phases`` is longer),
each with two containers whose CPU request is ``requests[i]`` (so the pod
requests twice that), Ready unless ``readiness`` says otherwise, started at
Go's zero time unless ``start_times`` says "hot" (now) or "cool" (3 min ago),
and samples stamped at Go's zero time with a one-minute window. The tests
use the Go test constants: tolerance 0.1, CPU initialization period 2 min,
initial readiness delay 10 s.
"""

from __future__ import annotations

import pytest

from planner.autoscaler.replica_calculator import (
    MAX_INT32,
    MAX_INT64,
    MetricUnavailableError,
    Pod,
    PodMetric,
    Tolerances,
    calculate_requests,
    get_external_metric_replicas,
    get_external_per_pod_metric_replicas,
    get_metric_replicas,
    get_object_metric_replicas,
    get_object_per_pod_metric_replicas,
    get_resource_replicas,
    get_resource_utilization_ratio,
    group_pods,
)

NOW_S = 1_000_000_000.0
GO_ZERO_TIME_S = -62_135_596_800.0  # time.Time{} as Unix seconds
HOT_S = NOW_S  # hotCPUCreationTime()
COOL_S = NOW_S - 180.0  # coolCPUCreationTime()
TESTING = {"cpu_initialization_period_s": 120.0, "delay_of_initial_readiness_status_s": 10.0}
DEFAULT = Tolerances(0.1, 0.1)
T, F = True, False
RUN, PEND, FAIL = "Running", "Pending", "Failed"


def _pods(current, *, requests=(), readiness=None, start_times=None, phases=None, deleted=None):
    count = max(current, len(phases or ()))
    pods = []
    for i in range(count):
        request = requests[i] if i < len(requests) else None
        pods.append(
            Pod(
                name=f"test-pod-{i}",
                phase=phases[i] if phases else RUN,
                ready=readiness[i] if readiness is not None and i < len(readiness) else True,
                start_time_s=start_times[i] if start_times else GO_ZERO_TIME_S,
                ready_transition_s=GO_ZERO_TIME_S,
                deleted=bool(deleted and deleted[i]),
                container_requests_milli=(("container1", request), ("container2", request)),
            )
        )
    return pods


def _levels(*per_pod):
    return [[level, level] for level in per_pod]


def _resource_metrics(levels, container="", pod_names=()):
    metrics = {}
    for i, containers in enumerate(levels):
        name = pod_names[i] if i < len(pod_names) else f"test-pod-{i}"
        if container == "":
            if len(containers) < 2:  # a container without a sample hides the pod
                continue
            value = sum(containers)
        else:
            index = int(container[-1]) - 1
            if index >= len(containers):
                continue
            value = containers[index]
        metrics[name] = PodMetric(value, GO_ZERO_TIME_S, 60.0)
    return metrics


def _plain_metrics(levels):
    return {f"test-pod-{i}": PodMetric(level, GO_ZERO_TIME_S) for i, level in enumerate(levels)}


R = 1000  # resource.MustParse("1.0") in milli-units

# (id, current, expected replicas, expected utilization %, expected raw value, kwargs)
RESOURCE_CASES = [
    ("TestReplicaCalcScaleUp", 3, 5, 50, 2 * 500, dict(requests=[R] * 3, levels=_levels(300, 500, 700), target=30)),
    (
        "TestReplicaCalcContainerScaleUp",
        3,
        5,
        50,
        500,
        dict(requests=[R] * 3, levels=[[1000, 300], [1000, 500], [1000, 700]], target=30, container="container2"),
    ),
    (
        "TestReplicaCalcScaleUpUnreadyLessScale",
        3,
        4,
        60,
        2 * 600,
        dict(requests=[R] * 3, levels=_levels(300, 500, 700), target=30, readiness=[F, T, T]),
    ),
    (
        "TestReplicaCalcScaleUpContainerHotCpuLessScale",
        3,
        4,
        60,
        600,
        dict(
            requests=[R] * 3,
            levels=[[0, 300], [0, 500], [0, 700]],
            target=30,
            container="container2",
            start_times=[HOT_S, COOL_S, COOL_S],
        ),
    ),
    (
        "TestReplicaCalcScaleUpHotCpuLessScale",
        3,
        4,
        60,
        2 * 600,
        dict(requests=[R] * 3, levels=_levels(300, 500, 700), target=30, start_times=[HOT_S, COOL_S, COOL_S]),
    ),
    (
        "TestReplicaCalcScaleUpUnreadyNoScale",
        3,
        3,
        40,
        2 * 400,
        dict(requests=[R] * 3, levels=_levels(400, 500, 700), target=30, readiness=[T, F, F]),
    ),
    (
        "TestReplicaCalcScaleHotCpuNoScale",
        3,
        3,
        40,
        2 * 400,
        dict(
            requests=[R] * 3,
            levels=_levels(400, 500, 700),
            target=30,
            readiness=[T, F, F],
            start_times=[COOL_S, HOT_S, HOT_S],
        ),
    ),
    (
        "TestReplicaCalcScaleUpIgnoresFailedPods",
        2,
        4,
        60,
        2 * 600,
        dict(
            requests=[R] * 4, levels=_levels(500, 700), target=30, readiness=[T, T, F, F], phases=[RUN, RUN, FAIL, FAIL]
        ),
    ),
    (
        "TestReplicaCalcMissingContainerMetricScaleUpIgnoresFailedPods",
        2,
        4,
        60,
        600,
        dict(
            requests=[R] * 4,
            levels=[[1000, 500], [9000, 700], [1000], [9000]],
            target=30,
            readiness=[T, T, F, F],
            phases=[RUN, RUN, FAIL, FAIL],
            container="container2",
        ),
    ),
    (
        "TestReplicaCalcScaleUpContainerIgnoresFailedPods",
        2,
        4,
        60,
        600,
        dict(
            requests=[R] * 4,
            levels=[[1000, 500], [9000, 700]],
            target=30,
            readiness=[T, T, F, F],
            phases=[RUN, RUN, FAIL, FAIL],
            container="container2",
        ),
    ),
    (
        "TestReplicaCalcScaleUpIgnoresDeletionPods",
        2,
        4,
        60,
        2 * 600,
        dict(
            requests=[R] * 4,
            levels=_levels(500, 700),
            target=30,
            readiness=[T, T, F, F],
            phases=[RUN] * 4,
            deleted=[F, F, T, T],
        ),
    ),
    (
        "TestReplicaCalcScaleUpContainerIgnoresDeletionPods",
        2,
        4,
        60,
        600,
        dict(
            requests=[R] * 4,
            levels=_levels(500, 700),
            target=30,
            readiness=[T, T, F, F],
            phases=[RUN] * 4,
            deleted=[F, F, T, T],
            container="container1",
        ),
    ),
    (
        "TestReplicaCalcScaleDown",
        5,
        3,
        28,
        2 * 280,
        dict(requests=[R] * 5, levels=_levels(100, 300, 500, 250, 250), target=50),
    ),
    (
        "TestReplicaCalcContainerScaleDown",
        5,
        3,
        28,
        280,
        dict(
            requests=[R] * 5,
            levels=[[1000, 100], [1000, 300], [1000, 500], [1000, 250], [1000, 250]],
            target=50,
            container="container2",
        ),
    ),
    (
        "TestReplicaCalcScaleDownExcludeUnreadyPods",
        5,
        2,
        30,
        2 * 300,
        dict(requests=[R] * 5, levels=_levels(100, 300, 500, 250, 250), target=50, readiness=[T, T, T, F, F]),
    ),
    (
        "TestReplicaCalcScaleDownExcludeUnscheduledPods",
        5,
        1,
        10,
        2 * 100,
        dict(
            requests=[R] * 5,
            levels=_levels(100),
            target=50,
            readiness=[T, F, F, F, F],
            phases=[RUN, PEND, PEND, PEND, PEND],
        ),
    ),
    (
        "TestReplicaCalcScaleDownIgnoreHotCpuPods",
        5,
        2,
        30,
        2 * 300,
        dict(
            requests=[R] * 5,
            levels=_levels(100, 300, 500, 250, 250),
            target=50,
            start_times=[COOL_S, COOL_S, COOL_S, HOT_S, HOT_S],
        ),
    ),
    (
        "TestReplicaCalcScaleDownIgnoresFailedPods",
        5,
        3,
        28,
        2 * 280,
        dict(
            requests=[R] * 7,
            levels=_levels(100, 300, 500, 250, 250),
            target=50,
            readiness=[T, T, T, T, T, F, F],
            phases=[RUN] * 5 + [FAIL, FAIL],
        ),
    ),
    (
        "TestReplicaCalcScaleDownIgnoresDeletionPods",
        5,
        3,
        28,
        2 * 280,
        dict(
            requests=[R] * 7,
            levels=_levels(100, 300, 500, 250, 250),
            target=50,
            readiness=[T, T, T, T, T, F, F],
            phases=[RUN] * 7,
            deleted=[F] * 5 + [T, T],
        ),
    ),
    (
        "TestReplicaCalcScaleDownIgnoresDeletionPods_StillRunning",
        5,
        3,
        28,
        280,
        dict(
            requests=[R] * 7,
            levels=[[1000, 100], [1000, 300], [1000, 500], [1000, 250], [1000, 250]],
            target=50,
            readiness=[T, T, T, T, T, F, F],
            phases=[RUN] * 7,
            deleted=[F] * 5 + [T, T],
            container="container2",
        ),
    ),
    (
        "TestReplicaCalcTolerance",
        3,
        3,
        102,
        2 * 1020,
        dict(requests=[900, 1000, 1100], levels=_levels(1010, 1030, 1020), target=100),
    ),
    (
        "TestReplicaCalcSuperfluousMetrics",
        4,
        24,
        587,
        2 * 5875,
        dict(requests=[R] * 4, levels=_levels(4000, 9500, 3000, 7000, 3200, 2000), target=100),
    ),
    ("TestReplicaCalcMissingMetrics", 4, 3, 24, 495, dict(requests=[R] * 4, levels=_levels(400, 95), target=100)),
    (
        "TestReplicaCalcMissingMetricsNoChangeEq",
        2,
        2,
        100,
        2 * 1000,
        dict(requests=[R] * 2, levels=_levels(1000), target=100),
    ),
    (
        "TestReplicaCalcMissingMetricsNoChangeGt",
        2,
        2,
        190,
        2 * 1900,
        dict(requests=[R] * 2, levels=_levels(1900), target=100),
    ),
    (
        "TestReplicaCalcMissingMetricsNoChangeLt",
        2,
        2,
        60,
        2 * 600,
        dict(requests=[R] * 2, levels=_levels(600), target=100),
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyChange",
        3,
        3,
        45,
        2 * 450,
        dict(requests=[R] * 3, levels=_levels(100, 450), target=50, readiness=[F, T, T]),
    ),
    (
        "TestReplicaCalcMissingMetricsHotCpuNoChange",
        3,
        3,
        45,
        2 * 450,
        dict(requests=[R] * 3, levels=_levels(100, 450), target=50, start_times=[HOT_S, COOL_S, COOL_S]),
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleUp",
        3,
        4,
        200,
        2 * 2000,
        dict(requests=[R] * 3, levels=_levels(100, 2000), target=50, readiness=[F, T, T]),
    ),
    (
        "TestReplicaCalcMissingMetricsHotCpuScaleUp",
        3,
        4,
        200,
        2 * 2000,
        dict(
            requests=[R] * 3,
            levels=_levels(100, 2000),
            target=50,
            readiness=[F, T, T],
            start_times=[HOT_S, COOL_S, COOL_S],
        ),
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleDown",
        4,
        3,
        10,
        2 * 100,
        dict(requests=[R] * 4, levels=_levels(100, 100, 100), target=50, readiness=[F, T, T, T]),
    ),
    (
        "TestReplicaCalcMissingMetricsScaleDownTargetOver100",
        4,
        2,
        6,
        2 * 100,
        dict(requests=[R, R, 2000, 2000], levels=_levels(200, 100, 100), target=300, readiness=[F, T, T, T]),
    ),
    (
        "TestReplicaCalcDuringRollingUpdateWithMaxSurge",
        2,
        2,
        10,
        2 * 100,
        dict(requests=[R] * 3, levels=_levels(100, 100), target=50, phases=[RUN] * 3),
    ),
    # Newer table-driven tests with per-direction tolerances (v1.33+).
    (
        "TestReplicaCalcResourceTolerance/outside 0% tolerance",
        3,
        4,
        101,
        2 * 1010,
        dict(requests=[900, 1000, 1100], levels=_levels(909, 1010, 1111), target=100, tolerances=Tolerances(0.0, 0.0)),
    ),
    (
        "TestReplicaCalcResourceTolerance/within 200% scale-up tolerance",
        3,
        3,
        190,
        2 * 1900,
        dict(requests=[900, 1000, 1100], levels=_levels(1890, 1910, 1900), target=100, tolerances=Tolerances(0.1, 2.0)),
    ),
    (
        "TestReplicaCalcResourceTolerance/outside 8% scale-up tolerance (superfluous scale-down tolerance)",
        3,
        4,
        109,
        2 * 1090,
        dict(
            requests=[900, 1000, 1100], levels=_levels(1100, 1080, 1090), target=100, tolerances=Tolerances(2.0, 0.08)
        ),
    ),
    (
        "TestReplicaCalcResourceTolerance/within 36% scale-down tolerance",
        3,
        3,
        65,
        2 * 650,
        dict(requests=[900, 1000, 1100], levels=_levels(660, 640, 650), target=100, tolerances=Tolerances(0.36, 0.1)),
    ),
    (
        "TestReplicaCalcResourceTolerance/outside 34% scale-down tolerance",
        3,
        2,
        65,
        2 * 650,
        dict(requests=[900, 1000, 1100], levels=_levels(660, 640, 650), target=100, tolerances=Tolerances(0.34, 0.1)),
    ),
]


@pytest.mark.parametrize(
    ("current", "expected", "utilization", "raw", "case"),
    [pytest.param(c, e, u, r, k, id=name) for name, c, e, u, r, k in RESOURCE_CASES],
)
def test_resource_replicas_match_kubernetes(current, expected, utilization, raw, case):
    case = dict(case)
    levels = case.pop("levels")
    target = case.pop("target")
    container = case.pop("container", "")
    tolerances = case.pop("tolerances", DEFAULT)
    requests = case.pop("requests")
    pods = _pods(current, requests=requests, **case)
    result = get_resource_replicas(
        current,
        target,
        "cpu",
        tolerances,
        pods,
        _resource_metrics(levels, container),
        NOW_S,
        container=container,
        **TESTING,
    )
    assert (result.replica_count, result.utilization_pct, result.raw_utilization_milli) == (expected, utilization, raw)


def test_computed_tolerance_alg_implementation():
    """TestReplicaCalcComputedToleranceAlgImplementation: just outside, then just inside, the tolerance."""
    start_pods = 10
    total_used = start_pods * 150
    total_requested = 2 * total_used
    requested_to_used = float(total_requested // total_used)
    per_pod_requested = total_requested // start_pods
    offsets = [100, -100, 10, -10, 2, -2, 1, -1, 0, 0]
    # The fake splits each listed request across two containers of that size.
    requests = [per_pod_requested + o for o in offsets]
    levels = _levels(*([total_used // 10] * 10))
    target = abs(1 / (requested_to_used * (1 - 0.1))) + 0.01
    final_target_pct = int(target * 100)
    resources_used_ratio = float(total_used) / (float(total_requested) * target)
    import math

    final_pods = math.ceil(resources_used_ratio * float(start_pods))
    pods = _pods(start_pods, requests=requests)
    result = get_resource_replicas(
        start_pods, final_target_pct, "cpu", DEFAULT, pods, _resource_metrics(levels), NOW_S, **TESTING
    )
    assert result.replica_count == final_pods
    assert result.utilization_pct == (total_used * 100) // total_requested
    target = abs(1 / (requested_to_used * (1 - 0.1))) + 0.004
    result = get_resource_replicas(
        start_pods, int(target * 100), "cpu", DEFAULT, pods, _resource_metrics(levels), NOW_S, **TESTING
    )
    assert result.replica_count == start_pods


@pytest.mark.parametrize(
    ("current", "levels", "pod_names", "requests", "message"),
    [
        pytest.param(
            1,
            _levels(100),
            ["an-older-pod-name"],
            [R],
            "no metrics returned matched known pods",
            id="TestReplicaCalcDisjointResourcesMetrics",
        ),
        pytest.param(
            4,
            [],
            [],
            [R] * 3,
            "unable to get metrics for resource cpu: no metrics returned from resource metrics API",
            id="TestReplicaCalcEmptyMetrics",
        ),
        pytest.param(1, _levels(200), [], [], "missing request for", id="TestReplicaCalcEmptyCPURequest"),
    ],
)
def test_resource_errors_match_kubernetes(current, levels, pod_names, requests, message):
    pods = _pods(current, requests=requests)
    with pytest.raises(MetricUnavailableError, match=message):
        get_resource_replicas(
            current, 100, "cpu", DEFAULT, pods, _resource_metrics(levels, pod_names=pod_names), NOW_S, **TESTING
        )


# (id, current, expected, expected usage, kwargs) for Pods metrics (GetMetricReplicas).
PODS_CASES = [
    ("TestReplicaCalcScaleUpCM", 3, 4, 20000, dict(levels=[20000, 10000, 30000], target=15000)),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale",
        3,
        6,
        30000,
        dict(levels=[50000, 10000, 30000], target=15000, readiness=[T, T, F], start_times=[COOL_S, COOL_S, HOT_S]),
    ),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown",
        3,
        7,
        31666,
        dict(levels=[50000, 15000, 30000], target=15000, readiness=[F, T, F], start_times=[HOT_S, COOL_S, HOT_S]),
    ),
    ("TestReplicaCalcScaleUpCMExternal", 1, 2, 8600, dict(levels=[8600], target=4400)),
    ("TestReplicaCalcScaleUpCMExternalNoLabels", 1, 2, 8600, dict(levels=[8600], target=4400)),
    ("TestReplicaCalcScaleDownCM", 5, 3, 12000, dict(levels=[12000] * 5, target=20000)),
    ("TestReplicaCalcToleranceCM", 3, 3, 20666, dict(levels=[20000, 21000, 21000], target=20000)),
    (
        "TestPlainMetricReplicaCalcMissingMetricsNoChangeEq",
        5,
        5,
        20000,
        dict(levels=[20000, 19000, 21000], target=20000),
    ),
    (
        "TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM",
        2,
        2,
        10000,
        dict(levels=[10000, 10000], target=17000, phases=[RUN] * 3),
    ),
    (
        "TestReplicaCalcPodMetric/outside configurable 1% tolerance",
        3,
        4,
        20666,
        dict(levels=[20000, 21000, 21000], target=20000, tolerances=Tolerances(0.1, 0.01)),
    ),
]


@pytest.mark.parametrize(
    ("current", "expected", "usage", "case"),
    [pytest.param(c, e, u, k, id=name) for name, c, e, u, k in PODS_CASES],
)
def test_pods_metric_replicas_match_kubernetes(current, expected, usage, case):
    case = dict(case)
    levels = case.pop("levels")
    target = case.pop("target")
    tolerances = case.pop("tolerances", DEFAULT)
    pods = _pods(current, **case)
    result = get_metric_replicas(current, target, tolerances, pods, _plain_metrics(levels), NOW_S, **TESTING)
    assert (result.replica_count, result.usage_milli) == (expected, usage)


@pytest.mark.parametrize(
    ("current", "readiness", "value", "target", "tolerances", "expected"),
    [
        pytest.param(3, None, 20000, 15000, DEFAULT, 4, id="TestReplicaCalcScaleUpCMObject"),
        pytest.param(3, [F, T, F], 50000, 10000, DEFAULT, 5, id="TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods"),
        pytest.param(5, None, 12000, 20000, DEFAULT, 3, id="TestReplicaCalcScaleDownCMObject"),
        pytest.param(3, None, 20666, 20000, DEFAULT, 3, id="TestReplicaCalcToleranceCMObject"),
        pytest.param(
            3,
            None,
            20666,
            20000,
            Tolerances(0.1, 0.01),
            4,
            id="TestReplicaCalcObjectMetric/outside configurable 1% tolerance",
        ),
        pytest.param(
            3,
            None,
            MAX_INT64,
            1,
            DEFAULT,
            MAX_INT32,
            id="TestReplicaCalcObjectMetric/scale up: very large metric saturates replicas to MaxInt32",
        ),
    ],
)
def test_object_metric_replicas_match_kubernetes(current, readiness, value, target, tolerances, expected):
    pods = _pods(current, readiness=readiness)
    result = get_object_metric_replicas(current, target, value, tolerances, pods)
    assert (result.replica_count, result.usage_milli) == (expected, value)


@pytest.mark.parametrize(
    ("status_replicas", "value", "target", "tolerances", "expected", "usage"),
    [
        pytest.param(3, 20000, 5000, DEFAULT, 4, 6667, id="TestReplicaCalcScaleUpCMPerPodObject"),
        pytest.param(5, 6000, 2000, DEFAULT, 3, 1200, id="TestReplicaCalcScaleDownPerPodCMObject"),
        pytest.param(4, 20166, 5000, DEFAULT, 4, 5042, id="TestReplicaCalcTolerancePerPodCMObject"),
        pytest.param(
            4,
            20208,
            5000,
            Tolerances(0.1, 0.01),
            5,
            5052,
            id="TestReplicaCalcObjectPerPodMetric/outside configurable 1% tolerance",
        ),
    ],
)
def test_object_per_pod_replicas_match_kubernetes(status_replicas, value, target, tolerances, expected, usage):
    result = get_object_per_pod_metric_replicas(status_replicas, target, value, tolerances)
    assert (result.replica_count, result.usage_milli) == (expected, usage)


@pytest.mark.parametrize(
    ("current", "readiness", "values", "target", "tolerances", "expected", "usage"),
    [
        pytest.param(
            3, [F, T, F], [8600], 4400, DEFAULT, 2, 8600, id="TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods"
        ),
        pytest.param(5, None, [8600], 14334, DEFAULT, 3, 8600, id="TestReplicaCalcScaleDownCMExternal"),
        pytest.param(3, None, [8600], 8888, DEFAULT, 3, 8600, id="TestReplicaCalcToleranceCMExternal"),
        pytest.param(
            3,
            None,
            [8900],
            8800,
            Tolerances(0.1, 0.01),
            4,
            8900,
            id="TestReplicaCalcExternalMetric/outside configurable 1% tolerance",
        ),
        pytest.param(
            3,
            None,
            [MAX_INT64 // 2 + 1, MAX_INT64 // 2 + 1],
            MAX_INT64,
            DEFAULT,
            3,
            MAX_INT64,
            id="TestReplicaCalcExternalMetric/usage overflow caps at MaxInt64",
        ),
    ],
)
def test_external_value_replicas_match_kubernetes(current, readiness, values, target, tolerances, expected, usage):
    pods = _pods(current, readiness=readiness)
    result = get_external_metric_replicas(current, target, values, tolerances, pods)
    assert (result.replica_count, result.usage_milli) == (expected, usage)


@pytest.mark.parametrize(
    ("status_replicas", "values", "target", "tolerances", "expected", "usage"),
    [
        pytest.param(3, [8600], 2150, DEFAULT, 4, 2867, id="TestReplicaCalcScaleUpPerPodCMExternal"),
        pytest.param(5, [8600], 2867, DEFAULT, 3, 1720, id="TestReplicaCalcScaleDownPerPodCMExternal"),
        pytest.param(3, [8600], 2900, DEFAULT, 3, 2867, id="TestReplicaCalcTolerancePerPodCMExternal"),
        pytest.param(
            3,
            [8600],
            2800,
            Tolerances(0.1, 0.01),
            4,
            2867,
            id="TestReplicaCalcExternalPerPodMetric/outside configurable 1% tolerance",
        ),
        pytest.param(
            1,
            [MAX_INT64],
            1,
            DEFAULT,
            MAX_INT32,
            MAX_INT64,
            id="TestReplicaCalcExternalPerPodMetric/replica count overflow saturates to MaxInt32",
        ),
        pytest.param(
            1,
            [MAX_INT64],
            MAX_INT64,
            DEFAULT,
            1,
            MAX_INT64,
            id="TestReplicaCalcExternalPerPodMetric/usage overflow with huge target leaves replicas unchanged",
        ),
    ],
)
def test_external_per_pod_replicas_match_kubernetes(status_replicas, values, target, tolerances, expected, usage):
    result = get_external_per_pod_metric_replicas(status_replicas, target, values, tolerances)
    assert (result.replica_count, result.usage_milli) == (expected, usage)


# TestGroupPods: (id, pods, metrics, resource, ready count, unready, missing, ignored)
def _group_cases():
    now = NOW_S
    return [
        ("void", [], {}, "cpu", 0, set(), set(), set()),
        (
            "count in a ready pod - memory",
            [Pod("bentham", phase="Succeeded", ready=None, start_time_s=None)],
            {"bentham": PodMetric(1, now, 60.0)},
            "memory",
            1,
            set(),
            set(),
            set(),
        ),
        (
            "unready a pod without ready condition - CPU",
            [Pod("lucretius", phase="Succeeded", ready=None, start_time_s=now)],
            {"lucretius": PodMetric(1, GO_ZERO_TIME_S, 0.0)},
            "cpu",
            0,
            {"lucretius"},
            set(),
            set(),
        ),
        (
            "count in a ready pod with fresh metrics during initialization period - CPU",
            [Pod("bentham", phase="Succeeded", ready=True, start_time_s=now - 60, ready_transition_s=now - 30)],
            {"bentham": PodMetric(1, now, 30.0)},
            "cpu",
            1,
            set(),
            set(),
            set(),
        ),
        (
            "unready a ready pod without fresh metrics during initialization period - CPU",
            [Pod("bentham", phase="Succeeded", ready=True, start_time_s=now - 60, ready_transition_s=now - 30)],
            {"bentham": PodMetric(1, now, 60.0)},
            "cpu",
            0,
            {"bentham"},
            set(),
            set(),
        ),
        (
            "unready an unready pod during initialization period - CPU",
            [Pod("lucretius", phase="Succeeded", ready=False, start_time_s=now - 600, ready_transition_s=now - 594)],
            {"lucretius": PodMetric(1, GO_ZERO_TIME_S, 0.0)},
            "cpu",
            0,
            {"lucretius"},
            set(),
            set(),
        ),
        (
            "count in a ready pod without fresh metrics after initialization period - CPU",
            [Pod("bentham", phase="Succeeded", ready=True, start_time_s=now - 180, ready_transition_s=now - 180)],
            {"bentham": PodMetric(1, now - 120, 60.0)},
            "cpu",
            1,
            set(),
            set(),
            set(),
        ),
        (
            "count in an unready pod that was ready after initialization period - CPU",
            [Pod("lucretius", phase="Succeeded", ready=False, start_time_s=now - 600, ready_transition_s=now - 540)],
            {"lucretius": PodMetric(1, GO_ZERO_TIME_S, 0.0)},
            "cpu",
            1,
            set(),
            set(),
            set(),
        ),
        (
            "unready pod that has never been ready after initialization period - CPU",
            [Pod("lucretius", phase="Succeeded", ready=False, start_time_s=now - 600, ready_transition_s=now - 590)],
            {"lucretius": PodMetric(1, GO_ZERO_TIME_S, 0.0)},
            "cpu",
            1,
            set(),
            set(),
            set(),
        ),
        (
            "a missing pod",
            [Pod("epicurus", phase="Succeeded", ready=None, start_time_s=now - 180)],
            {},
            "cpu",
            0,
            set(),
            {"epicurus"},
            set(),
        ),
        (
            "several pods",
            [
                Pod("lucretius", phase="Succeeded", ready=None, start_time_s=now),
                Pod("niccolo", phase="Succeeded", ready=True, start_time_s=now - 180, ready_transition_s=now - 180),
                Pod("epicurus", phase="Succeeded", ready=None, start_time_s=now - 180),
            ],
            {"lucretius": PodMetric(1, GO_ZERO_TIME_S, 0.0), "niccolo": PodMetric(1, GO_ZERO_TIME_S, 0.0)},
            "cpu",
            1,
            {"lucretius"},
            {"epicurus"},
            set(),
        ),
        (
            "pending pods are unreadied",
            [Pod("unscheduled", phase="Pending", ready=None, start_time_s=None)],
            {},
            "cpu",
            0,
            {"unscheduled"},
            set(),
            set(),
        ),
        (
            "ignore pods with deletion timestamps",
            [Pod("deleted", phase="Pending", ready=None, start_time_s=None, deleted=True)],
            {"deleted": PodMetric(1)},
            "cpu",
            0,
            set(),
            set(),
            {"deleted"},
        ),
        (
            "ignore pods in a failed state",
            [Pod("failed", phase="Failed", ready=None, start_time_s=None)],
            {"failed": PodMetric(1)},
            "cpu",
            0,
            set(),
            set(),
            {"failed"},
        ),
    ]


@pytest.mark.parametrize(
    ("pods", "metrics", "resource", "ready", "unready", "missing", "ignored"),
    [pytest.param(*case[1:], id=f"TestGroupPods/{case[0]}") for case in _group_cases()],
)
def test_group_pods_matches_kubernetes(pods, metrics, resource, ready, unready, missing, ignored):
    groups = group_pods(pods, metrics, resource, 120.0, 10.0, NOW_S)
    assert groups.ready_pod_count == ready
    assert groups.unready_pods == unready
    assert groups.missing_pods == missing
    assert groups.ignored_pods == ignored


@pytest.mark.parametrize(
    ("containers", "container", "expected"),
    [
        pytest.param(
            (("container1", 100), ("container2", 50)),
            "",
            150,
            id="TestCalculatePodRequests/pod with regular containers",
        ),
        pytest.param(
            (("container1", 100), ("container2", 50)),
            "container1",
            100,
            id="TestCalculatePodRequests/calculate requests with special container",
        ),
    ],
)
def test_calculate_requests_matches_kubernetes(containers, container, expected):
    assert calculate_requests([Pod("test-pod", container_requests_milli=containers)], container, "cpu") == {
        "test-pod": expected
    }


def test_calculate_requests_names_the_missing_request():
    """TestCalculatePodRequests/container missing requests."""
    pods = [Pod("test-pod", container_requests_milli=(("container1", None),))]
    with pytest.raises(MetricUnavailableError, match="missing request for cpu in container container1 of Pod test-pod"):
        calculate_requests(pods, "", "cpu")


def test_utilization_is_truncated_before_the_ratio():
    # 587.5 % truncates to 587, so the ratio is 5.87 (TestReplicaCalcSuperfluousMetrics).
    metrics = {"a": PodMetric(5875)}
    ratio = get_resource_utilization_ratio(metrics, {"a": 1000}, 100)
    assert ratio.utilization_pct == 587
    assert ratio.usage_ratio == 5.87


def test_tolerance_band_is_inclusive_and_per_direction():
    tolerances = Tolerances(scale_down=2.0, scale_up=0.08)
    assert tolerances.is_within(1.08)
    assert not tolerances.is_within(1.09)
    assert tolerances.is_within(0.0)  # no ratio at all triggers a scale-down
    assert Tolerances().is_within(0.9) and Tolerances().is_within(1.1)
    assert str(Tolerances()) == "[down:10.0%, up:10.0%]"


def test_scale_from_zero_ignores_tolerance_and_pods():
    # getUsageRatioReplicaCount with currentReplicas == 0: ceil(ratio), no pod list needed.
    assert get_external_metric_replicas(0, 1000, [1000], DEFAULT, []).replica_count == 1
    assert get_external_metric_replicas(0, 1000, [1050], DEFAULT, []).replica_count == 2
    assert get_object_metric_replicas(0, 1000, 0, DEFAULT, []).replica_count == 0


def test_external_value_without_pods_is_an_error():
    with pytest.raises(MetricUnavailableError, match="unable to calculate ready pods: no pods returned"):
        get_external_metric_replicas(3, 1000, [5000], DEFAULT, [])
