"""The ``keda`` module turns a KEDA ScaledObject into the HPA KEDA creates, and runs KEDA's own steps.

Ported from ``kedacore/keda`` (v2.x, by function name):

* ``newHPAForScaledObject`` / ``getScaledObjectMetricSpecs``
  (``controllers/keda/hpa.go``): one External metric ``s{i}-{type}`` per
  trigger with the trigger's ``metricType`` (default ``AverageValue``) and
  ``threshold`` as target; cpu/memory triggers become Resource metrics;
  ``minReplicas`` is ``minReplicaCount`` or 1, ``maxReplicas``
  ``maxReplicaCount`` or 100; ``advanced.horizontalPodAutoscalerConfig.behavior``
  is passed through unchanged; with ``advanced.scalingModifiers`` the
  External metrics are replaced by one ``composite-metric``.
* The Prometheus scaler (``pkg/scalers/prometheus_scaler.go``): an empty
  result is 0 when ``ignoreNullValues`` (default true) and an error
  otherwise; a trigger is active when its value is strictly greater than
  ``activationThreshold`` (default 0); values reach the HPA rounded to
  milli-units (``quantityFromFloat64``).
* ``GetMetricsWithFallback`` / ``doFallback`` (``pkg/fallback/fallback.go``):
  after more than ``failureThreshold`` consecutive failures the metric is
  replaced by ``target x replicas`` so the HPA computes ``fallback.replicas``.
  Failures are counted where KEDA counts them: once per metric each time the
  HPA fetches it through the metrics adapter (``GetScaledObjectMetrics``),
  never in the polling loop (``getScaledObjectState``).
* The metrics cache (``pkg/scaling/scale_handler.go``): every HPA fetch
  queries the scaler afresh (``GetScaledObjectMetrics`` calls
  ``GetMetricsAndActivityForScaler``), except for a trigger with
  ``useCachedMetrics: true``, whose value (or error) the polling loop stored
  at the last ``pollingInterval`` poll (``getScalerState`` fills the records,
  ``checkScalers`` stores them) and the fetch reads back (``ReadRecord``);
  before the first poll the fetch queries afresh. Fallback then applies to
  the cached value as to a fresh one.
* ``HandleScalingModifiers`` (``pkg/scaling/modifiers``) with the formula
  evaluated by :mod:`planner.autoscaler.formula`, never ``eval``.
* ``RequestScale`` (``pkg/scaling/executor/scale_scaledobjects.go``):
  0 -> 1 on activation, and back to ``minReplicaCount`` (0) after
  ``cooldownPeriod`` without activity; between 1 and N the HPA decides.
* The cron scaler (``pkg/scalers/cron_scaler.go``, in
  :mod:`planner.autoscaler.cron_scaler`): with a wall clock
  (:attr:`KedaController.start_epoch_s`) the controller asks each cron
  trigger for its value (``desiredReplicas`` inside its window, else 0) and
  its activity (the window itself, not ``activationThreshold``) at every
  poll and HPA fetch; an unknown zone is a failing trigger.

Not modelled: paused-replicas annotations, ``restoreToOriginalReplicaCount``,
the ``triggerScoped`` fallback behavior, scaler types other than Prometheus
and cron (any other type is read through its ``threshold``), and authentication.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior
from planner.autoscaler.cron_scaler import (
    CronMetadata,
    CronReading,
    CronScaler,
    build_cron_scaler,
    cron_metric_name,
    cron_reading,
)
from planner.autoscaler.defaults import (
    DEFAULT_COOLDOWN_PERIOD_S,
    DEFAULT_HPA_MAX_REPLICAS,
    DEFAULT_HPA_MIN_REPLICAS,
    DEFAULT_INITIAL_COOLDOWN_PERIOD_S,
    DEFAULT_MIN_REPLICA_COUNT,
    DEFAULT_POLLING_INTERVAL_S,
)
from planner.autoscaler.formula import Formula, FormulaError, compile_formula
from planner.autoscaler.horizontal import (
    ExternalReading,
    FailedReading,
    HorizontalController,
    PodMetricsReading,
    Reading,
    ReconcileResult,
)
from planner.autoscaler.hpa_spec import (
    AVERAGE_VALUE,
    EXTERNAL,
    RESOURCE,
    UTILIZATION,
    VALUE,
    HorizontalPodAutoscalerSpec,
    MetricSpec,
    MetricTarget,
)
from planner.autoscaler.replica_calculator import Pod, ready_pods
from planner.errors import PlannerInputError

__all__ = [
    "COMPOSITE_METRIC_NAME",
    "ExecutorDecision",
    "Fallback",
    "KedaController",
    "ScaledObjectSpec",
    "ScalingModifiers",
    "Trigger",
    "TriggerEvaluation",
    "TriggersEvaluation",
    "evaluate_triggers",
    "hpa_for_scaled_object",
    "keda_quantity_milli",
    "request_scale",
    "validate_scaled_object",
]

COMPOSITE_METRIC_NAME = "composite-metric"

RESOURCE_TRIGGERS = ("cpu", "memory")
FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower")


@dataclass(frozen=True)
class Trigger:
    """One entry of ``spec.triggers``.

    Attributes
    ----------
    index : int
        Position in ``spec.triggers`` (KEDA's metric names carry it: ``s0-prometheus``).
    type : str
        Scaler type (``prometheus``, ``cpu``, ...).
    name : str
        ``name``; ``""`` when unset.
    metric_type : str
        ``metricType``: ``AverageValue`` (default), ``Value``, or ``Utilization`` for cpu/memory.
    threshold : float
        ``metadata.threshold`` (``metadata.value`` for cpu/memory). [metric units]
    activation_threshold : float
        ``metadata.activationThreshold``; active when the value is strictly greater. [metric units]
    ignore_null_values : bool
        ``metadata.ignoreNullValues``: an empty query result counts as 0 instead of an error.
    use_cached_metrics : bool
        ``useCachedMetrics``: the HPA reads the value of the last poll instead of a fresh query.
    query : str
        ``metadata.query``, shown in explanations.
    cron : CronMetadata or None
        A ``cron`` trigger's ``start``, ``end``, ``timezone`` and ``desiredReplicas`` as written.
    """

    index: int
    type: str
    threshold: float
    name: str = ""
    metric_type: str = AVERAGE_VALUE
    activation_threshold: float = 0.0
    ignore_null_values: bool = True
    query: str = ""
    use_cached_metrics: bool = False
    cron: CronMetadata | None = None

    @property
    def is_resource(self) -> bool:
        return self.type in RESOURCE_TRIGGERS

    @property
    def metric_name(self) -> str:
        """The External metric name KEDA gives the HPA (``GenerateMetricNameWithIndex``)."""
        if self.cron is not None:
            return cron_metric_name(self.index, self.cron)
        return f"s{self.index}-{self.type.lower()}"

    @property
    def label(self) -> str:
        """``name`` if set, else the index."""
        return self.name or str(self.index)


@dataclass(frozen=True)
class Fallback:
    """``spec.fallback``: replicas to hold after ``failure_threshold`` failed polls."""

    failure_threshold: int
    replicas: int
    behavior: str = "static"


@dataclass(frozen=True)
class ScalingModifiers:
    """``spec.advanced.scalingModifiers``."""

    formula: str
    target: str
    activation_target: str = ""
    metric_type: str = ""


@dataclass(frozen=True)
class ScaledObjectSpec:
    """The parts of a ScaledObject that decide replica counts; ``None`` fields take KEDA's defaults."""

    name: str
    triggers: tuple[Trigger, ...]
    min_replica_count: int | None = None
    max_replica_count: int | None = None
    polling_interval_s: float | None = None
    cooldown_period_s: float | None = None
    initial_cooldown_period_s: float | None = None
    idle_replica_count: int | None = None
    fallback: Fallback | None = None
    behavior: HorizontalPodAutoscalerBehavior | None = None
    scaling_modifiers: ScalingModifiers | None = None
    scale_target_kind: str = "Deployment"
    scale_target_name: str = ""

    @property
    def effective_min_replica_count(self) -> int:
        return DEFAULT_MIN_REPLICA_COUNT if self.min_replica_count is None else self.min_replica_count

    @property
    def effective_polling_interval_s(self) -> float:
        return DEFAULT_POLLING_INTERVAL_S if self.polling_interval_s is None else self.polling_interval_s

    @property
    def effective_cooldown_period_s(self) -> float:
        return DEFAULT_COOLDOWN_PERIOD_S if self.cooldown_period_s is None else self.cooldown_period_s

    @property
    def effective_initial_cooldown_period_s(self) -> float:
        if self.initial_cooldown_period_s is None:
            return DEFAULT_INITIAL_COOLDOWN_PERIOD_S
        return self.initial_cooldown_period_s

    @property
    def is_using_modifiers(self) -> bool:
        return self.scaling_modifiers is not None and bool(self.scaling_modifiers.formula)

    def trigger(self, key: str) -> Trigger:
        """Find a trigger by ``name`` or by 0-based index."""
        for trigger in self.triggers:
            if trigger.name and trigger.name == key:
                return trigger
        if key.isdigit() and int(key) < len(self.triggers):
            return self.triggers[int(key)]
        known = ", ".join(t.label for t in self.triggers)
        raise PlannerInputError(f"no trigger named {key!r} in ScaledObject {self.name} (triggers: {known})")


def keda_quantity_milli(value: float) -> int:
    """A float as KEDA hands it to the HPA, in milli-units (``quantityFromFloat64``).

    KEDA formats the value with ``%.3f`` and parses it as a Quantity, so it is
    rounded to the nearest milli-unit; NaN and infinity become 0.
    """
    if math.isnan(value) or math.isinf(value):
        return 0
    return int(Decimal(f"{value:.3f}") * 1000)


def validate_scaled_object(so: ScaledObjectSpec) -> Formula | None:
    """The admission checks that change decisions (``CheckReplicaCountBoundsAreValid``,
    ``CheckFallbackValid``, ``ValidateAndCompileScalingModifiers``).

    Returns
    -------
    Formula or None
        The compiled ``scalingModifiers.formula``, if any.

    Raises
    ------
    PlannerInputError
        Naming the field and what was expected.
    """
    lo, hi = so.effective_min_replica_count, so.max_replica_count
    if hi is not None and lo > hi:
        raise PlannerInputError(f"MinReplicaCount={lo} must be less than MaxReplicaCount={hi}")
    if so.idle_replica_count is not None and so.idle_replica_count >= lo:
        raise PlannerInputError(f"IdleReplicaCount={so.idle_replica_count} must be less than MinReplicaCount={lo}")
    if not so.triggers:
        raise PlannerInputError("spec.triggers: at least one trigger is required")
    for trigger in so.triggers:
        if trigger.use_cached_metrics and trigger.type in ("cpu", "memory", "cron"):
            raise PlannerInputError(
                f"spec.triggers[{trigger.index}].useCachedMetrics: not supported for the {trigger.type} scaler"
            )
    if so.fallback is not None:
        if so.fallback.failure_threshold < 0 or so.fallback.replicas < 0:
            raise PlannerInputError("spec.fallback: failureThreshold and replicas must be >= 0")
        if so.fallback.behavior not in FALLBACK_BEHAVIORS:
            raise PlannerInputError(
                f"spec.fallback.behavior: expected one of {', '.join(FALLBACK_BEHAVIORS)}, got {so.fallback.behavior!r}"
            )
    if so.scaling_modifiers is None:
        return None
    modifiers = so.scaling_modifiers
    where = "spec.advanced.scalingModifiers"
    if not modifiers.formula:
        raise PlannerInputError(f"{where}.formula: ScalingModifiers.Formula is mandatory")
    if not modifiers.target:
        raise PlannerInputError(f"{where}.target: formula is given but target is empty")
    try:
        target = float(modifiers.target)
    except ValueError:
        target = -1.0
    if not target > 0.0:
        raise PlannerInputError(f"{where}.target: expected a positive number, got {modifiers.target!r}")
    if modifiers.metric_type == UTILIZATION:
        raise PlannerInputError(
            f"{where}.metricType: metric type cannot be Utilization, must be AverageValue or Value for external metrics"
        )
    if modifiers.activation_target:
        try:
            float(modifiers.activation_target)
        except ValueError:
            raise PlannerInputError(
                f"{where}.activationTarget: expected a number, got {modifiers.activation_target!r}"
            ) from None
    names = [t.name for t in so.triggers if not t.is_resource and t.name]
    try:
        formula = compile_formula(modifiers.formula, names)
        # KEDA's admission runs the formula once with every trigger at -1.
        result = formula.evaluate(dict.fromkeys(names, -1.0))
        _as_float(result)
    except FormulaError as error:
        raise FormulaError(f"{where}.formula: {error}") from None
    return formula


def hpa_for_scaled_object(so: ScaledObjectSpec) -> HorizontalPodAutoscalerSpec:
    """The HPA KEDA creates for ``so`` (Go ``newHPAForScaledObject``)."""
    validate_scaled_object(so)
    specs = []
    for trigger in so.triggers:
        if trigger.is_resource:
            if trigger.metric_type == AVERAGE_VALUE:
                target = MetricTarget(AVERAGE_VALUE, average_value_milli=keda_quantity_milli(trigger.threshold))
            else:
                target = MetricTarget(UTILIZATION, average_utilization_pct=int(trigger.threshold))
            specs.append(MetricSpec(RESOURCE, trigger.type, target))
            continue
        milli = keda_quantity_milli(trigger.threshold)
        if trigger.metric_type == VALUE:
            target = MetricTarget(VALUE, value_milli=milli)
        else:
            target = MetricTarget(AVERAGE_VALUE, average_value_milli=milli)
        specs.append(MetricSpec(EXTERNAL, trigger.metric_name, target))
    # sorted by type, so "External" entries come before "Resource" ones
    specs.sort(key=lambda spec: spec.type)
    if so.is_using_modifiers:
        modifiers = so.scaling_modifiers
        assert modifiers is not None  # is_using_modifiers
        metric_type = modifiers.metric_type or AVERAGE_VALUE
        target_milli = int(float(modifiers.target) * 1000)
        if metric_type == VALUE:
            target = MetricTarget(VALUE, value_milli=target_milli)
        else:
            target = MetricTarget(AVERAGE_VALUE, average_value_milli=target_milli)
        composite = MetricSpec(EXTERNAL, COMPOSITE_METRIC_NAME, target)
        specs = [spec for spec in specs if spec.type == RESOURCE] + [composite]
    min_replicas = (
        so.min_replica_count if so.min_replica_count and so.min_replica_count > 0 else (DEFAULT_HPA_MIN_REPLICAS)
    )
    max_replicas = DEFAULT_HPA_MAX_REPLICAS if so.max_replica_count is None else so.max_replica_count
    return HorizontalPodAutoscalerSpec(
        name=f"keda-hpa-{so.name}",
        max_replicas=max_replicas,
        metrics=tuple(specs),
        min_replicas=min_replicas,
        behavior=so.behavior,
        scale_target_kind=so.scale_target_kind,
        scale_target_name=so.scale_target_name,
    )


@dataclass(frozen=True)
class TriggerEvaluation:
    """What KEDA made of one trigger's query result.

    Attributes
    ----------
    trigger : Trigger
    raw_value : float or None
        What the query returned; ``None`` for an empty result.
    value_milli : int or None
        The value handed to the HPA, or ``None`` when the trigger errored. [milli-units]
    active : bool
        ``value > activationThreshold``.
    error : str or None
    fallback_applied : bool
        The value is the fallback value, not the query's.
    """

    trigger: Trigger
    raw_value: float | None
    value_milli: int | None
    active: bool
    error: str | None = None
    fallback_applied: bool = False


@dataclass(frozen=True)
class TriggersEvaluation:
    """All triggers, plus the readings for the HPA's metrics in ``spec.metrics`` order."""

    triggers: tuple[TriggerEvaluation, ...]
    readings: tuple[Reading, ...]
    is_active: bool
    is_error: bool
    composite_value_milli: int | None = None
    composite_error: str | None = None


def evaluate_triggers(
    so: ScaledObjectSpec,
    hpa: HorizontalPodAutoscalerSpec,
    values: Mapping[int, float | None],
    *,
    current_replicas: int,
    ready_replicas: int,
    consecutive_failures: Mapping[int, int] | None = None,
    errors: Mapping[int, str] | None = None,
    resource_readings: Mapping[int, PodMetricsReading] | None = None,
    active: Mapping[int, bool] | None = None,
) -> TriggersEvaluation:
    """Run the scalers' value handling, fallback and scalingModifiers for one poll.

    Parameters
    ----------
    so : ScaledObjectSpec
    hpa : HorizontalPodAutoscalerSpec
        ``hpa_for_scaled_object(so)``.
    values : mapping of int to float or None
        Query result per trigger index; ``None`` for an empty result.
    current_replicas, ready_replicas : int
        For the fallback value (``currentReplicas`` behaviors, ``Value`` targets). [replicas]
    consecutive_failures : mapping of int to int, optional
        Failed polls in a row per trigger, this one included.
    errors : mapping of int to str, optional
        Triggers whose query failed outright (unreachable Prometheus, ...).
    resource_readings : mapping of int to PodMetricsReading, optional
        Per-pod samples for cpu/memory triggers.
    active : mapping of int to bool, optional
        Activity a scaler reports itself (a cron trigger: inside its window); any
        other trigger is active when its value is above ``activationThreshold``.
    """
    consecutive_failures = consecutive_failures or {}
    errors = errors or {}
    active = active or {}
    results: list[TriggerEvaluation] = []
    by_metric_name: dict[str, TriggerEvaluation] = {}
    for trigger in so.triggers:
        if trigger.is_resource:
            continue
        raw = values.get(trigger.index)
        error = errors.get(trigger.index)
        if error is None and trigger.index not in values:
            raise PlannerInputError(f"no value given for trigger {trigger.label} ({trigger.query or trigger.type})")
        value: float | None = None
        if error is None:
            if raw is None or math.isnan(raw) or math.isinf(raw):
                if trigger.ignore_null_values:
                    value = 0.0
                else:
                    error = "prometheus metrics 'prometheus' target may be lost, the result is empty"
            else:
                value = raw
        if error is None:
            assert value is not None  # no error: the query's value or the ignoreNullValues 0
            trigger_active = active.get(trigger.index, value > trigger.activation_threshold)
            evaluation = TriggerEvaluation(trigger, raw, keda_quantity_milli(value), trigger_active)
        else:
            evaluation = _fallback(
                so,
                hpa,
                trigger,
                raw,
                error,
                consecutive_failures.get(trigger.index, 1),
                current_replicas,
                ready_replicas,
            )
        results.append(evaluation)
        by_metric_name[trigger.metric_name] = evaluation

    is_error = any(e.error is not None and not e.fallback_applied for e in results)
    composite_milli: int | None = None
    composite_error: str | None = None
    if so.is_using_modifiers:
        composite_milli, composite_error, is_active = _composite(
            so, hpa, results, consecutive_failures, current_replicas, ready_replicas
        )
        is_error = composite_error is not None
    else:
        is_active = any(e.active for e in results)

    readings: list[Reading] = []
    for index, spec in enumerate(hpa.metrics):
        if spec.type == RESOURCE:
            trigger = next(t for t in so.triggers if t.is_resource and t.type == spec.name)
            reading = (resource_readings or {}).get(trigger.index)
            if reading is None:
                raise PlannerInputError(f"no per-pod samples given for the {spec.name} trigger (metric {index})")
            readings.append(reading)
        elif spec.name == COMPOSITE_METRIC_NAME:
            if composite_error:
                readings.append(FailedReading(composite_error))
            else:
                assert composite_milli is not None  # _composite returns a value or an error
                readings.append(ExternalReading((composite_milli,)))
        else:
            evaluation = by_metric_name[spec.name]
            if evaluation.value_milli is None:
                assert evaluation.error is not None  # a trigger without a value has an error
                readings.append(FailedReading(evaluation.error))
            else:
                readings.append(ExternalReading((evaluation.value_milli,)))
    return TriggersEvaluation(tuple(results), tuple(readings), is_active, is_error, composite_milli, composite_error)


def _fallback_replicas(fallback: Fallback, current_replicas: int) -> int:
    """Replicas to hold (``doFallback``'s switch on ``fallback.behavior``)."""
    if fallback.behavior == "currentReplicas":
        return current_replicas
    if fallback.behavior == "currentReplicasIfHigher":
        return max(current_replicas, fallback.replicas)
    if fallback.behavior == "currentReplicasIfLower":
        return min(current_replicas, fallback.replicas)
    return fallback.replicas


def _fallback_value_milli(replicas: int, target: float, value_target: bool, ready_replicas: int) -> int | None:
    """``normalisationValue x 1000 x replicas`` (divided by Ready replicas for a Value target)."""
    replicas_float = float(replicas)
    if value_target:
        if ready_replicas <= 0:
            return None  # "status.readyReplicas is 0 in scaleTargetRef"
        replicas_float /= float(ready_replicas)
    return int(target * 1000 * replicas_float)


def _fallback(so, hpa, trigger, raw, error, failures, current_replicas, ready_replicas) -> TriggerEvaluation:
    fallback = so.fallback
    if fallback is None or so.is_using_modifiers or failures <= fallback.failure_threshold:
        return TriggerEvaluation(trigger, raw, None, False, error)
    spec = next(s for s in hpa.metrics if s.name == trigger.metric_name)
    target_milli = spec.target.value_milli if spec.target.type == VALUE else spec.target.average_value_milli
    value = _fallback_value_milli(
        _fallback_replicas(fallback, current_replicas),
        target_milli / 1000,
        spec.target.type == VALUE,
        ready_replicas,
    )
    if value is None:
        return TriggerEvaluation(trigger, raw, None, False, "error performing fallback")
    return TriggerEvaluation(trigger, raw, value, False, error, fallback_applied=True)


def _composite(so, hpa, results, consecutive_failures, current_replicas, ready_replicas):
    """The composite metric and activity (``HandleScalingModifiers`` and the activation re-check)."""
    modifiers = so.scaling_modifiers
    failed = [e for e in results if e.error is not None]
    if failed:
        fallback = so.fallback
        failures = max(consecutive_failures.get(e.trigger.index, 1) for e in failed)
        if fallback is not None and failures > fallback.failure_threshold:
            value = _fallback_value_milli(
                _fallback_replicas(fallback, current_replicas),
                float(modifiers.target),
                modifiers.metric_type == VALUE,
                ready_replicas,
            )
            if value is not None:
                return value, None, False
        return None, f"error from trigger {failed[0].trigger.label}: {failed[0].error}", False
    formula = _compiled_formula(so)
    data = {e.trigger.name: e.value_milli / 1000 for e in results if e.trigger.name}
    try:
        out = _as_float(formula.evaluate(data))
    except FormulaError as error:
        return None, f"error trying to run custom formula: {error}", False
    value_milli = int(out * 1000)
    activation = float(modifiers.activation_target) if modifiers.activation_target else 0.0
    return value_milli, None, value_milli / 1000 > activation


@lru_cache(maxsize=64)
def _compiled_formula(so: ScaledObjectSpec) -> Formula:
    formula = validate_scaled_object(so)
    assert formula is not None  # only called when is_using_modifiers
    return formula


def _as_float(result) -> float:
    if isinstance(result, bool) or result is None:
        raise FormulaError(f"formula must return a number, got {'nil' if result is None else str(result).lower()}")
    if not math.isfinite(result):
        raise FormulaError(f"formula returned {result}, which KEDA cannot hand to the HPA")
    return float(result)


@dataclass(frozen=True)
class ExecutorDecision:
    """What KEDA's operator does on one poll (Go ``RequestScale``).

    Attributes
    ----------
    replicas : int or None
        The count KEDA writes, or ``None`` when it leaves the target to the HPA. [replicas]
    reason : str
        Short description of the branch taken.
    last_active_s : float or None
        ``status.lastActiveTime`` after the poll. [s]
    """

    replicas: int | None
    reason: str
    last_active_s: float | None


def request_scale(
    so: ScaledObjectSpec,
    current_replicas: int,
    is_active: bool,
    is_error: bool,
    now_s: float,
    *,
    last_active_s: float | None,
    created_s: float = 0.0,
) -> ExecutorDecision:
    """KEDA's 0 <-> 1 and idle handling for one poll (Go ``RequestScale`` and helpers).

    Parameters
    ----------
    so : ScaledObjectSpec
    current_replicas : int
        The target's current count. [replicas]
    is_active : bool
        Some trigger (or the composite metric) is above its activation threshold.
    is_error : bool
        Some trigger failed without a fallback.
    now_s : float
        Current time. [s]
    last_active_s : float or None
        ``status.lastActiveTime``; ``None`` if never active. [s]
    created_s : float, optional
        ``metadata.creationTimestamp``, for ``initialCooldownPeriod``. [s]
    """
    min_replicas = so.effective_min_replica_count
    idle = so.idle_replica_count
    if is_active:
        if (idle is not None and current_replicas < min_replicas) or current_replicas == 0:
            replicas = min_replicas if min_replicas > 0 else 1
            return ExecutorDecision(replicas, "scaleFromZeroOrIdle: triggers are active", now_s)
        if is_error:
            return ExecutorDecision(None, "PartialTriggerError: some triggers are not working", last_active_s)
        return ExecutorDecision(None, "active: scaling above the minimum is left to the HPA", now_s)
    if is_error and so.fallback is not None and so.fallback.replicas != 0:
        return ExecutorDecision(None, "error: the HPA holds fallback.replicas after failureThreshold", last_active_s)
    if is_error and so.fallback is None:
        return ExecutorDecision(None, "TriggerError: triggers are not working", last_active_s)
    if (idle is not None and current_replicas > idle) or (current_replicas > 0 and min_replicas == 0):
        if last_active_s is None:
            cooled = created_s + so.effective_initial_cooldown_period_s < now_s
        else:
            cooled = last_active_s + so.effective_cooldown_period_s < now_s
        if cooled:
            replicas = idle if idle is not None else min_replicas
            return ExecutorDecision(replicas, "scaleToZeroOrIdle: cooldownPeriod has passed", last_active_s)
        return ExecutorDecision(None, "ScalerCooldown: waiting for cooldownPeriod", last_active_s)
    if current_replicas < min_replicas and idle is None:
        return ExecutorDecision(min_replicas, "below minReplicaCount", last_active_s)
    return ExecutorDecision(None, "no change", last_active_s)


@dataclass
class KedaController:
    """A ScaledObject's KEDA operator state plus the HPA it owns, stepped with injected time.

    KEDA polls every ``pollingInterval`` for activation, the way to and
    from zero and the metrics cache; the HPA reconciles every sync period
    (15 s) on the values KEDA's metrics server serves: a fresh query, or the
    last poll's value for a ``useCachedMetrics`` trigger. Call :meth:`poll` and :meth:`reconcile` on those
    cadences, or :meth:`step` for both at once.

    :attr:`failures` holds the consecutive failed fetches per trigger index
    (``status.health[...].numberOfFailures``); only :meth:`reconcile` moves it.
    :attr:`metrics_cache` holds, per trigger with ``useCachedMetrics``, the
    ``(value, error)`` of the last poll; :meth:`reconcile` serves it instead
    of the values it is given.

    Cron triggers are built as KEDA builds their scalers (invalid metadata is
    refused here). With :attr:`start_epoch_s` set, ``now_s`` is read on a wall
    clock (UTC epoch ``start_epoch_s + now_s``) and each cron trigger's value
    and activity are the scaler's own at that instant, whatever ``values``
    holds for it; without, ``values`` gives a cron trigger's value
    (``desiredReplicas`` inside the window, 0 outside) like any other.
    """

    so: ScaledObjectSpec
    created_s: float = 0.0
    hpa_options: dict = field(default_factory=dict)
    start_epoch_s: float | None = None

    def __post_init__(self) -> None:
        validate_scaled_object(self.so)
        self.hpa = hpa_for_scaled_object(self.so)
        self.controller = HorizontalController(self.hpa, **self.hpa_options)
        self.last_active_s: float | None = None
        self.failures: dict[int, int] = {}
        self.metrics_cache: dict[int, tuple[float | None, str | None]] = {}
        self.cron_scalers: dict[int, CronScaler] = {}
        for trigger in self.so.triggers:
            if trigger.type == "cron":
                try:
                    self.cron_scalers[trigger.index] = build_cron_scaler(trigger.cron or CronMetadata())
                except PlannerInputError as error:
                    raise PlannerInputError(f"spec.triggers[{trigger.index}].{error}") from None

    def cron_readings(self, now_s: float) -> dict[int, CronReading]:
        """Each cron trigger's value and activity at ``now_s`` on the wall clock (empty without one)."""
        if self.start_epoch_s is None:
            return {}
        wall_s = self.start_epoch_s + now_s
        return {index: cron_reading(scaler, wall_s) for index, scaler in self.cron_scalers.items()}

    def _with_cron(
        self, now_s: float, values: Mapping[int, float | None], errors: Mapping[int, str] | None
    ) -> tuple[dict[int, float | None], dict[int, str], dict[int, bool]]:
        """``values`` and ``errors`` with the cron triggers' own at ``now_s``, and their activity."""
        values, failed = dict(values), dict(errors or {})
        active = {}
        for index, reading in self.cron_readings(now_s).items():
            failed.pop(index, None)
            values.pop(index, None)
            if reading.error is not None:
                failed[index] = reading.error
            else:
                values[index] = reading.value
                active[index] = reading.active
        return values, failed, active

    def _failed(self, trigger: Trigger, values, errors) -> bool:
        raw = values.get(trigger.index)
        return trigger.index in (errors or {}) or (
            not trigger.ignore_null_values and (raw is None or not math.isfinite(raw))
        )

    def poll(
        self,
        now_s: float,
        current_replicas: int,
        values: Mapping[int, float | None],
        *,
        ready_replicas: int | None = None,
        errors: Mapping[int, str] | None = None,
        resource_readings=None,
    ) -> ExecutorDecision:
        """KEDA's operator loop at ``now_s``: activation, scale from and to zero.

        The scale loop (``getScaledObjectState``) neither reads nor updates the
        failure counts in ``status.health`` and applies no fallback: a failing
        trigger makes the poll an error poll, which keeps a ScaledObject with
        a fallback from being scaled to zero. :attr:`failures` is unchanged.
        """
        ready = current_replicas if ready_replicas is None else ready_replicas
        no_fallback = {t.index: 0 for t in self.so.triggers if not t.is_resource}
        polled, failed, active = self._with_cron(now_s, values, errors)
        evaluation = evaluate_triggers(
            self.so,
            self.hpa,
            polled,
            current_replicas=current_replicas,
            ready_replicas=ready,
            consecutive_failures=no_fallback,
            errors=failed,
            resource_readings=resource_readings,
            active=active,
        )
        decision = request_scale(
            self.so,
            current_replicas,
            evaluation.is_active,
            evaluation.is_error,
            now_s,
            last_active_s=self.last_active_s,
            created_s=self.created_s,
        )
        self.last_active_s = decision.last_active_s
        for trigger in self.so.triggers:  # getScalerState's records, stored by checkScalers
            if trigger.use_cached_metrics and not trigger.is_resource:
                self.metrics_cache[trigger.index] = (values.get(trigger.index), (errors or {}).get(trigger.index))
        return decision

    def served_values(
        self, values: Mapping[int, float | None], errors: Mapping[int, str] | None = None
    ) -> tuple[dict[int, float | None], dict[int, str]]:
        """What the metrics server hands the HPA now (``GetScaledObjectMetrics``): ``(values, errors)``.

        A fresh query (``values``, ``errors``) for every trigger, except those
        with ``useCachedMetrics`` that the polling loop has cached: their value
        or error is the last poll's.
        """
        served, failed = dict(values), dict(errors or {})
        for trigger in self.so.triggers:
            record = self.metrics_cache.get(trigger.index) if trigger.use_cached_metrics else None
            if record is None:
                continue
            value, error = record
            served[trigger.index] = value
            failed.pop(trigger.index, None)
            if error is not None:
                failed[trigger.index] = error
        return served, failed

    def reconcile(
        self,
        now_s: float,
        current_replicas: int,
        values: Mapping[int, float | None],
        *,
        ready_replicas: int | None = None,
        pods: Sequence[Pod] | None = None,
        errors: Mapping[int, str] | None = None,
        resource_readings=None,
    ) -> ReconcileResult:
        """The HPA's reconcile at ``now_s`` on the values KEDA's metrics adapter serves.

        Serving each metric goes through ``GetMetricsWithFallback``, which is
        where KEDA counts failures: once per trigger per HPA fetch, reset to 0
        by a success. So :attr:`failures` moves here, once per call.
        ``values`` and ``errors`` are a fresh query at ``now_s``; triggers with
        ``useCachedMetrics`` read the last poll's instead (:meth:`served_values`).
        """
        values, errors = self.served_values(values, errors)
        values, errors, active = self._with_cron(now_s, values, errors)
        ready = current_replicas if ready_replicas is None else ready_replicas
        if pods is None:
            pods = ready_pods(ready, max(current_replicas - ready, 0), now_s=now_s)
        self.failures = {
            t.index: self.failures.get(t.index, 0) + 1 if self._failed(t, values, errors) else 0
            for t in self.so.triggers
            if not t.is_resource
        }
        evaluation = evaluate_triggers(
            self.so,
            self.hpa,
            values,
            current_replicas=current_replicas,
            ready_replicas=ready,
            consecutive_failures=self.failures,
            errors=errors,
            resource_readings=resource_readings,
            active=active,
        )
        return self.controller.reconcile_autoscaler(now_s, current_replicas, evaluation.readings, pods=pods)

    def step(self, now_s: float, current_replicas: int, values: Mapping[int, float | None], **kwargs) -> int:
        """Poll, then reconcile if there are replicas; return the count after both. [replicas]"""
        pods = kwargs.pop("pods", None)
        decision = self.poll(now_s, current_replicas, values, **kwargs)
        replicas = current_replicas if decision.replicas is None else decision.replicas
        if replicas == 0:
            return 0
        return self.reconcile(now_s, replicas, values, pods=pods, **kwargs).desired_replicas
