"""Tests for planner.autoscaler.keda: the HPA KEDA creates, activation, null values, fallback, modifiers, zero."""

from __future__ import annotations

import dataclasses

import pytest

from planner.autoscaler.behavior import (
    HorizontalPodAutoscalerBehavior,
    HPAScalingPolicy,
    HPAScalingRules,
)
from planner.autoscaler.defaults import DEFAULT_COOLDOWN_PERIOD_S, DEFAULT_POLLING_INTERVAL_S
from planner.autoscaler.formula import FormulaError
from planner.autoscaler.horizontal import ExternalReading, FailedReading, HorizontalController
from planner.autoscaler.keda import (
    COMPOSITE_METRIC_NAME,
    Fallback,
    KedaController,
    ScaledObjectSpec,
    ScalingModifiers,
    Trigger,
    evaluate_triggers,
    hpa_for_scaled_object,
    keda_quantity_milli,
    request_scale,
)
from planner.autoscaler.replica_calculator import ready_pods
from planner.errors import PlannerInputError


def prometheus(index, threshold, **kwargs):
    return Trigger(index=index, type="prometheus", threshold=threshold, **kwargs)


def test_defaults_match_keda():
    so = ScaledObjectSpec("chat", (prometheus(0, 5.0),))
    assert so.effective_min_replica_count == 0
    assert so.effective_polling_interval_s == DEFAULT_POLLING_INTERVAL_S == 30
    assert so.effective_cooldown_period_s == DEFAULT_COOLDOWN_PERIOD_S == 300
    hpa = hpa_for_scaled_object(so)
    assert (hpa.name, hpa.min_replicas, hpa.max_replicas, hpa.behavior) == ("keda-hpa-chat", 1, 100, None)
    (metric,) = hpa.metrics
    assert (metric.type, metric.name, metric.target.type, metric.target.average_value_milli) == (
        "External",
        "s0-prometheus",
        "AverageValue",
        5000,
    )


def test_behavior_is_passed_through_and_value_type_kept():
    behavior = HorizontalPodAutoscalerBehavior(
        scale_down=HPAScalingRules(stabilization_window_seconds=900, policies=(HPAScalingPolicy("Pods", 1, 120),))
    )
    so = ScaledObjectSpec(
        "llama",
        (prometheus(0, 40.0), prometheus(1, 0.8, metric_type="Value")),
        min_replica_count=2,
        max_replica_count=12,
        behavior=behavior,
    )
    hpa = hpa_for_scaled_object(so)
    assert hpa.behavior is behavior
    assert (hpa.min_replicas, hpa.max_replicas) == (2, 12)
    assert [(m.name, m.target.type) for m in hpa.metrics] == [
        ("s0-prometheus", "AverageValue"),
        ("s1-prometheus", "Value"),
    ]
    assert hpa.metrics[1].target.value_milli == 800


def test_values_reach_the_hpa_rounded_to_milli():
    assert keda_quantity_milli(8.6) == 8600
    assert keda_quantity_milli(0.12345) == 123
    assert keda_quantity_milli(0.0006) == 1
    assert keda_quantity_milli(float("nan")) == 0


def _eval(so, values, **kwargs):
    hpa = hpa_for_scaled_object(so)
    kwargs.setdefault("current_replicas", 2)
    kwargs.setdefault("ready_replicas", 2)
    return hpa, evaluate_triggers(so, hpa, values, **kwargs)


@pytest.mark.parametrize(("value", "active"), [(3.0, False), (3.001, True), (0.0, False)])
def test_activation_is_strictly_greater(value, active):
    so = ScaledObjectSpec("q", (prometheus(0, 3.0, activation_threshold=3.0),))
    _, evaluation = _eval(so, {0: value})
    assert evaluation.is_active is active


def test_default_activation_threshold_is_zero():
    so = ScaledObjectSpec("q", (prometheus(0, 5.0),))
    assert not _eval(so, {0: 0.0})[1].is_active
    assert _eval(so, {0: 0.001})[1].is_active


def test_ignore_null_values():
    lenient = ScaledObjectSpec("q", (prometheus(0, 5.0),))
    _, evaluation = _eval(lenient, {0: None})
    assert evaluation.readings == (ExternalReading((0,)),) and not evaluation.is_error
    strict = ScaledObjectSpec("q", (prometheus(0, 5.0, ignore_null_values=False),))
    hpa, evaluation = _eval(strict, {0: None})
    assert isinstance(evaluation.readings[0], FailedReading) and evaluation.is_error
    assert "target may be lost" in evaluation.readings[0].message
    # the HPA then has no valid metric and changes nothing
    result = HorizontalController(hpa).reconcile_autoscaler(0.0, 3, evaluation.readings)
    assert result.desired_replicas == 3 and result.scaling_active.reason == "FailedGetExternalMetric"


@pytest.mark.parametrize(("failures", "expected"), [(3, 4), (4, 6)])
def test_fallback_after_more_than_failure_threshold(failures, expected):
    so = ScaledObjectSpec("q", (prometheus(0, 5.0),), fallback=Fallback(failure_threshold=3, replicas=6))
    hpa, evaluation = _eval(
        so,
        {},
        errors={0: "connection refused"},
        consecutive_failures={0: failures},
        current_replicas=4,
        ready_replicas=4,
    )
    result = HorizontalController(
        hpa,
    ).reconcile_autoscaler(0.0, 4, evaluation.readings)
    assert result.metric_desired_replicas == (6 if failures > 3 else -1)
    assert result.desired_replicas == expected


def test_fallback_on_a_value_target_divides_by_ready_replicas():
    so = ScaledObjectSpec(
        "q", (prometheus(0, 0.8, metric_type="Value"),), fallback=Fallback(failure_threshold=0, replicas=6)
    )
    hpa, evaluation = _eval(so, {}, errors={0: "down"}, current_replicas=4, ready_replicas=3)
    assert evaluation.readings[0] == ExternalReading((1600,))  # 0.8 x 6 / 3
    result = HorizontalController(hpa).reconcile_autoscaler(0.0, 4, evaluation.readings, pods=ready_pods(3, 1))
    assert result.metric_desired_replicas == 6


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [("static", 5), ("currentReplicas", 3), ("currentReplicasIfHigher", 5), ("currentReplicasIfLower", 3)],
)
def test_fallback_behaviors(behavior, expected):
    so = ScaledObjectSpec("q", (prometheus(0, 2.0),), fallback=Fallback(0, 5, behavior))
    _, evaluation = _eval(so, {}, errors={0: "down"}, current_replicas=3, ready_replicas=3)
    assert evaluation.readings[0] == ExternalReading((2000 * expected,))


def test_several_triggers_are_or():
    """Each trigger proposes a count and the HPA takes the largest (W in seed 000's example)."""
    so = ScaledObjectSpec(
        "llama",
        (prometheus(0, 40.0), prometheus(1, 0.8, metric_type="Value")),
        min_replica_count=2,
        max_replica_count=12,
    )
    hpa, evaluation = _eval(so, {0: 150.0, 1: 1.0}, current_replicas=4, ready_replicas=4)
    outcome = HorizontalController(hpa).reconcile_autoscaler(0.0, 4, evaluation.readings, pods=ready_pods(4, 0)).metrics
    assert [m.replica_count for m in outcome.outcomes] == [4, 5]  # inflight within tolerance; KV asks for 5
    assert outcome.replicas == 5


MODIFIERS = ScalingModifiers(
    formula=(
        "let demand = max(queue, running / 16); demand <= replicas ? demand : max(demand - (pending ?? 0), replicas)"
    ),
    target="1",
)


def _modifier_so(**kwargs):
    triggers = tuple(prometheus(i, 1.0, name=n) for i, n in enumerate(["queue", "running", "pending", "replicas"]))
    return ScaledObjectSpec(
        "guard",
        triggers,
        min_replica_count=1,
        max_replica_count=8,
        scaling_modifiers=kwargs.pop("modifiers", MODIFIERS),
        **kwargs,
    )


def test_scaling_modifiers_replace_external_metrics_with_a_composite():
    hpa = hpa_for_scaled_object(_modifier_so())
    (metric,) = hpa.metrics
    assert (metric.name, metric.target.type, metric.target.average_value_milli) == (
        COMPOSITE_METRIC_NAME,
        "AverageValue",
        1000,
    )
    _, evaluation = _eval(_modifier_so(), {0: 10.0, 1: 32.0, 2: 3.0, 3: 2.0})
    assert evaluation.composite_value_milli == 7000 and evaluation.is_active
    assert evaluation.readings == (ExternalReading((7000,)),)


def test_scaling_modifiers_activation_target():
    so = _modifier_so(modifiers=ScalingModifiers(MODIFIERS.formula, "1", activation_target="0.5"))
    assert not _eval(so, {0: 0.5, 1: 0.0, 2: 0.0, 3: 1.0})[1].is_active
    assert _eval(so, {0: 0.6, 1: 0.0, 2: 0.0, 3: 1.0})[1].is_active


def test_scaling_modifiers_that_try_to_run_code_are_rejected():
    for formula in ("__import__('os').system('rm -rf /')", "queue.__class__.__bases__", "open('/etc/passwd')"):
        so = _modifier_so(modifiers=ScalingModifiers(formula, "1"))
        with pytest.raises(
            FormulaError, match=r"spec\.advanced\.scalingModifiers\.formula: .*(not allowed|unexpected)"
        ):
            hpa_for_scaled_object(so)


@pytest.mark.parametrize(
    ("modifiers", "message"),
    [
        (ScalingModifiers("queue", ""), "target: formula is given but target is empty"),
        (ScalingModifiers("queue", "-1"), "expected a positive number"),
        (ScalingModifiers("queue", "1", metric_type="Utilization"), "metric type cannot be Utilization"),
        (ScalingModifiers("queue > 1", "1"), "formula must return a number"),
        (ScalingModifiers("nope", "1"), "unknown name 'nope'"),
    ],
)
def test_scaling_modifiers_validation(modifiers, message):
    with pytest.raises(PlannerInputError, match=message):
        hpa_for_scaled_object(_modifier_so(modifiers=modifiers))


def test_request_scale_from_and_to_zero():
    so = ScaledObjectSpec("q", (prometheus(0, 5.0),))
    assert request_scale(so, 0, True, False, 10.0, last_active_s=None).replicas == 1
    so3 = ScaledObjectSpec("q", (prometheus(0, 5.0),), min_replica_count=3)
    assert request_scale(so3, 0, True, False, 10.0, last_active_s=None).replicas == 3
    # inactive with replicas: wait for cooldownPeriod after the last activity (strictly longer)
    assert request_scale(so, 2, False, False, 300.0, last_active_s=0.0).replicas is None
    assert request_scale(so, 2, False, False, 300.5, last_active_s=0.0).replicas == 0
    # never active: initialCooldownPeriod (0 by default) from creation
    assert request_scale(so, 2, False, False, 0.5, last_active_s=None, created_s=0.0).replicas == 0
    # minReplicaCount above 0: KEDA leaves it to the HPA
    assert request_scale(so3, 3, False, False, 1e6, last_active_s=0.0).replicas is None


def test_keda_controller_goes_to_zero_and_back():
    so = ScaledObjectSpec("q", (prometheus(0, 5.0),), max_replica_count=10, cooldown_period_s=60.0)
    keda = KedaController(so)
    replicas = 0
    trace = []
    for tick in range(16):
        now_s = 15.0 * tick
        queue = 40.0 if 1 <= tick <= 4 else 0.0
        replicas = keda.step(now_s, replicas, {0: queue})
        trace.append(replicas)
    assert trace[0] == 0  # nothing waiting: stays at zero
    assert trace[1] == 4  # KEDA 0 -> 1, then the HPA's first step (legacy limit max(2x1, 4)) toward ceil(40/5)=8
    assert max(trace) == 8
    assert trace[-1] == 0  # back to zero once inactive for more than cooldownPeriod


def test_min_above_max_is_refused():
    with pytest.raises(PlannerInputError, match="MinReplicaCount=5 must be less than MaxReplicaCount=2"):
        hpa_for_scaled_object(ScaledObjectSpec("q", (prometheus(0, 5.0),), min_replica_count=5, max_replica_count=2))


def test_trigger_lookup_by_name_or_index():
    so = _modifier_so()
    assert so.trigger("running").index == 1 and so.trigger("2").name == "pending"
    with pytest.raises(PlannerInputError, match="no trigger named 'x'"):
        so.trigger("x")


def test_failure_count_moves_once_per_hpa_fetch():
    """KEDA counts failures in ``GetMetricsWithFallback`` (``pkg/fallback/fallback.go``), which only
    ``GetScaledObjectMetrics`` (``pkg/scaling/scale_handler.go``, the metrics adapter serving the HPA)
    calls; the scale loop's ``getScaledObjectState``/``getScalerState`` neither reads nor updates
    ``status.health``. So ``failureThreshold: 3`` falls back on the 4th failed HPA reconcile, however
    many polls ran in between, and ``step`` (a poll plus a reconcile) must count one failure, not two.
    """
    so = ScaledObjectSpec(
        "q",
        (prometheus(0, 5.0),),
        min_replica_count=1,
        max_replica_count=20,
        fallback=Fallback(failure_threshold=3, replicas=6),
    )
    keda = KedaController(so)
    replicas, seen = 2, []
    for tick in range(5):
        replicas = keda.step(15.0 * tick, replicas, {0: None}, errors={0: "connection refused"})
        seen.append((keda.failures[0], replicas))
    # the 4th failure falls back to 6; the legacy scale-up limit (max(2 x 2, 4)) takes two steps
    assert seen == [(1, 2), (2, 2), (3, 2), (4, 4), (5, 6)]
    # polls alone leave the count where it is
    for _ in range(10):
        keda.poll(100.0, replicas, {0: None}, errors={0: "connection refused"})
    assert keda.failures[0] == 5
    # one good fetch resets it (healthStatus.NumberOfFailures = 0)
    keda.reconcile(120.0, replicas, {0: 10.0})
    assert keda.failures[0] == 0


def test_a_failing_trigger_with_fallback_is_not_scaled_to_zero():
    """The scale loop applies no fallback: a failing trigger is an error poll (``isError``), and
    ``RequestScale`` leaves the target to the HPA's fallback instead of scaling it to zero."""
    so = ScaledObjectSpec(
        "q", (prometheus(0, 5.0),), cooldown_period_s=30.0, fallback=Fallback(failure_threshold=1, replicas=4)
    )
    keda = KedaController(so)
    replicas = 2
    for tick in range(12):
        replicas = keda.step(15.0 * tick, replicas, {0: None}, errors={0: "timeout"})
    assert replicas == 4 and keda.failures[0] == 12


# --- useCachedMetrics (GetScaledObjectMetrics reads the polling loop's records) ---------------------------


def test_without_the_cache_every_sync_reads_a_fresh_value():
    keda = KedaController(ScaledObjectSpec("chat", (prometheus(0, 5.0),), min_replica_count=1))
    keda.poll(0.0, 2, {0: 10.0})
    assert keda.metrics_cache == {}
    assert keda.reconcile(15.0, 2, {0: 40.0}).desired_replicas == 4  # ceil(40 / 5) = 8, held to 2 x 2


def test_with_the_cache_the_hpa_sees_the_value_of_the_last_poll():
    keda = KedaController(ScaledObjectSpec("chat", (prometheus(0, 5.0, use_cached_metrics=True),), min_replica_count=1))
    # Before the first poll the metrics server queries afresh.
    assert keda.served_values({0: 7.0}) == ({0: 7.0}, {})
    keda.poll(0.0, 2, {0: 10.0})
    assert keda.metrics_cache == {0: (10.0, None)}
    assert keda.served_values({0: 40.0}) == ({0: 10.0}, {})
    assert keda.reconcile(15.0, 2, {0: 40.0}).desired_replicas == 2  # 10 / (5 x 2) = 1: nothing changes
    # An error at the poll is served as the error; a fresh success in between does not hide it.
    keda.poll(30.0, 2, {}, errors={0: "prometheus unreachable"})
    assert keda.served_values({0: 40.0}) == ({0: None}, {0: "prometheus unreachable"})
    keda.reconcile(45.0, 2, {0: 40.0})
    assert keda.failures == {0: 1}


def test_only_cached_triggers_read_the_cache():
    so = ScaledObjectSpec(
        "chat", (prometheus(0, 5.0, use_cached_metrics=True), prometheus(1, 5.0)), min_replica_count=1
    )
    keda = KedaController(so)
    keda.poll(0.0, 2, {0: 10.0, 1: 10.0})
    assert keda.served_values({0: 40.0, 1: 40.0}) == ({0: 10.0, 1: 40.0}, {})


@pytest.mark.parametrize("kind", ["cpu", "memory", "cron"])
def test_the_cache_is_refused_for_cpu_memory_and_cron(kind):
    trigger = Trigger(index=0, type=kind, threshold=50.0, use_cached_metrics=True)
    with pytest.raises(PlannerInputError, match=f"useCachedMetrics: not supported for the {kind} scaler"):
        KedaController(ScaledObjectSpec("chat", (trigger,)))


def test_the_reader_takes_use_cached_metrics(tmp_path):
    from planner.readers.manifest import load_autoscaler

    path = tmp_path / "so.yaml"
    path.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {name: chat}\n  triggers:\n  - type: prometheus\n    useCachedMetrics: true\n"
        "    metadata: {query: 'sum(x)', threshold: '5'}\n  - type: prometheus\n"
        "    metadata: {query: 'sum(y)', threshold: '5'}\n"
    )
    so = load_autoscaler(path).scaled_object
    assert [t.use_cached_metrics for t in so.triggers] == [True, False]


# --- cron triggers (pkg/scalers/cron_scaler.go) ------------------------------------------------------

MONDAY_S = 1704067200.0  # 2024-01-01 00:00 UTC, a Monday
HOUR_S = 3600.0


def cron(index, start="0 8 * * MON-FRI", end="0 18 * * MON-FRI", desired="4", timezone="UTC"):
    from planner.autoscaler.cron_scaler import CronMetadata

    return Trigger(index=index, type="cron", threshold=1.0, cron=CronMetadata(start, end, timezone, desired))


def test_a_cron_trigger_is_an_external_metric_with_target_one():
    hpa = hpa_for_scaled_object(ScaledObjectSpec("chat", (prometheus(0, 5.0), cron(1))))
    (queue, schedule) = hpa.metrics
    assert queue.name == "s0-prometheus"
    assert (schedule.type, schedule.name) == ("External", "s1-cron-UTC-08xxMON-FRI-018xxMON-FRI")
    assert (schedule.target.type, schedule.target.average_value_milli) == ("AverageValue", 1000)


def test_cron_value_and_activity_follow_the_wall_clock():
    keda = KedaController(ScaledObjectSpec("chat", (cron(0, desired="4"),)), start_epoch_s=MONDAY_S)
    assert keda.cron_readings(8 * HOUR_S - 1)[0].active is False
    inside = keda.cron_readings(8 * HOUR_S)[0]
    assert (inside.value, inside.active) == (4.0, True)
    # the value the caller passes for a cron trigger is ignored: the scaler answers from the clock
    assert keda.reconcile(8 * HOUR_S, 4, {0: 99.0}).desired_replicas == 4
    assert keda.reconcile(18 * HOUR_S + 600, 4, {0: 99.0}).desired_replicas == 1  # 0: the HPA floor


def test_the_hpa_takes_the_largest_of_cron_and_metric():
    so = ScaledObjectSpec("chat", (prometheus(0, 5.0), cron(1, desired="4")), min_replica_count=1, max_replica_count=20)
    keda = KedaController(so, start_epoch_s=MONDAY_S)
    assert keda.reconcile(9 * HOUR_S, 4, {0: 5.0}).desired_replicas == 4  # queue asks 1, the window 4
    assert keda.reconcile(9 * HOUR_S + 15, 4, {0: 30.0}).desired_replicas == 6  # queue asks 6
    assert keda.reconcile(20 * HOUR_S, 6, {0: 30.0}).desired_replicas == 6  # outside: the queue alone


def test_cron_is_capped_by_max_replica_count():
    so = ScaledObjectSpec("chat", (cron(0, desired="10"),), min_replica_count=1, max_replica_count=6)
    keda = KedaController(so, start_epoch_s=MONDAY_S)
    replicas = 1
    for step in range(4):
        replicas = keda.reconcile(8 * HOUR_S + 15 * step, replicas, {}).desired_replicas
    assert replicas == 6


def test_cron_activity_takes_a_scaled_object_from_zero_and_back():
    so = ScaledObjectSpec("chat", (cron(0, desired="2"),), cooldown_period_s=300.0)
    keda = KedaController(so, start_epoch_s=MONDAY_S)
    assert keda.step(7 * HOUR_S, 0, {}) == 0  # inactive: stays at zero
    assert keda.step(8 * HOUR_S, 0, {}) == 2  # active: KEDA 0 -> 1, the HPA to desiredReplicas
    assert keda.step(18 * HOUR_S - 15, 2, {}) == 2  # the last active poll
    assert keda.step(18 * HOUR_S, 2, {}) == 2  # closed: cooldown runs, the HPA's 300 s window holds 2
    assert keda.step(18 * HOUR_S - 15 + 300, 2, {}) == 2  # cooldownPeriod not yet strictly passed
    assert keda.step(18 * HOUR_S - 15 + 301, 2, {}) == 0  # cooldownPeriod after the last activity: to zero


def test_cron_activity_ignores_activation_threshold():
    so = ScaledObjectSpec("chat", (cron(0, desired="2"),))
    trigger = dataclasses.replace(so.triggers[0], activation_threshold=50.0)
    keda = KedaController(dataclasses.replace(so, triggers=(trigger,)), start_epoch_s=MONDAY_S)
    assert keda.step(8 * HOUR_S, 0, {}) == 2


def test_an_unknown_zone_is_a_failing_trigger_with_fallback():
    so = ScaledObjectSpec(
        "chat",
        (cron(0, timezone="Europe/Dublyn"),),
        min_replica_count=1,
        fallback=Fallback(failure_threshold=2, replicas=5),
    )
    keda = KedaController(so, start_epoch_s=MONDAY_S)
    replicas, trace = 1, []
    for k in range(4):
        replicas = keda.reconcile(15.0 * k, replicas, {}).desired_replicas
        trace.append(replicas)
    assert keda.failures == {0: 4}
    assert trace == [1, 1, 4, 5]  # more than 2 failures: fallback.replicas, at the HPA's scale-up pace


def test_invalid_cron_metadata_is_refused_when_keda_builds_the_scaler():
    with pytest.raises(PlannerInputError, match=r"spec\.triggers\[1\]\.metadata\.start: error parsing start"):
        KedaController(ScaledObjectSpec("chat", (prometheus(0, 5.0), cron(1, start="0 8 * * 7"))))
    with pytest.raises(PlannerInputError, match=r"spec\.triggers\[0\]\.metadata\.desiredReplicas"):
        KedaController(ScaledObjectSpec("chat", (cron(0, desired=""),)))


def test_without_a_wall_clock_the_cron_value_is_given():
    # As `planner hpa` evaluates one decision: the value is desiredReplicas inside the window, 0 outside.
    so = ScaledObjectSpec("chat", (cron(0, desired="3"),), min_replica_count=1)
    keda = KedaController(so)
    assert keda.cron_readings(8 * HOUR_S) == {}
    assert keda.reconcile(0.0, 1, {0: 3.0}).desired_replicas == 3
