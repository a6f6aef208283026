"""Tests for planner.autoscaler.behavior: cases transcribed from Kubernetes' horizontal_test.go.

Go builds histories with ``time.Now().Add(-d)``; here they are ``NOW_S - d``.
"""

from __future__ import annotations

import pytest

from planner.autoscaler.behavior import (
    HorizontalPodAutoscalerBehavior,
    HPAScalingPolicy,
    HPAScalingRules,
    NormalizationArg,
    TimestampedRecommendation,
    TimestampedScaleEvent,
    calculate_scale_down_limit_with_behaviors,
    calculate_scale_up_limit,
    calculate_scale_up_limit_with_scaling_rules,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    generate_hpa_scale_down_rules,
    generate_hpa_scale_up_rules,
    get_replicas_change_per_period,
    set_defaults_horizontal_pod_autoscaler_behavior,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
    store_scale_event,
)

NOW_S = 1_000_000.0


def generate_scaling_rules(pods, pods_period, percent, percent_period, stabilization_window):
    """generateScalingRules: a Pods and/or Percent policy, selectPolicy Max."""
    policies = []
    if pods != 0:
        policies.append(HPAScalingPolicy("Pods", pods, pods_period))
    if percent != 0:
        policies.append(HPAScalingPolicy("Percent", percent, percent_period))
    return HPAScalingRules(stabilization_window, "Max", tuple(policies))


def generate_events_uniform_distribution(raw_events, period_seconds):
    """generateEventsUniformDistribution: events centred in equal segments of the last period."""
    segment = float(period_seconds) / float(len(raw_events))
    events = []
    for idx, change in enumerate(raw_events):
        boundary = int(float(period_seconds) - segment * float(idx + 1) + segment / 2.0)
        events.append(TimestampedScaleEvent(change, NOW_S - boundary))
    return tuple(events)


def _rec(value, ago_s):
    return TimestampedRecommendation(value, NOW_S - ago_s)


@pytest.mark.parametrize(
    ("current", "desired", "lo", "hi", "expected", "condition"),
    [
        pytest.param(
            5,
            7,
            3,
            8,
            7,
            "DesiredWithinRange",
            id="TestConvertDesiredReplicasWithRules/prenormalized desired replicas within range",
        ),
        pytest.param(
            3,
            1,
            2,
            8,
            2,
            "TooFewReplicas",
            id="TestConvertDesiredReplicasWithRules/prenormalized desired replicas < minReplicas",
        ),
        pytest.param(
            1,
            0,
            0,
            10,
            0,
            "DesiredWithinRange",
            id="TestConvertDesiredReplicasWithRules/prenormalized desired zeroed replicas within range",
        ),
        pytest.param(
            20,
            1000,
            1,
            10,
            10,
            "TooManyReplicas",
            id="TestConvertDesiredReplicasWithRules/maxReplicas is the limit because maxReplicas < scaleUpLimit",
        ),
        pytest.param(
            3,
            1000,
            1,
            2000,
            calculate_scale_up_limit(3),
            "ScaleUpLimit",
            id="TestConvertDesiredReplicasWithRules/scaleUpLimit is the limit because scaleUpLimit < maxReplicas",
        ),
    ],
)
def test_convert_desired_replicas_with_rules(current, desired, lo, hi, expected, condition):
    limited = convert_desired_replicas_with_rules(current, desired, lo, hi)
    assert (limited.replicas, limited.reason) == (expected, condition)


def test_legacy_scale_up_limit_is_max_of_double_and_four():
    assert [calculate_scale_up_limit(n) for n in (0, 1, 2, 3, 4, 10)] == [4, 4, 4, 6, 8, 20]


def test_calculate_scale_up_limit_with_scaling_rules_min_policy():
    """TestCalculateScaleUpLimitWithScalingRules: Min of +2 pods and +50 % from 1 is 2."""
    rules = HPAScalingRules(300, "Min", (HPAScalingPolicy("Pods", 2, 60), HPAScalingPolicy("Percent", 50, 60)))
    assert calculate_scale_up_limit_with_scaling_rules(1, (), (), rules, NOW_S) == 2


def test_calculate_scale_down_limit_with_behaviors_min_policy():
    """TestCalculateScaleDownLimitWithBehaviors: Min of -2 pods and -50 % from 5 is 3."""
    rules = HPAScalingRules(300, "Min", (HPAScalingPolicy("Pods", 2, 60), HPAScalingPolicy("Percent", 50, 60)))
    assert calculate_scale_down_limit_with_behaviors(5, (), (), rules, NOW_S) == 3


@pytest.mark.parametrize(
    ("recommendations", "desired", "expected", "log_length"),
    [
        pytest.param((), 5, 5, 1, id="TestNormalizeDesiredReplicas/empty log"),
        pytest.param((_rec(4, 120), _rec(5, 60)), 3, 5, 3, id="TestNormalizeDesiredReplicas/stabilize"),
        pytest.param((_rec(1, 120), _rec(2, 60)), 3, 3, 3, id="TestNormalizeDesiredReplicas/no stabilize"),
        pytest.param(
            (_rec(10, 600), _rec(9, 540)), 3, 3, 2, id="TestNormalizeDesiredReplicas/no stabilize - old recommendations"
        ),
        pytest.param(
            (_rec(10, 600), _rec(4, 60), _rec(5, 120), _rec(9, 540)),
            3,
            5,
            4,
            id="TestNormalizeDesiredReplicas/stabilize - old recommendations",
        ),
    ],
)
def test_stabilize_recommendation_legacy(recommendations, desired, expected, log_length):
    stabilized, history = stabilize_recommendation(recommendations, desired, NOW_S, 300.0)
    assert stabilized == expected
    assert len(history) == log_length


SCALING_WITH_RULES = [
    # name, up events, down events, min, max, up rules, down rules, current, desired, expected, condition
    ("prenormalized desired replicas within range", (), (), 3, 8, None, None, 5, 7, 7, "DesiredWithinRange"),
    ("prenormalized desired replicas < minReplicas", (), (), 2, 8, None, None, 3, 1, 2, "TooFewReplicas"),
    (
        "prenormalized desired replicas within range when minReplicas is 0",
        (),
        (),
        0,
        10,
        None,
        None,
        1,
        0,
        0,
        "DesiredWithinRange",
    ),
    (
        "maxReplicas is the limit because maxReplicas < scaleUpLimit",
        (),
        (),
        1,
        10,
        None,
        None,
        20,
        1000,
        10,
        "TooManyReplicas",
    ),
    (
        "desired replica count is more than the maximum replica count",
        (),
        (),
        100,
        150,
        None,
        None,
        100,
        1000,
        150,
        "TooManyReplicas",
    ),
    (
        "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
        (),
        (),
        1,
        2000,
        generate_scaling_rules(0, 0, 1, 60, 0),
        None,
        3,
        1000,
        4,
        "ScaleUpLimit",
    ),
    (
        "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies",
        (),
        (),
        3,
        2000,
        None,
        generate_scaling_rules(20, 60, 0, 0, 0),
        1000,
        3,
        980,
        "ScaleDownLimit",
    ),
    ("scaleUp with default behavior", (), (), 1, 1000, None, None, 10, 50, 20, "ScaleUpLimit"),
    (
        "scaleUp with pods policy larger than percent policy",
        (),
        (),
        1,
        1000,
        generate_scaling_rules(100, 60, 100, 60, 0),
        None,
        10,
        500,
        110,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy larger than pods policy",
        (),
        (),
        1,
        1000,
        generate_scaling_rules(2, 60, 100, 60, 0),
        None,
        10,
        500,
        20,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy",
        (),
        (),
        1,
        1000,
        generate_scaling_rules(100, 60, 0, 0, 0),
        None,
        10,
        50,
        50,
        "DesiredWithinRange",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large percent policy",
        (),
        (),
        1,
        1000,
        generate_scaling_rules(10000, 60, 0, 0, 0),
        None,
        10,
        50,
        50,
        "DesiredWithinRange",
    ),
    (
        "scaleUp with pod policy limitation",
        (),
        (),
        1,
        1000,
        generate_scaling_rules(30, 60, 0, 0, 0),
        None,
        10,
        50,
        40,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy limitation",
        (),
        (),
        1,
        1000,
        generate_scaling_rules(0, 0, 200, 60, 0),
        None,
        10,
        50,
        30,
        "ScaleUpLimit",
    ),
    (
        "scaleDown with percent policy larger than pod policy",
        (),
        (),
        1,
        1000,
        None,
        generate_scaling_rules(20, 60, 1, 60, 300),
        100,
        2,
        80,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with pod policy larger than percent policy",
        (),
        (),
        1,
        1000,
        None,
        generate_scaling_rules(2, 60, 1, 60, 300),
        100,
        2,
        98,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with spec MinReplicas=nil limitation with large pod policy",
        (),
        (),
        1,
        1000,
        None,
        generate_scaling_rules(100, 60, 0, 0, 300),
        10,
        0,
        1,
        "TooFewReplicas",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy",
        (),
        (),
        5,
        1000,
        None,
        generate_scaling_rules(0, 0, 100, 60, 300),
        10,
        2,
        5,
        "TooFewReplicas",
    ),
    (
        "scaleDown with pod policy limitation",
        (),
        (),
        1,
        1000,
        None,
        generate_scaling_rules(5, 60, 0, 0, 300),
        10,
        2,
        5,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with percent policy limitation",
        (),
        (),
        1,
        1000,
        None,
        generate_scaling_rules(0, 0, 50, 60, 300),
        10,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        generate_events_uniform_distribution([1, 5, 9], 120),
        (),
        1,
        200,
        generate_scaling_rules(300, 60, 0, 0, 0),
        None,
        100,
        500,
        200,
        "TooManyReplicas",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large percent policy and events",
        generate_events_uniform_distribution([1, 5, 9], 120),
        (),
        1,
        200,
        generate_scaling_rules(0, 0, 10000, 60, 0),
        None,
        100,
        500,
        200,
        "TooManyReplicas",
    ),
    (
        "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
        generate_events_uniform_distribution([1, 5, 9], 120),
        (),
        1,
        1000,
        generate_scaling_rules(5, 120, 0, 0, 0),
        None,
        100,
        500,
        100,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with pod policy and previous scale up events",
        generate_events_uniform_distribution([1, 5, 9], 120),
        (),
        1,
        1000,
        generate_scaling_rules(150, 120, 0, 0, 0),
        None,
        100,
        500,
        235,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy and previous scale up events",
        generate_events_uniform_distribution([1, 5, 9], 120),
        (),
        1,
        1000,
        generate_scaling_rules(0, 0, 200, 120, 0),
        None,
        100,
        500,
        255,
        "ScaleUpLimit",
    ),
    (
        "scaleDown with default policy and previous events",
        (),
        generate_events_uniform_distribution([1, 5, 9], 120),
        1,
        1000,
        None,
        None,
        10,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
        (),
        generate_events_uniform_distribution([1, 5, 9], 120),
        1,
        1000,
        None,
        generate_scaling_rules(115, 120, 0, 0, 300),
        100,
        0,
        1,
        "TooFewReplicas",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
        (),
        generate_events_uniform_distribution([1, 5, 9], 120),
        5,
        1000,
        None,
        generate_scaling_rules(130, 120, 0, 0, 300),
        100,
        0,
        5,
        "TooFewReplicas",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
        (),
        generate_events_uniform_distribution([1, 5, 9], 120),
        5,
        1000,
        None,
        generate_scaling_rules(0, 0, 100, 120, 300),
        100,
        2,
        5,
        "TooFewReplicas",
    ),
    (
        "scaleDown with pod policy limitation and previous events",
        (),
        generate_events_uniform_distribution([1, 5, 9], 120),
        1,
        1000,
        None,
        generate_scaling_rules(5, 120, 0, 0, 300),
        100,
        2,
        100,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with percent policy limitation and previous events",
        (),
        generate_events_uniform_distribution([2, 4, 6], 120),
        1,
        1000,
        None,
        generate_scaling_rules(0, 0, 50, 120, 300),
        100,
        0,
        56,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with previous events preventing further scale down",
        (),
        generate_events_uniform_distribution([10, 10, 10], 120),
        1,
        1000,
        None,
        generate_scaling_rules(0, 0, 10, 120, 300),
        100,
        0,
        100,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with with previous events still allowing more scale down",
        (),
        generate_events_uniform_distribution([10, 10, 10], 120),
        1,
        1000,
        None,
        generate_scaling_rules(0, 0, 1000, 120, 300),
        10,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "check 'outdated' flag for events for one behavior for up",
        generate_events_uniform_distribution([8, 12, 9, 11], 120),
        (),
        1,
        1000,
        generate_scaling_rules(1000, 60, 0, 0, 0),
        None,
        100,
        200,
        200,
        "DesiredWithinRange",
    ),
    (
        "check that events were not marked 'outdated' for two different policies in the behavior for up",
        generate_events_uniform_distribution([8, 12, 9, 11], 120),
        (),
        1,
        1000,
        generate_scaling_rules(1000, 120, 100, 60, 0),
        None,
        100,
        200,
        200,
        "DesiredWithinRange",
    ),
    (
        "check that events were marked 'outdated' for two different policies in the behavior for up",
        generate_events_uniform_distribution([8, 12, 9, 11], 120),
        (),
        1,
        1000,
        generate_scaling_rules(1000, 30, 100, 60, 0),
        None,
        100,
        200,
        200,
        "DesiredWithinRange",
    ),
    (
        "check 'outdated' flag for events for one behavior for down",
        (),
        generate_events_uniform_distribution([8, 12, 9, 11], 120),
        1,
        1000,
        None,
        generate_scaling_rules(1000, 60, 0, 0, 300),
        100,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "check that events were not marked 'outdated' for two different policies in the behavior for down",
        (),
        generate_events_uniform_distribution([8, 12, 9, 11], 120),
        1,
        1000,
        None,
        generate_scaling_rules(1000, 120, 100, 60, 300),
        100,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "check that events were marked 'outdated' for two different policies in the behavior for down",
        (),
        generate_events_uniform_distribution([8, 12, 9, 11], 120),
        1,
        1000,
        None,
        generate_scaling_rules(1000, 30, 100, 60, 300),
        100,
        5,
        5,
        "DesiredWithinRange",
    ),
]


@pytest.mark.parametrize(
    ("up_events", "down_events", "lo", "hi", "up_rules", "down_rules", "current", "desired", "expected", "condition"),
    [pytest.param(*case[1:], id=f"TestScalingWithRules/{case[0]}") for case in SCALING_WITH_RULES],
)
def test_scaling_with_rules(
    up_events, down_events, lo, hi, up_rules, down_rules, current, desired, expected, condition
):
    arg = NormalizationArg(
        scale_up_behavior=generate_hpa_scale_up_rules(up_rules),
        scale_down_behavior=generate_hpa_scale_down_rules(down_rules),
        min_replicas=lo,
        max_replicas=hi,
        current_replicas=current,
        desired_replicas=desired,
    )
    limited = convert_desired_replicas_with_behavior_rate(arg, up_events, down_events, NOW_S)
    assert (limited.replicas, limited.reason) == (expected, condition)


STORE_CASES = [
    # name, previous events (change, seconds ago), rules, expected change in last 60 s, new events (change, outdated)
    ("empty entries with default behavior", [], None, 0, []),
    ("empty entries with two-policy-behavior", [], generate_scaling_rules(10, 60, 100, 60, 0), 0, [(5, False)]),
    ("one outdated entry to be kept untouched without behavior", [(7, 61)], None, 0, [(7, False)]),
    (
        "one outdated entry to be replaced with behavior",
        [(7, 61)],
        generate_scaling_rules(10, 60, 100, 60, 0),
        0,
        [(5, False)],
    ),
    (
        "one actual entry to be not touched with behavior",
        [(7, 58)],
        generate_scaling_rules(10, 60, 100, 60, 0),
        7,
        [(7, False), (5, False)],
    ),
    (
        "two entries, one of them to be replaced",
        [(7, 61), (6, 59)],
        generate_scaling_rules(10, 60, 0, 0, 0),
        6,
        [(5, False), (6, False)],
    ),
    (
        "replace one entry, use policies with different periods",
        [(8, 29), (6, 59), (7, 61), (9, 61)],
        generate_scaling_rules(10, 60, 100, 30, 0),
        14,
        [(8, False), (6, False), (7, True), (5, False)],
    ),
    (
        "two entries, both actual",
        [(7, 58), (6, 59)],
        generate_scaling_rules(10, 120, 100, 30, 0),
        13,
        [(7, False), (6, False), (5, False)],
    ),
]


@pytest.mark.parametrize(
    ("previous", "rules", "expected_change", "new_events"),
    [pytest.param(*case[1:], id=f"TestStoreScaleEvents/{case[0]}") for case in STORE_CASES],
)
def test_store_scale_events(previous, rules, expected_change, new_events):
    events = tuple(TimestampedScaleEvent(change, NOW_S - ago) for change, ago in previous)
    assert get_replicas_change_per_period(60, events, NOW_S) == expected_change
    # scale up by 5 from 10
    behavior = HorizontalPodAutoscalerBehavior(scale_up=rules) if rules else None
    up, _ = store_scale_event(behavior, events, (), 10, 15, NOW_S)
    assert [(e.replica_change, e.outdated) for e in up] == new_events
    # scale down by 5 from 10
    behavior = HorizontalPodAutoscalerBehavior(scale_down=rules) if rules else None
    _, down = store_scale_event(behavior, (), events, 10, 5, NOW_S)
    assert [(e.replica_change, e.outdated) for e in down] == new_events


NORMALIZE_WITH_BEHAVIOR = [
    # name, recommendations (value, seconds ago), current, desired, expected, expected recs, up window, down window
    ("empty recommendations for scaling down", [], 100, 5, 5, [5], 0, 0),
    ("simple scale down stabilization", [(4, 120), (5, 60)], 100, 3, 5, [4, 5, 3], 0, 180),
    ("simple scale up stabilization", [(4, 120), (5, 60)], 1, 7, 4, [4, 5, 7], 300, 0),
    ("no scale down stabilization", [(1, 120), (2, 60)], 100, 3, 3, [1, 2, 3], 300, 0),
    ("no scale up stabilization", [(4, 120), (5, 60)], 1, 3, 3, [4, 5, 3], 0, 300),
    ("no scale down stabilization, reuse recommendation element", [(10, 600), (9, 540)], 100, 3, 3, [10, 3], 0, 0),
    ("no scale up stabilization, reuse recommendation element", [(10, 600), (9, 540)], 1, 100, 100, [10, 100], 0, 0),
    (
        "scale down stabilization, reuse one of obsolete recommendation element",
        [(10, 600), (4, 60), (5, 120), (9, 540)],
        100,
        3,
        5,
        [10, 4, 5, 3],
        0,
        180,
    ),
    (
        "scale up stabilization, reuse one of obsolete recommendation element",
        [(10, 6000), (6, 60), (5, 120), (9, 180)],
        1,
        100,
        5,
        [100, 6, 5, 9],
        300,
        0,
    ),
]


@pytest.mark.parametrize(
    ("recs", "current", "desired", "expected", "expected_recs", "up_window", "down_window"),
    [
        pytest.param(*case[1:], id=f"TestNormalizeDesiredReplicasWithBehavior/{case[0]}")
        for case in NORMALIZE_WITH_BEHAVIOR
    ],
)
def test_stabilize_recommendation_with_behaviors(
    recs, current, desired, expected, expected_recs, up_window, down_window
):
    arg = NormalizationArg(
        scale_up_behavior=HPAScalingRules(stabilization_window_seconds=up_window),
        scale_down_behavior=HPAScalingRules(stabilization_window_seconds=down_window),
        min_replicas=0,
        max_replicas=1000,
        current_replicas=current,
        desired_replicas=desired,
    )
    result = stabilize_recommendation_with_behaviors(arg, tuple(_rec(v, ago) for v, ago in recs), NOW_S)
    assert result.replicas == expected
    assert [r.recommendation for r in result.recommendations] == expected_recs


def test_defaults_are_filled_only_when_behavior_is_set():
    assert set_defaults_horizontal_pod_autoscaler_behavior(None) is None
    behavior = set_defaults_horizontal_pod_autoscaler_behavior(
        HorizontalPodAutoscalerBehavior(scale_down=HPAScalingRules(stabilization_window_seconds=30))
    )
    assert behavior.scale_up == HPAScalingRules(
        0, "Max", (HPAScalingPolicy("Pods", 4, 15), HPAScalingPolicy("Percent", 100, 15))
    )
    assert behavior.scale_down == HPAScalingRules(30, "Max", (HPAScalingPolicy("Percent", 100, 15),))
    # A user policy list replaces the whole default list; a tolerance is kept.
    rules = generate_hpa_scale_up_rules(HPAScalingRules(policies=(HPAScalingPolicy("Pods", 1, 60),), tolerance=0.05))
    assert rules.policies == (HPAScalingPolicy("Pods", 1, 60),)
    assert rules.tolerance == 0.05 and rules.select_policy == "Max"


@pytest.mark.parametrize(("select", "up", "down"), [("Max", 20, 5), ("Min", 14, 7), ("Disabled", 10, 10)])
def test_select_policy(select, up, down):
    rules = HPAScalingRules(0, select, (HPAScalingPolicy("Pods", 4, 15), HPAScalingPolicy("Percent", 100, 15)))
    assert calculate_scale_up_limit_with_scaling_rules(10, (), (), rules, NOW_S) == up
    rules = HPAScalingRules(0, select, (HPAScalingPolicy("Pods", 3, 15), HPAScalingPolicy("Percent", 50, 15)))
    assert calculate_scale_down_limit_with_behaviors(10, (), (), rules, NOW_S) == down


def test_percent_rounding_up_for_scale_up_and_truncated_for_scale_down():
    up = HPAScalingRules(0, "Max", (HPAScalingPolicy("Percent", 10, 60),))
    assert calculate_scale_up_limit_with_scaling_rules(3, (), (), up, NOW_S) == 4  # ceil(3.3)
    down = HPAScalingRules(0, "Max", (HPAScalingPolicy("Percent", 10, 60),))
    assert calculate_scale_down_limit_with_behaviors(80, (), (), down, NOW_S) == 72
    assert calculate_scale_down_limit_with_behaviors(3, (), (), down, NOW_S) == 2  # int32(2.7)
