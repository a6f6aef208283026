"""Tests for planner.autoscaler.horizontal: worked examples, Kubernetes controller cases and properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.autoscaler.behavior import (
    HorizontalPodAutoscalerBehavior,
    HPAScalingPolicy,
    HPAScalingRules,
    TimestampedRecommendation,
    TimestampedScaleEvent,
)
from planner.autoscaler.horizontal import (
    SCALE_TO_ZERO_LEGACY,
    ExternalReading,
    FailedReading,
    HorizontalController,
    ObjectReading,
    PodMetricsReading,
    compute_replicas_for_metrics,
    describe_conditions,
)
from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
from planner.autoscaler.replica_calculator import Pod, PodMetric, ready_pods
from planner.dynamics.kv_ramp import ramp_replicas

EMPTY_BEHAVIOR = HorizontalPodAutoscalerBehavior()  # `behavior: {}`: every field defaulted


def external(target_type: str, target_milli: int, name: str = "s0-prometheus") -> MetricSpec:
    if target_type == "AverageValue":
        return MetricSpec("External", name, MetricTarget("AverageValue", average_value_milli=target_milli))
    return MetricSpec("External", name, MetricTarget("Value", value_milli=target_milli))


def pods_metric(target_milli: int, name: str = "qps") -> MetricSpec:
    return MetricSpec("Pods", name, MetricTarget("AverageValue", average_value_milli=target_milli))


def cpu(target_pct: int) -> MetricSpec:
    return MetricSpec("Resource", "cpu", MetricTarget("Utilization", average_utilization_pct=target_pct))


def hpa(*metrics, min_replicas=1, max_replicas=100, behavior=None) -> HorizontalPodAutoscalerSpec:
    return HorizontalPodAutoscalerSpec("test-hpa", max_replicas, tuple(metrics), min_replicas, behavior)


def proposal(spec, current, readings, ready=None):
    ready = current if ready is None else ready
    pods = ready_pods(ready, current - ready)
    outcome = compute_replicas_for_metrics(
        spec.metrics, readings, current, current, pods, HorizontalController(spec).tolerances, 0.0
    )
    return outcome


# --- Worked examples (seed articles) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("total_waiting", "ratio", "expected"),
    [pytest.param(20.0, 2.5, 10, id="W1"), pytest.param(9.0, 1.125, 5, id="W2"), pytest.param(8.6, 1.075, 4, id="W3")],
)
def test_w1_w3_queue_depth_average_value(total_waiting, ratio, expected):
    spec = hpa(external("AverageValue", 2000))
    outcome = proposal(spec, 4, [ExternalReading((round(total_waiting * 1000),))])
    (metric,) = outcome.outcomes
    assert metric.usage_ratio == pytest.approx(ratio, rel=1e-12)
    assert metric.within_tolerance is (expected == 4)
    assert outcome.replicas == expected


@pytest.mark.parametrize(
    "behavior", [pytest.param(EMPTY_BEHAVIOR, id="behavior-defaults"), pytest.param(None, id="legacy-no-behavior")]
)
def test_w4_default_scale_up_takes_two_periods(behavior):
    """W4: 4 -> 10 asked for at once; the default policy (+100 % or +4 per 15 s) gives 4 -> 8 -> 10."""
    controller = HorizontalController(hpa(external("AverageValue", 2000), behavior=behavior))
    replicas, history = 4, []
    for now_s in (0.0, 15.0, 30.0):
        result = controller.reconcile_autoscaler(now_s, replicas, [ExternalReading((20000,))])
        replicas = result.desired_replicas
        history.append((replicas, result.scaling_limited.reason))
    assert [r for r, _ in history] == [8, 10, 10]
    assert history[0][1] == "ScaleUpLimit"


def test_w4_policy_period_is_strict():
    """An event exactly periodSeconds old no longer counts (getReplicasChangePerPeriod uses After)."""
    controller = HorizontalController(hpa(external("AverageValue", 2000), behavior=EMPTY_BEHAVIOR))
    assert controller.reconcile_autoscaler(0.0, 4, [ExternalReading((20000,))]).desired_replicas == 8
    assert controller.reconcile_autoscaler(14.9, 8, [ExternalReading((20000,))]).desired_replicas == 8
    assert controller.reconcile_autoscaler(15.0, 8, [ExternalReading((20000,))]).desired_replicas == 10


def test_w5_queue_integral_overshoots():
    """W5: queue 60 with 4 Ready replicas asks for ceil(4 x 60/4/2) = 30."""
    outcome = proposal(hpa(external("AverageValue", 2000)), 4, [ExternalReading((60000,))])
    assert outcome.replicas == 30


def test_w6_pinned_gpu_utilization_grows_to_max():
    """W6: target 70 %, every pod reads 97 % -> ratio 1.386 on every evaluation, up to maxReplicas."""
    spec = hpa(pods_metric(70_000), max_replicas=16, behavior=EMPTY_BEHAVIOR)
    controller = HorizontalController(spec)
    replicas, seen = 4, [4]
    for tick in range(12):
        pods = ready_pods(replicas, 0)
        reading = PodMetricsReading({pod.name: PodMetric(97_000) for pod in pods})
        replicas = controller.reconcile_autoscaler(15.0 * tick, replicas, [reading], pods=pods).desired_replicas
        seen.append(replicas)
    metric = controller.reconcile_autoscaler(999.0, replicas, [reading], pods=pods).metrics.outcomes[0]
    assert metric.usage_ratio == pytest.approx(97 / 70)
    assert seen[:4] == [4, 6, 9, 13]
    assert seen[-1] == 16 and all(b >= a for a, b in itertools.pairwise(seen))


def test_w7_target_close_to_pinned_value_never_acts():
    """W7: target 95 %, metric 97 % -> ratio 1.021, inside the 0.1 tolerance: no action."""
    spec = hpa(pods_metric(95_000), behavior=EMPTY_BEHAVIOR)
    controller = HorizontalController(spec)
    pods = ready_pods(4, 0)
    reading = PodMetricsReading({pod.name: PodMetric(97_000) for pod in pods})
    for tick in range(20):
        result = controller.reconcile_autoscaler(15.0 * tick, 4, [reading], pods=pods)
        assert result.desired_replicas == 4 and not result.rescale
    assert result.metrics.outcomes[0].within_tolerance


def _w10_grid():
    return [(n, kv_milli) for n in range(1, 21) for kv_milli in range(50, 1001, 50)]


def test_w10_sum_average_value_equals_avg_value_when_all_ready():
    """W10: sum(kv) with AverageValue 0.8 and avg(kv) with Value 0.8 give the same count (all pods Ready)."""
    for n, kv_milli in _w10_grid():
        total = proposal(hpa(external("AverageValue", 800)), n, [ExternalReading((n * kv_milli,))])
        mean = proposal(hpa(external("Value", 800)), n, [ExternalReading((kv_milli,))])
        assert total.replicas == mean.replicas, (n, kv_milli)


def test_w10_avg_with_average_value_divides_twice():
    """W10: avg(kv) under an AverageValue target scales down a saturated fleet."""
    n, kv_milli = 10, 950
    right = proposal(hpa(external("AverageValue", 800)), n, [ExternalReading((n * kv_milli,))])
    wrong = proposal(hpa(external("AverageValue", 800)), n, [ExternalReading((kv_milli,))])
    assert right.replicas == 12  # ceil(9.5 / 0.8)
    assert wrong.replicas == 2  # ceil(0.95 / 0.8): the mean divided by the pod count again


def test_w34_transient_queue_asks_for_eight():
    """W34: threshold 5 on sum(num_requests_waiting), AverageValue: a queue of 40 asks for 8."""
    assert proposal(hpa(external("AverageValue", 5000)), 1, [ExternalReading((40000,))]).replicas == 8


def test_kv_bounded_ratio_agrees_with_kv_ramp():
    """A saturated avg KV (1.0) on a Value target: each decision matches planner.dynamics.kv_ramp."""
    for target_milli, start in itertools.product((500, 600, 700, 750, 800, 850, 900, 950), (1, 2, 4, 7, 10)):
        expected = ramp_replicas(start, target_milli / 1000, 5).tolist()
        spec = hpa(external("Value", target_milli), max_replicas=10_000)
        replicas, got = start, [start]
        for _ in range(5):
            # each warmup: the previous pods are all Ready, avg KV is pinned at 1.0
            replicas = proposal(spec, replicas, [ExternalReading((1000,))]).replicas
            got.append(replicas)
        assert got == expected, (target_milli, start)


# --- Kubernetes horizontal_test.go cases --------------------------------------------------------


def _cpu_reading(levels):
    return PodMetricsReading({f"pod-{i}": PodMetric(level, -1e9, 60.0) for i, level in enumerate(levels)})


def _cpu_pods(count):
    return tuple(
        Pod(
            f"pod-{i}",
            start_time_s=-1e9,
            ready_transition_s=-1e9,
            container_requests_milli=(("container1", 500), ("container2", 500)),
        )
        for i in range(count)
    )


def test_scale_up_one_metric_empty():
    """TestScaleUpOneMetricEmpty: CPU asks for 4, the external metric fails; partial metrics may scale up."""
    spec = hpa(cpu(30), external("Value", 100, "qps"), min_replicas=2, max_replicas=6)
    controller = HorizontalController(spec, scale_up_limit_factor=8)
    result = controller.reconcile_autoscaler(
        0.0, 3, [_cpu_reading([300, 400, 500]), FailedReading("something went wrong")], pods=_cpu_pods(3)
    )
    assert result.desired_replicas == 4
    assert result.scaling_active.reason == "ValidMetricFound"
    assert result.error.startswith("invalid metrics (1 invalid out of 2)")


def test_no_scale_down_one_metric_invalid():
    """TestNoScaleDownOneMetricInvalid: CPU asks for 3 of 5, another metric is invalid: no scale-down."""
    spec = hpa(
        cpu(50), MetricSpec("CheddarCheese", "x", MetricTarget("Value", value_milli=1)), min_replicas=2, max_replicas=6
    )
    controller = HorizontalController(spec, scale_up_limit_factor=8)
    result = controller.reconcile_autoscaler(
        0.0, 5, [_cpu_reading([100, 300, 500, 250, 250]), FailedReading("unused")], pods=_cpu_pods(5)
    )
    assert result.desired_replicas == 5 and not result.rescale
    assert result.metric_desired_replicas == -1
    assert result.scaling_active.reason == "InvalidMetricSourceType"


def test_no_scale_down_one_metric_empty():
    """TestNoScaleDownOneMetricEmpty: same with a failing External metric."""
    spec = hpa(cpu(50), external("Value", 1000, "qps"), min_replicas=2, max_replicas=6)
    controller = HorizontalController(spec, scale_up_limit_factor=8)
    result = controller.reconcile_autoscaler(
        0.0,
        5,
        [_cpu_reading([100, 300, 500, 250, 250]), FailedReading("something went wrong")],
        pods=_cpu_pods(5),
    )
    assert result.desired_replicas == 5
    assert result.scaling_active.reason == "FailedGetExternalMetric"


def test_all_metrics_invalid_changes_nothing():
    controller = HorizontalController(hpa(external("Value", 1000)))
    result = controller.reconcile_autoscaler(0.0, 3, [FailedReading("prometheus query returned nothing")])
    assert result.desired_replicas == 3 and not result.rescale
    assert "invalid metrics (1 invalid out of 1)" in result.error


def test_initial_recommendation_holds_the_first_scale_down():
    """recordInitialRecommendation seeds the history with the current count (legacy path)."""
    controller = HorizontalController(hpa(external("AverageValue", 1000)))
    low = [ExternalReading((1000,))]  # asks for 1
    first = controller.reconcile_autoscaler(0.0, 5, low)
    assert first.desired_replicas == 5 and first.able_to_scale.reason == "ScaleDownStabilized"
    assert controller.reconcile_autoscaler(300.0, 5, low).desired_replicas == 5  # seed is exactly 300 s old
    assert controller.reconcile_autoscaler(300.5, 5, low).desired_replicas == 1


def test_behavior_scale_down_window_and_pods_policy():
    """A 120 s window, then one pod per 60 s (seed 003, attempt 3 style)."""
    behavior = HorizontalPodAutoscalerBehavior(
        scale_down=HPAScalingRules(stabilization_window_seconds=120, policies=(HPAScalingPolicy("Pods", 1, 60),))
    )
    controller = HorizontalController(hpa(external("AverageValue", 800), behavior=behavior))
    replicas, trace = 4, []
    for tick in range(17):
        result = controller.reconcile_autoscaler(15.0 * tick, replicas, [ExternalReading((100,))])
        replicas = result.desired_replicas
        trace.append(replicas)
    # Held while the t=0 records are strictly inside the window; at t=120 they drop out
    # (Go's After is strict), then one pod per 60 s: 4 until t=105, 3 at t=120, 2 at t=180, 1 at t=240.
    assert trace[:8] == [4] * 8
    assert trace[8:12] == [3] * 4
    assert trace[12:16] == [2] * 4
    assert trace[16] == 1


@pytest.mark.parametrize(
    ("current", "min_replicas", "max_replicas", "expected", "reason"),
    [
        (12, 1, 10, 10, "Current number of replicas above Spec.MaxReplicas"),
        (1, 3, 10, 3, "Current number of replicas below Spec.MinReplicas"),
    ],
)
def test_early_exits(current, min_replicas, max_replicas, expected, reason):
    controller = HorizontalController(
        hpa(external("Value", 1000), min_replicas=min_replicas, max_replicas=max_replicas)
    )
    result = controller.reconcile_autoscaler(0.0, current, [FailedReading("not evaluated")])
    assert (result.desired_replicas, result.rescale_reason) == (expected, reason)
    assert result.metrics is None


def test_zero_replicas_disables_scaling_unless_min_is_zero():
    controller = HorizontalController(hpa(external("Value", 1000)))
    result = controller.reconcile_autoscaler(0.0, 0, [ExternalReading((5000,))])
    assert result.desired_replicas == 0 and result.scaling_active.reason == "ScalingDisabled"
    # minReplicas 0 (HPAScaleToZero): an Object/External Value metric scales from zero to ceil(ratio), in
    # Kubernetes 1.37 once the HPA scaled the target to zero itself (ScaledToZero True), before 1.36 always.
    for mode in ({"scaled_to_zero": True}, {"scale_to_zero": SCALE_TO_ZERO_LEGACY}):
        controller = HorizontalController(hpa(external("Value", 1000), min_replicas=0), **mode)
        assert controller.reconcile_autoscaler(0.0, 0, [ExternalReading((2500,))]).desired_replicas == 3
        controller = HorizontalController(
            hpa(
                MetricSpec("Object", "q", MetricTarget("Value", value_milli=1000), described_object_kind="Service"),
                min_replicas=0,
            ),
            **mode,
        )
        assert controller.reconcile_autoscaler(0.0, 0, [ObjectReading(1000)]).desired_replicas == 1


def test_external_value_counts_only_ready_pods():
    """Object/External Value multiply by Running+Ready pods: 3 replicas, 1 Ready, ratio 1.95 -> 2."""
    controller = HorizontalController(hpa(external("Value", 4400), behavior=EMPTY_BEHAVIOR))
    result = controller.reconcile_autoscaler(0.0, 3, [ExternalReading((8600,))], pods=ready_pods(1, 2))
    assert result.metric_desired_replicas == 2
    assert result.desired_replicas == 3  # the scale-down is held by the seeded stabilization window


def test_per_direction_tolerance_from_behavior():
    behavior = HorizontalPodAutoscalerBehavior(
        scale_up=HPAScalingRules(tolerance=0.01), scale_down=HPAScalingRules(tolerance=0.5)
    )
    controller = HorizontalController(hpa(external("AverageValue", 1000), behavior=behavior))
    assert controller.tolerances.scale_up == 0.01 and controller.tolerances.scale_down == 0.5
    assert controller.reconcile_autoscaler(0.0, 10, [ExternalReading((10500,))]).desired_replicas == 11
    assert (
        proposal(hpa(external("AverageValue", 1000), behavior=behavior), 10, [ExternalReading((6000,))]).replicas == 10
    )


def test_several_metrics_take_the_largest():
    spec = hpa(external("AverageValue", 40_000, "inflight"), external("Value", 800, "kv"))
    outcome = proposal(spec, 4, [ExternalReading((200_000,)), ExternalReading((1000,))])
    assert [m.replica_count for m in outcome.outcomes] == [5, 5]
    outcome = proposal(spec, 4, [ExternalReading((400_000,)), ExternalReading((1000,))])
    assert [m.replica_count for m in outcome.outcomes] == [10, 5] and outcome.replicas == 10
    assert outcome.metric == "external metric inflight"


# --- Properties --------------------------------------------------------------------------------

policies = st.lists(
    st.builds(HPAScalingPolicy, st.sampled_from(["Pods", "Percent"]), st.integers(1, 300), st.integers(1, 600)),
    min_size=1,
    max_size=3,
).map(tuple)
rules = st.builds(
    HPAScalingRules,
    st.one_of(st.none(), st.integers(0, 600)),
    st.one_of(st.none(), st.sampled_from(["Max", "Min"])),
    st.one_of(st.none(), policies),
)
behaviors = st.one_of(
    st.none(), st.builds(HorizontalPodAutoscalerBehavior, st.one_of(st.none(), rules), st.one_of(st.none(), rules))
)
single_metric = st.one_of(
    st.tuples(st.just("AverageValue"), st.integers(1, 100_000)),
    st.tuples(st.just("Value"), st.integers(1, 100_000)),
    st.tuples(st.just("Pods"), st.integers(1, 100_000)),
)


def _spec_and_reading(kind, target, usage_milli, current):
    if kind == "Pods":
        pods = ready_pods(current, 0)
        return pods_metric(target), PodMetricsReading({p.name: PodMetric(usage_milli) for p in pods})
    total = usage_milli * current if kind == "AverageValue" else usage_milli
    return external(kind, target), ExternalReading((total,))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(0, 30),
    single_metric,
    st.integers(0, 1_000_000),
    behaviors,
    st.lists(st.integers(0, 1_000_000), min_size=1, max_size=6),
)
def test_result_stays_within_min_and_max(min_replicas, spread, metric, usage_milli, behavior, later_usages):
    max_replicas = min_replicas + spread
    kind, target = metric
    current = min_replicas
    spec, _ = _spec_and_reading(kind, target, usage_milli, current)
    controller = HorizontalController(
        hpa(spec, min_replicas=min_replicas, max_replicas=max_replicas, behavior=behavior)
    )
    for step, usage in enumerate([usage_milli, *later_usages]):
        _, reading = _spec_and_reading(kind, target, usage, current)
        result = controller.reconcile_autoscaler(15.0 * step, current, [reading], pods=ready_pods(current, 0))
        assert min_replicas <= result.desired_replicas <= max_replicas
        current = result.desired_replicas


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 50), single_metric, st.floats(0.9, 1.1), behaviors)
def test_inside_tolerance_nothing_changes(current, metric, ratio, behavior):
    kind, target = metric
    usage_milli = round(target * ratio)
    spec, reading = _spec_and_reading(kind, target, usage_milli, current)
    controller = HorizontalController(hpa(spec, max_replicas=1000, behavior=behavior))
    result = controller.reconcile_autoscaler(0.0, current, [reading], pods=ready_pods(current, 0))
    assume(result.metrics.outcomes[0].within_tolerance)
    assert result.desired_replicas == current and not result.rescale


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 50), single_metric, st.integers(0, 1_000_000), behaviors, st.integers(0, 3))
def test_single_metric_never_moves_against_its_ratio(current, metric, usage_milli, behavior, history_steps):
    kind, target = metric
    spec, reading = _spec_and_reading(kind, target, usage_milli, current)
    controller = HorizontalController(hpa(spec, max_replicas=1000, behavior=behavior))
    now_s = 0.0
    for _ in range(history_steps):  # some history at the current count first
        controller.reconcile_autoscaler(
            now_s, current, [_spec_and_reading(kind, target, target, current)[1]], pods=ready_pods(current, 0)
        )
        now_s += 15.0
    result = controller.reconcile_autoscaler(now_s, current, [reading], pods=ready_pods(current, 0))
    ratio = result.metrics.outcomes[0].usage_ratio
    if ratio > 1.0:
        assert result.desired_replicas >= current
    elif ratio < 1.0:
        assert result.desired_replicas <= current
    else:
        assert result.desired_replicas == current


# --- status conditions, as `kubectl describe hpa` shows them ----------------------------------------


def test_conditions_after_a_rescale_are_kubernetes_status_ok():
    """TestScaleUp (horizontal_test.go): 3 -> 5 at CPU target 30 %, and its ``statusOk`` conditions."""
    spec = hpa(cpu(30), min_replicas=2, max_replicas=6)
    controller = HorizontalController(spec, scale_up_limit_factor=8)
    result = controller.reconcile_autoscaler(0.0, 3, [_cpu_reading([300, 500, 700])], pods=_cpu_pods(3))
    assert result.desired_replicas == 5
    assert [str(c) for c in result.conditions] == [
        "AbleToScale True SucceededRescale the HPA controller was able to update the target scale to 5",
        "ScalingActive True ValidMetricFound the HPA was able to successfully calculate a replica count "
        "from cpu resource utilization (percentage of request)",
        "ScalingLimited False DesiredWithinRange the desired count is within the acceptable range",
        # Kubernetes 1.37 (HPAScaleToZero on by default) records after every rescale whether it went to zero.
        "ScaledToZero False NotScaledToZero the HPA controller did not scale the workload to zero",
    ]
    # the stabilization verdict the rescale overwrote is still there for explanations
    assert result.stabilization.reason == "ReadyForNewScale"


def test_conditions_without_a_rescale_keep_the_stabilization_verdict():
    controller = HorizontalController(hpa(external("AverageValue", 1000), behavior=EMPTY_BEHAVIOR))
    steady = controller.reconcile_autoscaler(0.0, 4, [ExternalReading((4000,))])
    assert not steady.rescale
    assert str(steady.able_to_scale) == "AbleToScale True ReadyForNewScale recommended size matches current size"
    held = controller.reconcile_autoscaler(15.0, 4, [ExternalReading((1000,))])
    assert not held.rescale and held.able_to_scale.reason == "ScaleDownStabilized"
    assert held.able_to_scale == held.stabilization


def test_conditions_when_metrics_fail_or_scaling_is_disabled():
    controller = HorizontalController(hpa(external("Value", 1000)))
    failed = controller.reconcile_autoscaler(0.0, 3, [FailedReading("no data")])
    assert [(c.type, c.status_text, c.reason) for c in failed.conditions] == [
        ("AbleToScale", "True", "SucceededGetScale"),
        ("ScalingActive", "False", "FailedGetExternalMetric"),
    ]
    assert failed.able_to_scale.message == "the HPA controller was able to get the target's current scale"
    disabled = controller.reconcile_autoscaler(15.0, 0, [ExternalReading((1,))])
    assert [c.reason for c in disabled.conditions] == ["SucceededGetScale", "ScalingDisabled"]


def test_conditions_when_the_count_is_above_max():
    """Above maxReplicas the controller rescales without reading metrics."""
    result = HorizontalController(hpa(external("Value", 1000), max_replicas=4)).reconcile_autoscaler(
        0.0, 9, [ExternalReading((1,))]
    )
    assert result.desired_replicas == 4
    assert [str(c) for c in result.conditions] == [
        "AbleToScale True SucceededRescale the HPA controller was able to update the target scale to 4",
        "ScaledToZero False NotScaledToZero the HPA controller did not scale the workload to zero",
    ]


def test_describe_conditions_is_the_kubectl_table():
    spec = hpa(cpu(30), min_replicas=2, max_replicas=4)
    result = HorizontalController(spec).reconcile_autoscaler(0.0, 3, [_cpu_reading([300, 500, 700])], pods=_cpu_pods(3))
    assert describe_conditions(result.conditions).splitlines() == [
        "Type            Status  Reason            Message",
        "----            ------  ------            -------",
        "AbleToScale     True    SucceededRescale  the HPA controller was able to update the target scale to 4",
        "ScalingActive   True    ValidMetricFound  the HPA was able to successfully calculate a replica count "
        "from cpu resource utilization (percentage of request)",
        "ScalingLimited  True    TooManyReplicas   the desired replica count is more than the maximum replica count",
        "ScaledToZero    False   NotScaledToZero   the HPA controller did not scale the workload to zero",
    ]


# --- history given to the constructor ----------------------------------------------------------------


def test_history_from_the_constructor_equals_history_lived_through():
    """W4 resumed at 14.9 s: a controller built with the 0 s history decides as the one that ran it."""
    spec = hpa(external("AverageValue", 2000), behavior=EMPTY_BEHAVIOR)
    lived = HorizontalController(spec)
    lived.reconcile_autoscaler(0.0, 4, [ExternalReading((20000,))])
    resumed = HorizontalController(
        spec,
        recommendations=lived.recommendations,
        scale_up_events=lived.scale_up_events,
        scale_down_events=lived.scale_down_events,
    )
    assert resumed.scale_up_events == (TimestampedScaleEvent(4, 0.0),)
    for now_s, current in ((14.9, 8), (15.0, 8), (30.0, 10)):
        a = lived.reconcile_autoscaler(now_s, current, [ExternalReading((20000,))])
        b = resumed.reconcile_autoscaler(now_s, current, [ExternalReading((20000,))])
        assert a == b
    fresh = HorizontalController(spec).reconcile_autoscaler(14.9, 8, [ExternalReading((20000,))])
    assert fresh.desired_replicas == 10  # without the event the +4 at 0 s is forgotten


def test_seeded_recommendations_hold_a_scale_down():
    """Legacy path: a recommendation of 10 made 100 s ago holds 10 replicas (5 min window)."""
    spec = hpa(external("AverageValue", 1000))
    seeded = HorizontalController(spec, recommendations=(TimestampedRecommendation(10, 0.0),))
    result = seeded.reconcile_autoscaler(100.0, 10, [ExternalReading((5000,))])
    assert result.metric_desired_replicas == 5 and result.desired_replicas == 10
    assert result.able_to_scale.reason == "ScaleDownStabilized"
    assert seeded.reconcile_autoscaler(301.0, 10, [ExternalReading((5000,))]).desired_replicas == 5
