"""The ``lint`` module reviews autoscaler and model-server manifests against what is known to go wrong.

Each rule is a function that takes the parsed manifests (a
:class:`~planner.readers.workload.ManifestSet`) and the review settings and
returns :class:`Finding` objects; nothing here reads files. Rule ids are a
stable contract; the book's appendix page ``lint_rules`` has one section per
id, anchored by the id.

Numbers the rules need, and where they come from:

* ``short-scale-down-window`` compares the scale-down stabilization window
  (HPA default 300 s when unset) with ``warmup_s``, default
  :data:`DEFAULT_WARMUP_S` = 90 s, the time a new vLLM pod took to become Ready
  in the flapping experiment of the source articles (W35). A startup probe's
  budget is not used: it is a ceiling written generously, not the warmup.
  With a fleet file's node pool (:class:`ReplicaSupply`) it is the time a
  removed replica takes to come back, and the node-quota rules run.
* ``short-grace`` sizes the longest generation with
  :func:`planner.dynamics.grace.drain_time_s` from ``max_tokens`` when given, else from
  the server's ``--max-model-len`` (every token of the context generated, an
  upper bound), at ``itl_ms`` or :data:`DEFAULT_ITL_MS` = 50 ms (W37).
* ``threshold-at-batch-limit`` uses ``max_num_seqs`` when given, else the
  paired workload's ``--max-num-seqs``, else vLLM's default
  :data:`DEFAULT_MAX_NUM_SEQS` = 256 (V1 engine, ``EngineArgs.get_batch_defaults``
  in vLLM 0.10-0.11 for the OpenAI server; GPUs with 70 GiB or more other than
  the A100, such as the H100, get 1024, so the rule under-reports there).

Signals are classified by the metric names in a query or metric name
(:func:`signal_kinds`); that is text matching, and a query built from
recording rules with other names is classified as ``other``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from planner.autoscaler.cron_scaler import CronScaler, build_cron_scaler, cron_problems, overlap_in_a_year_s
from planner.autoscaler.cron_schedule import timezone_problem
from planner.autoscaler.defaults import DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S
from planner.autoscaler.hpa_spec import (
    AVERAGE_VALUE,
    CONTAINER_RESOURCE,
    EXTERNAL,
    OBJECT,
    PODS,
    RESOURCE,
)
from planner.autoscaler.spec import Autoscaler
from planner.autoscaler.versions import HPA_SCALE_TO_ZERO, ClusterVersions
from planner.dynamics.cold_start import pods_per_node
from planner.dynamics.grace import DEFAULT_TERMINATION_GRACE_PERIOD_S, drain_time_s, plan_grace
from planner.readers.workload import (
    WHOLE_PLACEHOLDER,
    ManifestSet,
    ReadProblem,
    Workload,
    YamlDocument,
    find_scale_target,
    format_path,
    target_in_documents,
)
from planner.simulate.fleet import FleetSpec
from planner.vllm.promql import LEGACY_ONLY, SIGNALS

__all__ = [
    "DEFAULT_ITL_MS",
    "DEFAULT_MAX_NUM_SEQS",
    "DEFAULT_SCALE_DOWN_WINDOW_S",
    "DEFAULT_WARMUP_S",
    "RULES",
    "SEVERITIES",
    "Finding",
    "LintSettings",
    "ReplicaSupply",
    "Rule",
    "Signal",
    "exit_status",
    "lint",
    "signal_kinds",
    "signals_of",
]

DEFAULT_WARMUP_S = 90.0
"""Pod scheduled to Ready for a vLLM replica on a warm node (W35: about 90 s). [s]"""
DEFAULT_ITL_MS = 50.0
"""Inter-token latency while draining when none is given (W37's 50 ms). [ms]"""
DEFAULT_MAX_NUM_SEQS = 256
"""vLLM V1's ``--max-num-seqs`` for the OpenAI server on GPUs under 70 GiB and the A100."""
DEFAULT_SCALE_DOWN_WINDOW_S = int(DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S)
"""The HPA's scale-down stabilization window when ``behavior`` leaves it unset. [s]"""

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Rule:
    """A lint rule: its stable id, default severity and one-line summary."""

    id: str
    severity: str
    summary: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule("gpu-util-trigger", "warning", "the fleet scales on GPU utilization"),
        Rule("waiting-only-trigger", "warning", "the only signal is a waiting-queue count"),
        Rule("avg-with-averagevalue", "error", "a per-pod average under an AverageValue target"),
        Rule("ignore-null-values", "warning", 'a Prometheus trigger without ignoreNullValues: "false"'),
        Rule("deprecated-metric", "warning", "a vLLM metric name current servers no longer export"),
        Rule("multi-trigger-or", "warning", "several KEDA triggers without scalingModifiers combine as OR"),
        Rule("short-scale-down-window", "warning", "scale-down stabilization shorter than the warmup, or 0"),
        Rule("min-zero-pod-metric", "error", "scale to zero on a signal only the pods serve"),
        Rule(
            "hpa-min-zero-version", "warning", "an HPA minReplicas of 0 the cluster's Kubernetes refuses or holds at 0"
        ),
        Rule("tolerance-dropped", "info", "a behavior tolerance the cluster's Kubernetes or KEDA drops"),
        Rule("short-grace", "error", "grace period unset or shorter than the longest generation"),
        Rule("shutdown-timeout-vs-grace", "warning", "vLLM --shutdown-timeout missing, 0, or not below the grace"),
        Rule("threshold-at-batch-limit", "error", "a per-replica in-flight threshold at or above --max-num-seqs"),
        Rule("no-max", "warning", "no maxReplicaCount"),
        Rule("unsubstituted-placeholder", "error", "a ${VAR} or V_NAME placeholder left in the manifest"),
        Rule("cpu-trigger", "warning", "an LLM server scaled on CPU usage"),
        Rule(
            "kv-threshold-out-of-range", "error", "a KV-usage threshold above 1, which the 0-1 fraction never reaches"
        ),
        Rule("unaggregated-query", "error", "a query that returns one series per pod"),
        Rule("misplaced-metric-type", "warning", "metricType under metadata, where KEDA ignores it"),
        Rule("missing-readiness-probe", "warning", "a vLLM container without a readiness probe"),
        Rule("scale-target-not-found", "info", "scaleTargetRef names no workload in the files given"),
        Rule("metric-not-exported", "error", "a query names a vLLM metric the server's scrape does not export"),
        Rule("schema-violation", "error", "a field the Kubernetes or KEDA schema rejects"),
        Rule("unreadable-document", "error", "a file or document that cannot be read; the rest is still reviewed"),
        Rule("underscore-metric-name", "error", "a query on vllm_... where vLLM exports vllm:..."),
        Rule("gpu-memory-trigger", "warning", "the fleet scales on GPU memory used, which vLLM pre-allocates"),
        Rule("hpa-and-scaledobject", "error", "an HPA and a ScaledObject scale the same workload"),
        Rule("latency-quantile-averagevalue", "error", "a latency quantile under an AverageValue target"),
        Rule("unscoped-query", "warning", "a query whose selector does not single out the target's pods or model"),
        Rule("min-replicas-over-node-quota", "error", "the minimum's pods do not fit in the node quota"),
        Rule("max-replicas-over-node-quota", "warning", "the maximum asks for pods the node quota cannot hold"),
        Rule("cron-invalid-timezone", "error", "a cron trigger without a timezone, or with one Go cannot load"),
        Rule("cron-invalid-schedule", "error", "a cron trigger KEDA cannot build: start, end or desiredReplicas"),
        Rule("cron-overlap", "warning", "cron windows that overlap with different desiredReplicas"),
        Rule("cron-above-max", "error", "a cron desiredReplicas above maxReplicaCount"),
    )
}


@dataclass(frozen=True)
class Finding:
    """One problem found in one document.

    Attributes
    ----------
    rule, severity : str
    file : str
    document : int
        1-based document number in the file.
    path : str
        YAML path, e.g. ``spec.triggers[0].metadata.query``.
    line : int
        1-based line of that path.
    why : str
        One sentence: what goes wrong.
    fix : str
        A concrete change.
    template : str
        Helm template the document was rendered from, if the file says.
    """

    rule: str
    severity: str
    file: str
    document: int
    path: str
    line: int
    why: str
    fix: str
    template: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ReplicaSupply:
    """What a fleet file's node pool says about where a replica's GPUs come from.

    Attributes
    ----------
    gpus_per_replica, gpus_per_node : int
    max_nodes : int or None
        The node quota; ``None``: none.
    warm_time_to_ready_s : float
        A new pod on a node that has a free GPU and the image. [s]
    cold_time_to_ready_s : float
        A new pod that needs a new node: the node autoscaler's delay, provisioning, node init,
        image pull, weights and warmup. [s]
    empty_node_kept_s : float
        How long the node autoscaler keeps an empty node. [s]
    comeback_s : float
        How long a replica removed in a dip takes to come back at the earliest
        (:attr:`planner.simulate.fleet.FleetSpec.comeback_s`). [s]
    source : str
        The fleet file, named in findings.
    """

    gpus_per_replica: int
    gpus_per_node: int
    max_nodes: int | None
    warm_time_to_ready_s: float
    cold_time_to_ready_s: float
    empty_node_kept_s: float
    comeback_s: float
    source: str = "the fleet file"

    @classmethod
    def from_fleet(cls, fleet: FleetSpec) -> ReplicaSupply | None:
        """The supply of a fleet with a ``nodes:`` section; ``None`` without one."""
        nodes = fleet.nodes
        if nodes is None:
            return None
        return cls(
            gpus_per_replica=fleet.gpus_per_replica,
            gpus_per_node=nodes.gpus_per_node,
            max_nodes=nodes.max_nodes,
            warm_time_to_ready_s=fleet.time_to_ready_s(needs_node=False, image_cached=True),
            cold_time_to_ready_s=fleet.time_to_ready_s(needs_node=True, image_cached=False),
            empty_node_kept_s=nodes.empty_node_kept_s,
            comeback_s=fleet.comeback_s,
            source=fleet.source or "the fleet file",
        )

    @property
    def max_pods(self) -> int | None:
        """Most replicas the quota holds, packed ``pods_per_node`` to a node; ``None``: no quota."""
        if self.max_nodes is None:
            return None
        return self.max_nodes * self.pods_per_node

    @property
    def pods_per_node(self) -> int:
        return pods_per_node(self.gpus_per_node, self.gpus_per_replica)


@dataclass(frozen=True)
class LintSettings:
    """Numbers the rules compare against; ``None`` means "read it from the manifests".

    Attributes
    ----------
    warmup_s : float
        New pod to Ready. [s]
    max_tokens : float or None
        Largest ``max_tokens`` the service accepts. [tokens]
    itl_ms : float or None
        Inter-token latency while draining. [ms]
    max_num_seqs : int or None
        vLLM ``--max-num-seqs`` of the replicas. [requests]
    exported_metrics : frozenset of str or None
        ``vllm:`` metric families a server's ``/metrics`` scrape exports
        (:func:`planner.readers.metrics.read_metrics_scrape`); ``None`` skips ``metric-not-exported``.
    versions : ClusterVersions
        Kubernetes and KEDA versions the cluster runs.
    supply : ReplicaSupply or None
        The node pool and cold-start phases of a fleet file (:meth:`ReplicaSupply.from_fleet`); with
        it, ``short-scale-down-window`` uses the time a removed replica takes to come back instead of
        ``warmup_s``, and the node-quota rules run.
    """

    warmup_s: float = DEFAULT_WARMUP_S
    max_tokens: float | None = None
    itl_ms: float | None = None
    max_num_seqs: int | None = None
    exported_metrics: frozenset[str] | None = None
    versions: ClusterVersions = field(default_factory=ClusterVersions)
    supply: ReplicaSupply | None = None


_KIND_PATTERNS = (
    ("waiting", re.compile(r"num_requests_waiting|queue_size|queue_length|queue_depth|pending_requests", re.I)),
    ("running", re.compile(r"num_requests_running|requests?_running|inflight|in_flight", re.I)),
    ("kv", re.compile(r"(kv|gpu|cpu)_cache_usage", re.I)),
    ("gpu_util", re.compile(r"gpu_util|dcgm_fi_dev_gpu_util|duty_cycle", re.I)),
    ("cpu", re.compile(r"container_cpu_usage|process_cpu_seconds|cpu_usage", re.I)),
)
# Metrics scraped from the serving pods themselves (vLLM, cAdvisor, DCGM), gone at zero replicas.
_POD_SERVED = re.compile(r"vllm[:_]|container_cpu|container_memory|dcgm_|gpu_cache_usage|kv_cache_usage", re.I)
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_NAME_PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9]*_[A-Z0-9_]+")
_BARE_SELECTOR = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*\s*(\{[^{}]*\})?$")
_AVG_TOP = re.compile(r"^\(?\s*avg\s*(\(|by\b|without\b)", re.I)
_SUM_OVER_COUNT = re.compile(r"^\(?\s*sum\b.*\)\s*/\s*\(?\s*count\b", re.I | re.S)


def signal_kinds(text: str) -> frozenset[str]:
    """What a query or metric name measures: ``waiting``, ``running``, ``kv``, ``gpu_util``, ``cpu`` or ``other``.

    Examples
    --------
    >>> sorted(signal_kinds("sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"))
    ['running', 'waiting']
    """
    kinds = frozenset(kind for kind, pattern in _KIND_PATTERNS if pattern.search(text))
    return kinds or frozenset({"other"})


@dataclass(frozen=True)
class Signal:
    """One scaling input of an autoscaler: a KEDA trigger or an HPA metric.

    Attributes
    ----------
    text : str
        The query (KEDA Prometheus) or metric name (HPA, KEDA cpu/memory).
    path : tuple
        YAML path of the trigger or metric.
    source : str
        ``prometheus``, ``cpu``, ... for KEDA; the HPA metric type otherwise.
    per_replica : bool
        An ``AverageValue`` target: a per-replica threshold (for an External metric the HPA
        proposes ``ceil(value / threshold)`` whatever the pod count).
    threshold : float
        In the metric's own units.
    is_query : bool
        ``text`` is a query (a KEDA prometheus query, an external scaler's ``metricQuery``), not a name.
    """

    text: str
    path: tuple
    source: str
    per_replica: bool
    threshold: float
    is_query: bool = False

    @property
    def kinds(self) -> frozenset[str]:
        return signal_kinds(self.text)


def signals_of(autoscaler: Autoscaler) -> tuple[Signal, ...]:
    """The signals an autoscaler scales on, in manifest order."""
    so = autoscaler.scaled_object
    if so is not None:
        signals = []
        for trigger in so.triggers:
            is_query = bool(trigger.query) and trigger.type in ("prometheus", "external", "external-push")
            text = trigger.query if trigger.type == "prometheus" or is_query else trigger.type
            per_replica = trigger.metric_type == AVERAGE_VALUE and not so.is_using_modifiers
            signals.append(
                Signal(
                    text,
                    ("spec", "triggers", trigger.index),
                    trigger.type,
                    per_replica,
                    trigger.threshold,
                    is_query or trigger.type == "prometheus",
                )
            )
        return tuple(signals)
    signals = []
    for index, metric in enumerate(autoscaler.hpa.metrics):
        target = metric.target
        milli = target.average_value_milli if target.average_value_milli is not None else target.value_milli
        threshold = milli / 1000 if milli is not None else float(target.average_utilization_pct or 0)
        per_replica = metric.type == PODS or (metric.type in (OBJECT, EXTERNAL) and target.type == AVERAGE_VALUE)
        signals.append(Signal(metric.name, ("spec", "metrics", index), metric.type, per_replica, threshold))
    return tuple(signals)


class _Context:
    """Builds findings for one document with the line of each path."""

    def __init__(self, document: YamlDocument):
        self.document = document

    def finding(self, rule: str, path: tuple, why: str, fix: str, severity: str | None = None) -> Finding:
        return Finding(
            rule=rule,
            severity=severity or RULES[rule].severity,
            file=self.document.source,
            document=self.document.number,
            path=format_path(path),
            line=self.document.line(path),
            why=why,
            fix=fix,
            template=self.document.template,
        )


def _get(data, path: tuple):
    for part in path:
        if isinstance(part, int):
            if not isinstance(data, list) or part >= len(data):
                return None
        elif not isinstance(data, Mapping):
            return None
        data = data[part] if isinstance(part, int) else data.get(part)
    return data


def _min_replicas(autoscaler: Autoscaler) -> tuple[int, tuple, bool]:
    """(minimum, path, written) of an autoscaler."""
    so = autoscaler.scaled_object
    if so is not None:
        return so.effective_min_replica_count, ("spec", "minReplicaCount"), so.min_replica_count is not None
    return autoscaler.hpa.effective_min_replicas, ("spec", "minReplicas"), autoscaler.hpa.min_replicas is not None


def _behavior_path(autoscaler: Autoscaler) -> tuple:
    if autoscaler.scaled_object is not None:
        return ("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior")
    return ("spec", "behavior")


# --- autoscaler rules -------------------------------------------------------------------------------


def _gpu_util_trigger(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if "gpu_util" in signal.kinds:
            yield ctx.finding(
                "gpu-util-trigger",
                signal.path,
                "GPU utilization reads near 100 % as soon as any batch runs, so it says nothing about how "
                "many requests a replica can still take and either pins the fleet at the maximum or never acts "
                "(W6, W7).",
                "Scale on requests in flight per replica (vllm:num_requests_running + vllm:num_requests_waiting) "
                "with a threshold below the load-test knee; see `planner knee`.",
            )


def _waiting_only(ctx, autoscaler, signals, settings, target):
    if signals and all(signal.kinds == {"waiting"} for signal in signals):
        yield ctx.finding(
            "waiting-only-trigger",
            signals[0].path,
            "A waiting-queue count is zero whenever the replicas keep up, so the autoscaler recommends the "
            "minimum, removes replicas, and the queue re-forms: the fleet flaps at a steady arrival rate (W35).",
            "Scale on running + waiting per replica (sum(vllm:num_requests_running) + "
            "sum(vllm:num_requests_waiting), AverageValue) or add a KV-usage trigger with scalingModifiers.",
        )


def _avg_with_average_value(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if signal.source != "prometheus" or not signal.per_replica:
            continue
        query = signal.text.strip()
        if _AVG_TOP.match(query) or _SUM_OVER_COUNT.match(query):
            yield ctx.finding(
                "avg-with-averagevalue",
                (*signal.path, "metadata", "query"),
                "The query already divides by the pods and AverageValue reads the value as a fleet total "
                "(ceil(value / threshold) replicas), so "
                "the autoscaler sees 1/N of the load and under-scales (W10).",
                "Use the fleet total, sum(...), under AverageValue, or keep avg(...) and set metricType: Value.",
            )


def _ignore_null_values(ctx, autoscaler, signals, settings, target):
    so = autoscaler.scaled_object
    if so is None:
        return
    for trigger in so.triggers:
        if trigger.type == "prometheus" and trigger.ignore_null_values:
            path = ("spec", "triggers", trigger.index, "metadata")
            if _get(ctx.document.data, (*path, "ignoreNullValues")) is not None:
                path = (*path, "ignoreNullValues")
            yield ctx.finding(
                "ignore-null-values",
                path,
                "With ignoreNullValues left at true an empty query result (a renamed metric, a broken scrape) "
                "reads as 0, and KEDA scales the fleet down instead of reporting an error.",
                'Add ignoreNullValues: "false" to the trigger\'s metadata, and a fallback for the replicas '
                "to hold while the metric is missing.",
            )


_DEPRECATED = tuple(
    (name, re.compile(r"(?<![A-Za-z0-9_])(?:vllm[:_])?" + re.escape(name.split(":", 1)[1]) + r"(?![A-Za-z0-9_])"))
    for name in [old for signal in SIGNALS for old in signal.deprecated] + list(LEGACY_ONLY)
)
_CURRENT = {old: signal.current for signal in SIGNALS for old in signal.deprecated}


def _deprecated_metric(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        for name, pattern in _DEPRECATED:
            if pattern.search(signal.text):
                current = _CURRENT.get(name)
                fix = (
                    f"Query {current} instead (check the name with `planner metrics` on a scrape)."
                    if current
                    else "Drop the trigger: the V1 engine has no swapping, so the metric is gone."
                )
                path = signal.path + (("metadata", "query") if signal.source == "prometheus" else ())
                yield ctx.finding(
                    "deprecated-metric",
                    path,
                    f"{name} is an old vLLM name that current servers hide or never export, so the trigger "
                    "reads nothing.",
                    fix,
                )


def _multi_trigger_or(ctx, autoscaler, signals, settings, target):
    # KEDA only: a plain HPA has no other way to combine metrics, and pairing KV usage with an
    # unbounded signal there is the recommended design (the max makes KV a floor).
    so = autoscaler.scaled_object
    # A cron trigger is a schedule floor (OR is its point); with at most one replica the HPA has nothing to
    # choose and KEDA activates on any trigger by design.
    metric_signals = [signal for signal in signals if signal.source != "cron"]
    if (
        so is not None
        and len(metric_signals) > 1
        and not so.is_using_modifiers
        and not (so.max_replica_count is not None and so.max_replica_count <= 1)
    ):
        path = ("spec", "triggers")
        yield ctx.finding(
            "multi-trigger-or",
            path,
            f"The {len(metric_signals)} signals combine as OR: the HPA takes the largest proposal, so any one of them "
            "scales up and all must fall before it scales down.",
            "Keep the one leading signal, or combine the triggers explicitly with "
            "advanced.scalingModifiers.formula (name each trigger).",
        )


def _short_scale_down_window(ctx, autoscaler, signals, settings, target):
    behavior = autoscaler.hpa.behavior
    rules = behavior.scale_down if behavior is not None else None
    window = rules.stabilization_window_seconds if rules is not None else None
    if window is None:
        return  # the default 300 s window applies
    supply = settings.supply
    warmup = settings.warmup_s if supply is None else supply.comeback_s
    if window == 0 or window < warmup:
        path = (*_behavior_path(autoscaler), "scaleDown", "stabilizationWindowSeconds")
        if supply is None:
            takes = f"the {warmup:g} s a new replica takes to warm up"
            source = "pass --warmup-s with yours"
        elif supply.empty_node_kept_s > 0:
            takes = (
                f"the {warmup:g} s a removed replica takes to come back on its node while the node autoscaler "
                f"keeps it ({supply.empty_node_kept_s:g} s; {supply.cold_time_to_ready_s:g} s on a new node after)"
            )
            source = f"from {supply.source}"
        else:
            takes = (
                f"the {warmup:g} s a removed replica takes to come back on a new node (the node autoscaler "
                "removes an empty node at once)"
            )
            source = f"from {supply.source}"
        yield ctx.finding(
            "short-scale-down-window",
            path,
            f"A {window} s scale-down window is shorter than {takes}, so a dip removes replicas that the next "
            "burst must wait a whole warmup to get back.",
            f"Set stabilizationWindowSeconds to at least the warmup ({math.ceil(warmup)} s; {source}) plus the "
            "usual gap between bursts, and remove one pod per period.",
        )


def _max_replicas(autoscaler: Autoscaler) -> tuple[int, tuple]:
    """(maximum, path) of an autoscaler."""
    if autoscaler.scaled_object is not None:
        return autoscaler.hpa.max_replicas, ("spec", "maxReplicaCount")
    return autoscaler.hpa.max_replicas, ("spec", "maxReplicas")


def _quota_text(supply: ReplicaSupply, fit: int) -> str:
    return (
        f"{supply.source} holds {supply.max_nodes} node(s) of {supply.gpus_per_node} GPU(s), so at most {fit} "
        f"replica(s) of {supply.gpus_per_replica} GPU(s)"
    )


def _min_replicas_over_node_quota(ctx, autoscaler, signals, settings, target):
    supply = settings.supply
    fit = supply.max_pods if supply is not None else None
    minimum, path, _ = _min_replicas(autoscaler)
    if supply is None or fit is None or isinstance(_get(ctx.document.data, path), str) or minimum <= fit:
        return
    yield ctx.finding(
        "min-replicas-over-node-quota",
        path,
        f"A minimum of {minimum} replicas does not fit: {_quota_text(supply, fit)}. The other "
        f"{minimum - fit} stay Pending for good, count in status.replicas, and a rollout's surge pods wait too.",
        f"Lower the minimum to {fit} or less, or raise the node quota to "
        f"{math.ceil(minimum / supply.pods_per_node)} nodes (max_nodes in the fleet file, and the "
        "node pool's limit or the cloud quota behind it).",
    )


def _max_replicas_over_node_quota(ctx, autoscaler, signals, settings, target):
    supply = settings.supply
    fit = supply.max_pods if supply is not None else None
    maximum, path = _max_replicas(autoscaler)
    minimum, _, _ = _min_replicas(autoscaler)
    if supply is None or fit is None or maximum <= fit or minimum > fit:
        return  # over the minimum too: min-replicas-over-node-quota says it
    if isinstance(_get(ctx.document.data, path), str):
        return
    yield ctx.finding(
        "max-replicas-over-node-quota",
        path,
        f"The autoscaler may ask for {maximum} replicas but {_quota_text(supply, fit)}: at a peak the other "
        f"{maximum - fit} wait Pending and serve nothing, while the fleet looks scaled up and the node "
        "autoscaler retries against the quota.",
        f"Set the maximum to {fit}, the replicas the quota holds, or raise the quota to "
        f"{math.ceil(maximum / supply.pods_per_node)} nodes.",
    )


def _min_zero_pod_metric(ctx, autoscaler, signals, settings, target):
    minimum, path, written = _min_replicas(autoscaler)
    if minimum != 0 or not signals or isinstance(_get(ctx.document.data, path), str):
        return  # a placeholder minimum is unknown, reported by unsubstituted-placeholder
    if all(
        signal.source in (PODS, RESOURCE, CONTAINER_RESOURCE, "cpu", "memory") or _POD_SERVED.search(signal.text)
        for signal in signals
    ):
        default = "" if written else " (unset: KEDA's default is 0)"
        back = (
            "the trigger never activates"
            if autoscaler.scaled_object is not None
            else "the HPA, even with Kubernetes 1.37's scale to zero, has no value to scale up on"
        )
        yield ctx.finding(
            "min-zero-pod-metric",
            path,
            f"The minimum is 0{default} but every signal is scraped from the serving pods, so at zero replicas "
            f"the query is empty, {back}, and the fleet never comes back.",
            "Set the minimum to 1, or activate on a signal that exists without pods (a gateway or queue metric).",
        )


def _hpa_min_zero_version(ctx, autoscaler, signals, settings, target):
    # A plain HPA at minReplicas 0 (KEDA scales 0 <-> 1 itself, on any Kubernetes).
    minimum, path, _ = _min_replicas(autoscaler)
    if autoscaler.scaled_object is not None or minimum != 0:
        return
    versions = settings.versions
    k8s = versions.kubernetes
    if not versions.hpa_scale_to_zero_by_default:
        where = "kube-apiserver and kube-controller-manager" if versions.scaled_to_zero_condition else "kube-apiserver"
        yield ctx.finding(
            "hpa-min-zero-version",
            path,
            f"On Kubernetes {k8s} HPAScaleToZero is alpha and off by default (beta and on from "
            f"{HPA_SCALE_TO_ZERO.on_by_default}), so the API server refuses minReplicas: 0.",
            f"Enable the HPAScaleToZero feature gate on {where}, or set minReplicas to 1.",
        )
    elif versions.scaled_to_zero_condition:
        yield ctx.finding(
            "hpa-min-zero-version",
            path,
            f"On Kubernetes {k8s} the HPA scales up from 0 only a workload it scaled to 0 itself (its "
            "ScaledToZero condition is True); a workload created or scaled by hand to 0 replicas stays at 0.",
            "Start the workload at 1 or more replicas and let the HPA take it to 0.",
            severity="info",
        )


def _tolerance_dropped(ctx, autoscaler, signals, settings, target):
    behavior = autoscaler.hpa.behavior
    if behavior is None:
        return
    kind = "ScaledObject" if autoscaler.scaled_object is not None else "HorizontalPodAutoscaler"
    dropped = settings.versions.tolerance_dropped(kind)
    if dropped is None:
        return
    for direction, rules in (("scaleUp", behavior.scale_up), ("scaleDown", behavior.scale_down)):
        if rules is not None and rules.tolerance is not None:
            yield ctx.finding(
                "tolerance-dropped",
                (*_behavior_path(autoscaler), direction, "tolerance"),
                f"The {direction} tolerance of {rules.tolerance:g} has no effect here: {dropped}; "
                "the cluster's 10 % applies.",
                "Upgrade, enable the gate, or drop the field and size the target for a 10 % band "
                "(pass --kubernetes-version / --keda-version if these are not your cluster's).",
            )


def _threshold_at_batch_limit(ctx, autoscaler, signals, settings, target):
    limit, origin = settings.max_num_seqs, "--max-num-seqs given"
    if limit is None and target is not None:
        limits = [s.max_num_seqs for s in target.servers if s.max_num_seqs is not None]
        if limits:
            limit, origin = min(limits), f"--max-num-seqs of {target.kind} {target.name}"
    if limit is None:
        limit, origin = DEFAULT_MAX_NUM_SEQS, "vLLM's default --max-num-seqs"
    for signal in signals:
        kinds = signal.kinds
        if not signal.per_replica or "running" not in kinds or not kinds <= {"running", "waiting"}:
            continue
        if signal.threshold >= limit:
            severity = "error" if kinds == {"running"} else "warning"
            why = (
                f"A replica never runs more than {limit} requests ({origin}), so a running target of "
                f"{signal.threshold:g} per replica is never exceeded and the fleet does not scale up."
                if severity == "error"
                else f"The in-flight target {signal.threshold:g} per replica is at or above the batch limit {limit} "
                f"({origin}), so replicas are added only after requests already queue."
            )
            path = signal.path + (("metadata", "threshold") if signal.source == "prometheus" else ("pods", "target"))
            yield ctx.finding(
                "threshold-at-batch-limit",
                path,
                why,
                f"Set the threshold below {limit}, at the load-test knee times (1 - headroom); see `planner knee`.",
                severity=severity,
            )


def _no_max(ctx, autoscaler, signals, settings, target):
    so = autoscaler.scaled_object
    if so is not None and so.max_replica_count is None:
        yield ctx.finding(
            "no-max",
            ("spec",),
            "Without maxReplicaCount KEDA lets the HPA grow to 100 replicas, and a queue-depth signal "
            "overshoots after slow warmups (W5).",
            "Set maxReplicaCount to your GPU quota divided by the GPUs per replica.",
        )


def _cpu_trigger(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if (signal.text == "cpu" and signal.source in (RESOURCE, CONTAINER_RESOURCE, "cpu")) or "cpu" in signal.kinds:
            yield ctx.finding(
                "cpu-trigger",
                signal.path,
                "An LLM server's load is on the accelerator; its CPU use barely moves with requests in flight, "
                "so the fleet does not follow demand.",
                "Scale on requests in flight per replica from vLLM's metrics (running + waiting, AverageValue).",
            )


def _kv_threshold(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if signal.kinds == {"kv"} and signal.threshold > 1.0:
            path = signal.path + (("metadata", "threshold") if signal.source == "prometheus" else ())
            yield ctx.finding(
                "kv-threshold-out-of-range",
                path,
                f"KV-cache usage is a fraction from 0 to 1 (per pod, or per replica under AverageValue), so a "
                f"threshold of {signal.threshold:g} is never reached and the fleet never scales up.",
                "Write the threshold as a fraction, e.g. 0.8 for 80 %.",
            )


def _unaggregated_query(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        # One series per pod only for what the pods serve; a controller's or gateway's gauge is one series.
        if (
            signal.source == "prometheus"
            and _BARE_SELECTOR.match(signal.text.strip())
            and _POD_SERVED.search(signal.text)
        ):
            yield ctx.finding(
                "unaggregated-query",
                (*signal.path, "metadata", "query"),
                "The query is a bare selector that returns one series per pod, and KEDA's Prometheus scaler "
                "fails on a result with more than one element.",
                f"Aggregate it: sum({signal.text.strip()}) for a fleet total under AverageValue.",
            )


def _misplaced_metric_type(ctx, autoscaler, signals, settings, target):
    so = autoscaler.scaled_object
    if so is None:
        return
    for index, trigger in enumerate(_get(ctx.document.data, ("spec", "triggers")) or []):
        if (
            isinstance(trigger, Mapping)
            and isinstance(trigger.get("metadata"), Mapping)
            and "metricType" in trigger["metadata"]
            and "metricType" not in trigger
        ):
            yield ctx.finding(
                "misplaced-metric-type",
                ("spec", "triggers", index, "metadata", "metricType"),
                "KEDA reads metricType from the trigger itself, not from its metadata, so this one is ignored "
                "and the trigger uses AverageValue.",
                "Move metricType up one level, beside type and metadata.",
            )


def _scale_target_not_found(ctx, autoscaler, signals, settings, target, workloads=(), documents=()):
    # A target that is in the files but runs no vLLM (a gateway, Ollama) is found, just not reviewed.
    if _is_placeholder_value(ctx.document, ("spec", "scaleTargetRef", "name")):
        return  # unsubstituted-placeholder says it
    if target is None and workloads and not target_in_documents(autoscaler, ctx.document, documents):
        kind, name = autoscaler.hpa.scale_target_kind, autoscaler.hpa.scale_target_name
        yield ctx.finding(
            "scale-target-not-found",
            ("spec", "scaleTargetRef"),
            f"scaleTargetRef names {kind} {name!r}, which is in none of the files given, so its grace period "
            "and --max-num-seqs are not checked against this autoscaler.",
            "Lint the autoscaler together with the workload it scales, or fix the kind and name.",
        )


_VLLM_NAME = re.compile(r"vllm:[A-Za-z0-9_:]+")
_SAMPLE_SUFFIXES = ("_bucket", "_total", "_count", "_sum", "_created")


def _family(name: str) -> str:
    """The metric family of a sample name, as the scrape parser names it (``_total`` etc. removed)."""
    for suffix in _SAMPLE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _metric_not_exported(ctx, autoscaler, signals, settings, target):
    exported = settings.exported_metrics
    if exported is None:
        return
    for signal in signals:
        if signal.source != "prometheus":
            continue
        missing = sorted(
            {name for name in _VLLM_NAME.findall(signal.text) if name not in exported and _family(name) not in exported}
        )
        if missing:
            yield ctx.finding(
                "metric-not-exported",
                (*signal.path, "metadata", "query"),
                f"The server's scrape has no {', '.join(missing)}, so the query returns nothing for it "
                "(a renamed, hidden or misspelt metric).",
                "Use a name the scrape exports; `planner metrics SCRAPE` lists them with matching PromQL.",
            )


# Metric names as Prometheus stores them: vLLM and SGLang export with a colon (vllm:num_requests_running);
# an underscore spelling exists only where something renamed it (an OTel pipeline, an adapter's `as`).
_UNDERSCORE_NAME = re.compile(r"(?<![\w:])(vllm|sglang)_([a-z][a-z0-9_]*)")
_LABEL_BLOCK = re.compile(r"\{[^{}]*\}|\"[^\"]*\"|'[^']*'")


def _metric_names_outside_labels(query: str) -> str:
    return _LABEL_BLOCK.sub(" ", query)


def _underscore_metric_name(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if not signal.is_query:
            continue
        names = sorted(
            {match.group(0) for match in _UNDERSCORE_NAME.finditer(_metric_names_outside_labels(signal.text))}
        )
        if names:
            fixed = ", ".join(name.replace("_", ":", 1) for name in names)
            minimum, _, _ = _min_replicas(autoscaler)
            zero = " With a minimum of 0 the fleet, once at zero, never comes back." if minimum == 0 else ""
            yield ctx.finding(
                "underscore-metric-name",
                (*signal.path, "metadata", "query"),
                f"The query reads {', '.join(names)}, but the server exports {fixed}; a standard Prometheus "
                "scrape stores the colon name, so the query returns nothing and the trigger reads 0." + zero,
                f"Query {fixed} (check with `planner metrics` on a scrape); keep the underscore only if your "
                "pipeline renames metrics, and then say so beside the trigger.",
            )


_GPU_MEMORY = re.compile(r"dcgm_fi_dev_fb_(used|free)|(gpu|nvidia|nvml)\w*_mem(ory)?_?\w*(used|usage|util|free)", re.I)


def _gpu_memory_trigger(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if _GPU_MEMORY.search(signal.text):
            yield ctx.finding(
                "gpu-memory-trigger",
                (*signal.path, "metadata", "query") if signal.is_query else signal.path,
                "vLLM allocates --gpu-memory-utilization (0.9 by default) of the GPU's memory for weights and KV "
                "cache at start, so memory used reads about 90 % on an idle replica and the fleet runs to its maximum.",
                "Scale on requests in flight per replica (vllm:num_requests_running + vllm:num_requests_waiting), "
                "or on KV-cache usage (vllm:kv_cache_usage_perc), which does follow load.",
            )


_QUANTILE = re.compile(
    r"histogram_quantile\s*\(|\bquantile(_over_time)?\s*\(|quantile\s*=~?\s*\"?0?\.\d+"
    r"|_p(50|75|90|95|99|999)(?![0-9])|latency_p\d+",
    re.I,
)


def _latency_quantile_average_value(ctx, autoscaler, signals, settings, target):
    for signal in signals:
        if not signal.per_replica or signal.source == PODS or not _QUANTILE.search(signal.text):
            continue
        path = (*signal.path, "metadata", "query") if signal.is_query else signal.path
        yield ctx.finding(
            "latency-quantile-averagevalue",
            path,
            f"A latency quantile is not a total to share out: under AverageValue the HPA wants "
            f"ceil(p95 / {signal.threshold:g}) replicas whatever the current count, so a slow p95 asks for "
            "more replicas than help and a fast one removes replicas the load needs.",
            "Use metricType: Value for a latency target, or better scale on requests in flight per replica "
            "(AverageValue on the fleet sum) and keep latency as the SLO you check.",
        )


# --- query selectors ---------------------------------------------------------------------------------

# Metrics a model server's pods export, one series per pod (or per GPU): a query on them must say whose.
_SERVER_METRIC = re.compile(r"^(vllm[:_]|sglang[:_]|tgi_|dcgm_fi_)", re.I)
_SELECTOR = re.compile(r"(?<![\w:.\\\"'])([A-Za-z_:][\w:]*)\s*(\{[^{}]*\})?")
_MATCHER = re.compile(r"([A-Za-z_][\w]*)\s*(=~|!~|!=|=)\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}\s]+)")
_NOT_IDENTIFYING = frozenset(
    {
        "le",
        "quantile",
        "engine",
        "finished_reason",
        "__name__",
        "status",
        "code",
        "method",
        "handler",
        "gpu",
        "device",
        "uuid",
        "modelname",
        "hostname",
    }
)
_NAMESPACE_LABELS = frozenset(
    {"namespace", "k8s_namespace", "k8s_namespace_name", "kubernetes_namespace", "exported_namespace"}
)
_MODEL_LABELS = frozenset({"model_name", "model", "served_model_name", "model_id"})
_MATCH_ALL = frozenset({".*", ".+", ""})


def _matchers(block: str | None) -> list[tuple[str, str, str]]:
    if not block:
        return []
    return [(label, op, value.strip("\"'")) for label, op, value in _MATCHER.findall(block)]


def _server_selectors(query: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """(metric, matchers) of every selector in a query on a model server's metric."""
    found = []
    for match in _SELECTOR.finditer(query):
        name, block = match.group(1), match.group(2)
        if _SERVER_METRIC.match(name):
            found.append((name, _matchers(block)))
    for block in re.findall(r"(?<![\w:])\{[^{}]*__name__\s*=~?\s*\"(?:vllm|sglang)[^{}]*\}", query):
        found.append(("{__name__}", _matchers(block)))
    return found


def _served_names(workload: Workload) -> set[str]:
    """Model names the target is known to serve: its ``--served-model-name`` (vLLM's ``model_name`` label),
    or KServe's model name. Empty when only ``--model`` is given: a relabelling pipeline often names the
    model there, so a model matcher is then taken as the team's own scope."""
    names = set()
    for server in workload.servers:
        for flag in ("--served-model-name", "--model-name"):
            value = server.flags.get(flag)
            if value:
                names.update(value.split())
    if workload.kind in ("InferenceService", "LLMInferenceService"):
        names.add(workload.name)
        model = _get(workload.document.data, ("spec", "model", "name"))
        if isinstance(model, str):
            names.add(model)
    return {name for name in names if name and not re.search(r"\$|\{\{|__[A-Z]", name)}


def _value_matches(op: str, value: str, candidates: set[str]) -> bool:
    if op == "=":
        return value in candidates
    try:
        return any(re.fullmatch(value, candidate) for candidate in candidates)
    except re.error:
        return True


def _selector_problem(matchers, target: Workload | None, workloads) -> str:
    """Why a selector does not single out the target ('' when it does)."""
    identifying = [
        (label, op, value)
        for label, op, value in matchers
        if op in ("=", "=~") and label not in _NOT_IDENTIFYING and value not in _MATCH_ALL
    ]
    if not identifying:
        return (
            "has no label matcher, so it reads every server in the cluster"
            if not matchers
            else "matches no label that picks a workload or model, so it reads every server in the cluster"
        )
    if target is None:
        return ""
    served = _served_names(target)
    others = [w for w in workloads if w is not target]
    for label, op, value in identifying:
        if label in _MODEL_LABELS:
            if served and not _value_matches(op, value, served):
                return (
                    f'matches {label}{op}"{value}" but the target {target.kind} {target.name} serves '
                    f"{', '.join(sorted(served))}"
                )
            return ""
        if label not in _NAMESPACE_LABELS:
            return ""  # a pod, deployment, job or app label: the team's own choice of scope
    namespaces = {value for label, op, value in identifying if label in _NAMESPACE_LABELS}
    # A workload written without a namespace goes wherever it is applied: it is not counted as sharing one.
    sharing = sorted(
        {
            f"{w.kind} {w.name}"
            for w in others
            if w.namespace and any(_value_matches("=", ns, {w.namespace}) for ns in namespaces)
        }
    )
    if sharing:
        return (
            f"only matches the namespace, which also runs {', '.join(sharing)}, so their load is counted "
            f"as {target.name}'s"
        )
    return ""


def _unscoped_query(ctx, autoscaler, signals, target, workloads):
    for signal in signals:
        if not signal.is_query:
            continue
        for metric, matchers in _server_selectors(signal.text):
            problem = _selector_problem(matchers, target, workloads)
            if problem:
                scope = (
                    f'model_name="{sorted(_served_names(target))[0]}"'
                    if target is not None and _served_names(target)
                    else 'model_name="<served model>", namespace="<namespace>"'
                )
                yield ctx.finding(
                    "unscoped-query",
                    (*signal.path, "metadata", "query"),
                    f"The selector of {metric} {problem}: the autoscaler then scales on other teams' traffic.",
                    f"Add the target's own matchers, e.g. {metric}{{{scope}}}.",
                )
                break


# --- cron triggers ------------------------------------------------------------------------------------


def _cron_triggers(autoscaler: Autoscaler):
    so = autoscaler.scaled_object
    return [] if so is None else [t for t in so.triggers if t.type == "cron" and t.cron is not None]


def _cron_metadata_path(trigger, key: str) -> tuple:
    return ("spec", "triggers", trigger.index, "metadata", key)


def _cron_timezone(ctx, autoscaler, signals, settings, target):
    for trigger in _cron_triggers(autoscaler):
        name = trigger.cron.timezone
        path = _cron_metadata_path(trigger, "timezone")
        if not name:
            yield ctx.finding(
                "cron-invalid-timezone",
                path,
                "The cron trigger has no timezone, which KEDA requires: it refuses to build the scaler, so the "
                "ScaledObject never gets its HPA and nothing scales.",
                "Add timezone: with an IANA name such as Europe/Dublin or America/New_York (or Etc/UTC).",
            )
        elif name == "Local":
            yield ctx.finding(
                "cron-invalid-timezone",
                path,
                "Local is the KEDA operator's own zone: UTC in KEDA's image unless its pod sets TZ, so the window "
                "moves with how the operator is deployed.",
                "Name the zone the schedule is meant in, e.g. Europe/Dublin or Etc/UTC.",
                severity="warning",
            )
        elif (problem := timezone_problem(name)) is not None:
            yield ctx.finding(
                "cron-invalid-timezone",
                path,
                f"KEDA loads the zone at every poll and fails ({problem}): the trigger is an error, the window "
                "never opens, and only a fallback holds replicas.",
                "Use a name from the IANA time zone database, spelt exactly (it is case-sensitive), "
                "e.g. Europe/Dublin.",
            )


def _cron_schedule(ctx, autoscaler, signals, settings, target):
    for trigger in _cron_triggers(autoscaler):
        for problem in cron_problems(trigger.cron):
            if problem.field == "timezone":
                continue  # cron-invalid-timezone says it
            yield ctx.finding(
                "cron-invalid-schedule",
                _cron_metadata_path(trigger, problem.field),
                f"KEDA cannot build this cron trigger ({problem.field}: {problem.message}), so the ScaledObject "
                "never gets its HPA and nothing scales.",
                "Write start and end as two different 5-field schedules (minute hour day-of-month month "
                "day-of-week; days of week 0-6 or SUN-SAT, no 7, no @daily) and desiredReplicas as a whole "
                'number in quotes, e.g. "4".',
            )


def _built_crons(autoscaler: Autoscaler) -> list[tuple[int, CronScaler]]:
    built = []
    for trigger in _cron_triggers(autoscaler):
        if cron_problems(trigger.cron) or timezone_problem(trigger.cron.timezone) is not None:
            continue
        built.append((trigger.index, build_cron_scaler(trigger.cron)))
    return built


def _cron_overlap(ctx, autoscaler, signals, settings, target):
    built = _built_crons(autoscaler)
    for later, (index, scaler) in enumerate(built):
        for other_index, other in built[:later]:
            if other.desired_replicas == scaler.desired_replicas:
                continue
            when_s = overlap_in_a_year_s(other, scaler)
            if when_s is None:
                continue
            when = datetime.fromtimestamp(when_s, UTC).strftime("%A %Y-%m-%d %H:%M UTC")
            high = max(other.desired_replicas, scaler.desired_replicas)
            yield ctx.finding(
                "cron-overlap",
                ("spec", "triggers", index),
                f"This window (desiredReplicas {scaler.desired_replicas}) overlaps trigger {other_index}'s "
                f"(desiredReplicas {other.desired_replicas}), for example from {when}: there the HPA takes the larger, "
                f"{high}, whichever window is narrower or listed later.",
                "Make the windows disjoint (end one where the other starts), or give them the same "
                "desiredReplicas if the larger is what you mean.",
            )


def _cron_above_max(ctx, autoscaler, signals, settings, target):
    for trigger in _cron_triggers(autoscaler):
        desired = trigger.cron.desired_replicas
        if not desired.lstrip("-").isdigit():
            continue  # cron-invalid-schedule says it
        ceiling = autoscaler.hpa.max_replicas
        if int(desired) > ceiling:
            written = autoscaler.scaled_object is not None and autoscaler.scaled_object.max_replica_count is not None
            where = "maxReplicaCount" if written else "KEDA's default maxReplicaCount"
            yield ctx.finding(
                "cron-above-max",
                _cron_metadata_path(trigger, "desiredReplicas"),
                f"desiredReplicas {desired} is above {where} {ceiling}: the HPA caps the window at {ceiling}, so "
                "the schedule never gets the replicas it names.",
                f"Lower desiredReplicas to {ceiling} or less, or raise maxReplicaCount if the GPUs exist.",
            )


def _hpa_and_scaled_object(manifests: ManifestSet) -> Iterable[Finding]:
    """An HPA and a ScaledObject on one workload fight over its replicas (KEDA's own keda-hpa-* are not read)."""

    def key(document, autoscaler):
        return autoscaler.hpa.scale_target_kind, autoscaler.hpa.scale_target_name, document.namespace

    def same(a, b):
        return a[:2] == b[:2] and (not a[2] or not b[2] or a[2] == b[2])

    pairs = manifests.autoscalers
    for document, autoscaler in pairs:
        for other_document, other in pairs:
            if other is autoscaler or {autoscaler.kind, other.kind} != {"HorizontalPodAutoscaler", "ScaledObject"}:
                continue
            # Alternatives in separate files (`planner manifests` writes hpa.yaml beside scaledobject.yaml,
            # example repositories offer both) are applied one or the other; one file is applied whole.
            if other_document.source != document.source:
                continue
            if not same(key(document, autoscaler), key(other_document, other)):
                continue
            kind, name = autoscaler.hpa.scale_target_kind, autoscaler.hpa.scale_target_name
            yield _Context(document).finding(
                "hpa-and-scaledobject",
                ("spec", "scaleTargetRef"),
                f"{other.kind} {other.name} (document {other_document.number}) also scales {kind} {name}: the two "
                "controllers "
                "set its replicas in turn, and KEDA's webhook refuses the ScaledObject when the HPA exists first.",
                "Keep one autoscaler per workload: move the HPA's metrics into the ScaledObject's triggers "
                "(cpu/memory triggers exist) and delete the HPA.",
            )


def _unreadable(problem: ReadProblem) -> Finding:
    return Finding(
        rule="unreadable-document",
        severity=RULES["unreadable-document"].severity,
        file=problem.source,
        document=problem.document,
        path="",
        line=problem.line,
        why=problem.message,
        fix="Correct the document as the message says; the other documents were reviewed without it.",
    )


_AUTOSCALER_RULES = (
    _gpu_util_trigger,
    _waiting_only,
    _avg_with_average_value,
    _ignore_null_values,
    _deprecated_metric,
    _multi_trigger_or,
    _short_scale_down_window,
    _min_zero_pod_metric,
    _hpa_min_zero_version,
    _tolerance_dropped,
    _threshold_at_batch_limit,
    _no_max,
    _cpu_trigger,
    _kv_threshold,
    _unaggregated_query,
    _misplaced_metric_type,
    _metric_not_exported,
    _underscore_metric_name,
    _gpu_memory_trigger,
    _latency_quantile_average_value,
    _min_replicas_over_node_quota,
    _max_replicas_over_node_quota,
    _cron_timezone,
    _cron_schedule,
    _cron_overlap,
    _cron_above_max,
)


# --- workload rules ---------------------------------------------------------------------------------


def _drain_s(server, settings: LintSettings) -> tuple[float | None, str]:
    itl = settings.itl_ms if settings.itl_ms is not None else DEFAULT_ITL_MS
    itl_text = f"{itl:g} ms per token" + ("" if settings.itl_ms is not None else ", the default --itl-ms")
    if settings.max_tokens is not None:
        return float(drain_time_s(settings.max_tokens, itl)), f"--max-tokens {settings.max_tokens:g} at {itl_text}"
    if server.max_model_len is not None:
        return float(drain_time_s(server.max_model_len, itl)), f"--max-model-len {server.max_model_len} at {itl_text}"
    return None, ""


def _workload_rules(workload: Workload, settings: LintSettings) -> Iterable[Finding]:
    ctx = _Context(workload.document)
    grace = workload.termination_grace_period_s
    grace_path = (*workload.pod_path, "terminationGracePeriodSeconds")
    effective_grace = DEFAULT_TERMINATION_GRACE_PERIOD_S if grace is None else grace
    # An LLMInferenceService's template is merged over KServe's well-known config, which sets the grace
    # period, probes, preStop and --shutdown-timeout: what this document leaves unset is inherited.
    inherits = workload.kind == "LLMInferenceService"
    for server in workload.servers:
        if "--headless" in server.flags:
            continue  # a multi-node group's worker: it serves no requests of its own
        if inherits and grace is None:
            continue
        pre_stop_s = server.pre_stop.sleep_s if server.pre_stop and server.pre_stop.sleep_s else 0.0
        drain, basis = _drain_s(server, settings)
        plan = plan_grace(drain, pre_stop_s=pre_stop_s) if drain else None
        recommend = (
            f" terminationGracePeriodSeconds: {plan.termination_grace_period_s} with --shutdown-timeout "
            f"{plan.shutdown_timeout_s} (from `planner grace`)"
            if plan
            else ""
        )
        if grace is None:
            yield ctx.finding(
                "short-grace",
                workload.pod_path,
                "terminationGracePeriodSeconds is unset, so Kubernetes kills the pod 30 s after scale-down "
                "starts and every longer generation is cut off"
                + (f" (the longest, {basis}, takes {drain:g} s)." if drain else "."),
                "Set"
                + (
                    recommend
                    or " terminationGracePeriodSeconds from the longest allowed generation: "
                    "`planner grace --max-tokens N --itl-ms X`"
                )
                + ".",
            )
        elif drain is not None and effective_grace - pre_stop_s < drain:
            yield ctx.finding(
                "short-grace",
                grace_path,
                f"A {grace} s grace period"
                + (f" less the {pre_stop_s:g} s preStop" if pre_stop_s else "")
                + f" is shorter than the longest generation, {drain:g} s ({basis}), so scale-down cuts it off.",
                "Set" + recommend + ", or cap max_tokens at the gateway.",
            )
        if server.pre_stop is not None and server.pre_stop.drains:
            continue  # the preStop hook itself waits for running requests before SIGTERM
        flag = server.flags.get("--shutdown-timeout", "missing")
        timeout = server.shutdown_timeout_s
        args_path = server.path + (("args",) if "args" in (_get(ctx.document.data, server.path) or {}) else ())
        if (flag == "missing" and not inherits) or timeout == 0:
            what = "has no --shutdown-timeout" if flag == "missing" else "sets --shutdown-timeout 0"
            yield ctx.finding(
                "shutdown-timeout-vs-grace",
                args_path,
                f"The vLLM container {what}, so on SIGTERM vLLM aborts every running request instead of "
                "finishing them within the grace period.",
                (
                    f"Add --shutdown-timeout {plan.shutdown_timeout_s}"
                    if plan
                    else "Add --shutdown-timeout below the grace period"
                )
                + " (vLLM 0.18.0 or newer), keeping preStop plus "
                "the timeout below terminationGracePeriodSeconds.",
            )
        elif timeout is not None and pre_stop_s + timeout >= effective_grace:
            yield ctx.finding(
                "shutdown-timeout-vs-grace",
                args_path,
                f"preStop {pre_stop_s:g} s plus --shutdown-timeout {timeout} s is not below the {effective_grace} s "
                "grace period, so SIGKILL can land while vLLM is still draining.",
                f"Set terminationGracePeriodSeconds to at least {math.ceil(pre_stop_s + timeout + 5)} s, or lower "
                "the timeout.",
                severity="error",
            )
        # KServe's reconciler gives an InferenceService container without one a TCP readiness probe.
        if server.readiness_probe is None and workload.kind not in ("InferenceService", "LLMInferenceService"):
            yield ctx.finding(
                "missing-readiness-probe",
                server.path,
                "Without a readiness probe the pod is Ready before the model is loaded, so it gets traffic it "
                "cannot serve and the HPA averages over a replica that is not serving.",
                "Add readinessProbe: httpGet /health on the server port, with a startupProbe sized to the model load.",
            )


# --- document rules ---------------------------------------------------------------------------------


# Keys whose strings a shell or the program reads: ${VAR} there is the shell's, not a template's.
_SHELL_KEYS = frozenset({"command", "args", "script"})
_SHELL_VAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*")
# Tokens a template tool was meant to replace, anywhere in a string.
_TOKEN_PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])(__[A-Z][A-Z0-9_]*__|REPLACE_[A-Z0-9_]+|REPLACE-ME)")
_IMAGE_PLACEHOLDER = re.compile(r"^[^/:@]*[A-Z][^/:@]*(?=[:@/]|$)")  # an upper-case registry/repository part


def _strings(node, path: tuple = (), shell: bool = False, config_data: bool = False):
    """(path, text, read by a shell, config data) for every string in a document."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _strings(value, (*path, key), shell or key in _SHELL_KEYS, config_data)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _strings(item, (*path, index), shell, config_data)
    elif isinstance(node, str):
        yield path, node, shell, config_data


_NAME_PATHS = (("metadata", "name"), ("metadata", "namespace"), ("spec", "scaleTargetRef", "name"))


def _placeholders_in(path: tuple, text: str, shell: bool, config_data: bool) -> list[str]:
    found = _TOKEN_PLACEHOLDER.findall(text)
    whole = WHOLE_PLACEHOLDER.match(text)
    if whole and not shell:
        found.append(whole.group(1))
    if not shell and not config_data:
        found += _PLACEHOLDER.findall(text)
        # Kubernetes expands only $(VAR) in an env value; $VAR and ${VAR} reach the program as written.
        if len(path) >= 3 and path[-1] == "value" and isinstance(path[-2], int) and path[-3] == "env":
            found += [v for v in _SHELL_VAR.findall(text) if v not in found]
    if path in _NAME_PATHS:
        found += _NAME_PLACEHOLDER.findall(_PLACEHOLDER.sub("", text))
    if path and path[-1] == "image" and (image := _IMAGE_PLACEHOLDER.match(text)):
        found.append(image.group(0))
    return found


def _placeholders(document: YamlDocument) -> Iterable[Finding]:
    ctx = _Context(document)
    names: list[str] = []
    first: tuple | None = None
    config = document.kind in ("ConfigMap", "Secret")
    for path, text, shell, _ in _strings(document.data):
        data = config and path[:1] in (("data",), ("stringData",))  # files, scripts: not the manifest's own
        for name in _placeholders_in(path, text, shell, data):
            if name not in names:
                names.append(name)
                first = first or path
    if names:
        assert first is not None  # set with the first name
        yield ctx.finding(
            "unsubstituted-placeholder",
            first,
            f"The manifest still holds {', '.join(names)}, which kubectl applies literally: the names are "
            "invalid or point at nothing.",
            "Render it first (envsubst, sed or your template tool) and lint the rendered output.",
        )


def _is_placeholder_value(document: YamlDocument, path: tuple) -> bool:
    value = _get(document.data, path)
    return isinstance(value, str) and bool(
        WHOLE_PLACEHOLDER.match(value) or _TOKEN_PLACEHOLDER.search(value) or _PLACEHOLDER.search(value)
    )


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path_tuple(path: str) -> tuple:
    """``spec.triggers[0].metadata`` -> ``("spec", "triggers", 0, "metadata")``."""
    return tuple(int(index) if index else key for key, index in _PATH_PART.findall(path))


def _schema_violations(document: YamlDocument, problems) -> Iterable[Finding]:
    ctx = _Context(document)
    for problem in problems:
        if _is_placeholder_value(document, _path_tuple(problem.path)):
            continue  # the placeholder's own finding says it; the rendered value decides
        yield ctx.finding(
            "schema-violation",
            _path_tuple(problem.path),
            f"The API server (or KEDA's admission webhook) rejects this: {problem.message}.",
            "Correct the field as the schema says; `kubectl apply --dry-run=server` confirms it.",
        )


# --- entry points -----------------------------------------------------------------------------------


_DEFAULT = object()


def lint(manifests: ManifestSet, settings: LintSettings | None = None, *, schema_check=_DEFAULT) -> tuple[Finding, ...]:
    """Every finding for a set of manifests, in file, document and line order.

    Parameters
    ----------
    manifests : ManifestSet
        From :func:`planner.readers.workload.read_manifest_set`.
    settings : LintSettings, optional
    schema_check : callable or None, optional
        ``schema_check(document_data)`` returns the schema problems of one
        document (objects with ``path`` and ``message``). By default
        :func:`planner.manifests.schema.schema_errors` against Kubernetes' and KEDA's
        schemas, checking fields and types but not required fields (so a
        patch passes); ``None`` skips the check.

    Returns
    -------
    tuple of Finding
    """
    settings = settings or LintSettings()
    if schema_check is _DEFAULT:
        from planner.manifests.schema import schema_errors

        # Partial: kustomize and `planner manifests` patches leave required fields out on purpose;
        # unknown fields and wrong types are what a review catches that kubectl would not say first.
        def schema_check(data):
            return schema_errors(data, partial=True)

    findings: list[Finding] = []
    for document in manifests.documents:
        findings.extend(_placeholders(document))
        if schema_check is not None:
            findings.extend(_schema_violations(document, schema_check(document.data)))
    for document, autoscaler in manifests.autoscalers:
        ctx = _Context(document)
        signals = signals_of(autoscaler)
        target = find_scale_target(autoscaler, document, manifests.workloads)
        for rule in _AUTOSCALER_RULES:
            findings.extend(rule(ctx, autoscaler, signals, settings, target))
        findings.extend(
            _scale_target_not_found(
                ctx, autoscaler, signals, settings, target, manifests.workloads, manifests.documents
            )
        )
        findings.extend(_unscoped_query(ctx, autoscaler, signals, target, manifests.workloads))
    findings.extend(_hpa_and_scaled_object(manifests))
    findings.extend(_unreadable(problem) for problem in manifests.problems)
    for workload in manifests.workloads:
        findings.extend(_workload_rules(workload, settings))
    order = {name: index for index, name in enumerate(manifests.files)}
    return tuple(sorted(findings, key=lambda f: (order.get(f.file, len(order)), f.file, f.document, f.line, f.rule)))


def exit_status(findings: Iterable[Finding]) -> int:
    """1 when any finding is an error, else 0 (``planner lint``'s exit status)."""
    return 1 if any(finding.severity == "error" for finding in findings) else 0
