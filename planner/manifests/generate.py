"""The ``generate`` module writes the autoscaling manifests a plan calls for, with a reason for each number.

From the thresholds of a load test (:mod:`planner.capacity.knee`), the warmup and the
longest generation (:mod:`planner.dynamics.grace`) it builds, as plain data:

* a KEDA ``ScaledObject`` whose Prometheus triggers carry vLLM's own
  signals: the fleet's in-flight requests ``sum(running) + sum(waiting)``,
  the fleet's KV usage ``sum(vllm:kv_cache_usage_perc)`` and, when a
  queue threshold is given, the fleet's waiting requests. Every trigger is an
  ``AverageValue`` over a ``sum(...)``: for an External metric the HPA
  proposes ``ceil(sum / threshold)`` whatever the pod count. Triggers carry
  ``ignoreNullValues: "false"`` so a renamed metric fails loudly.
  Several signals are combined in ``advanced.scalingModifiers`` as
  ``max(signal_i / target_i)`` in replica units against a target of 1: the
  replica count the most demanding signal needs, written out instead of
  left to KEDA's implicit OR. With ``scalingModifiers`` the HPA reads only
  the composite metric, typed by ``scalingModifiers.metricType``; the
  triggers' own ``metricType`` is not used;
* the equivalent ``autoscaling/v2`` HorizontalPodAutoscaler for clusters
  without KEDA. Its metrics are External metrics served by
  prometheus-adapter (rules included): External ``AverageValue`` is exactly
  what KEDA hands the HPA, so both files decide alike (a Pods metric would
  treat pods without samples differently). The HPA takes the largest
  proposal across metrics, which is the same ``max``;
* the ``behavior`` both share: the Kubernetes scale-up defaults written
  out, a scale-up tolerance (0 by default, so scaling starts at the target
  rather than 10 % above it) where the cluster's versions keep the field
  (:mod:`planner.autoscaler.versions`; elsewhere a comment says why it is left
  out), a scale-down stabilization window of at least the warmup, and at
  most one replica removed per warmup;
* with ``cron_windows``, a KEDA ``cron`` trigger per window beside the metric
  triggers (:mod:`planner.autoscaler.cron_scaler`): inside its window a trigger
  proposes its ``desiredReplicas``, outside 0, and with a formula it joins the
  ``max(...)`` by name, so the fleet never runs below the window's floor and the
  load can still take it higher. The windows are checked as KEDA builds them
  and as ``planner lint`` reviews them (zone, schedules, no overlap with
  different floors, floors within ``max_replicas``); the HPA cannot express a
  schedule, so ``hpa.yaml`` leaves them out and a note says so;
* with ``forecast``, a predictive trigger beside the reactive ones
  (:mod:`planner.vllm.forecast`): the fleet's in-flight requests forecast by
  Prometheus itself (a day ago ``lead`` ahead, a line through the last half
  hour, the window's peak, or Holt's smoothing), against the same per-replica
  target, joining the formula's ``max()``, so the fleet follows whichever asks
  for more. It ends in ``or vector(0)``: where it has nothing to read (the first
  day of a seasonal forecast) it proposes 0 instead of failing the formula.
  ``prometheus_major`` 2 writes ``holt_winters`` where Prometheus 3 reads
  ``double_exponential_smoothing`` (which Prometheus 3 serves only with
  ``--enable-feature=promql-experimental-functions``; a note says so);
* a Deployment (or StatefulSet) patch: ``terminationGracePeriodSeconds``
  and vLLM's ``--shutdown-timeout`` from :func:`planner.dynamics.grace.plan_grace`,
  and a preStop ``sleep`` that keeps the pod serving while its endpoint is
  removed from the Service, before SIGTERM.

Each document comes with comments keyed by their path in it; writing YAML
is left to the edges (:mod:`planner.manifests.writer`).

Approximations: the composite metric reaches the HPA rounded to 0.001
replica (KEDA's milli-quantity), and the HPA's tolerance applies to the
composite as a whole rather than to each signal.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal

from planner.autoscaler.cron_scaler import (
    CronMetadata,
    CronScaler,
    build_cron_scaler,
    cron_problems,
    overlap_in_a_year_s,
)
from planner.autoscaler.cron_schedule import timezone_problem
from planner.autoscaler.defaults import (
    DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S,
    DEFAULT_HPA_MAX_REPLICAS,
    DEFAULT_SYNC_PERIOD_S,
)
from planner.autoscaler.versions import ClusterVersions
from planner.dynamics.grace import GracePlan, drain_time_s, plan_grace
from planner.errors import (
    PlannerInputError,
    require_fraction,
    require_non_negative,
    require_positive,
)
from planner.vllm.forecast import Forecast, forecast_query
from planner.vllm.promql import selector

__all__ = [
    "DEFAULT_PRE_STOP_S",
    "POLLING_INTERVAL_S",
    "CronWindow",
    "GeneratedManifest",
    "ManifestSet",
    "ScalingPlan",
    "format_threshold",
    "generate_manifests",
    "manifest_thresholds",
    "pod_matcher",
    "query_matchers",
    "scheduled_scaled_object",
    "workload_matchers",
]

DEFAULT_PRE_STOP_S = 10.0
"""preStop sleep: time for the endpoint to leave the Service and load balancers. [s]"""
POLLING_INTERVAL_S = int(DEFAULT_SYNC_PERIOD_S)
"""The KEDA ``pollingInterval`` the written ScaledObject sets, as often as the HPA syncs (KEDA's own
default is :data:`planner.autoscaler.defaults.DEFAULT_POLLING_INTERVAL_S`): how often KEDA's operator
checks activation (0 <-> 1) and refreshes its metrics cache. The HPA's own 15 s syncs query the scaler
afresh through KEDA's metrics server unless a trigger sets ``useCachedMetrics``. [s]"""
METRIC_TYPE_AVERAGE_VALUE = (
    "External AverageValue: the HPA proposes ceil(fleet sum / threshold), whatever the pod count"
)
METRIC_TYPE_WITH_MODIFIERS = (
    "not used: with scalingModifiers the HPA reads only the composite metric, typed by scalingModifiers.metricType"
)
MIN_SCALE_DOWN_WINDOW_S = int(
    DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S
)  # the HPA's default; shorter would be more eager than stock Kubernetes
MAX_STABILIZATION_WINDOW_S = 3600  # API limit on stabilizationWindowSeconds
MAX_POLICY_PERIOD_S = 1800  # API limit on periodSeconds
HPA_SYNC_PERIOD_S = int(DEFAULT_SYNC_PERIOD_S)  # an integer, for periodSeconds
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"


@dataclass(frozen=True)
class CronWindow:
    """A replica floor on a schedule, written as a KEDA ``cron`` trigger.

    Attributes
    ----------
    start, end : str
        5-field cron schedules (minute hour day-of-month month day-of-week) opening and closing the window.
    timezone : str
        IANA zone the schedules are read in, e.g. ``Europe/Dublin``.
    desired_replicas : int
        Replicas the fleet keeps at least inside the window. [replicas]
    """

    start: str
    end: str
    timezone: str
    desired_replicas: int

    @property
    def metadata(self) -> CronMetadata:
        return CronMetadata(self.start.strip(), self.end.strip(), self.timezone.strip(), str(self.desired_replicas))


@dataclass(frozen=True)
class ScalingPlan:
    """Everything the generated manifests are computed from.

    Attributes
    ----------
    target_name : str
        The Deployment (or StatefulSet) to scale.
    concurrency_target : float
        Per-replica in-flight target T. [requests]
    warmup_s : float
        Time from scale-up decision to a Ready replica. [s]
    max_output_tokens : float
        Largest ``max_tokens`` the service accepts. [tokens]
    itl_ms : float
        Inter-token latency while draining (a high percentile). [ms]
    max_replicas : int
        Upper bound (GPU quota / GPUs per replica).
    min_replicas : int
        Lower bound, at least 1: every signal comes from the pods themselves.
    kv_usage_target_frac : float or None
        Per-replica KV usage target. [fraction of 1]
    queue_threshold_requests : float or None
        Per-replica waiting requests the queue-wait budget allows. [requests]
    prometheus_address : str
        Prometheus URL KEDA queries.
    namespace, model_name : str
        Label matchers for the queries (``namespace``, ``model_name``); empty to omit.
    target_kind : str
        ``Deployment`` or ``StatefulSet``.
    container_name : str
        The vLLM container, for the patch.
    knee_concurrency : float or None
        Knee K the target came from, quoted in comments. [requests]
    growth_frac : float or None
        Growth during one warmup that T absorbs, quoted in comments. [fraction]
    kv_usage_at_knee_frac : float or None
        KV usage measured at the knee, quoted in comments. [fraction of 1]
    ttft_ms : float
        Time to first token of the longest request, added to its drain time. [ms]
    pre_stop_s : float
        preStop sleep. [s]
    scale_up_tolerance_frac : float or None
        ``behavior.scaleUp.tolerance``; None leaves the cluster's (10 %). [fraction]
    polling_interval_s : int
        KEDA ``pollingInterval``. [s]
    max_num_seqs : int or None
        vLLM's ``--max-num-seqs``, if known: the target must stay below it. [sequences]
    scale_down_window_s : int or None
        ``behavior.scaleDown.stabilizationWindowSeconds`` as chosen (e.g. by ``planner plan``'s
        sweep); None takes the warmup, at least the HPA's default 300 s. [s]
    label_matchers : tuple of str
        PromQL label matchers to keep in every query, as written (``model_name="chat"``), e.g.
        the team's own from :func:`query_matchers`; ``namespace`` and ``model_name`` are added
        for labels these do not already name.
    placeholders : int
        Low-priority pause pods that hold warm GPUs for the next replicas (0: none written).
    gpus_per_replica : int
        GPUs each placeholder requests: as many as one replica, so a replica fits where it was.
    gpu_resource : str
        The extended resource the device plugin advertises.
    cron_windows : tuple of CronWindow
        Scheduled replica floors, one KEDA ``cron`` trigger each (``(start, end, timezone,
        desired_replicas)`` tuples are taken too).
    forecast : Forecast or None
        A predictive trigger on the fleet's in-flight requests beside the reactive ones
        (:class:`planner.vllm.forecast.Forecast`); None writes none.
    prometheus_major : int
        The Prometheus KEDA queries, 2 or 3: the name Holt's smoothing goes by.
    """

    target_name: str
    concurrency_target: float
    warmup_s: float
    max_output_tokens: float
    itl_ms: float
    max_replicas: int
    min_replicas: int = 1
    kv_usage_target_frac: float | None = None
    queue_threshold_requests: float | None = None
    prometheus_address: str = "http://prometheus-operated.monitoring.svc:9090"
    namespace: str = ""
    model_name: str = ""
    target_kind: str = "Deployment"
    container_name: str = "vllm"
    knee_concurrency: float | None = None
    growth_frac: float | None = None
    kv_usage_at_knee_frac: float | None = None
    ttft_ms: float = 0.0
    pre_stop_s: float = DEFAULT_PRE_STOP_S
    scale_up_tolerance_frac: float | None = 0.0
    polling_interval_s: int = POLLING_INTERVAL_S
    max_num_seqs: int | None = None
    scale_down_window_s: int | None = None
    label_matchers: tuple[str, ...] = ()
    placeholders: int = 0
    gpus_per_replica: int = 1
    gpu_resource: str = "nvidia.com/gpu"
    cron_windows: tuple[CronWindow, ...] = ()
    forecast: Forecast | None = None
    prometheus_major: int = 3

    def __post_init__(self) -> None:
        windows = tuple(w if isinstance(w, CronWindow) else CronWindow(*w) for w in self.cron_windows)
        object.__setattr__(self, "cron_windows", windows)


_Comment = tuple[tuple[str | int, ...], str]
"""A comment and the path (keys and list indices) of the entry it is written beside."""


@dataclass(frozen=True)
class GeneratedManifest:
    """One YAML document to write, with its reasons.

    Attributes
    ----------
    file_stem : str
        Suggested file name without ``.yaml``.
    document : dict
        The object, as plain dicts, lists, strings and numbers.
    header : str
        Comment block for the top of the file.
    comments : tuple of (tuple, str)
        ``(path, text)``: a comment for the entry at ``path`` (keys and list indices).
    is_kubernetes_object : bool
        False for configuration that is not applied with kubectl (adapter rules).
    is_patch : bool
        A strategic-merge patch: required fields of the full object may be absent.
    """

    file_stem: str
    document: dict
    header: str
    comments: tuple[_Comment, ...] = ()
    is_kubernetes_object: bool = True
    is_patch: bool = False


@dataclass(frozen=True)
class ManifestSet:
    """The generated manifests and the numbers behind them.

    Attributes
    ----------
    scaled_object, hpa, workload_patch, adapter_rules : GeneratedManifest
    grace : GracePlan
    scale_down_window_s : int
        ``behavior.scaleDown.stabilizationWindowSeconds``. [s]
    scale_down_period_s : int
        Period of the one-replica removal policy. [s]
    signals : tuple of str
        Trigger names in the ScaledObject.
    formula : str
        ``scalingModifiers.formula`` ('' with a single signal).
    shutdown_flag : str
        The vLLM argument to add, e.g. ``--shutdown-timeout=226``.
    notes : tuple of str
    placeholders : tuple of GeneratedManifest
        The placeholders' PriorityClass and Deployment, when the plan asks for any.
    """

    scaled_object: GeneratedManifest
    hpa: GeneratedManifest
    workload_patch: GeneratedManifest
    adapter_rules: GeneratedManifest
    grace: GracePlan
    scale_down_window_s: int
    scale_down_period_s: int
    signals: tuple[str, ...]
    formula: str
    shutdown_flag: str
    notes: tuple[str, ...] = field(default=())
    placeholders: tuple[GeneratedManifest, ...] = ()

    @property
    def all(self) -> tuple[GeneratedManifest, ...]:
        return (self.scaled_object, self.hpa, self.workload_patch, self.adapter_rules, *self.placeholders)


@dataclass(frozen=True)
class _Signal:
    name: str  # trigger name, also the formula variable
    metric: str  # External metric name for the HPA / adapter
    query: str
    series: str  # a series the adapter can discover the metric by
    target: str  # per-replica target, as written
    reason: str  # comment on the target
    meaning: str


def format_threshold(value: float) -> str:
    """A target as KEDA and the HPA read it: at most 3 decimals, rounded down, no trailing zeros.

    Rounded down so the written target never exceeds the planned one; Kubernetes
    quantities carry milli-units at most.

    Examples
    --------
    >>> format_threshold(40.0), format_threshold(0.8), format_threshold(53.33333)
    ('40', '0.8', '53.333')
    """
    value = require_positive("threshold", value)
    text = str(Decimal(repr(value)).quantize(Decimal("0.001"), rounding=ROUND_FLOOR).normalize())
    if "E" in text:  # Decimal writes 4E+1 for 40
        text = str(int(Decimal(text)))
    if Decimal(text) <= 0:
        raise PlannerInputError(f"threshold {value!r} rounds to 0 at milli-unit precision")
    return text


def generate_manifests(plan: ScalingPlan, versions: ClusterVersions | None = None) -> ManifestSet:
    """Build the ScaledObject, the HPA, the workload patch and the adapter rules for ``plan``.

    ``versions`` are the Kubernetes and KEDA releases the files are for (default
    :class:`~planner.autoscaler.versions.ClusterVersions`: 1.37 and 2.20): where they
    would drop ``behavior.scaleUp.tolerance``, it is left out with a comment and a note.

    Raises
    ------
    PlannerInputError
        A value out of range, naming it.
    """
    _check(plan)
    grace = plan_grace(drain_time_s(plan.max_output_tokens, plan.itl_ms, plan.ttft_ms), pre_stop_s=plan.pre_stop_s)
    window_s = (
        plan.scale_down_window_s
        if plan.scale_down_window_s is not None
        else max(math.ceil(plan.warmup_s), MIN_SCALE_DOWN_WINDOW_S)
    )
    period_s = min(max(math.ceil(plan.warmup_s), HPA_SYNC_PERIOD_S), MAX_POLICY_PERIOD_S)
    signals = _signals(plan)
    formula = ""
    if len(signals) > 1:
        terms = [f"{s.name} / {s.target}" for s in signals] + [_cron_name(k) for k in range(len(plan.cron_windows))]
        formula = "max(" + ", ".join(terms) + ")"
    versions = ClusterVersions() if versions is None else versions
    hpa_dropped = versions.tolerance_dropped("HorizontalPodAutoscaler")
    so_dropped = versions.tolerance_dropped("ScaledObject")
    behavior, behavior_comments = _behavior(plan, window_s, period_s, hpa_dropped)
    so_behavior, so_behavior_comments = _behavior(plan, window_s, period_s, so_dropped)
    shutdown_flag = f"--shutdown-timeout={grace.shutdown_timeout_s}"
    notes = []
    if plan.cron_windows:
        notes.append(
            "hpa.yaml leaves the cron windows out: an HPA has no schedule (raise its minReplicas from a CronJob "
            "if you apply it instead of scaledobject.yaml)"
        )
    if plan.forecast is not None and plan.forecast.method == "double_exponential_smoothing":
        notes.append(
            "the forecast trigger calls double_exponential_smoothing, which Prometheus 3 serves only with "
            "--enable-feature=promql-experimental-functions (Prometheus 2 calls it holt_winters: prometheus_major=2)"
            if plan.prometheus_major == 3
            else "the forecast trigger calls holt_winters, which Prometheus 3 renamed double_exponential_smoothing"
        )
    if plan.scale_up_tolerance_frac is not None:
        for name, dropped in (("hpa.yaml", hpa_dropped), ("scaledobject.yaml", so_dropped)):
            if dropped is not None:
                notes.append(
                    f"{name} leaves behavior.scaleUp.tolerance out: {dropped} (Kubernetes "
                    f"{versions.kubernetes}, KEDA {versions.keda}); the cluster's 10 % applies"
                )
    return ManifestSet(
        scaled_object=_scaled_object(plan, signals, formula, so_behavior, so_behavior_comments),
        hpa=_hpa(plan, signals, behavior, behavior_comments),
        workload_patch=_workload_patch(plan, grace),
        adapter_rules=_adapter_rules(plan, signals),
        grace=grace,
        scale_down_window_s=window_s,
        scale_down_period_s=period_s,
        signals=tuple(s.name for s in signals),
        formula=formula,
        shutdown_flag=shutdown_flag,
        notes=tuple(notes),
        placeholders=placeholder_manifests(plan),
    )


PLACEHOLDER_PRIORITY = -10
"""The placeholders' PriorityClass value, as cluster-autoscaler's FAQ on overprovisioning writes it:
below the 0 of every pod without a class, so any pending pod preempts them, and not below
cluster-autoscaler's ``--expendable-pods-priority-cutoff`` (-10 by default), so a preempted
placeholder that goes Pending still makes it buy a node and the spare refills."""
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def placeholder_manifests(plan: ScalingPlan) -> tuple[GeneratedManifest, ...]:
    """The overprovisioning pattern: a PriorityClass below every pod's and a Deployment of pause pods.

    Each pause pod requests one replica's GPUs. A replica that finds no free
    GPU preempts one (the scheduler evicts the lower priority at once, with no
    grace period) and binds to its node, skipping the node autoscaler and the
    node's provisioning; the evicted placeholder goes Pending and the node
    autoscaler buys a node for it in the background. Nothing when
    ``plan.placeholders`` is 0.
    """
    if plan.placeholders == 0:
        return ()
    name = f"{plan.target_name}-gpu-placeholder"
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": PLACEHOLDER_PRIORITY,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": f"Pause pods holding warm GPUs for {plan.target_name}; any real pod preempts them.",
    }
    labels = {"app.kubernetes.io/name": name}
    gpus = {plan.gpu_resource: plan.gpus_per_replica}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(plan, name),
        "spec": {
            "replicas": plan.placeholders,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": name,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "pause", "image": PAUSE_IMAGE, "resources": {"requests": gpus, "limits": gpus}}
                    ],
                },
            },
        },
    }
    header = (
        f"{plan.placeholders} placeholder pod(s) of {plan.gpus_per_replica} GPU(s) each for {plan.target_kind} "
        f"{plan.target_name}: they keep nodes up so the next\nreplicas skip the node's provisioning. Give them the "
        "vLLM pods' nodeSelector, tolerations and affinity, so they hold\nnodes of the same pool. They bill as "
        "GPUs in use."
    )
    return (
        GeneratedManifest(
            f"{name}-priorityclass",
            priority_class,
            "The placeholders' priority: below every pod without a class (0), so a replica preempts them.",
            (
                (
                    ("value",),
                    f"{PLACEHOLDER_PRIORITY}: below 0, not below cluster-autoscaler's expendable cutoff",
                ),
            ),
        ),
        GeneratedManifest(
            name,
            deployment,
            header,
            ((("spec", "replicas"), "warm spare GPUs, in replicas' worth"),),
        ),
    )


def _check(plan: ScalingPlan) -> None:
    if not plan.target_name or not isinstance(plan.target_name, str):
        raise PlannerInputError("target name must be a non-empty string (the Deployment to scale)")
    if plan.target_kind not in ("Deployment", "StatefulSet"):
        raise PlannerInputError(f"target kind must be Deployment or StatefulSet, got {plan.target_kind!r}")
    require_positive("concurrency_target", plan.concurrency_target)
    require_positive("warmup_s", plan.warmup_s)
    if plan.warmup_s > MAX_STABILIZATION_WINDOW_S:
        raise PlannerInputError(
            f"warmup_s {plan.warmup_s:g} s is longer than the {MAX_STABILIZATION_WINDOW_S} s the HPA allows "
            "for a stabilization window, so no scale-down window can cover it; shorten the warmup"
        )
    if plan.max_num_seqs is not None:
        require_positive("max_num_seqs", plan.max_num_seqs)
        if plan.concurrency_target >= plan.max_num_seqs:
            raise PlannerInputError(
                f"concurrency target {plan.concurrency_target:g} is at or above --max-num-seqs "
                f"{plan.max_num_seqs}: a replica runs at most {plan.max_num_seqs} requests at once, so "
                "in-flight above that is a queue, and the fleet would scale only once requests wait; "
                "lower the target or raise --max-num-seqs"
            )
    if plan.kv_usage_target_frac is not None:
        require_fraction("kv_usage_target_frac", plan.kv_usage_target_frac)
    if plan.queue_threshold_requests is not None:
        require_positive("queue_threshold_requests", plan.queue_threshold_requests)
    for name in ("min_replicas", "max_replicas"):
        value = getattr(plan, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlannerInputError(f"{name} must be a whole number, got {value!r}")
    if plan.min_replicas < 1:
        raise PlannerInputError(
            f"min_replicas must be at least 1, got {plan.min_replicas}: every signal here is served by "
            "the vLLM pods, so at 0 replicas there is nothing to scale back up on (KEDA's activation and "
            "the HPA's own scale to zero, beta from Kubernetes 1.37, both need a value that exists without pods)"
        )
    if plan.max_replicas < plan.min_replicas:
        raise PlannerInputError(f"max_replicas {plan.max_replicas} is below min_replicas {plan.min_replicas}")
    if plan.scale_up_tolerance_frac is not None:
        require_non_negative("scale_up_tolerance_frac", plan.scale_up_tolerance_frac)
    if plan.scale_down_window_s is not None and (
        isinstance(plan.scale_down_window_s, bool)
        or not isinstance(plan.scale_down_window_s, int)
        or not 0 <= plan.scale_down_window_s <= MAX_STABILIZATION_WINDOW_S
    ):
        raise PlannerInputError(
            f"scale_down_window_s must be a whole number 0-{MAX_STABILIZATION_WINDOW_S}, "
            f"got {plan.scale_down_window_s!r}"
        )
    for matcher in plan.label_matchers:
        if not isinstance(matcher, str) or not _MATCHER.fullmatch(matcher.strip()):
            raise PlannerInputError(f'label matcher {matcher!r}: expected NAME="VALUE" (or !=, =~, !~)')
    if (
        isinstance(plan.polling_interval_s, bool)
        or not isinstance(plan.polling_interval_s, int)
        or plan.polling_interval_s < 1
    ):
        raise PlannerInputError(f"polling_interval_s must be a whole number >= 1, got {plan.polling_interval_s!r}")
    if not plan.prometheus_address.startswith(("http://", "https://")):
        raise PlannerInputError(
            f"prometheus address must start with http:// or https://, got {plan.prometheus_address!r}"
        )
    if not plan.container_name:
        raise PlannerInputError("container name must not be empty")
    for name in ("placeholders", "gpus_per_replica"):
        value = getattr(plan, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "placeholders" else 1):
            raise PlannerInputError(
                f"{name} must be a whole number >= {0 if name == 'placeholders' else 1}, got {value!r}"
            )
    if plan.forecast is not None and not isinstance(plan.forecast, Forecast):
        raise PlannerInputError(f"forecast must be a Forecast, got {plan.forecast!r}")
    if plan.prometheus_major not in (2, 3):
        raise PlannerInputError(f"prometheus_major must be 2 or 3, got {plan.prometheus_major!r}")
    _check_cron_windows(plan)


def _check_cron_windows(plan: ScalingPlan) -> None:
    _check_windows(plan.cron_windows, plan.max_replicas)


def _check_windows(windows: Sequence[CronWindow], max_replicas: int) -> None:
    """Refuse a window KEDA would not build or ``planner lint`` would flag, naming it."""
    built: list[tuple[int, CronScaler]] = []
    for k, window in enumerate(windows):
        where = f"cron window {k} ({window.start} to {window.end})"
        desired = window.desired_replicas
        if isinstance(desired, bool) or not isinstance(desired, int) or desired < 1:
            raise PlannerInputError(f"{where}: desired_replicas must be a whole number >= 1, got {desired!r}")
        if desired > max_replicas:
            raise PlannerInputError(
                f"{where}: desired_replicas {desired} is above max_replicas {max_replicas}, which caps it"
            )
        problems = cron_problems(window.metadata)
        if problems:
            raise PlannerInputError(f"{where}: {problems[0].field}: {problems[0].message}")
        zone = window.metadata.timezone
        problem = "the KEDA operator's own zone; name one" if zone == "Local" else timezone_problem(zone)
        if problem is not None:
            raise PlannerInputError(f"{where}: timezone {zone!r}: {problem}")
        scaler = build_cron_scaler(window.metadata)
        for other_k, other in built:
            if other.desired_replicas != scaler.desired_replicas and overlap_in_a_year_s(other, scaler) is not None:
                raise PlannerInputError(
                    f"{where} overlaps cron window {other_k} with different desired_replicas "
                    f"({other.desired_replicas} and {scaler.desired_replicas}): the HPA would take the larger; "
                    "make them disjoint"
                )
        built.append((k, scaler))


def _cron_name(k: int, prefix: str = "cron") -> str:
    return f"{prefix}_{k}"


def _cron_trigger(name: str, window: CronWindow, index: int, in_formula: bool) -> tuple[dict, list[_Comment]]:
    """One window as a KEDA ``cron`` trigger at ``spec.triggers[index]``, with its comments."""
    metadata = window.metadata
    trigger = {
        "type": "cron",
        "name": name,
        "metadata": {
            "timezone": metadata.timezone,
            "start": metadata.start,
            "end": metadata.end,
            "desiredReplicas": metadata.desired_replicas,
        },
    }
    base = ("spec", "triggers", index)
    comments: list[_Comment] = [
        (
            (*base, "name"),
            f"at least {window.desired_replicas} replicas from start to end (start included, end not), "
            "whatever the load says; outside the window it proposes 0"
            + (", and joins the formula's max() by this name" if in_formula else ""),
        ),
        ((*base, "metadata", "timezone"), "the zone start and end are read in, daylight saving included"),
    ]
    return trigger, comments


def scheduled_scaled_object(
    document: Mapping, windows: Sequence[CronWindow], source: str = "scaledobject.yaml"
) -> GeneratedManifest:
    """A team's ScaledObject with ``windows`` as its cron triggers, in place of any it had.

    Every other field stays as written. The windows are checked as :func:`generate_manifests`
    checks a plan's (KEDA builds them, no two with different floors overlap, none above
    ``maxReplicaCount``). With ``advanced.scalingModifiers`` the HPA reads only the composite
    metric, so each cron trigger joins the formula as ``max(formula, name x target)``: its
    ``desiredReplicas`` in the composite's units, which ``AverageValue`` divides by the target.

    Parameters
    ----------
    document : Mapping
        The ScaledObject as parsed YAML.
    windows : sequence of CronWindow
    source : str
        Where the document came from, for messages and the header.

    Returns
    -------
    GeneratedManifest

    Raises
    ------
    PlannerInputError
        Not a ScaledObject; a formula that names a cron trigger being replaced, or a composite
        metric typed ``Value`` (a floor in replicas has no fixed value there); a window as
        :func:`generate_manifests` refuses it.
    """
    if not isinstance(document, Mapping) or document.get("kind") != "ScaledObject":
        kind = document.get("kind") if isinstance(document, Mapping) else None
        raise PlannerInputError(
            f"{source}: expected a KEDA ScaledObject, got {kind or 'no kind'}: cron triggers live only in a "
            "ScaledObject (an HPA has no schedule)"
        )
    data = copy.deepcopy(dict(document))
    spec = data.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("triggers"), list):
        raise PlannerInputError(f"{source}: spec.triggers: expected a list of triggers")
    triggers = spec["triggers"]
    is_cron = [isinstance(t, Mapping) and t.get("type") == "cron" for t in triggers]
    cron = [t for t, c in zip(triggers, is_cron, strict=True) if c]
    kept = [t for t, c in zip(triggers, is_cron, strict=True) if not c]
    if not kept:
        raise PlannerInputError(
            f"{source}: spec.triggers: only cron triggers; the schedule needs a metric trigger beside it"
        )
    max_replicas = spec.get("maxReplicaCount", DEFAULT_HPA_MAX_REPLICAS)
    _check_windows(windows, max_replicas if isinstance(max_replicas, int) else DEFAULT_HPA_MAX_REPLICAS)
    taken = {str(t.get("name")) for t in kept if isinstance(t, Mapping) and t.get("name")}
    # A prefix no kept trigger's name starts with, so the formula's names stay apart.
    prefix = next(
        (p for p in ("cron", "schedule", "floor") if not any(n.startswith(p + "_") for n in taken)), "planner_cron"
    )
    names = [_cron_name(k, prefix) for k in range(len(windows))]
    advanced = spec.get("advanced")
    modifiers = advanced.get("scalingModifiers") if isinstance(advanced, dict) else None
    if not isinstance(modifiers, dict):
        modifiers = {}
    formula = str(modifiers.get("formula") or "")
    comments: list[_Comment] = []
    if formula and windows:
        for old in (str(t.get("name") or "") for t in cron):
            if old and re.search(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", formula):
                raise PlannerInputError(
                    f"{source}: spec.advanced.scalingModifiers.formula names the cron trigger {old!r}, which the "
                    "schedule replaces; take it out of the formula first"
                )
        metric_type = str(modifiers.get("metricType") or "AverageValue")
        if metric_type != "AverageValue":
            raise PlannerInputError(
                f"{source}: spec.advanced.scalingModifiers.metricType: {metric_type} has no fixed value for a floor "
                "in replicas (the HPA multiplies by the current count); use AverageValue"
            )
        target = str(modifiers.get("target") or "").strip()
        try:
            one = float(target) == 1.0
        except ValueError:
            raise PlannerInputError(
                f"{source}: spec.advanced.scalingModifiers.target: expected a number, got {target!r}"
            ) from None
        terms = [name if one else f"{name} * {target}" for name in names]
        modifiers["formula"] = f"max({formula}, {', '.join(terms)})"
        comments.append(
            (
                ("spec", "advanced", "scalingModifiers", "formula"),
                "the team's formula, and each cron trigger's floor in its units (desiredReplicas x target)",
            )
        )
    first = len(kept)
    for k, window in enumerate(windows):
        trigger, trigger_comments = _cron_trigger(names[k], window, first + k, bool(formula))
        kept.append(trigger)
        comments += trigger_comments
    spec["triggers"] = kept
    name = (data.get("metadata") or {}).get("name", "") if isinstance(data.get("metadata"), Mapping) else ""
    header = (
        f"KEDA ScaledObject {name} from {source}, with a weekly schedule written by planner schedule: its own "
        f"triggers as they were{', its cron triggers replaced' if cron else ''}, and one cron trigger per window."
    )
    return GeneratedManifest("scaledobject", data, header, tuple(comments))


_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_METRIC_SELECTOR = re.compile(r"(?<![A-Za-z0-9_:])(vllm[:_][A-Za-z0-9_:]*)\s*\{([^{}]*)\}")


def _labels(plan: ScalingPlan) -> dict[str, str]:
    labels = {}
    if plan.namespace:
        labels["namespace"] = plan.namespace
    if plan.model_name:
        labels["model_name"] = plan.model_name
    try:
        selector(labels)
    except ValueError as error:
        raise PlannerInputError(f"namespace or model name: {error}") from None
    return labels


def _match(plan: ScalingPlan) -> str:
    """The selector every generated query carries: the given matchers, then namespace and model name."""
    matchers = [m.strip() for m in plan.label_matchers]
    named = set()
    for m in matchers:
        matcher = _MATCHER.fullmatch(m)
        assert matcher is not None  # the plan's matchers were checked against _MATCHER
        named.add(matcher.group(1))
    labels = {name: value for name, value in _labels(plan).items() if name not in named}
    extra = selector(labels)[1:-1] if labels else ""
    parts = matchers + ([extra] if extra else [])
    return "{" + ",".join(parts) + "}" if parts else ""


def query_matchers(query: str) -> tuple[str, ...]:
    """The label matchers a query puts on its vLLM metrics, as written, first spelling of each label kept.

    The team's own selector (``{model_name="chat"}``) is what singles out its
    model in a shared Prometheus, so generated queries keep it.

    Examples
    --------
    >>> query_matchers('sum(vllm:num_requests_waiting{model_name="chat", namespace="llm"})')
    ('model_name="chat"', 'namespace="llm"')
    >>> query_matchers("sum(vllm:num_requests_running)")
    ()
    """
    found: dict[str, str] = {}
    for selector_match in _METRIC_SELECTOR.finditer(query or ""):
        for matcher in _MATCHER.finditer(selector_match.group(2)):
            found.setdefault(matcher.group(1), f'{matcher.group(1)}{matcher.group(2)}"{matcher.group(3)}"')
    return tuple(found.values())


def workload_matchers(namespace: str, flags) -> tuple[str, ...]:
    """Matchers that scope a query to one vLLM workload: its namespace and the model name it serves.

    vLLM labels its metrics ``model_name`` with the first ``--served-model-name``,
    else ``--model``. ``flags`` are the server's flags as
    :class:`planner.readers.workload.ModelServer` reads them.
    """
    labels = {}
    if namespace:
        labels["namespace"] = namespace
    served = (flags or {}).get("--served-model-name") or (flags or {}).get("--model")
    if served and isinstance(served, str) and "{" not in served and "$" not in served:
        labels["model_name"] = served.split()[0]
    try:
        selector(labels)
    except ValueError:
        return ()
    return tuple(f'{name}="{value}"' for name, value in labels.items())


def pod_matcher(kind: str, name: str) -> str:
    """A ``pod`` matcher for the pods of one Deployment (``NAME-HASH-ID``) or StatefulSet (``NAME-N``).

    The last resort to scope a query when neither a model name nor the team's
    own selector is known: ``sum(...)`` with no selector adds up every vLLM
    the Prometheus scrapes, other teams' included.

    Examples
    --------
    >>> pod_matcher("Deployment", "chat")
    'pod=~"chat-[a-z0-9]+-[a-z0-9]+"'
    """
    escaped = re.sub(r"([.+*?()\[\]{}|^$])", r"\\\\\1", name)
    tail = "[0-9]+" if kind == "StatefulSet" else "[a-z0-9]+-[a-z0-9]+"
    return f'pod=~"{escaped}-{tail}"'


def _signals(plan: ScalingPlan) -> list[_Signal]:
    match = _match(plan)
    t = format_threshold(plan.concurrency_target)
    if plan.knee_concurrency is not None and plan.growth_frac is not None:
        why = (
            f"{t} = knee {plan.knee_concurrency:g} / (1 + {plan.growth_frac:g} growth during one "
            "warmup) requests in flight per replica"
        )
    else:
        why = f"{t} requests in flight per replica (running + waiting)"
    if plan.max_num_seqs is not None:
        why += f", below --max-num-seqs {plan.max_num_seqs}"
    signals = [
        _Signal(
            "inflight",
            "vllm_requests_in_flight",
            f"sum({RUNNING}{match}) + sum({WAITING}{match})",
            f"{RUNNING}{match}",
            t,
            why,
            "requests in flight over the fleet (running + waiting): grows with load, unbounded",
        )
    ]
    if plan.kv_usage_target_frac is not None:
        kv = format_threshold(plan.kv_usage_target_frac)
        why = f"{kv} of one replica's KV cache per replica"
        if plan.kv_usage_at_knee_frac is not None:
            why += f" (usage at the knee was {plan.kv_usage_at_knee_frac:.3g})"
        signals.append(
            _Signal(
                "kv",
                "vllm_kv_cache_usage_sum",
                f"sum({KV_USAGE}{match})",
                f"{KV_USAGE}{match}",
                kv,
                why,
                "KV cache in use over the fleet, in replicas' worth (sum, not avg: the total does not "
                "fall when a replica is added)",
            )
        )
    if plan.forecast is not None:
        signals.append(_forecast_signal(plan, match, t))
    if plan.queue_threshold_requests is not None:
        q = format_threshold(plan.queue_threshold_requests)
        signals.append(
            _Signal(
                "waiting",
                "vllm_requests_waiting_sum",
                f"sum({WAITING}{match})",
                f"{WAITING}{match}",
                q,
                f"{q} waiting requests per replica = queue-wait budget x drain rate per replica",
                "requests queued over the fleet; alone it flaps (it falls to 0 once capacity suffices), "
                "so it only ever adds to the other signals",
            )
        )
    return signals


_FORECAST_MEANING = {
    "seasonal_naive": "requests in flight over the fleet one period ago, read lead seconds ahead",
    "predict_linear": "requests in flight over the fleet, extrapolated along the line through the window",
    "max_over_time": "the peak of requests in flight over the fleet across the window",
    "double_exponential_smoothing": "requests in flight over the fleet, smoothed (Holt's level and trend)",
}


def _forecast_signal(plan: ScalingPlan, match: str, target: str) -> _Signal:
    forecast = plan.forecast
    assert forecast is not None  # called only with a forecast
    query = forecast_query(forecast, "in_flight", match, prometheus_major=plan.prometheus_major)
    if forecast.method == "seasonal_naive":
        detail = (
            f"offset {forecast.offset_s:g} s = period {forecast.period_s:g} s - lead {forecast.lead_s:g} s, "
            "so replicas ordered now are Ready when the load of one period ago comes back"
        )
    elif forecast.method == "predict_linear":
        detail = f"the line through the last {forecast.window_s:g} s, read {forecast.ahead_s:g} s ahead"
    elif forecast.method == "max_over_time":
        detail = f"the peak of the last {forecast.window_s:g} s holds capacity through shorter dips"
    else:
        detail = (
            f"Holt's level over the last {forecast.window_s:g} s (smoothing {forecast.smoothing_frac:g}, "
            f"trend {forecast.trend_frac:g}); it smooths, it does not look ahead"
        )
    return _Signal(
        "forecast",
        "vllm_requests_in_flight_forecast",
        query,
        f"{RUNNING}{match}",
        target,
        f"{target} requests in flight per replica, the in-flight target: {detail}; 0 where it has no history",
        _FORECAST_MEANING[forecast.method] + " (predictive; the HPA follows whichever trigger asks for more)",
    )


def _behavior(
    plan: ScalingPlan, window_s: int, period_s: int, dropped: str | None = None
) -> tuple[dict, list[_Comment]]:
    # ``dropped``: why these versions would drop scaleUp.tolerance (None: they keep it).
    scale_up = {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": HPA_SYNC_PERIOD_S},
            {"type": "Pods", "value": 4, "periodSeconds": HPA_SYNC_PERIOD_S},
        ],
    }
    comments: list[_Comment] = [
        (
            ("scaleUp", "stabilizationWindowSeconds"),
            f"react at once: a replica takes {plan.warmup_s:g} s to warm up, so waiting only adds to it",
        ),
        (("scaleUp", "policies"), "Kubernetes' defaults, written out: +100 % or +4 pods per 15 s, whichever is more"),
    ]
    if plan.scale_up_tolerance_frac is not None and dropped is None:
        scale_up["tolerance"] = format_tolerance(plan.scale_up_tolerance_frac)
        comments.append(
            (
                ("scaleUp", "tolerance"),
                "scale up as soon as a target is passed, not 10 % later: T already holds "
                "the warmup headroom (HPAConfigurableTolerance)",
            )
        )
    elif plan.scale_up_tolerance_frac is not None:
        comments.append(
            (
                ("scaleUp", "selectPolicy"),
                f"no tolerance written: {dropped}; the cluster's 10 % applies, so scaling starts "
                "10 % above each target",
            )
        )
    scale_down = {
        "stabilizationWindowSeconds": window_s,
        "selectPolicy": "Max",
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": period_s}],
    }
    if plan.scale_down_window_s is not None:
        why = f"{window_s} s, as chosen for this traffic (planner plan); the warmup is {plan.warmup_s:g} s" + (
            ""
            if window_s >= plan.warmup_s
            else ", so a dip shorter than a warmup may remove a replica that is needed back"
        )
    elif window_s > math.ceil(plan.warmup_s):
        why = (
            f"{window_s} s: the HPA default, already longer than the {plan.warmup_s:g} s warmup, "
            "so a dip shorter than a warmup never removes a replica"
        )
    else:
        why = (
            f"{window_s} s = the warmup: a replica removed in a dip shorter than this would be "
            "needed back before a new one could be Ready"
        )
    comments += [
        (("scaleDown", "stabilizationWindowSeconds"), why),
        (
            ("scaleDown", "policies"),
            f"at most 1 replica removed per {period_s} s (one warmup): a "
            "removal that proves wrong costs one replica's warmup, not several",
        ),
    ]
    return {"scaleUp": scale_up, "scaleDown": scale_down}, comments


def format_tolerance(value: float) -> str:
    """A tolerance as a quantity string (``"0"``, ``"0.05"``)."""
    value = require_non_negative("tolerance", value)
    if value == 0:
        return "0"
    return format_threshold(value)


def _metadata(plan: ScalingPlan, name: str) -> dict:
    metadata = {"name": name}
    if plan.namespace:
        metadata["namespace"] = plan.namespace
    return metadata


def _scaled_object(plan, signals, formula, behavior, behavior_comments) -> GeneratedManifest:
    triggers = []
    comments: list[_Comment] = [
        (
            ("spec", "minReplicaCount"),
            "at least 1: the vLLM metrics vanish at 0 replicas, so nothing could scale the fleet back up",
        ),
        (("spec", "maxReplicaCount"), "the ceiling: GPU quota / GPUs per replica"),
        (
            ("spec", "pollingInterval"),
            f"{plan.polling_interval_s} s: how often KEDA checks activation "
            "(0 <-> 1) and refreshes its metrics cache; without useCachedMetrics every 15 s HPA sync "
            "queries Prometheus afresh through KEDA's metrics server",
        ),
    ]
    for index, signal in enumerate(signals):
        triggers.append(
            {
                "type": "prometheus",
                "name": signal.name,
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": plan.prometheus_address,
                    "query": signal.query,
                    "threshold": signal.target,
                    "ignoreNullValues": "false",
                },
            }
        )
        base = ("spec", "triggers", index)
        comments += [
            ((*base, "name"), signal.meaning),
            ((*base, "metricType"), METRIC_TYPE_WITH_MODIFIERS if formula else METRIC_TYPE_AVERAGE_VALUE),
            ((*base, "metadata", "threshold"), signal.reason),
            (
                (*base, "metadata", "ignoreNullValues"),
                "the query itself reads 0 where it has no history (or vector(0)); the reactive trigger still "
                "fails loudly on a renamed metric"
                if signal.name == "forecast"
                else "a renamed or missing metric is an error, not a silent 0",
            ),
        ]
    for k, window in enumerate(plan.cron_windows):
        trigger, trigger_comments = _cron_trigger(_cron_name(k), window, len(signals) + k, bool(formula))
        triggers.append(trigger)
        comments += trigger_comments
    advanced: dict = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    for path, text in behavior_comments:
        comments.append((("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", *path), text))
    if formula:
        advanced["scalingModifiers"] = {"formula": formula, "target": "1", "metricType": "AverageValue"}
        comments += [
            (
                ("spec", "advanced", "scalingModifiers", "formula"),
                "replicas the most demanding signal needs; KEDA feeds the raw query values, so the "
                "per-replica targets are divided out here",
            ),
            (
                ("spec", "advanced", "scalingModifiers", "target"),
                "the formula is already in replicas: desired = ceil(its value) once outside the tolerance",
            ),
            (
                ("spec", "advanced", "scalingModifiers", "metricType"),
                "the composite metric's type: the only metricType the HPA sees here",
            ),
        ]
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": plan.target_kind, "name": plan.target_name},
        "minReplicaCount": plan.min_replicas,
        "maxReplicaCount": plan.max_replicas,
        "pollingInterval": plan.polling_interval_s,
        "advanced": advanced,
        "triggers": triggers,
    }
    document = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(plan, plan.target_name),
        "spec": spec,
    }
    header = (
        f"KEDA ScaledObject for {plan.target_kind} {plan.target_name}, written by planner manifests.\n"
        "Apply this or hpa.yaml, not both: KEDA creates its own HPA from this object."
    )
    return GeneratedManifest("scaledobject", document, header, tuple(comments))


def _hpa(plan, signals, behavior, behavior_comments) -> GeneratedManifest:
    metrics = []
    comments: list[_Comment] = [
        (
            ("spec", "minReplicas"),
            "at least 1: the vLLM metrics vanish at 0 replicas, so even the "
            "HPA's own scale to zero (beta from Kubernetes 1.37) would have no External value to come back on",
        ),
        (("spec", "maxReplicas"), "the ceiling: GPU quota / GPUs per replica"),
        (
            ("spec", "metrics"),
            "External AverageValue metrics from prometheus-adapter (adapter-rules.yaml), "
            "the type KEDA itself hands the HPA, so both files decide alike; the HPA scales to the largest "
            "proposal, the same max() as the ScaledObject's formula",
        ),
    ]
    for index, signal in enumerate(signals):
        metrics.append(
            {
                "type": "External",
                "external": {
                    "metric": {"name": signal.metric},
                    "target": {"type": "AverageValue", "averageValue": signal.target},
                },
            }
        )
        comments.append((("spec", "metrics", index, "external", "target", "averageValue"), signal.reason))
    for path, text in behavior_comments:
        comments.append((("spec", "behavior", *path), text))
    document = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(plan, plan.target_name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": plan.target_kind, "name": plan.target_name},
            "minReplicas": plan.min_replicas,
            "maxReplicas": plan.max_replicas,
            "metrics": metrics,
            "behavior": behavior,
        },
    }
    header = (
        f"autoscaling/v2 HorizontalPodAutoscaler for {plan.target_kind} {plan.target_name}, the "
        "equivalent of scaledobject.yaml\nfor clusters without KEDA. Needs prometheus-adapter with "
        "the rules in adapter-rules.yaml."
    )
    return GeneratedManifest("hpa", document, header, tuple(comments))


def _adapter_rules(plan, signals) -> GeneratedManifest:
    rules = []
    comments: list[_Comment] = []
    for index, signal in enumerate(signals):
        rules.append(
            {
                "seriesQuery": signal.series,
                "resources": {"namespaced": False},
                "name": {"as": signal.metric},
                "metricsQuery": signal.query,
            }
        )
        comments += [
            (
                ("externalRules", index, "resources"),
                "the query names its own labels, so the adapter adds no namespace matcher",
            ),
            (("externalRules", index, "metricsQuery"), f"the same query as the ScaledObject's {signal.name!r} trigger"),
        ]
    header = (
        "prometheus-adapter configuration (its --config file, or the Helm chart's rules.external):\n"
        "serves the External metrics hpa.yaml reads. Not a Kubernetes object."
    )
    return GeneratedManifest(
        "adapter-rules", {"externalRules": rules}, header, tuple(comments), is_kubernetes_object=False
    )


def _workload_patch(plan: ScalingPlan, grace: GracePlan) -> GeneratedManifest:
    container = {"name": plan.container_name, "lifecycle": {"preStop": {"sleep": {"seconds": grace.pre_stop_s}}}}
    document = {
        "apiVersion": "apps/v1",
        "kind": plan.target_kind,
        "metadata": _metadata(plan, plan.target_name),
        "spec": {
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": grace.termination_grace_period_s,
                    "containers": [container],
                }
            }
        },
    }
    pod = ("spec", "template", "spec")
    comments = (
        ((*pod, "terminationGracePeriodSeconds"), grace_reason(grace)),
        ((*pod, "containers", 0, "lifecycle", "preStop", "sleep", "seconds"), pre_stop_reason(grace)),
    )
    header = (
        f"Strategic-merge patch for {plan.target_kind} {plan.target_name} "
        f"(kubectl patch --type strategic, or a kustomize patch).\n"
        f"Also add {shutdown_flag_text(grace)} to the vLLM container's args: a strategic merge "
        "replaces\nthe whole args list, so this patch leaves args alone "
        "(planner manifests --patch FILE writes it for you)."
    )
    return GeneratedManifest(f"{plan.target_kind.lower()}-patch", document, header, comments, is_patch=True)


def shutdown_flag_text(grace: GracePlan) -> str:
    """The vLLM flag, e.g. ``--shutdown-timeout=226``."""
    return f"--shutdown-timeout={grace.shutdown_timeout_s}"


def grace_reason(grace: GracePlan) -> str:
    """Why the grace period is what it is, for a comment."""
    return (
        f"{grace.termination_grace_period_s} s = preStop {grace.pre_stop_s} s + --shutdown-timeout "
        f"{grace.shutdown_timeout_s} s + slack for the process to exit"
    )


def shutdown_reason(grace: GracePlan) -> str:
    """Why ``--shutdown-timeout`` is what it is, for a comment."""
    return (
        f"{grace.shutdown_timeout_s} s = longest generation {grace.drain_time_s:g} s + 10 % margin; "
        f"below the {grace.termination_grace_period_s} s grace period"
    )


def pre_stop_reason(grace: GracePlan) -> str:
    """Why the preStop sleep, for a comment."""
    return f"keep serving {grace.pre_stop_s} s while the endpoint leaves the Service, then SIGTERM starts vLLM's drain"


def manifest_thresholds(result, steps) -> dict:
    """The thresholds ``planner manifests --loadtest`` takes from a load test, under the same keys.

    ``result`` is :func:`planner.capacity.knee.thresholds_from_loadtest` on ``steps``.

    Raises
    ------
    PlannerInputError
        The load test gives no concurrency target (no knee, or too few steps);
        the message is the knee finding.
    """
    if not math.isfinite(result.concurrency_target):
        from planner.capacity.knee import knee_finding  # pandas; only on this path

        raise PlannerInputError(f"the load test gives no concurrency target: {knee_finding(result, steps)}")
    found = {
        "concurrency_target": result.concurrency_target,
        "knee_concurrency": result.knee_concurrency,
        "growth_frac": result.growth_frac,
    }
    if math.isfinite(result.kv_usage_target_frac):
        found["kv_usage_target"] = result.kv_usage_target_frac
        found["kv_usage_at_knee_frac"] = result.kv_usage_at_knee_frac
    if math.isfinite(result.queue_threshold_requests):
        found["queue_threshold_requests"] = result.queue_threshold_requests
    return found
