"""Read HorizontalPodAutoscaler and KEDA ScaledObject manifests from YAML.

:func:`load_autoscalers` reads every document of a file with PyYAML's
``safe_load_all`` and returns the autoscalers in it: ``autoscaling/v2``
(and ``v2beta2``, same schema) or ``autoscaling/v1`` HorizontalPodAutoscalers,
and ``keda.sh/v1alpha1`` ScaledObjects, the latter together with the HPA
KEDA would create. Other documents (Deployments, TriggerAuthentications,
...) are skipped; a file with no autoscaler at all is refused. Errors name
the file and the field, e.g. ``hpa.yaml: spec.metrics[0].pods.target.averageValue``.

Quantities (``averageValue: 500m``, ``threshold: "0.8"``) are parsed as
Kubernetes does and kept as integer milli-units, rounded up like
``Quantity.MilliValue()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, overload

import yaml

from planner.autoscaler.behavior import (
    HorizontalPodAutoscalerBehavior,
    HPAScalingPolicy,
    HPAScalingRules,
)
from planner.autoscaler.cron_scaler import CronMetadata
from planner.autoscaler.defaults import DEFAULT_CPU_UTILIZATION_PCT
from planner.autoscaler.hpa_spec import (
    AVERAGE_VALUE,
    CONTAINER_RESOURCE,
    EXTERNAL,
    OBJECT,
    PODS,
    RESOURCE,
    UTILIZATION,
    VALUE,
    HorizontalPodAutoscalerSpec,
    MetricSpec,
    MetricTarget,
)
from planner.autoscaler.keda import (
    Fallback,
    ScaledObjectSpec,
    ScalingModifiers,
    Trigger,
    hpa_for_scaled_object,
)
from planner.autoscaler.quantity import parse_quantity_milli
from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError

__all__ = ["autoscaler_from_document", "load_autoscaler", "load_autoscalers"]


_KINDS = {
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler"),
    ("autoscaling/v1", "HorizontalPodAutoscaler"),
    ("keda.sh/v1alpha1", "ScaledObject"),
}


class _Fields:
    """Typed access to a YAML mapping that names the file and path in every error."""

    def __init__(self, source: str, path: str, data):
        if not isinstance(data, Mapping):
            raise PlannerInputError(f"{source}: {path}: expected a mapping, got {_shown(data)}")
        self.source, self.path, self.data = source, path, data

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, expected: str, value) -> PlannerInputError:
        return PlannerInputError(f"{self.source}: {self.where(key)}: expected {expected}, got {_shown(value)}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    @overload
    def sub(self, key: str, required: Literal[True]) -> _Fields: ...
    @overload
    def sub(self, key: str, required: bool = False) -> _Fields | None: ...
    def sub(self, key: str, required: bool = False) -> _Fields | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise PlannerInputError(f"{self.source}: {self.where(key)}: required field is missing")
            return None
        return _Fields(self.source, self.where(key), value)

    def items(self, key: str) -> list[_Fields]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(key, "a list", value)
        return [_Fields(self.source, f"{self.where(key)}[{i}]", item) for i, item in enumerate(value)]

    # The overloads say what the checks below guarantee: a required field, or one with a
    # default, is never None.
    @overload
    def string(self, key: str, default: str, required: bool = False) -> str: ...
    @overload
    def string(self, key: str, default: None = None, *, required: Literal[True]) -> str: ...
    @overload
    def string(self, key: str, default: str | None = None, required: bool = False) -> str | None: ...
    def string(self, key: str, default: str | None = None, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise PlannerInputError(f"{self.source}: {self.where(key)}: required field is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(key, "a string", value)
        return str(value)

    @overload
    def integer(
        self, key: str, *, minimum: int | None = None, maximum: int | None = None, required: Literal[True]
    ) -> int: ...
    @overload
    def integer(
        self, key: str, *, minimum: int | None = None, maximum: int | None = None, required: bool = False
    ) -> int | None: ...
    def integer(
        self, key: str, *, minimum: int | None = None, maximum: int | None = None, required: bool = False
    ) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise PlannerInputError(f"{self.source}: {self.where(key)}: required field is missing")
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, "an integer", value)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bounds = f"an integer in [{minimum}, {maximum}]" if maximum is not None else f"an integer >= {minimum}"
            raise self.fail(key, bounds, value)
        return value

    @overload
    def number(self, key: str, *, required: Literal[True], default: float | None = None) -> float: ...
    @overload
    def number(self, key: str, *, required: bool = False, default: float) -> float: ...
    @overload
    def number(self, key: str, *, required: bool = False, default: float | None = None) -> float | None: ...
    def number(self, key: str, *, required: bool = False, default: float | None = None) -> float | None:
        """A float given as a YAML number or a numeric string (KEDA metadata is all strings)."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise PlannerInputError(f"{self.source}: {self.where(key)}: required field is missing")
            return default
        if isinstance(value, bool):
            raise self.fail(key, "a number", value)
        try:
            number = float(str(value).strip())
        except ValueError:
            raise self.fail(key, "a number", value) from None
        if not math.isfinite(number):
            raise self.fail(key, "a finite number", value)
        return number

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        text = str(value)
        if text in ("1", "t", "T", "TRUE", "true", "True"):  # strconv.ParseBool
            return True
        if text in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        raise self.fail(key, "true or false", value)

    @overload
    def quantity_milli(self, key: str, required: Literal[True]) -> int: ...
    @overload
    def quantity_milli(self, key: str, required: bool = False) -> int | None: ...
    def quantity_milli(self, key: str, required: bool = False) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise PlannerInputError(f"{self.source}: {self.where(key)}: required field is missing")
            return None
        try:
            return parse_quantity_milli(value)
        except ValueError:
            raise self.fail(key, "a quantity such as 40, 0.8 or 500m", value) from None

    @overload
    def choice(self, key: str, options: tuple[str, ...], default: str, required: bool = False) -> str: ...
    @overload
    def choice(self, key: str, options: tuple[str, ...], default: None = None, *, required: Literal[True]) -> str: ...
    @overload
    def choice(
        self, key: str, options: tuple[str, ...], default: str | None = None, required: bool = False
    ) -> str | None: ...
    def choice(
        self, key: str, options: tuple[str, ...], default: str | None = None, required: bool = False
    ) -> str | None:
        value = self.string(key, default, required)
        if value is not None and value != default and value not in options:
            raise self.fail(key, f"one of {', '.join(options)}", value)
        return value


def load_autoscalers(path: str | Path) -> tuple[Autoscaler, ...]:
    """Every HPA and ScaledObject in a YAML file.

    Raises
    ------
    PlannerInputError
        Unreadable YAML, a malformed autoscaler, or a file with no autoscaler.
    FileNotFoundError
        No such file.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    source = str(path)
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise PlannerInputError(f"{source}: not valid YAML{where}: {problem}") from None
    found, kinds = [], []
    for number, document in enumerate(documents):
        if not isinstance(document, Mapping):
            kinds.append(type(document).__name__)
            continue
        api_version, kind = document.get("apiVersion"), document.get("kind")
        kinds.append(f"{kind} ({api_version})" if kind else "a document without kind")
        if (api_version, kind) not in _KINDS:
            continue
        label = source if len(documents) == 1 else f"{source} (document {number + 1})"
        if kind == "ScaledObject":
            found.append(_read_scaled_object(label, document))
        else:
            found.append(_read_hpa(label, document, autoscaling_v1=api_version == "autoscaling/v1"))
    if not found:
        raise PlannerInputError(
            f"{source}: no HorizontalPodAutoscaler (autoscaling/v2) or ScaledObject (keda.sh/v1alpha1) found; "
            f"the file holds {', '.join(kinds) or 'no documents'}"
        )
    return tuple(found)


def load_autoscaler(path: str | Path, name: str | None = None) -> Autoscaler:
    """The one autoscaler in ``path`` (or the one called ``name``)."""
    autoscalers = load_autoscalers(path)
    if name is not None:
        for autoscaler in autoscalers:
            if autoscaler.name == name:
                return autoscaler
        raise PlannerInputError(f"{path}: no autoscaler named {name!r} (found {_names(autoscalers)})")
    if len(autoscalers) > 1:
        raise PlannerInputError(
            f"{path}: holds {len(autoscalers)} autoscalers ({_names(autoscalers)}); pick one by name"
        )
    return autoscalers[0]


def autoscaler_from_document(label: str, document) -> Autoscaler | None:
    """The autoscaler in one parsed YAML document, or ``None`` for any other kind.

    ``label`` names the file and document in errors, e.g. ``"hpa.yaml (document 2)"``.
    """
    if not isinstance(document, Mapping):
        return None
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if (api_version, kind) not in _KINDS:
        return None
    if kind == "ScaledObject":
        return _read_scaled_object(label, document)
    return _read_hpa(label, document, autoscaling_v1=api_version == "autoscaling/v1")


def _names(autoscalers) -> str:
    return ", ".join(f"{a.kind} {a.name}" for a in autoscalers)


def _metadata_name(source: str, document) -> str:
    metadata = _Fields(source, "metadata", document.get("metadata") or {})
    return metadata.string("name", default="") or ""


def _read_hpa(source: str, document, *, autoscaling_v1: bool) -> Autoscaler:
    name = _metadata_name(source, document)
    spec = _Fields(source, "spec", document.get("spec"))
    target_ref = spec.sub("scaleTargetRef", required=True)
    max_replicas = spec.integer("maxReplicas", minimum=1, required=True)
    min_replicas = spec.integer("minReplicas", minimum=0)
    if min_replicas is not None and min_replicas > max_replicas:
        raise PlannerInputError(f"{source}: spec.minReplicas: {min_replicas} is above spec.maxReplicas {max_replicas}")
    metrics: tuple[MetricSpec, ...]
    if autoscaling_v1:
        target = spec.integer("targetCPUUtilizationPercentage", minimum=1) or DEFAULT_CPU_UTILIZATION_PCT
        metrics = (MetricSpec(RESOURCE, "cpu", MetricTarget(UTILIZATION, average_utilization_pct=target)),)
        behavior = None
    else:
        metrics = tuple(_read_metric(item) for item in spec.items("metrics"))
        if not metrics:  # SetDefaults_HorizontalPodAutoscaler
            metrics = (
                MetricSpec(
                    RESOURCE, "cpu", MetricTarget(UTILIZATION, average_utilization_pct=DEFAULT_CPU_UTILIZATION_PCT)
                ),
            )
        behavior = _read_behavior(spec.sub("behavior"))
    if min_replicas == 0 and not any(m.type in (OBJECT, EXTERNAL) for m in metrics):
        raise PlannerInputError(
            f"{source}: spec.minReplicas: 0 is allowed only with an Object or External metric (HPAScaleToZero)"
        )
    hpa = HorizontalPodAutoscalerSpec(
        name=name,
        max_replicas=max_replicas,
        metrics=metrics,
        min_replicas=min_replicas,
        behavior=behavior,
        scale_target_kind=target_ref.string("kind", default="") or "",
        scale_target_name=target_ref.string("name", default="") or "",
    )
    return Autoscaler("HorizontalPodAutoscaler", name, source, hpa)


_SOURCE_KEY = {
    RESOURCE: "resource",
    CONTAINER_RESOURCE: "containerResource",
    PODS: "pods",
    OBJECT: "object",
    EXTERNAL: "external",
}
_ALLOWED_TARGETS = {
    RESOURCE: (UTILIZATION, AVERAGE_VALUE),
    CONTAINER_RESOURCE: (UTILIZATION, AVERAGE_VALUE),
    PODS: (AVERAGE_VALUE,),
    OBJECT: (VALUE, AVERAGE_VALUE),
    EXTERNAL: (VALUE, AVERAGE_VALUE),
}


def _read_metric(item: _Fields) -> MetricSpec:
    metric_type = item.choice("type", tuple(_SOURCE_KEY), required=True)
    body = item.sub(_SOURCE_KEY[metric_type], required=True)
    if metric_type in (RESOURCE, CONTAINER_RESOURCE):
        name = body.string("name", required=True)
        container = body.string("container", required=True) if metric_type == CONTAINER_RESOURCE else ""
    else:
        name = body.sub("metric", required=True).string("name", required=True)
        container = ""
    kind = ""
    if metric_type == OBJECT:
        kind = body.sub("describedObject", required=True).string("kind", default="") or ""
    target_fields = body.sub("target", required=True)
    target_type = target_fields.choice("type", _ALLOWED_TARGETS[metric_type], required=True)
    if target_type == UTILIZATION:
        target = MetricTarget(
            UTILIZATION, average_utilization_pct=target_fields.integer("averageUtilization", minimum=1, required=True)
        )
    elif target_type == AVERAGE_VALUE:
        target = MetricTarget(AVERAGE_VALUE, average_value_milli=_positive_quantity(target_fields, "averageValue"))
    else:
        target = MetricTarget(VALUE, value_milli=_positive_quantity(target_fields, "value"))
    return MetricSpec(metric_type, name, target, container, kind)


def _positive_quantity(fields: _Fields, key: str) -> int:
    milli = fields.quantity_milli(key, required=True)
    if milli <= 0:
        raise fields.fail(key, "a quantity above 0", fields.data.get(key))
    return milli


def _read_behavior(fields: _Fields | None) -> HorizontalPodAutoscalerBehavior | None:
    if fields is None:
        return None
    return HorizontalPodAutoscalerBehavior(
        scale_up=_read_rules(fields.sub("scaleUp")), scale_down=_read_rules(fields.sub("scaleDown"))
    )


def _read_rules(fields: _Fields | None) -> HPAScalingRules | None:
    if fields is None:
        return None
    policies = None
    if fields.has("policies"):
        policies = tuple(
            HPAScalingPolicy(
                policy.choice("type", ("Pods", "Percent"), required=True),
                policy.integer("value", minimum=1, required=True),
                policy.integer("periodSeconds", minimum=1, maximum=1800, required=True),
            )
            for policy in fields.items("policies")
        )
        if not policies:
            raise fields.fail("policies", "at least one policy", [])
    tolerance = fields.quantity_milli("tolerance")
    return HPAScalingRules(
        stabilization_window_seconds=fields.integer("stabilizationWindowSeconds", minimum=0, maximum=3600),
        select_policy=fields.choice("selectPolicy", ("Max", "Min", "Disabled")),
        policies=policies,
        tolerance=None if tolerance is None else tolerance / 1000,
    )


def _read_scaled_object(source: str, document) -> Autoscaler:
    name = _metadata_name(source, document)
    spec = _Fields(source, "spec", document.get("spec"))
    target_ref = spec.sub("scaleTargetRef", required=True)
    notes = []
    triggers = []
    for index, item in enumerate(spec.items("triggers")):
        trigger_type = item.string("type", required=True)
        metadata = item.sub("metadata") or _Fields(source, item.where("metadata"), {})
        if metadata.has("metricType") and not item.has("metricType"):
            notes.append(
                f"{item.where('metadata.metricType')} is ignored by KEDA (metricType belongs on the trigger); "
                "the trigger uses the default AverageValue"
            )
        resource = trigger_type in ("cpu", "memory")
        allowed = (UTILIZATION, AVERAGE_VALUE) if resource else (VALUE, AVERAGE_VALUE)
        metric_type = item.choice("metricType", allowed, default=UTILIZATION if resource else AVERAGE_VALUE)
        threshold, note = _trigger_target(trigger_type, metadata)
        if note:
            notes.append(f"{item.where('metadata')}: {note}")
        triggers.append(
            Trigger(
                index=index,
                type=trigger_type,
                threshold=threshold,
                name=item.string("name", default="") or "",
                metric_type=metric_type,
                activation_threshold=0.0
                if trigger_type == "cron"
                else metadata.number("activationThreshold", default=0.0),
                ignore_null_values=metadata.boolean("ignoreNullValues", True),
                use_cached_metrics=item.boolean("useCachedMetrics", False),
                query=" ".join((_query_text(metadata) or "").split()),
                cron=_cron_metadata(metadata) if trigger_type == "cron" else None,
            )
        )
    if not triggers:
        raise PlannerInputError(f"{source}: spec.triggers: at least one trigger is required")
    advanced = spec.sub("advanced")
    behavior = modifiers = None
    if advanced is not None:
        hpa_config = advanced.sub("horizontalPodAutoscalerConfig")
        if hpa_config is not None:
            behavior = _read_behavior(hpa_config.sub("behavior"))
        modifier_fields = advanced.sub("scalingModifiers")
        if modifier_fields is not None:
            modifiers = ScalingModifiers(
                formula=modifier_fields.string("formula", default="") or "",
                target=modifier_fields.string("target", default="") or "",
                activation_target=modifier_fields.string("activationTarget", default="") or "",
                metric_type=modifier_fields.choice("metricType", (VALUE, AVERAGE_VALUE, UTILIZATION), default="") or "",
            )
    fallback = None
    fallback_fields = spec.sub("fallback")
    if fallback_fields is not None:
        fallback = Fallback(
            failure_threshold=fallback_fields.integer("failureThreshold", minimum=0, required=True),
            replicas=fallback_fields.integer("replicas", minimum=0, required=True),
            behavior=fallback_fields.string("behavior", default="static"),
        )
    so = ScaledObjectSpec(
        name=name,
        triggers=tuple(triggers),
        min_replica_count=spec.integer("minReplicaCount", minimum=0),
        max_replica_count=spec.integer("maxReplicaCount", minimum=1),
        polling_interval_s=_float_or_none(spec.integer("pollingInterval", minimum=1)),
        cooldown_period_s=_float_or_none(spec.integer("cooldownPeriod", minimum=0)),
        initial_cooldown_period_s=_float_or_none(spec.integer("initialCooldownPeriod", minimum=0)),
        idle_replica_count=spec.integer("idleReplicaCount", minimum=0),
        fallback=fallback,
        behavior=behavior,
        scaling_modifiers=modifiers,
        scale_target_kind=target_ref.string("kind", default="Deployment") or "Deployment",
        scale_target_name=target_ref.string("name", default="") or "",
    )
    try:
        hpa = hpa_for_scaled_object(so)
    except PlannerInputError as error:
        raise type(error)(f"{source}: {error}") from None
    return Autoscaler("ScaledObject", name, source, hpa, so, tuple(notes))


# Each KEDA scaler reads its target from its own metadata field (pkg/scalers/*_scaler.go, the
# `keda:"name=..."` tags): (field, KEDA's default, or None where KEDA requires the field). Only
# prometheus and cpu/memory are read strictly; for the others a missing or unreadable target is
# the scaler's business (an external scaler returns its own target), so it is read as unknown.
_STRICT_TARGETS = {"prometheus": "threshold", "cpu": "value", "memory": "value"}
_SCALER_TARGETS: dict[str, tuple[str, float | None]] = {
    "redis": ("listLength", 5.0),
    "redis-cluster": ("listLength", 5.0),
    "redis-sentinel": ("listLength", 5.0),
    "redis-streams": ("pendingEntriesCount", 5.0),
    "redis-cluster-streams": ("pendingEntriesCount", 5.0),
    "aws-sqs-queue": ("queueLength", 5.0),
    "azure-queue": ("queueLength", 5.0),
    "azure-servicebus": ("messageCount", 5.0),
    "rabbitmq": ("value", 20.0),
    "kafka": ("lagThreshold", 10.0),
    "apache-kafka": ("lagThreshold", 10.0),
    "nats-jetstream": ("lagThreshold", 10.0),
    "gcp-pubsub": ("value", 10.0),
    "gcp-stackdriver": ("targetValue", 5.0),
    "aws-kinesis-stream": ("shardCount", 2.0),
    "aws-cloudwatch": ("targetMetricValue", None),
    "aws-dynamodb": ("targetValue", None),
    "metrics-api": ("targetValue", None),
    "datadog": ("queryValue", None),
    "new-relic": ("threshold", None),
    "postgresql": ("targetQueryValue", None),
    "mysql": ("queryValue", None),
    "mongodb": ("queryValue", None),
    "kubernetes-workload": ("value", None),
    "loki": ("threshold", None),
    "dynatrace": ("threshold", None),
    "elasticsearch": ("targetValue", None),
    "influxdb": ("thresholdValue", None),
    "graphite": ("threshold", None),
    "cron": ("desiredReplicas", None),
}
UNKNOWN_TARGET = 1.0
"""The stand-in target of a trigger whose target KEDA gets from elsewhere (an external scaler's own)."""


def _trigger_target(trigger_type: str, metadata: _Fields) -> tuple[float, str]:
    """(target, note) of one trigger, read by the scaler's own field; a note says when it is unknown."""
    strict = _STRICT_TARGETS.get(trigger_type)
    if strict is not None:
        threshold = metadata.number(strict, required=True)
        if threshold <= 0:
            raise metadata.fail(strict, "a number above 0", metadata.data.get(strict))
        return threshold, ""
    if trigger_type == "cron":
        return 1.0, ""  # KEDA's cron scaler targets 1 and reports desiredReplicas while active
    field, default = _SCALER_TARGETS.get(trigger_type, ("threshold", None))
    try:
        value = metadata.number(field)
    except PlannerInputError:
        value = None
    if value is not None and value > 0:
        return value, ""
    if default is not None:
        return default, ""
    return UNKNOWN_TARGET, f"the {trigger_type} scaler's target is not in the manifest; read as unknown"


def _cron_metadata(metadata: _Fields) -> CronMetadata:
    """A cron trigger's metadata as KEDA's typed config reads it: strings, trimmed, ``""`` when absent.

    Nothing is refused here: KEDA refuses a bad schedule when it builds the scaler
    (:class:`planner.autoscaler.keda.KedaController`), and ``planner lint`` names it.
    """

    def text(key: str) -> str:
        value = metadata.data.get(key)
        if value is None or isinstance(value, bool | Mapping | list):
            return ""
        return str(value).strip()

    return CronMetadata(text("start"), text("end"), text("timezone"), text("desiredReplicas"))


def _query_text(metadata: _Fields) -> str:
    """``metadata.query`` (prometheus), else an external scaler's ``metricQuery`` when it is text."""
    query = metadata.string("query", default="") or ""
    if not query and isinstance(metadata.data.get("metricQuery"), str):
        query = metadata.data["metricQuery"]
    return query


def _float_or_none(value: int | None) -> float | None:
    return None if value is None else float(value)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
