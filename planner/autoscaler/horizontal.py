"""The ``horizontal`` module steps one HorizontalPodAutoscaler the way kube-controller-manager does.

It ports ``reconcileAutoscaler``, ``computeReplicasForMetrics`` and
``computeReplicasForMetric`` of ``pkg/controller/podautoscaler/horizontal.go``
(Kubernetes v1.33+, with per-direction tolerances from
``behavior.scale{Up,Down}.tolerance``). A :class:`HorizontalController` owns
the per-HPA history the Go controller keeps in maps (recommendations and
scale events) and takes the time as ``now_s`` on every call, so a simulator
can drive it tick by tick and get the same decisions on every run.

Scale to zero follows Kubernetes 1.37 (``HPAScaleToZero`` beta, on by default),
whose controller is condition-based (kubernetes PR 135118, in 1.36; PR 139648
turned the gate on): ``hasObjectOrExternalMetrics``,
``getScaledToZeroConditionStatus`` and ``shouldComputeMetricsForZeroReplicas``
decide whether a target at 0 replicas is scaled up, and after a successful
rescale the ``ScaledToZero`` condition records whether the controller itself
took the target to 0. At 0 replicas the controller computes metrics only when
that condition is True and the HPA has an Object or External metric (or, with
the condition True, when ``minReplicas`` has since been raised above 0); a
target scaled to 0 by hand stays at 0 (``ScalingDisabled``). The
:data:`SCALE_TO_ZERO_LEGACY` mode keeps the controller before 1.36, which
computed metrics at 0 replicas whenever ``minReplicas`` was 0;
:data:`SCALE_TO_ZERO_DISABLED` is 1.36 or later with the gate off. The
controller logic and the condition's reasons were read from the merged pull
requests' diffs and from published readings of the 1.36/1.37
``horizontal.go``.

The inputs of one reconcile are what the Go controller would fetch: the
scale subresource (``spec.replicas`` and ``status.replicas``), the pods its
selector matches, and one reading per metric (per-pod samples for Resource
and Pods metrics, a value for Object, the returned series for External, or
a failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.autoscaler.behavior import (
    SCALE_UP_LIMIT_FACTOR,
    SCALE_UP_LIMIT_MINIMUM,
    HorizontalPodAutoscalerBehavior,
    NormalizationArg,
    TimestampedRecommendation,
    TimestampedScaleEvent,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    maybe_init_scale_down_stabilization_window,
    set_defaults_horizontal_pod_autoscaler_behavior,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
    store_scale_event,
)
from planner.autoscaler.defaults import (
    DEFAULT_CPU_INITIALIZATION_PERIOD_S,
    DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S,
    DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S,
    DEFAULT_TOLERANCE,
)
from planner.autoscaler.hpa_spec import (
    AVERAGE_VALUE,
    CONTAINER_RESOURCE,
    EXTERNAL,
    OBJECT,
    PODS,
    RESOURCE,
    VALUE,
    HorizontalPodAutoscalerSpec,
    MetricSpec,
)
from planner.autoscaler.replica_calculator import (
    MetricUnavailableError,
    Pod,
    PodMetric,
    Tolerances,
    get_external_metric_replicas,
    get_external_per_pod_metric_replicas,
    get_metric_replicas,
    get_object_metric_replicas,
    get_object_per_pod_metric_replicas,
    get_raw_resource_replicas,
    get_resource_replicas,
)
from planner.errors import PlannerInputError

__all__ = [
    "SCALE_TO_ZERO_CONDITION",
    "SCALE_TO_ZERO_DISABLED",
    "SCALE_TO_ZERO_LEGACY",
    "SCALE_TO_ZERO_MODES",
    "Condition",
    "ExternalReading",
    "FailedReading",
    "HorizontalController",
    "MetricOutcome",
    "MetricsOutcome",
    "ObjectReading",
    "PodMetricsReading",
    "ReconcileResult",
    "compute_replicas_for_metric",
    "compute_replicas_for_metrics",
    "describe_conditions",
    "has_object_or_external_metrics",
    "should_compute_metrics_for_zero_replicas",
    "tolerances_for",
]

SCALE_TO_ZERO_CONDITION = "condition"
"""1.36+ with ``HPAScaleToZero`` on (the 1.37 default): scale from zero needs the ``ScaledToZero`` condition."""
SCALE_TO_ZERO_DISABLED = "disabled"
"""1.36+ with ``HPAScaleToZero`` off: a target at 0 replicas is never scaled up."""
SCALE_TO_ZERO_LEGACY = "legacy"
"""Before 1.36: metrics are computed at 0 replicas whenever ``minReplicas`` is 0."""
SCALE_TO_ZERO_MODES = (SCALE_TO_ZERO_CONDITION, SCALE_TO_ZERO_DISABLED, SCALE_TO_ZERO_LEGACY)


@dataclass(frozen=True)
class PodMetricsReading:
    """Per-pod samples of a Resource, ContainerResource or Pods metric, by pod name."""

    metrics: Mapping[str, PodMetric]


@dataclass(frozen=True)
class ObjectReading:
    """The value of an Object metric. [milli-units]"""

    value_milli: int


@dataclass(frozen=True)
class ExternalReading:
    """The series an External metric returned; the controller sums them. [milli-units]"""

    values_milli: tuple[int, ...]


@dataclass(frozen=True)
class FailedReading:
    """The metrics API failed for this metric (for example, a KEDA scaler error)."""

    message: str


Reading = PodMetricsReading | ObjectReading | ExternalReading | FailedReading


@dataclass(frozen=True)
class Condition:
    """An HPA status condition: ``type``, ``status``, ``reason``, ``message``.

    ``str(condition)`` is the row ``kubectl describe hpa`` prints for it,
    for example ``AbleToScale True SucceededRescale the HPA controller was
    able to update the target scale to 5``.
    """

    type: str
    status: bool
    reason: str
    message: str

    @property
    def status_text(self) -> str:
        """``"True"`` or ``"False"``, as the API stores the status."""
        return "True" if self.status else "False"

    def __str__(self) -> str:
        return f"{self.type} {self.status_text} {self.reason} {self.message}"


def describe_conditions(conditions: Sequence[Condition]) -> str:
    """The ``Conditions:`` table of ``kubectl describe hpa`` (columns padded to the widest entry)."""
    rows = [("Type", "Status", "Reason", "Message"), ("----", "------", "------", "-------")]
    rows += [(c.type, c.status_text, c.reason, c.message) for c in conditions]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


# Set at the start of every reconcile once the scale subresource is read,
# and overwritten later in the same reconcile on most paths.
_SUCCEEDED_GET_SCALE = Condition(
    "AbleToScale", True, "SucceededGetScale", "the HPA controller was able to get the target's current scale"
)


@dataclass(frozen=True)
class MetricOutcome:
    """What one metric proposed in one reconcile.

    Attributes
    ----------
    index : int
        Position in ``spec.metrics``.
    description : str
        The controller's name for the metric ("pods metric qps", ...).
    replica_count : int or None
        The proposal; ``None`` when the metric is invalid. [replicas]
    usage : int or None
        Reported usage: a percentage for Utilization targets, else milli-units.
    usage_ratio : float or None
        Ratio compared with the tolerance (first pass). [-]
    new_usage_ratio : float or None
        Ratio after filling missing and unready pods, when that path ran. [-]
    within_tolerance : bool or None
        ``usage_ratio`` is inside the tolerance band (``None`` for scale from zero).
    error : str or None
        Why the metric is invalid.
    condition_reason : str or None
        ``ScalingActive`` reason for an invalid metric (``FailedGetExternalMetric``, ...).
    """

    index: int
    description: str
    replica_count: int | None
    usage: int | None = None
    usage_ratio: float | None = None
    new_usage_ratio: float | None = None
    within_tolerance: bool | None = None
    error: str | None = None
    condition_reason: str | None = None


@dataclass(frozen=True)
class MetricsOutcome:
    """Result of :func:`compute_replicas_for_metrics`.

    ``replicas`` is -1 when the controller must not act (all metrics invalid,
    or some invalid while the valid ones would scale down).
    """

    replicas: int
    metric: str
    outcomes: tuple[MetricOutcome, ...]
    invalid_metrics_count: int
    error: str | None
    scaling_active: Condition


def tolerances_for(
    behavior: HorizontalPodAutoscalerBehavior | None, tolerance: float = DEFAULT_TOLERANCE
) -> Tolerances:
    """Per-direction tolerances: ``behavior.scale{Up,Down}.tolerance`` if set, else the cluster flag."""
    scale_down = scale_up = tolerance
    if behavior is not None:
        if behavior.scale_down is not None and behavior.scale_down.tolerance is not None:
            scale_down = behavior.scale_down.tolerance
        if behavior.scale_up is not None and behavior.scale_up.tolerance is not None:
            scale_up = behavior.scale_up.tolerance
    return Tolerances(scale_down=scale_down, scale_up=scale_up)


_FAILED_REASON = {
    RESOURCE: "FailedGetResourceMetric",
    CONTAINER_RESOURCE: "FailedGetContainerResourceMetric",
    PODS: "FailedGetPodsMetric",
    OBJECT: "FailedGetObjectMetric",
    EXTERNAL: "FailedGetExternalMetric",
}


def compute_replicas_for_metric(
    index: int,
    spec: MetricSpec,
    reading: Reading,
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[Pod],
    tolerances: Tolerances,
    now_s: float,
    *,
    cpu_initialization_period_s: float = DEFAULT_CPU_INITIALIZATION_PERIOD_S,
    delay_of_initial_readiness_status_s: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S,
) -> MetricOutcome:
    """One metric's proposal (Go ``computeReplicasForMetric`` and the ``computeStatusFor*Metric`` helpers).

    Resource, ContainerResource and Pods metrics use ``spec.replicas``;
    Object and External ``AverageValue`` targets use ``status.replicas``;
    Object and External ``Value`` targets use ``spec.replicas`` and the
    Running+Ready pods.
    """
    timing = {
        "cpu_initialization_period_s": cpu_initialization_period_s,
        "delay_of_initial_readiness_status_s": delay_of_initial_readiness_status_s,
    }
    reason = _FAILED_REASON.get(spec.type, "InvalidMetricSourceType")
    if spec.type not in _FAILED_REASON:
        return _invalid(index, spec, f'unknown metric source type "{spec.type}"', reason)
    if isinstance(reading, FailedReading):
        return _invalid(index, spec, _wrap(spec, reading.message), reason)
    _check_reading(index, spec, reading)
    target = spec.target
    try:
        if spec.type in (RESOURCE, CONTAINER_RESOURCE):
            assert isinstance(reading, PodMetricsReading)  # _check_reading
            if target.average_value_milli is not None:
                proposal = get_raw_resource_replicas(
                    spec_replicas,
                    target.average_value_milli,
                    spec.name,
                    tolerances,
                    pods,
                    reading.metrics,
                    now_s,
                    **timing,
                )
                return _valid(
                    index,
                    spec,
                    proposal.replica_count,
                    proposal.usage_milli,
                    proposal.usage_ratio,
                    proposal.new_usage_ratio,
                    tolerances,
                )
            if target.average_utilization_pct is None:
                raise MetricUnavailableError(
                    "invalid resource metric source: neither an average utilization target "
                    "nor an average value (usage) target was set"
                )
            result = get_resource_replicas(
                spec_replicas,
                target.average_utilization_pct,
                spec.name,
                tolerances,
                pods,
                reading.metrics,
                now_s,
                container=spec.container,
                **timing,
            )
            return _valid(
                index,
                spec,
                result.replica_count,
                result.utilization_pct,
                result.usage_ratio,
                result.new_usage_ratio,
                tolerances,
            )
        if spec.type == PODS:
            assert isinstance(reading, PodMetricsReading)  # _check_reading
            if target.average_value_milli is None:
                raise MetricUnavailableError("invalid pods metric source: no average value target was set")
            proposal = get_metric_replicas(
                spec_replicas, target.average_value_milli, tolerances, pods, reading.metrics, now_s, **timing
            )
            return _valid(
                index,
                spec,
                proposal.replica_count,
                proposal.usage_milli,
                proposal.usage_ratio,
                proposal.new_usage_ratio,
                tolerances,
            )
        if spec.type == OBJECT:
            assert isinstance(reading, ObjectReading)  # _check_reading
            if target.type == VALUE and target.value_milli is not None:
                proposal = get_object_metric_replicas(
                    spec_replicas, target.value_milli, reading.value_milli, tolerances, pods
                )
                return _valid(
                    index,
                    spec,
                    proposal.replica_count,
                    proposal.usage_milli,
                    proposal.usage_ratio,
                    None,
                    tolerances,
                    from_zero=spec_replicas == 0,
                )
            if target.type == AVERAGE_VALUE and target.average_value_milli is not None:
                proposal = get_object_per_pod_metric_replicas(
                    status_replicas, target.average_value_milli, reading.value_milli, tolerances
                )
                return _valid(
                    index, spec, proposal.replica_count, proposal.usage_milli, proposal.usage_ratio, None, tolerances
                )
            raise MetricUnavailableError(
                "invalid object metric source: neither a value target nor an average value target was set"
            )
        # External: an AverageValue target wins when both are set, as in horizontal.go.
        assert isinstance(reading, ExternalReading)  # _check_reading
        if target.average_value_milli is not None:
            proposal = get_external_per_pod_metric_replicas(
                status_replicas, target.average_value_milli, reading.values_milli, tolerances
            )
            return _valid(
                index, spec, proposal.replica_count, proposal.usage_milli, proposal.usage_ratio, None, tolerances
            )
        if target.value_milli is not None:
            proposal = get_external_metric_replicas(
                spec_replicas, target.value_milli, reading.values_milli, tolerances, pods
            )
            return _valid(
                index,
                spec,
                proposal.replica_count,
                proposal.usage_milli,
                proposal.usage_ratio,
                None,
                tolerances,
                from_zero=spec_replicas == 0,
            )
        raise MetricUnavailableError(
            "invalid external metric source: neither a value target nor an average value target was set"
        )
    except MetricUnavailableError as error:
        return _invalid(index, spec, _wrap(spec, str(error)), reason)


def compute_replicas_for_metrics(
    metric_specs: Sequence[MetricSpec],
    readings: Sequence[Reading],
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[Pod],
    tolerances: Tolerances,
    now_s: float,
    **timing,
) -> MetricsOutcome:
    """The largest valid proposal, and the invalid-metric rules (Go ``computeReplicasForMetrics``).

    If every metric is invalid, or some are invalid and the largest valid
    proposal is below ``spec.replicas``, the result is -1: with partial
    metrics the HPA may scale up but never down.
    """
    if len(readings) != len(metric_specs):
        raise PlannerInputError(f"got {len(readings)} metric readings for {len(metric_specs)} metrics in spec.metrics")
    replicas = 0
    metric = ""
    invalid_metrics_count = 0
    invalid_metric_error: str | None = None
    invalid_reason = ""
    outcomes = []
    for i, (metric_spec, reading) in enumerate(zip(metric_specs, readings, strict=True)):
        outcome = compute_replicas_for_metric(
            i, metric_spec, reading, spec_replicas, status_replicas, pods, tolerances, now_s, **timing
        )
        outcomes.append(outcome)
        if outcome.error is not None:
            if invalid_metrics_count <= 0:
                invalid_metric_error = outcome.error
                invalid_reason = outcome.condition_reason or ""
            invalid_metrics_count += 1
            continue
        assert outcome.replica_count is not None  # a valid outcome carries its proposal
        if replicas == 0 or outcome.replica_count > replicas:
            replicas = outcome.replica_count
            metric = outcome.description

    error = None
    if invalid_metric_error is not None:
        error = (
            f"invalid metrics ({invalid_metrics_count} invalid out of {len(metric_specs)}), "
            f"first error is: {invalid_metric_error}"
        )
    # If all metrics are invalid or some are invalid and we would scale down,
    # return an error and set the condition of the hpa based on the first invalid metric.
    if invalid_metrics_count >= len(metric_specs) or (invalid_metrics_count > 0 and replicas < spec_replicas):
        condition = Condition(
            "ScalingActive",
            False,
            invalid_reason,
            f"the HPA was unable to compute the replica count: {invalid_metric_error}",
        )
        return MetricsOutcome(-1, "", tuple(outcomes), invalid_metrics_count, error, condition)
    condition = Condition(
        "ScalingActive",
        True,
        "ValidMetricFound",
        f"the HPA was able to successfully calculate a replica count from {metric}",
    )
    return MetricsOutcome(replicas, metric, tuple(outcomes), invalid_metrics_count, error, condition)


@dataclass(frozen=True)
class ReconcileResult:
    """Everything one reconcile decided, for explanation and simulation.

    Attributes
    ----------
    now_s : float
        When the reconcile ran. [s]
    current_replicas : int
        ``scale.spec.replicas`` before. [replicas]
    desired_replicas : int
        The count after this reconcile (equal to current when nothing changes). [replicas]
    rescale : bool
        The controller wrote a new count.
    metrics : MetricsOutcome or None
        Per-metric proposals; ``None`` on the early exits.
    metric_desired_replicas : int or None
        Largest valid proposal before normalization (-1 when blocked). [replicas]
    stabilized_replicas : int or None
        After the stabilization window, before the rate limits. [replicas]
    able_to_scale, scaling_active, scaling_limited : Condition or None
        The status conditions as this reconcile leaves them (``None`` where
        it set none): ``AbleToScale`` is ``SucceededRescale`` after a
        rescale, the stabilization verdict when the count stayed, and
        ``SucceededGetScale`` when the reconcile stopped before normalizing.
    stabilization : Condition or None
        The ``AbleToScale`` verdict of the stabilization step
        (``ReadyForNewScale``, ``ScaleUpStabilized``, ``ScaleDownStabilized``),
        kept even when a rescale then overwrote it.
    rescale_reason : str
        The event text ("pods metric qps above target", ...).
    error : str or None
        The error the controller would return (invalid metrics).
    scaled_to_zero : Condition or None
        The ``ScaledToZero`` condition this reconcile set (only after a rescale,
        with ``HPAScaleToZero`` on in the condition-based controller).
    """

    now_s: float
    current_replicas: int
    desired_replicas: int
    rescale: bool
    metrics: MetricsOutcome | None
    metric_desired_replicas: int | None
    stabilized_replicas: int | None
    able_to_scale: Condition | None
    scaling_active: Condition | None
    scaling_limited: Condition | None
    rescale_reason: str
    error: str | None
    stabilization: Condition | None = None
    scaled_to_zero: Condition | None = None

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The conditions this reconcile set, in the order ``kubectl describe hpa`` lists them."""
        return tuple(
            c
            for c in (self.able_to_scale, self.scaling_active, self.scaling_limited, self.scaled_to_zero)
            if c is not None
        )


class HorizontalController:
    """One HPA's controller state, stepped with injected time.

    Parameters
    ----------
    spec : HorizontalPodAutoscalerSpec
        The HPA. ``behavior`` gets the API defaults, as the API server fills them on create.
    tolerance : float, optional
        ``--horizontal-pod-autoscaler-tolerance``. [fraction]
    downscale_stabilization_window_s : float, optional
        ``--horizontal-pod-autoscaler-downscale-stabilization``. [s]
    cpu_initialization_period_s, delay_of_initial_readiness_status_s : float, optional
        The CPU readiness flags. [s]
    scale_up_limit_factor, scale_up_limit_minimum : float, optional
        Legacy-path constants (Kubernetes' own tests set the factor to 8).
    recommendations : tuple of TimestampedRecommendation, optional
        History to start from (the Go controller's ``recommendations`` map
        entry for this HPA); ``None`` until the first reconcile seeds it.
    scale_up_events, scale_down_events : tuple of TimestampedScaleEvent, optional
        Past scale events the rate policies count (``scaleUpEvents`` and
        ``scaleDownEvents``), for example to resume a controller mid-run.
    scale_to_zero : str, optional
        One of :data:`SCALE_TO_ZERO_MODES` (default: Kubernetes 1.37's,
        :data:`SCALE_TO_ZERO_CONDITION`); see
        :attr:`planner.autoscaler.versions.ClusterVersions.hpa_scale_to_zero_mode`.
    scaled_to_zero : bool, optional
        The HPA's ``ScaledToZero`` condition status to start from (True: the
        controller itself took the target to 0 replicas).

    Notes
    -----
    The history is kept across calls exactly as the Go controller keeps it
    per HPA key: the first reconcile seeds the recommendations with the
    current count (``recordInitialRecommendation``), so a scale-down right
    after start is held by the stabilization window.
    """

    def __init__(
        self,
        spec: HorizontalPodAutoscalerSpec,
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        downscale_stabilization_window_s: float = DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S,
        cpu_initialization_period_s: float = DEFAULT_CPU_INITIALIZATION_PERIOD_S,
        delay_of_initial_readiness_status_s: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S,
        scale_up_limit_factor: float = SCALE_UP_LIMIT_FACTOR,
        scale_up_limit_minimum: float = SCALE_UP_LIMIT_MINIMUM,
        recommendations: Sequence[TimestampedRecommendation] | None = None,
        scale_up_events: Sequence[TimestampedScaleEvent] = (),
        scale_down_events: Sequence[TimestampedScaleEvent] = (),
        scale_to_zero: str = SCALE_TO_ZERO_CONDITION,
        scaled_to_zero: bool = False,
    ) -> None:
        if scale_to_zero not in SCALE_TO_ZERO_MODES:
            raise PlannerInputError(
                f"scale_to_zero: expected one of {', '.join(SCALE_TO_ZERO_MODES)}, got {scale_to_zero!r}"
            )
        self.scale_to_zero = scale_to_zero
        self.scaled_to_zero = bool(scaled_to_zero)
        self.spec = spec
        self.behavior = set_defaults_horizontal_pod_autoscaler_behavior(spec.behavior)
        self.tolerances = tolerances_for(self.behavior, tolerance)
        self.downscale_stabilization_window_s = downscale_stabilization_window_s
        self.cpu_initialization_period_s = cpu_initialization_period_s
        self.delay_of_initial_readiness_status_s = delay_of_initial_readiness_status_s
        self.scale_up_limit_factor = scale_up_limit_factor
        self.scale_up_limit_minimum = scale_up_limit_minimum
        self.recommendations: tuple[TimestampedRecommendation, ...] | None = (
            None if recommendations is None else tuple(recommendations)
        )
        self.scale_up_events: tuple[TimestampedScaleEvent, ...] = tuple(scale_up_events)
        self.scale_down_events: tuple[TimestampedScaleEvent, ...] = tuple(scale_down_events)

    def record_initial_recommendation(self, current_replicas: int, now_s: float) -> None:
        """Seed the history with the current count once (Go ``recordInitialRecommendation``)."""
        if self.recommendations is None:
            self.recommendations = (TimestampedRecommendation(current_replicas, now_s),)

    def reconcile_autoscaler(
        self,
        now_s: float,
        spec_replicas: int,
        readings: Sequence[Reading],
        *,
        status_replicas: int | None = None,
        pods: Sequence[Pod] = (),
    ) -> ReconcileResult:
        """Run one reconcile at ``now_s`` (Go ``reconcileAutoscaler``) and update the history.

        Parameters
        ----------
        now_s : float
            Current time; must not go backwards between calls. [s]
        spec_replicas : int
            ``scale.spec.replicas``. [replicas]
        readings : sequence
            One reading per entry of ``spec.metrics``.
        status_replicas : int, optional
            ``scale.status.replicas`` (pods that exist); defaults to ``spec_replicas``. [replicas]
        pods : sequence of Pod, optional
            Pods matched by the selector (needed by Resource and Pods metrics
            and by Object/External ``Value`` targets).

        Returns
        -------
        ReconcileResult
        """
        status_replicas = spec_replicas if status_replicas is None else status_replicas
        current_replicas = spec_replicas
        self.record_initial_recommendation(current_replicas, now_s)
        min_replicas = self.spec.effective_min_replicas
        max_replicas = self.spec.max_replicas

        metrics_outcome = None
        metric_desired = None
        stabilized = None
        able_to_scale = _SUCCEEDED_GET_SCALE
        stabilization = scaling_limited = scaling_active = None
        error = None
        rescale_reason = ""
        desired_replicas = 0
        rescale = True
        legacy = self.scale_to_zero == SCALE_TO_ZERO_LEGACY
        scale_to_zero_feature_enabled = self.scale_to_zero == SCALE_TO_ZERO_CONDITION
        has_object_or_ext_metrics = has_object_or_external_metrics(self.spec)
        scaled_to_zero_condition = scale_to_zero_feature_enabled and self.scaled_to_zero
        can_scale_from_zero = scaled_to_zero_condition and has_object_or_ext_metrics
        needs_metric_computation = True
        if current_replicas == 0 and (not legacy or min_replicas != 0):
            if legacy:
                needs_metric_computation, should_disable = False, True
            else:
                needs_metric_computation, should_disable = should_compute_metrics_for_zero_replicas(
                    min_replicas, scaled_to_zero_condition, can_scale_from_zero
                )
            if should_disable:
                # Autoscaling is disabled for this resource
                desired_replicas = 0
                rescale = False
                scaling_active = Condition(
                    "ScalingActive",
                    False,
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero",
                )
        elif current_replicas > max_replicas:
            rescale_reason = "Current number of replicas above Spec.MaxReplicas"
            desired_replicas = max_replicas
            needs_metric_computation = False
        elif current_replicas < min_replicas:
            rescale_reason = "Current number of replicas below Spec.MinReplicas"
            desired_replicas = min_replicas
            needs_metric_computation = False
        if needs_metric_computation:
            metrics_outcome = compute_replicas_for_metrics(
                self.spec.metrics,
                readings,
                spec_replicas,
                status_replicas,
                pods,
                self.tolerances,
                now_s,
                cpu_initialization_period_s=self.cpu_initialization_period_s,
                delay_of_initial_readiness_status_s=self.delay_of_initial_readiness_status_s,
            )
            metric_desired = metrics_outcome.replicas
            scaling_active = metrics_outcome.scaling_active
            error = metrics_outcome.error
            if metrics_outcome.error is not None and metric_desired == -1:
                return ReconcileResult(
                    now_s,
                    current_replicas,
                    current_replicas,
                    False,
                    metrics_outcome,
                    metric_desired,
                    None,
                    able_to_scale,
                    scaling_active,
                    None,
                    "",
                    error,
                )
            rescale_metric = ""
            if metric_desired > desired_replicas:
                desired_replicas = metric_desired
                rescale_metric = metrics_outcome.metric
            if desired_replicas > current_replicas:
                rescale_reason = f"{rescale_metric} above target"
            if desired_replicas < current_replicas:
                rescale_reason = "All metrics below target"
            if self.behavior is None:
                desired_replicas, stabilized, stabilization, scaling_limited = self._normalize_desired_replicas(
                    current_replicas, desired_replicas, min_replicas, now_s
                )
            else:
                desired_replicas, stabilized, stabilization, scaling_limited = (
                    self._normalize_desired_replicas_with_behaviors(
                        current_replicas, desired_replicas, min_replicas, now_s
                    )
                )
            able_to_scale = stabilization
            if (
                current_replicas == 0
                and min_replicas != 0
                and scaled_to_zero_condition
                and desired_replicas < min_replicas
            ):
                desired_replicas = min_replicas
                if rescale_reason == "":
                    rescale_reason = "Current number of replicas below Spec.MinReplicas"
            rescale = desired_replicas != current_replicas

        scaled_to_zero = None
        if rescale:
            able_to_scale = Condition(
                "AbleToScale",
                True,
                "SucceededRescale",
                f"the HPA controller was able to update the target scale to {desired_replicas}",
            )
            self.scale_up_events, self.scale_down_events = store_scale_event(
                self.behavior,
                self.scale_up_events,
                self.scale_down_events,
                current_replicas,
                desired_replicas,
                now_s,
            )
            # Handle ScaledToZero condition based on scale direction
            if scale_to_zero_feature_enabled:
                if current_replicas > 0 and desired_replicas == 0 and min_replicas == 0 and has_object_or_ext_metrics:
                    scaled_to_zero = Condition(
                        "ScaledToZero", True, "ScaledToZero", "the HPA controller scaled the workload to zero"
                    )
                else:
                    scaled_to_zero = Condition(
                        "ScaledToZero",
                        False,
                        "NotScaledToZero",
                        "the HPA controller did not scale the workload to zero",
                    )
                self.scaled_to_zero = scaled_to_zero.status
        else:
            desired_replicas = current_replicas
        return ReconcileResult(
            now_s,
            current_replicas,
            desired_replicas,
            rescale,
            metrics_outcome,
            metric_desired,
            stabilized,
            able_to_scale,
            scaling_active,
            scaling_limited,
            rescale_reason,
            error,
            stabilization,
            scaled_to_zero,
        )

    def _normalize_desired_replicas(
        self, current_replicas: int, prenormalized_desired_replicas: int, min_replicas: int, now_s: float
    ) -> tuple[int, int, Condition, Condition]:
        """Legacy normalization (Go ``normalizeDesiredReplicas``)."""
        assert self.recommendations is not None  # seeded by record_initial_recommendation
        stabilized, self.recommendations = stabilize_recommendation(
            self.recommendations, prenormalized_desired_replicas, now_s, self.downscale_stabilization_window_s
        )
        if stabilized != prenormalized_desired_replicas:
            able_to_scale = Condition(
                "AbleToScale",
                True,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        else:
            able_to_scale = Condition("AbleToScale", True, "ReadyForNewScale", "recommended size matches current size")
        limited = convert_desired_replicas_with_rules(
            current_replicas,
            stabilized,
            min_replicas,
            self.spec.max_replicas,
            self.scale_up_limit_factor,
            self.scale_up_limit_minimum,
        )
        scaling_limited = Condition("ScalingLimited", limited.replicas != stabilized, limited.reason, limited.message)
        return limited.replicas, stabilized, able_to_scale, scaling_limited

    def _normalize_desired_replicas_with_behaviors(
        self, current_replicas: int, prenormalized_desired_replicas: int, min_replicas: int, now_s: float
    ) -> tuple[int, int, Condition, Condition]:
        """Normalization with ``spec.behavior`` (Go ``normalizeDesiredReplicasWithBehaviors``).

        1. Apply the basic conditions (i.e. < maxReplicas, > minReplicas, etc...)
        2. Apply the scale up/down limits from the hpaSpec.Behaviors (i.e. add no more than 4 pods)
        3. Apply the constraints period (i.e. add no more than 4 pods per minute)
        4. Apply the stabilization (i.e. add no more than 4 pods per minute, and pick the
           smallest recommendation during last 5 minutes)
        """
        behavior = maybe_init_scale_down_stabilization_window(self.behavior, self.downscale_stabilization_window_s)
        # Only called with spec.behavior set, and SetDefaults filled both directions.
        assert behavior is not None and behavior.scale_up is not None and behavior.scale_down is not None
        assert self.recommendations is not None  # seeded by record_initial_recommendation
        arg = NormalizationArg(
            scale_up_behavior=behavior.scale_up,
            scale_down_behavior=behavior.scale_down,
            min_replicas=min_replicas,
            max_replicas=self.spec.max_replicas,
            current_replicas=current_replicas,
            desired_replicas=prenormalized_desired_replicas,
        )
        stabilized = stabilize_recommendation_with_behaviors(arg, self.recommendations, now_s)
        self.recommendations = stabilized.recommendations
        if stabilized.replicas != prenormalized_desired_replicas:
            able_to_scale = Condition("AbleToScale", True, stabilized.reason, stabilized.message)
        else:
            able_to_scale = Condition("AbleToScale", True, "ReadyForNewScale", "recommended size matches current size")
        arg = NormalizationArg(
            arg.scale_up_behavior,
            arg.scale_down_behavior,
            arg.min_replicas,
            arg.max_replicas,
            arg.current_replicas,
            stabilized.replicas,
        )
        limited = convert_desired_replicas_with_behavior_rate(arg, self.scale_up_events, self.scale_down_events, now_s)
        scaling_limited = Condition(
            "ScalingLimited", limited.replicas != stabilized.replicas, limited.reason, limited.message
        )
        return limited.replicas, stabilized.replicas, able_to_scale, scaling_limited


def has_object_or_external_metrics(spec: HorizontalPodAutoscalerSpec) -> bool:
    """The HPA has at least one Object or External metric (Go ``hasObjectOrExternalMetrics``)."""
    return any(metric.type in (OBJECT, EXTERNAL) for metric in spec.metrics)


def should_compute_metrics_for_zero_replicas(
    min_replicas: int, scaled_to_zero_condition: bool, can_scale_from_zero: bool
) -> tuple[bool, bool]:
    """At 0 replicas: ``(needsMetricComputation, shouldDisable)`` (Go ``shouldComputeMetricsForZeroReplicas``).

    Metrics are computed when the HPA scaled the target to zero itself and can
    scale it back (an Object or External metric), or when it scaled it to zero
    and ``minReplicas`` has since been raised; otherwise scaling is disabled.
    """
    if (min_replicas != 0 and scaled_to_zero_condition) or can_scale_from_zero:
        return True, False
    return False, True


def _valid(index, spec, replica_count, usage, usage_ratio, new_usage_ratio, tolerances, *, from_zero=False):
    within = None if from_zero else tolerances.is_within(usage_ratio)
    return MetricOutcome(index, spec.description, replica_count, usage, usage_ratio, new_usage_ratio, within)


def _invalid(index, spec, message, reason):
    return MetricOutcome(index, spec.description, None, error=message, condition_reason=reason)


def _wrap(spec: MetricSpec, message: str) -> str:
    if spec.type == RESOURCE:
        return f"failed to get {spec.name} resource metric value: {message}"
    if spec.type == CONTAINER_RESOURCE:
        return f"failed to get {spec.container} container metric value: {message}"
    if spec.type == PODS:
        return f"failed to get pods metric value: {message}"
    if spec.type == OBJECT:
        return f"failed to get object metric value: {message}"
    return f"failed to get {spec.name} external metric value: {message}"


_READING_FOR = {
    RESOURCE: PodMetricsReading,
    CONTAINER_RESOURCE: PodMetricsReading,
    PODS: PodMetricsReading,
    OBJECT: ObjectReading,
    EXTERNAL: ExternalReading,
}


def _check_reading(index: int, spec: MetricSpec, reading: Reading) -> None:
    expected = _READING_FOR[spec.type]
    if not isinstance(reading, expected):
        raise PlannerInputError(
            f"spec.metrics[{index}] is a {spec.type} metric and needs a {expected.__name__}, "
            f"got {type(reading).__name__}"
        )
