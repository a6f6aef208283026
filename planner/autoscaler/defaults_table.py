"""The ``defaults_table`` module lists the HPA's and KEDA's defaults as the planner applies them.

Every value is read from the constant, dataclass default or function the
planner's controller ports use, never retyped, so the book's table of
defaults and the planner cannot disagree. Each row names the constant and
links the documentation and the upstream source that set the value. No maths
beyond what the ports already do: one two-trigger example is run through
:class:`planner.autoscaler.keda.KedaController` to show that the largest proposal wins.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner.autoscaler import behavior, defaults, horizontal, hpa_spec, keda, versions
from planner.markdown import link, markdown_table

__all__ = [
    "DefaultRow",
    "MultiTriggerExample",
    "controller_defaults",
    "defaults_table_markdown",
    "multi_trigger_example",
    "planner_names_markdown",
    "version_changes_markdown",
]

_HPA_DOC = "https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/"
_KCM_DOC = "https://kubernetes.io/docs/reference/command-line-tools-reference/kube-controller-manager/"
_K8S = "https://github.com/kubernetes/kubernetes/blob/master/"
_KCM_DEFAULTS = (
    "defaults.go (RecommendedDefaultHPAControllerConfiguration)",
    _K8S + "pkg/controller/podautoscaler/config/v1alpha1/defaults.go",
)
_API_DEFAULTS = ("autoscaling/v2 defaults.go", _K8S + "pkg/apis/autoscaling/v2/defaults.go")
_HORIZONTAL = ("horizontal.go", _K8S + "pkg/controller/podautoscaler/horizontal.go")
_REPLICA_CALC = ("replica_calculator.go", _K8S + "pkg/controller/podautoscaler/replica_calculator.go")
_SO_DOC = "https://keda.sh/docs/latest/reference/scaledobject-spec/"
_PROM_DOC = ("Prometheus scaler", "https://keda.sh/docs/latest/scalers/prometheus/")
_KEDA = "https://github.com/kedacore/keda/blob/main/"
_SO_TYPES = ("scaledobject_types.go", _KEDA + "apis/keda/v1alpha1/scaledobject_types.go")
_PROM_SRC = ("prometheus_scaler.go", _KEDA + "pkg/scalers/prometheus_scaler.go")
_EXECUTOR = ("scale_scaledobjects.go", _KEDA + "pkg/scaling/executor/scale_scaledobjects.go")
_FALLBACK = ("fallback.go", _KEDA + "pkg/fallback/fallback.go")
_KEDA_HPA = ("hpa.go", _KEDA + "controllers/keda/hpa.go")
_SCALE_HANDLER = ("scale_handler.go", _KEDA + "pkg/scaling/scale_handler.go")
_CACHE_DOC = "https://keda.sh/docs/latest/concepts/scaling-deployments/#caching-metrics"
_ZERO_DOC = _HPA_DOC + "#scaling-to-and-from-zero"
_TOLERANCE_DOC = _HPA_DOC


@dataclass(frozen=True)
class DefaultRow:
    """One default, its value in the planner, and where it comes from.

    Attributes
    ----------
    controller : str
        ``HPA`` or ``KEDA``.
    setting : str
        The flag or field a user would set.
    value : str
        The default, formatted from the planner's constant.
    planner_name : str
        Where the planner keeps it (dotted name).
    docs : tuple of (str, str)
        ``(title, url)`` of the documentation.
    source : tuple of (str, str)
        ``(title, url)`` of the upstream code.
    """

    controller: str
    setting: str
    value: str
    planner_name: str
    docs: tuple[str, str]
    source: tuple[str, str]


@dataclass(frozen=True)
class MultiTriggerExample:
    """Two triggers run through the planner's KEDA and HPA ports.

    Attributes
    ----------
    proposals : tuple of int
        Each trigger's replica proposal, in ``spec.triggers`` order. [replicas]
    desired_replicas : int
        What the HPA sets. [replicas]
    """

    proposals: tuple[int, ...]
    desired_replicas: int


def _field_default(cls: type, name: str):
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def _seconds(value_s: float) -> str:
    return f"{value_s:g} s" + (f" ({value_s / 60:g} min)" if value_s >= 60 else "")


def _policies(rules: behavior.HPAScalingRules) -> str:
    sign = {"Pods": "{:+d} pods", "Percent": "{:+d} %"}
    parts = [sign[p.type].format(p.value) + f" per {p.period_seconds} s" for p in rules.policies or ()]
    window = rules.stabilization_window_seconds
    stabilization = "window from the flag" if window is None else f"window {window} s"
    return f"selectPolicy {rules.select_policy} of: {', '.join(parts)}; {stabilization}"


def _down_policies(rules: behavior.HPAScalingRules) -> str:
    # Scale-down shrinks the fleet: show the policy values as removals.
    text = _policies(rules)
    for p in rules.policies or ():
        unit = "pods" if p.type == "Pods" else "%"
        text = text.replace(f"+{p.value} {unit}", f"-{p.value} {unit}")
    return text


def multi_trigger_example(
    waiting_total: float = 60.0, kv_usage_sum: float = 3.6, current_replicas: int = 4
) -> MultiTriggerExample:
    """Run a queue trigger and a KV trigger together and report each proposal and the result.

    Parameters
    ----------
    waiting_total : float
        ``sum(vllm:num_requests_waiting)``; the trigger's threshold is 10 per replica. [requests]
    kv_usage_sum : float
        ``sum(vllm:kv_cache_usage_perc)``; the trigger's threshold is 0.8 per replica. [fraction]
    current_replicas : int
        Ready replicas before the reconcile. [replicas]
    """
    so = keda.ScaledObjectSpec(
        name="example",
        triggers=(keda.Trigger(0, "prometheus", 10.0), keda.Trigger(1, "prometheus", 0.8)),
        min_replica_count=1,
        max_replica_count=50,
    )
    controller = keda.KedaController(so)
    result = controller.reconcile(0.0, current_replicas, {0: waiting_total, 1: kv_usage_sum})
    # The HPA computes its metrics whenever the target has replicas, and both triggers
    # always propose (ignoreNullValues turns a missing value into 0).
    assert result.metrics is not None, "current_replicas must be at least 1"
    outcomes = result.metrics.outcomes
    proposals = tuple(outcome.replica_count for outcome in outcomes if outcome.replica_count is not None)
    assert len(proposals) == len(outcomes)
    return MultiTriggerExample(proposals, result.desired_replicas)


def controller_defaults() -> tuple[DefaultRow, ...]:
    """The HPA's and KEDA's defaults that change replica counts, as the planner applies them."""
    tolerance = defaults.DEFAULT_TOLERANCE
    up = behavior.generate_hpa_scale_up_rules(None)
    down = behavior.generate_hpa_scale_down_rules(None)
    factor, minimum = behavior.SCALE_UP_LIMIT_FACTOR, behavior.SCALE_UP_LIMIT_MINIMUM
    example = multi_trigger_example()
    fallback_behavior = _field_default(keda.Fallback, "behavior")
    trigger = keda.Trigger
    activation = _field_default(trigger, "activation_threshold")
    rows = [
        DefaultRow(
            "HPA",
            "--horizontal-pod-autoscaler-tolerance",
            f"{tolerance:g}: ratios from {1 - tolerance:g} to {1 + tolerance:g} change nothing",
            "planner.autoscaler.defaults.DEFAULT_TOLERANCE",
            ("algorithm details", _HPA_DOC + "#algorithm-details"),
            _KCM_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "--horizontal-pod-autoscaler-sync-period",
            _seconds(defaults.DEFAULT_SYNC_PERIOD_S),
            "planner.autoscaler.defaults.DEFAULT_SYNC_PERIOD_S",
            ("kube-controller-manager flags", _KCM_DOC),
            _KCM_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "--horizontal-pod-autoscaler-downscale-stabilization",
            _seconds(defaults.DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S),
            "planner.autoscaler.defaults.DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S",
            ("stabilization window", _HPA_DOC + "#stabilization-window"),
            _KCM_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "behavior.scaleUp",
            "with spec.behavior set: " + _policies(up),
            "planner.autoscaler.behavior.generate_hpa_scale_up_rules",
            ("default behavior", _HPA_DOC + "#default-behavior"),
            _API_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "behavior.scaleDown",
            "with spec.behavior set: " + _down_policies(down),
            "planner.autoscaler.behavior.generate_hpa_scale_down_rules",
            ("default behavior", _HPA_DOC + "#default-behavior"),
            _API_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "scale-up limit without spec.behavior",
            f"at most max({factor:g} x current, {minimum:g}) replicas per reconcile",
            "planner.autoscaler.behavior.SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM",
            ("default behavior", _HPA_DOC + "#default-behavior"),
            _HORIZONTAL,
        ),
        DefaultRow(
            "HPA",
            "--horizontal-pod-autoscaler-cpu-initialization-period",
            _seconds(defaults.DEFAULT_CPU_INITIALIZATION_PERIOD_S),
            "planner.autoscaler.defaults.DEFAULT_CPU_INITIALIZATION_PERIOD_S",
            ("kube-controller-manager flags", _KCM_DOC),
            _KCM_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "--horizontal-pod-autoscaler-initial-readiness-delay",
            _seconds(defaults.DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S),
            "planner.autoscaler.defaults.DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S",
            ("kube-controller-manager flags", _KCM_DOC),
            _KCM_DEFAULTS,
        ),
        DefaultRow(
            "HPA",
            "minReplicas",
            str(hpa_spec.HorizontalPodAutoscalerSpec("x", 1, ()).effective_min_replicas),
            "planner.autoscaler.hpa_spec.HorizontalPodAutoscalerSpec.effective_min_replicas",
            (
                "HPA v2 API reference",
                "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/horizontal-pod-autoscaler-v2/",
            ),
            _HORIZONTAL,
        ),
        DefaultRow(
            "HPA",
            "minReplicas: 0",
            f"allowed with an Object or External metric, by default from Kubernetes "
            f"{versions.HPA_SCALE_TO_ZERO.on_by_default} (HPAScaleToZero beta); the HPA scales up "
            "from 0 only a target it took to 0 itself (condition ScaledToZero)",
            "planner.autoscaler.horizontal.SCALE_TO_ZERO_CONDITION",
            ("scaling to and from zero", _ZERO_DOC),
            _HORIZONTAL,
        ),
        DefaultRow(
            "HPA",
            "behavior tolerance",
            f"unset: the flag's {defaults.DEFAULT_TOLERANCE:g}; per HPA by default from Kubernetes "
            f"{versions.HPA_CONFIGURABLE_TOLERANCE.on_by_default} (GA in "
            f"{versions.HPA_CONFIGURABLE_TOLERANCE.ga}); a ScaledObject passes it from KEDA "
            f"{versions.KEDA_TOLERANCE_SINCE}",
            "planner.autoscaler.versions.HPA_CONFIGURABLE_TOLERANCE",
            ("tolerance", _TOLERANCE_DOC),
            _HORIZONTAL,
        ),
        DefaultRow(
            "HPA",
            "several metrics",
            "the largest proposal wins (proposals {} -> {} replicas)".format(
                " and ".join(str(p) for p in example.proposals), example.desired_replicas
            ),
            "planner.autoscaler.horizontal.compute_replicas_for_metrics",
            ("algorithm details", _HPA_DOC + "#algorithm-details"),
            _HORIZONTAL,
        ),
        DefaultRow(
            "KEDA",
            "pollingInterval",
            _seconds(defaults.DEFAULT_POLLING_INTERVAL_S),
            "planner.autoscaler.defaults.DEFAULT_POLLING_INTERVAL_S",
            ("pollingInterval", _SO_DOC + "#pollinginterval"),
            _EXECUTOR,
        ),
        DefaultRow(
            "KEDA",
            "cooldownPeriod",
            _seconds(defaults.DEFAULT_COOLDOWN_PERIOD_S) + ", only on the way to zero",
            "planner.autoscaler.defaults.DEFAULT_COOLDOWN_PERIOD_S",
            ("cooldownPeriod", _SO_DOC + "#cooldownperiod"),
            _EXECUTOR,
        ),
        DefaultRow(
            "KEDA",
            "initialCooldownPeriod",
            _seconds(defaults.DEFAULT_INITIAL_COOLDOWN_PERIOD_S),
            "planner.autoscaler.defaults.DEFAULT_INITIAL_COOLDOWN_PERIOD_S",
            ("initialCooldownPeriod", _SO_DOC + "#initialcooldownperiod"),
            _EXECUTOR,
        ),
        DefaultRow(
            "KEDA",
            "minReplicaCount",
            f"{defaults.DEFAULT_MIN_REPLICA_COUNT} (the HPA KEDA creates gets minReplicas "
            f"{defaults.DEFAULT_HPA_MIN_REPLICAS}; KEDA itself moves 0 <-> 1)",
            "planner.autoscaler.defaults.DEFAULT_MIN_REPLICA_COUNT, DEFAULT_HPA_MIN_REPLICAS",
            ("minReplicaCount", _SO_DOC + "#minreplicacount"),
            _SO_TYPES,
        ),
        DefaultRow(
            "KEDA",
            "maxReplicaCount",
            str(defaults.DEFAULT_HPA_MAX_REPLICAS),
            "planner.autoscaler.defaults.DEFAULT_HPA_MAX_REPLICAS",
            ("maxReplicaCount", _SO_DOC + "#maxreplicacount"),
            _SO_TYPES,
        ),
        DefaultRow(
            "KEDA",
            "activationThreshold",
            f"{activation:g}: active only when the value is strictly greater",
            "planner.autoscaler.keda.Trigger.activation_threshold",
            _PROM_DOC,
            _PROM_SRC,
        ),
        DefaultRow(
            "KEDA",
            "metricType",
            _field_default(trigger, "metric_type") + ": the HPA asks for ceil(query result / threshold) "
            "replicas once the ratio leaves the tolerance",
            "planner.autoscaler.keda.Trigger.metric_type",
            ("triggers", _SO_DOC + "#triggers"),
            _KEDA_HPA,
        ),
        DefaultRow(
            "KEDA",
            "useCachedMetrics",
            f"{str(_field_default(trigger, 'use_cached_metrics')).lower()}: every HPA sync queries the scaler "
            "afresh; true serves the value of the last pollingInterval poll",
            "planner.autoscaler.keda.Trigger.use_cached_metrics",
            ("caching metrics", _CACHE_DOC),
            _SCALE_HANDLER,
        ),
        DefaultRow(
            "KEDA",
            "ignoreNullValues",
            f"{str(_field_default(trigger, 'ignore_null_values')).lower()}: an empty result counts as 0, silently",
            "planner.autoscaler.keda.Trigger.ignore_null_values",
            _PROM_DOC,
            _PROM_SRC,
        ),
        DefaultRow(
            "KEDA",
            "fallback",
            f"none unless set; when set, behavior {fallback_behavior}: after more than failureThreshold "
            "failed fetches in a row the HPA is fed target x fallback.replicas",
            "planner.autoscaler.keda.Fallback",
            ("fallback", _SO_DOC + "#fallback"),
            _FALLBACK,
        ),
        DefaultRow(
            "KEDA",
            "several triggers",
            "one HPA metric per trigger, so the largest proposal wins (OR); AND needs advanced.scalingModifiers",
            "planner.autoscaler.keda.hpa_for_scaled_object",
            ("scaling modifiers", _SO_DOC + "#scalingmodifiers"),
            _KEDA_HPA,
        ),
    ]
    return tuple(rows)


def defaults_table_markdown(rows: tuple[DefaultRow, ...] | None = None, controller: str | None = None) -> str:
    """The defaults as a Markdown table: setting, default, links to the docs and the upstream code.

    Parameters
    ----------
    rows : tuple of DefaultRow, optional
        By default :func:`controller_defaults`.
    controller : str, optional
        ``HPA`` or ``KEDA`` to keep only that controller's rows.
    """
    rows = controller_defaults() if rows is None else rows
    body = [
        (_setting(row), row.value, f"{link('docs', row.docs[1])}, {link('code', row.source[1])}")
        for row in rows
        if controller is None or row.controller == controller
    ]
    return markdown_table(("setting", "default", "sources"), body)


def _setting(row: DefaultRow) -> str:
    return row.setting if " " in row.setting else f"`{row.setting}`"


def planner_names_markdown(rows: tuple[DefaultRow, ...] | None = None) -> str:
    """A Markdown list: each setting and the planner name its default is read from."""
    rows = controller_defaults() if rows is None else rows
    return "\n".join(f"- {row.controller} {_setting(row)}: `{row.planner_name}`" for row in rows)


def version_changes_markdown() -> str:
    """What recent Kubernetes and KEDA releases changed in the rows above, as a Markdown table.

    Read from :mod:`planner.autoscaler.versions` and the HPA port's scale-to-zero modes.
    """
    zero = versions.HPA_SCALE_TO_ZERO
    tolerance = versions.HPA_CONFIGURABLE_TOLERANCE
    rows = [
        (
            f"Kubernetes {zero.on_by_default}",
            "HPA scale to zero",
            f"`HPAScaleToZero` beta and on by default (alpha since {zero.alpha}): `minReplicas: 0` with an Object or "
            "External metric. The controller scales a target up from 0 only when its `ScaledToZero` condition is "
            "True, i.e. when it took the target to 0 itself; a target scaled to 0 by hand stays there "
            f"(`{horizontal.SCALE_TO_ZERO_CONDITION}` mode of the port)",
        ),
        (
            f"Kubernetes {versions.SCALED_TO_ZERO_CONDITION_SINCE}",
            "HPA scale to zero",
            "the condition-based controller (`ScaledToZero`) replaced the alpha rule that computed metrics at 0 "
            "replicas whenever `minReplicas` was 0; the gate now matters on kube-controller-manager too "
            f"(`{horizontal.SCALE_TO_ZERO_DISABLED}` mode while off, `{horizontal.SCALE_TO_ZERO_LEGACY}` "
            "before)",
        ),
        (
            f"Kubernetes {tolerance.ga}",
            "per-HPA tolerance",
            f"`behavior.scaleUp.tolerance` / `scaleDown.tolerance` GA (beta and on from {tolerance.on_by_default}, "
            f"alpha from {tolerance.alpha}); where the gate is off the API server drops the field",
        ),
        (
            f"KEDA {versions.KEDA_TOLERANCE_SINCE}",
            "per-HPA tolerance",
            "the ScaledObject's `advanced.horizontalPodAutoscalerConfig.behavior` tolerance reaches the HPA",
        ),
    ]
    return markdown_table(("since", "what", "change"), rows)
