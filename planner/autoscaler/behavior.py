"""The ``behavior`` module turns a metric proposal into the replica count the HPA sets.

It ports the normalization half of
``pkg/controller/podautoscaler/horizontal.go`` (Kubernetes v1.33+) and the
``behavior`` defaults of ``pkg/apis/autoscaling/v2/defaults.go``:

* without ``spec.behavior``, the legacy path: ``stabilizeRecommendation``
  (maximum over the downscale-stabilization window) then
  ``convertDesiredReplicasWithRules`` (min/max and a scale-up limit of
  ``max(2 x current, 4)``);
* with ``spec.behavior``, ``stabilizeRecommendationWithBehaviors`` (scale-up
  uses the minimum of recent recommendations, scale-down the maximum) and
  ``convertDesiredReplicasWithBehaviorRate`` (Pods and Percent policies over
  the scale events inside ``periodSeconds``, ``selectPolicy``).

Go reads ``time.Now()`` inside these functions and keeps the histories in
maps; here the histories are tuples passed in and returned, and the time is
``now_s``. Time comparisons keep Go's strictness: a record counts when its
timestamp is strictly after ``now_s - window``.

Reasons and messages are the Go strings, so conditions match ``kubectl describe hpa``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.autoscaler.defaults import (
    DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S,
    DEFAULT_POLICY_PERIOD_S,
)

__all__ = [
    "DISABLED_POLICY_SELECT",
    "MAX_CHANGE_POLICY_SELECT",
    "MIN_CHANGE_POLICY_SELECT",
    "PERCENT_SCALING_POLICY",
    "PODS_SCALING_POLICY",
    "SCALE_UP_LIMIT_FACTOR",
    "SCALE_UP_LIMIT_MINIMUM",
    "HPAScalingPolicy",
    "HPAScalingRules",
    "HorizontalPodAutoscalerBehavior",
    "LimitedReplicas",
    "NormalizationArg",
    "StabilizedReplicas",
    "TimestampedRecommendation",
    "TimestampedScaleEvent",
    "calculate_scale_down_limit_with_behaviors",
    "calculate_scale_up_limit",
    "calculate_scale_up_limit_with_scaling_rules",
    "convert_desired_replicas_with_behavior_rate",
    "convert_desired_replicas_with_rules",
    "generate_hpa_scale_down_rules",
    "generate_hpa_scale_up_rules",
    "get_longest_policy_period",
    "get_replicas_change_per_period",
    "mark_scale_events_outdated",
    "maybe_init_scale_down_stabilization_window",
    "set_defaults_horizontal_pod_autoscaler_behavior",
    "stabilize_recommendation",
    "stabilize_recommendation_with_behaviors",
    "store_scale_event",
]

SCALE_UP_LIMIT_FACTOR = 2.0
"""``scaleUpLimitFactor`` of the legacy path (``horizontal.go``)."""
SCALE_UP_LIMIT_MINIMUM = 4.0
"""``scaleUpLimitMinimum`` of the legacy path (``horizontal.go``)."""

PODS_SCALING_POLICY = "Pods"
PERCENT_SCALING_POLICY = "Percent"
MAX_CHANGE_POLICY_SELECT = "Max"
MIN_CHANGE_POLICY_SELECT = "Min"
DISABLED_POLICY_SELECT = "Disabled"

_MAX_INT32 = 2**31 - 1
_MIN_INT32 = -(2**31)


@dataclass(frozen=True)
class HPAScalingPolicy:
    """One rate policy: ``type`` Pods or Percent, ``value``, per ``period_seconds``."""

    type: str
    value: int
    period_seconds: int


@dataclass(frozen=True)
class HPAScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown``; ``None`` fields are unset.

    Attributes
    ----------
    stabilization_window_seconds : int or None
        ``stabilizationWindowSeconds``. [s]
    select_policy : str or None
        ``Max``, ``Min`` or ``Disabled``.
    policies : tuple of HPAScalingPolicy or None
        ``policies``; a user list replaces the whole default list.
    tolerance : float or None
        ``tolerance`` for this direction (v1.33+); ``None`` uses the cluster flag. [fraction]
    """

    stabilization_window_seconds: int | None = None
    select_policy: str | None = None
    policies: tuple[HPAScalingPolicy, ...] | None = None
    tolerance: float | None = None


@dataclass(frozen=True)
class HorizontalPodAutoscalerBehavior:
    """``spec.behavior`` with its two directions."""

    scale_up: HPAScalingRules | None = None
    scale_down: HPAScalingRules | None = None


@dataclass(frozen=True)
class TimestampedRecommendation:
    """An unstabilized recommendation and when it was made (Go ``timestampedRecommendation``)."""

    recommendation: int
    timestamp_s: float


@dataclass(frozen=True)
class TimestampedScaleEvent:
    """The absolute size of a past scale change (Go ``timestampedScaleEvent``).

    ``outdated`` events are older than the longest policy period and their
    slot is reused by the next event.
    """

    replica_change: int
    timestamp_s: float
    outdated: bool = False


# defaults.go: "These constants repeats previous HPA behavior"
_DEFAULT_HPA_SCALE_UP_RULES = HPAScalingRules(
    stabilization_window_seconds=0,
    select_policy=MAX_CHANGE_POLICY_SELECT,
    policies=(
        HPAScalingPolicy(PODS_SCALING_POLICY, 4, DEFAULT_POLICY_PERIOD_S),
        HPAScalingPolicy(PERCENT_SCALING_POLICY, 100, DEFAULT_POLICY_PERIOD_S),
    ),
)
# The scale-down window stays unset: the controller fills it from its flag.
_DEFAULT_HPA_SCALE_DOWN_RULES = HPAScalingRules(
    stabilization_window_seconds=None,
    select_policy=MAX_CHANGE_POLICY_SELECT,
    policies=(HPAScalingPolicy(PERCENT_SCALING_POLICY, 100, DEFAULT_POLICY_PERIOD_S),),
)


def _copy_hpa_scaling_rules(source: HPAScalingRules | None, defaults: HPAScalingRules) -> HPAScalingRules:
    """Keep every field the user set, default the others (Go ``copyHPAScalingRules``)."""
    if source is None:
        return defaults
    return HPAScalingRules(
        stabilization_window_seconds=(
            source.stabilization_window_seconds
            if source.stabilization_window_seconds is not None
            else defaults.stabilization_window_seconds
        ),
        select_policy=source.select_policy if source.select_policy is not None else defaults.select_policy,
        policies=source.policies if source.policies is not None else defaults.policies,
        tolerance=source.tolerance if source.tolerance is not None else defaults.tolerance,
    )


def generate_hpa_scale_up_rules(rules: HPAScalingRules | None) -> HPAScalingRules:
    """Scale-up rules with the API defaults filled in (Go ``GenerateHPAScaleUpRules``).

    Defaults: no stabilization, ``selectPolicy: Max``, policies +4 pods and
    +100 % per 15 s.
    """
    return _copy_hpa_scaling_rules(rules, _DEFAULT_HPA_SCALE_UP_RULES)


def generate_hpa_scale_down_rules(rules: HPAScalingRules | None) -> HPAScalingRules:
    """Scale-down rules with the API defaults filled in (Go ``GenerateHPAScaleDownRules``).

    Defaults: ``selectPolicy: Max``, -100 % per 15 s; the stabilization window
    stays unset (see :func:`maybe_init_scale_down_stabilization_window`).
    """
    return _copy_hpa_scaling_rules(rules, _DEFAULT_HPA_SCALE_DOWN_RULES)


def set_defaults_horizontal_pod_autoscaler_behavior(
    behavior: HorizontalPodAutoscalerBehavior | None,
) -> HorizontalPodAutoscalerBehavior | None:
    """Fill both directions when ``spec.behavior`` is present (Go ``SetDefaults_HorizontalPodAutoscalerBehavior``).

    An HPA without ``behavior`` keeps ``None`` and takes the legacy path.
    """
    if behavior is None:
        return None
    return HorizontalPodAutoscalerBehavior(
        scale_up=generate_hpa_scale_up_rules(behavior.scale_up),
        scale_down=generate_hpa_scale_down_rules(behavior.scale_down),
    )


def maybe_init_scale_down_stabilization_window(
    behavior: HorizontalPodAutoscalerBehavior | None, downscale_stabilization_window_s: float
) -> HorizontalPodAutoscalerBehavior | None:
    """Fill an unset scale-down window from the controller flag (Go ``maybeInitScaleDownStabilizationWindow``)."""
    if (
        behavior is not None
        and behavior.scale_down is not None
        and (behavior.scale_down.stabilization_window_seconds is None)
    ):
        window = int(downscale_stabilization_window_s)
        return replace(behavior, scale_down=replace(behavior.scale_down, stabilization_window_seconds=window))
    return behavior


# --- legacy path (behavior == nil) -------------------------------------------------------------


def stabilize_recommendation(
    recommendations: tuple[TimestampedRecommendation, ...],
    prenormalized_desired_replicas: int,
    now_s: float,
    downscale_stabilization_window_s: float = DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S,
) -> tuple[int, tuple[TimestampedRecommendation, ...]]:
    """Highest recommendation in the window, and the updated history (Go ``stabilizeRecommendation``).

    The new recommendation replaces the last one older than the window, or is appended.

    Returns
    -------
    max_recommendation : int
        [replicas]
    recommendations : tuple of TimestampedRecommendation
    """
    max_recommendation = prenormalized_desired_replicas
    found_old_sample = False
    old_sample_index = 0
    cutoff_s = now_s - downscale_stabilization_window_s
    for i, rec in enumerate(recommendations):
        if rec.timestamp_s < cutoff_s:
            found_old_sample = True
            old_sample_index = i
        elif rec.recommendation > max_recommendation:
            max_recommendation = rec.recommendation
    new = TimestampedRecommendation(prenormalized_desired_replicas, now_s)
    history = list(recommendations)
    if found_old_sample:
        history[old_sample_index] = new
    else:
        history.append(new)
    return max_recommendation, tuple(history)


def calculate_scale_up_limit(
    current_replicas: int,
    scale_up_limit_factor: float = SCALE_UP_LIMIT_FACTOR,
    scale_up_limit_minimum: float = SCALE_UP_LIMIT_MINIMUM,
) -> int:
    """``int32(max(factor x current, minimum))`` (Go ``calculateScaleUpLimit``)."""
    return int(max(scale_up_limit_factor * float(current_replicas), scale_up_limit_minimum))


@dataclass(frozen=True)
class LimitedReplicas:
    """A count after the min/max and rate limits, with the ``ScalingLimited`` reason and message."""

    replicas: int
    reason: str
    message: str


def convert_desired_replicas_with_rules(
    current_replicas: int,
    desired_replicas: int,
    hpa_min_replicas: int,
    hpa_max_replicas: int,
    scale_up_limit_factor: float = SCALE_UP_LIMIT_FACTOR,
    scale_up_limit_minimum: float = SCALE_UP_LIMIT_MINIMUM,
) -> LimitedReplicas:
    """Clamp to [min, min(max, scale-up limit)] (Go ``convertDesiredReplicasWithRules``)."""
    minimum_allowed_replicas = hpa_min_replicas
    # Do not scale up too much to prevent incorrect rapid increase of the number of
    # replicas caused by bogus usage reports.
    scale_up_limit = calculate_scale_up_limit(current_replicas, scale_up_limit_factor, scale_up_limit_minimum)
    if hpa_max_replicas > scale_up_limit:
        maximum_allowed_replicas = scale_up_limit
        condition = "ScaleUpLimit"
        reason = "the desired replica count is increasing faster than the maximum scale rate"
    else:
        maximum_allowed_replicas = hpa_max_replicas
        condition = "TooManyReplicas"
        reason = "the desired replica count is more than the maximum replica count"
    if desired_replicas < minimum_allowed_replicas:
        return LimitedReplicas(
            minimum_allowed_replicas,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    if desired_replicas > maximum_allowed_replicas:
        return LimitedReplicas(maximum_allowed_replicas, condition, reason)
    return LimitedReplicas(desired_replicas, "DesiredWithinRange", "the desired count is within the acceptable range")


# --- behavior path -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NormalizationArg:
    """Inputs shared by the behavior functions (Go ``NormalizationArg``; the key is dropped)."""

    scale_up_behavior: HPAScalingRules
    scale_down_behavior: HPAScalingRules
    min_replicas: int
    max_replicas: int
    current_replicas: int
    desired_replicas: int


@dataclass(frozen=True)
class StabilizedReplicas:
    """Result of :func:`stabilize_recommendation_with_behaviors`."""

    replicas: int
    reason: str
    message: str
    recommendations: tuple[TimestampedRecommendation, ...]


def stabilize_recommendation_with_behaviors(
    args: NormalizationArg,
    recommendations: tuple[TimestampedRecommendation, ...],
    now_s: float,
) -> StabilizedReplicas:
    """Clamp the current count into [min of recent up-window recs, max of recent down-window recs].

    Go ``stabilizeRecommendationWithBehaviors``. The unstabilized desired
    count is recorded, replacing the last record older than both windows.
    """
    found_old_sample = False
    old_sample_index = 0

    # Both windows are set by now (SetDefaults and maybeInitScaleDownStabilizationWindow);
    # Go dereferences the pointers here.
    up_window_seconds = args.scale_up_behavior.stabilization_window_seconds
    down_window_seconds = args.scale_down_behavior.stabilization_window_seconds
    assert up_window_seconds is not None and down_window_seconds is not None

    up_recommendation = args.desired_replicas
    up_cutoff_s = now_s - float(up_window_seconds)
    down_recommendation = args.desired_replicas
    down_cutoff_s = now_s - float(down_window_seconds)

    # Calculate the upper and lower stabilization limits.
    for i, rec in enumerate(recommendations):
        if rec.timestamp_s > up_cutoff_s:
            up_recommendation = min(rec.recommendation, up_recommendation)
        if rec.timestamp_s > down_cutoff_s:
            down_recommendation = max(rec.recommendation, down_recommendation)
        if rec.timestamp_s < up_cutoff_s and rec.timestamp_s < down_cutoff_s:
            found_old_sample = True
            old_sample_index = i

    # Bring the recommendation to within the upper and lower limits (stabilize).
    recommendation = args.current_replicas
    if recommendation < up_recommendation:
        recommendation = up_recommendation
    if recommendation > down_recommendation:
        recommendation = down_recommendation

    # Record the unstabilized recommendation.
    new = TimestampedRecommendation(args.desired_replicas, now_s)
    history = list(recommendations)
    if found_old_sample:
        history[old_sample_index] = new
    else:
        history.append(new)

    # Determine a human-friendly message.
    if args.desired_replicas >= args.current_replicas:
        reason = "ScaleUpStabilized"
        message = "recent recommendations were lower than current one, applying the lowest recent recommendation"
    else:
        reason = "ScaleDownStabilized"
        message = "recent recommendations were higher than current one, applying the highest recent recommendation"
    return StabilizedReplicas(recommendation, reason, message, tuple(history))


def get_replicas_change_per_period(
    period_seconds: int, scale_events: tuple[TimestampedScaleEvent, ...], now_s: float
) -> int:
    """Sum of the changes strictly after ``now_s - period_seconds`` (Go ``getReplicasChangePerPeriod``)."""
    cutoff_s = now_s - float(period_seconds)
    return sum(event.replica_change for event in scale_events if event.timestamp_s > cutoff_s)


def calculate_scale_up_limit_with_scaling_rules(
    current_replicas: int,
    scale_up_events: tuple[TimestampedScaleEvent, ...],
    scale_down_events: tuple[TimestampedScaleEvent, ...],
    scaling_rules: HPAScalingRules,
    now_s: float,
) -> int:
    """Most pods a scale-up may reach under the policies (Go ``calculateScaleUpLimitWithScalingRules``).

    Each policy starts from the count at the start of its period
    (``current - added + removed`` within ``periodSeconds``); Pods adds
    ``value``, Percent multiplies by ``1 + value/100`` rounded up.
    ``selectPolicy`` Max takes the largest, Min the smallest; Disabled
    returns the current count.
    """
    if scaling_rules.select_policy == DISABLED_POLICY_SELECT:
        return current_replicas  # Scaling is disabled
    if scaling_rules.select_policy == MIN_CHANGE_POLICY_SELECT:
        result = _MAX_INT32
        select_policy_fn = min  # For scaling up, the lowest change ('min' policy) produces a minimum value
    else:
        result = _MIN_INT32
        select_policy_fn = max  # Use the default policy otherwise to produce a highest possible change
    proposed = 0
    for policy in scaling_rules.policies or ():
        replicas_added_in_current_period = get_replicas_change_per_period(policy.period_seconds, scale_up_events, now_s)
        replicas_deleted_in_current_period = get_replicas_change_per_period(
            policy.period_seconds, scale_down_events, now_s
        )
        period_start_replicas = current_replicas - replicas_added_in_current_period + replicas_deleted_in_current_period
        if policy.type == PODS_SCALING_POLICY:
            proposed = period_start_replicas + policy.value
        elif policy.type == PERCENT_SCALING_POLICY:
            # the proposal has to be rounded up because the proposed change might not
            # increase the replica count causing the target to never scale up
            proposed = math.ceil(float(period_start_replicas) * (1 + float(policy.value) / 100))
        result = select_policy_fn(result, proposed)
    return result


def calculate_scale_down_limit_with_behaviors(
    current_replicas: int,
    scale_up_events: tuple[TimestampedScaleEvent, ...],
    scale_down_events: tuple[TimestampedScaleEvent, ...],
    scaling_rules: HPAScalingRules,
    now_s: float,
) -> int:
    """Fewest pods a scale-down may reach under the policies (Go ``calculateScaleDownLimitWithBehaviors``).

    Pods subtracts ``value``; Percent keeps ``int32(start x (1 - value/100))``,
    truncated. ``selectPolicy`` Max takes the lowest limit (the biggest
    change), Min the highest; Disabled returns the current count.
    """
    if scaling_rules.select_policy == DISABLED_POLICY_SELECT:
        return current_replicas  # Scaling is disabled
    if scaling_rules.select_policy == MIN_CHANGE_POLICY_SELECT:
        result = _MIN_INT32
        select_policy_fn = max  # For scaling down, the lowest change ('min' policy) produces a maximum value
    else:
        result = _MAX_INT32
        select_policy_fn = min  # Use the default policy otherwise to produce a highest possible change
    proposed = 0
    for policy in scaling_rules.policies or ():
        replicas_added_in_current_period = get_replicas_change_per_period(policy.period_seconds, scale_up_events, now_s)
        replicas_deleted_in_current_period = get_replicas_change_per_period(
            policy.period_seconds, scale_down_events, now_s
        )
        period_start_replicas = current_replicas - replicas_added_in_current_period + replicas_deleted_in_current_period
        if policy.type == PODS_SCALING_POLICY:
            proposed = period_start_replicas - policy.value
        elif policy.type == PERCENT_SCALING_POLICY:
            proposed = int(float(period_start_replicas) * (1 - float(policy.value) / 100))
        result = select_policy_fn(result, proposed)
    return result


def convert_desired_replicas_with_behavior_rate(
    args: NormalizationArg,
    scale_up_events: tuple[TimestampedScaleEvent, ...],
    scale_down_events: tuple[TimestampedScaleEvent, ...],
    now_s: float,
) -> LimitedReplicas:
    """Apply the rate policies and min/max on the side the count moves to.

    Go ``convertDesiredReplicasWithBehaviorRate``; stabilization is done
    separately, before it.
    """
    if args.desired_replicas > args.current_replicas:
        scale_up_limit = calculate_scale_up_limit_with_scaling_rules(
            args.current_replicas, scale_up_events, scale_down_events, args.scale_up_behavior, now_s
        )
        if scale_up_limit < args.current_replicas:
            # We shouldn't scale up further until the scaleUpEvents will be cleaned up
            scale_up_limit = args.current_replicas
        maximum_allowed_replicas = args.max_replicas
        if maximum_allowed_replicas > scale_up_limit:
            maximum_allowed_replicas = scale_up_limit
            reason = "ScaleUpLimit"
            message = "the desired replica count is increasing faster than the maximum scale rate"
        else:
            reason = "TooManyReplicas"
            message = "the desired replica count is more than the maximum replica count"
        if args.desired_replicas > maximum_allowed_replicas:
            return LimitedReplicas(maximum_allowed_replicas, reason, message)
    elif args.desired_replicas < args.current_replicas:
        scale_down_limit = calculate_scale_down_limit_with_behaviors(
            args.current_replicas, scale_up_events, scale_down_events, args.scale_down_behavior, now_s
        )
        if scale_down_limit > args.current_replicas:
            # We shouldn't scale down further until the scaleDownEvents will be cleaned up
            scale_down_limit = args.current_replicas
        minimum_allowed_replicas = args.min_replicas
        if minimum_allowed_replicas < scale_down_limit:
            minimum_allowed_replicas = scale_down_limit
            reason = "ScaleDownLimit"
            message = "the desired replica count is decreasing faster than the maximum scale rate"
        else:
            message = "the desired replica count is less than the minimum replica count"
            reason = "TooFewReplicas"
        if args.desired_replicas < minimum_allowed_replicas:
            return LimitedReplicas(minimum_allowed_replicas, reason, message)
    return LimitedReplicas(
        args.desired_replicas, "DesiredWithinRange", "the desired count is within the acceptable range"
    )


def get_longest_policy_period(scaling_rules: HPAScalingRules) -> int:
    """Longest ``periodSeconds`` among the policies (Go ``getLongestPolicyPeriod``)."""
    return max((policy.period_seconds for policy in scaling_rules.policies or ()), default=0)


def mark_scale_events_outdated(
    scale_events: tuple[TimestampedScaleEvent, ...], longest_policy_period: int, now_s: float
) -> tuple[TimestampedScaleEvent, ...]:
    """Flag events older than the longest period for reuse (Go ``markScaleEventsOutdated``)."""
    cutoff_s = now_s - float(longest_policy_period)
    return tuple(replace(event, outdated=True) if event.timestamp_s < cutoff_s else event for event in scale_events)


def store_scale_event(
    behavior: HorizontalPodAutoscalerBehavior | None,
    scale_up_events: tuple[TimestampedScaleEvent, ...],
    scale_down_events: tuple[TimestampedScaleEvent, ...],
    prev_replicas: int,
    new_replicas: int,
    now_s: float,
) -> tuple[tuple[TimestampedScaleEvent, ...], tuple[TimestampedScaleEvent, ...]]:
    """Record a rescale, reusing the last outdated slot (Go ``storeScaleEvent``).

    Without ``behavior`` nothing is stored, since the legacy path never reads events.

    Returns
    -------
    scale_up_events, scale_down_events : tuple of TimestampedScaleEvent
    """
    if behavior is None:
        return scale_up_events, scale_down_events  # we should not store any event as they will not be used
    # SetDefaults fills the direction that moved; Go dereferences it.
    if new_replicas > prev_replicas:
        assert behavior.scale_up is not None
        events = mark_scale_events_outdated(scale_up_events, get_longest_policy_period(behavior.scale_up), now_s)
        return _replace_or_append(events, new_replicas - prev_replicas, now_s), scale_down_events
    assert behavior.scale_down is not None
    events = mark_scale_events_outdated(scale_down_events, get_longest_policy_period(behavior.scale_down), now_s)
    return scale_up_events, _replace_or_append(events, prev_replicas - new_replicas, now_s)


def _replace_or_append(
    events: tuple[TimestampedScaleEvent, ...], replica_change: int, now_s: float
) -> tuple[TimestampedScaleEvent, ...]:
    old_sample_index = None
    for i, event in enumerate(events):
        if event.outdated:
            old_sample_index = i
    new = TimestampedScaleEvent(replica_change, now_s, False)
    if old_sample_index is None:
        return (*events, new)
    history = list(events)
    history[old_sample_index] = new
    return tuple(history)
