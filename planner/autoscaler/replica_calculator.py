"""The ``replica_calculator`` module computes one metric's replica proposal exactly as the Kubernetes HPA does.

It ports ``pkg/controller/podautoscaler/replica_calculator.go`` and the ratio
helpers of ``pkg/controller/podautoscaler/metrics/utilization.go``
(Kubernetes v1.33+, with per-direction ``Tolerances``). Function names are
the Go names in snake case and the branches keep the Go order, so the two can
be read side by side.

Units follow the controller: every metric value, request and target is an
integer in **milli-units** (``_milli``; a CPU request of ``"1.0"`` is 1000 and
a queue length of 15 is 15000), utilization is an integer percentage of the
request (``_pct``), and ratios are floats computed as float64, like Go.
Times are seconds on any clock the caller chooses (``now_s``); nothing here
reads a clock.

What is left out, and why:

* Pod-level resource requests (KEP-2837) and restartable init containers:
  a pod's request is the sum over the containers given in :class:`Pod`.
* Fetching metrics and listing pods: the caller passes them in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from planner.autoscaler.defaults import (
    DEFAULT_CPU_INITIALIZATION_PERIOD_S,
    DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S,
    DEFAULT_TOLERANCE,
)

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "RESOURCE_CPU",
    "MetricProposal",
    "MetricUnavailableError",
    "Pod",
    "PodGroups",
    "PodMetric",
    "ResourceProposal",
    "Tolerances",
    "UtilizationRatio",
    "calc_plain_metric_replicas",
    "calculate_requests",
    "get_external_metric_replicas",
    "get_external_per_pod_metric_replicas",
    "get_metric_replicas",
    "get_metric_usage_ratio",
    "get_object_metric_replicas",
    "get_object_per_pod_metric_replicas",
    "get_raw_resource_replicas",
    "get_ready_pods_count",
    "get_resource_replicas",
    "get_resource_utilization_ratio",
    "get_usage_ratio_replica_count",
    "group_pods",
    "ready_pods",
]

RESOURCE_CPU = "cpu"
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

POD_PENDING = "Pending"
POD_RUNNING = "Running"
POD_FAILED = "Failed"


class MetricUnavailableError(Exception):
    """The controller cannot compute a proposal from this metric in this cycle.

    The HPA then counts the metric as invalid (see
    :func:`planner.autoscaler.horizontal.compute_replicas_for_metrics`). The message
    is the Go error text, so it can be matched against the upstream tests.
    """


@dataclass(frozen=True)
class Tolerances:
    """Usage-ratio tolerances per direction (Go ``Tolerances``).

    Attributes
    ----------
    scale_down : float
        Ratios down to ``1 - scale_down`` are "close enough". [fraction]
    scale_up : float
        Ratios up to ``1 + scale_up`` are "close enough". [fraction]
    """

    scale_down: float = DEFAULT_TOLERANCE
    scale_up: float = DEFAULT_TOLERANCE

    def is_within(self, usage_ratio: float) -> bool:
        """True if ``usage_ratio`` is inside the band, both ends included (``Tolerances.isWithin``)."""
        return (1.0 - self.scale_down) <= usage_ratio <= (1.0 + self.scale_up)

    def __str__(self) -> str:
        return f"[down:{self.scale_down * 100.0:.1f}%, up:{self.scale_up * 100.0:.1f}%]"


@dataclass(frozen=True)
class Pod:
    """The fields of a pod that the replica calculator reads.

    Attributes
    ----------
    name : str
        Pod name; metrics are matched to pods by name.
    phase : str
        ``status.phase``: ``"Running"``, ``"Pending"``, ``"Failed"``, ...
    ready : bool or None
        Status of the ``Ready`` condition; ``None`` when the pod has no such condition.
    start_time_s : float or None
        ``status.startTime``; ``None`` when not set. [s]
    ready_transition_s : float
        ``lastTransitionTime`` of the ``Ready`` condition. [s]
    deleted : bool
        The pod has a ``deletionTimestamp``.
    container_requests_milli : tuple of (str, int or None)
        ``(container name, request)`` for the scaled resource; ``None`` when the
        container sets no request. [milli-units]
    """

    name: str
    phase: str = POD_RUNNING
    ready: bool | None = True
    start_time_s: float | None = 0.0
    ready_transition_s: float = 0.0
    deleted: bool = False
    container_requests_milli: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True)
class PodMetric:
    """One pod's sample from a metrics API (Go ``metricsclient.PodMetric``).

    Attributes
    ----------
    value_milli : int
        The sample. [milli-units]
    timestamp_s : float
        When the sample was taken. [s]
    window_s : float
        Averaging window of the sample (resource metrics). [s]
    """

    value_milli: int
    timestamp_s: float = 0.0
    window_s: float = 60.0


@dataclass(frozen=True)
class PodGroups:
    """Result of :func:`group_pods`: how each pod counts for a per-pod metric."""

    ready_pod_count: int
    unready_pods: frozenset[str]
    missing_pods: frozenset[str]
    ignored_pods: frozenset[str]


@dataclass(frozen=True)
class UtilizationRatio:
    """Result of :func:`get_resource_utilization_ratio`."""

    usage_ratio: float
    utilization_pct: int
    raw_average_milli: int


@dataclass(frozen=True)
class ResourceProposal:
    """A Resource ``Utilization`` proposal (the return values of ``GetResourceReplicas``).

    Attributes
    ----------
    replica_count : int
        Proposed replicas. [replicas]
    utilization_pct : int
        Truncated utilization over the ready pods' requests, as reported in
        the HPA status (first pass, ready pods only). [%]
    raw_utilization_milli : int
        Mean usage per ready pod. [milli-units]
    usage_ratio : float
        ``utilization_pct / target`` of the first pass. [-]
    new_usage_ratio : float or None
        Ratio after filling missing and unready pods, when that path ran. [-]
    """

    replica_count: int
    utilization_pct: int
    raw_utilization_milli: int
    usage_ratio: float
    new_usage_ratio: float | None = None


@dataclass(frozen=True)
class MetricProposal:
    """A proposal from a plain, Object or External metric.

    Attributes
    ----------
    replica_count : int
        Proposed replicas. [replicas]
    usage_milli : int
        The usage the HPA reports in its status (per-pod mean, object value,
        external sum, or per-pod share of it). [milli-units]
    usage_ratio : float
        The ratio compared with the tolerance (first pass). [-]
    new_usage_ratio : float or None
        Ratio after filling missing and unready pods, when that path ran. [-]
    """

    replica_count: int
    usage_milli: int
    usage_ratio: float
    new_usage_ratio: float | None = None


def _go_div(numerator: int, denominator: int) -> int:
    """Integer division truncated toward zero, as Go's ``/`` on int64."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator >= 0) else -quotient


def group_pods(
    pods: Iterable[Pod],
    metrics: Mapping[str, PodMetric],
    resource: str,
    cpu_initialization_period_s: float,
    delay_of_initial_readiness_status_s: float,
    now_s: float,
) -> PodGroups:
    """Sort pods into ready, unready, missing and ignored (Go ``groupPods``).

    Parameters
    ----------
    pods : iterable of Pod
        Pods the HPA's selector matches.
    metrics : mapping of str to PodMetric
        Samples by pod name.
    resource : str
        The resource scaled on, or ``""`` for a Pods (custom) metric. The
        readiness and start-time rules apply only to ``"cpu"``.
    cpu_initialization_period_s : float
        ``--horizontal-pod-autoscaler-cpu-initialization-period``. [s]
    delay_of_initial_readiness_status_s : float
        ``--horizontal-pod-autoscaler-initial-readiness-delay``. [s]
    now_s : float
        Current time. [s]

    Returns
    -------
    PodGroups

    Notes
    -----
    Checked in this order: deleted or Failed -> ignored; Pending -> unready;
    no sample -> missing; then, for CPU only, a pod is unready when it has no
    Ready condition or start time, when it is still initializing and either
    not Ready or its sample predates the last Ready transition plus one
    metric window, or when it is past initialization, not Ready and was never
    Ready (its Ready condition changed within the initial-readiness delay of
    its start).
    """
    ready_pod_count = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        if pod.deleted or pod.phase == POD_FAILED:
            ignored.add(pod.name)
            continue
        # Pending pods are ignored.
        if pod.phase == POD_PENDING:
            unready.add(pod.name)
            continue
        # Pods missing metrics.
        metric = metrics.get(pod.name)
        if metric is None:
            missing.add(pod.name)
            continue
        # Unready pods are ignored (CPU only: readiness skews CPU while starting).
        if resource == RESOURCE_CPU:
            if pod.ready is None or pod.start_time_s is None:
                is_unready = True
            elif pod.start_time_s + cpu_initialization_period_s > now_s:
                # Still initializing: drop the sample if the pod is unready or the
                # sample does not yet cover a full window since the last transition.
                is_unready = (pod.ready is False) or (metric.timestamp_s < pod.ready_transition_s + metric.window_s)
            else:
                # Past initialization: drop it only if the pod has never been ready.
                is_unready = (pod.ready is False) and (
                    pod.start_time_s + delay_of_initial_readiness_status_s > pod.ready_transition_s
                )
            if is_unready:
                unready.add(pod.name)
                continue
        ready_pod_count += 1
    return PodGroups(ready_pod_count, frozenset(unready), frozenset(missing), frozenset(ignored))


def calculate_requests(pods: Iterable[Pod], container: str, resource: str) -> dict[str, int]:
    """Each pod's request for ``resource`` (Go ``calculateRequests`` / ``calculatePodRequestsFromContainers``).

    Parameters
    ----------
    pods : iterable of Pod
    container : str
        Only this container's request (ContainerResource metrics); ``""`` sums all containers.
    resource : str
        Resource name, quoted in errors.

    Returns
    -------
    dict of str to int
        Request by pod name. [milli-units]

    Raises
    ------
    MetricUnavailableError
        A container without a request, or a named container that is not in the pod.
    """
    requests: dict[str, int] = {}
    for pod in pods:
        request = 0
        found = False
        for name, value in pod.container_requests_milli:
            if container == "" or container == name:
                if value is None:
                    raise MetricUnavailableError(
                        f"missing request for {resource} in container {name} of Pod {pod.name}"
                    )
                request += value
            # container names are unique inside the pod
            if container == name:
                found = True
                break
        if container != "" and not found:
            raise MetricUnavailableError(f"container {container} not found in Pod {pod.name}")
        requests[pod.name] = request
    return requests


def get_resource_utilization_ratio(
    metrics: Mapping[str, PodMetric], requests: Mapping[str, int], target_utilization_pct: int
) -> UtilizationRatio:
    """Utilization over the pods that have both a sample and a request (Go ``GetResourceUtilizationRatio``).

    The percentage is an integer, truncated: 587.5 % becomes 587 and the ratio 5.87.

    Raises
    ------
    MetricUnavailableError
        No sample matches a known pod, or the percentage leaves the int32 range.
    """
    metrics_total = 0
    requests_total = 0
    num_entries = 0
    for pod_name, metric in metrics.items():
        request = requests.get(pod_name)
        if request is None:
            # missing requests are checked elsewhere, so these are extraneous metrics
            continue
        metrics_total += metric.value_milli
        requests_total += request
        num_entries += 1
    if requests_total == 0:
        raise MetricUnavailableError("no metrics returned matched known pods")
    percentage = _go_div(metrics_total * 100, requests_total)
    if not -(2**31) <= percentage <= MAX_INT32:
        raise MetricUnavailableError(f"resource utilization {percentage} is outside the int32 range")
    return UtilizationRatio(
        usage_ratio=float(percentage) / float(target_utilization_pct),
        utilization_pct=percentage,
        raw_average_milli=_go_div(metrics_total, num_entries),
    )


def get_metric_usage_ratio(metrics: Mapping[str, PodMetric], target_usage_milli: int) -> tuple[float, int]:
    """Mean usage over all samples and its ratio to the target (Go ``GetMetricUsageRatio``).

    Returns
    -------
    usage_ratio : float
        ``float(current_usage) / float(target)``. [-]
    current_usage_milli : int
        Integer mean of the samples, truncated. [milli-units]
    """
    metrics_total = sum(metric.value_milli for metric in metrics.values())
    current_usage = _go_div(metrics_total, len(metrics))
    return float(current_usage) / float(target_usage_milli), current_usage


def get_resource_replicas(
    current_replicas: int,
    target_utilization_pct: int,
    resource: str,
    tolerances: Tolerances,
    pods: Iterable[Pod],
    metrics: Mapping[str, PodMetric],
    now_s: float,
    *,
    container: str = "",
    cpu_initialization_period_s: float = DEFAULT_CPU_INITIALIZATION_PERIOD_S,
    delay_of_initial_readiness_status_s: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S,
) -> ResourceProposal:
    """Replicas for a Resource metric with a ``Utilization`` target (Go ``GetResourceReplicas``).

    Parameters
    ----------
    current_replicas : int
        ``scale.spec.replicas``. [replicas]
    target_utilization_pct : int
        ``target.averageUtilization``. [%]
    resource : str
        ``"cpu"`` or ``"memory"``.
    tolerances : Tolerances
    pods : iterable of Pod
        Pods matched by the selector.
    metrics : mapping of str to PodMetric
        Samples by pod name (the container's sample for a ContainerResource metric).
    now_s : float
        Current time, for the CPU readiness rules. [s]
    container : str, optional
        Container name for a ContainerResource metric.

    Returns
    -------
    ResourceProposal

    Raises
    ------
    MetricUnavailableError
        No samples, no pods, no sample from a usable pod, or a missing request.

    Notes
    -----
    With no unready pods on a scale-up and no missing pods, the result is
    ``ceil(usage_ratio x ready pods)`` (or the current count inside the
    tolerance). Otherwise missing pods are filled at 100 % of their request
    (or the target, if above 100 %) on a scale-down and at 0 on a scale-up,
    unready pods at 0 on a scale-up, and the ratio is recomputed; a result
    inside the tolerance, or one that flips the direction, changes nothing.
    """
    metrics = dict(metrics)
    if not metrics:
        raise MetricUnavailableError(
            f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        )
    pod_list = list(pods)
    if not pod_list:
        raise MetricUnavailableError("no pods returned by selector while calculating replica count")

    groups = group_pods(
        pod_list,
        metrics,
        resource,
        cpu_initialization_period_s,
        delay_of_initial_readiness_status_s,
        now_s,
    )
    for name in groups.ignored_pods | groups.unready_pods:
        metrics.pop(name, None)
    if not metrics:
        raise MetricUnavailableError("did not receive metrics for targeted pods (pods might be unready)")

    requests = calculate_requests(pod_list, container, resource)
    first = get_resource_utilization_ratio(metrics, requests, target_utilization_pct)
    usage_ratio = first.usage_ratio

    scale_up_with_unready = len(groups.unready_pods) > 0 and usage_ratio > 1.0
    if not scale_up_with_unready and len(groups.missing_pods) == 0:
        if tolerances.is_within(usage_ratio):
            # return the current replicas if the change would be too small
            return ResourceProposal(current_replicas, first.utilization_pct, first.raw_average_milli, usage_ratio)
        # if we don't have any unready or missing pods, we can calculate the new replica count now
        return ResourceProposal(
            math.ceil(usage_ratio * float(groups.ready_pod_count)),
            first.utilization_pct,
            first.raw_average_milli,
            usage_ratio,
        )

    if groups.missing_pods:
        if usage_ratio < 1.0:
            # on a scale-down, treat missing pods as using 100% (all) of the resource
            # request, or the utilization target for targets higher than 100%
            fallback_utilization = max(100, target_utilization_pct)
            for name in groups.missing_pods:
                metrics[name] = PodMetric(_go_div(requests[name] * fallback_utilization, 100))
        elif usage_ratio > 1.0:
            # on a scale-up, treat missing pods as using 0% of the resource request
            for name in groups.missing_pods:
                metrics[name] = PodMetric(0)

    if scale_up_with_unready:
        # on a scale-up, treat unready pods as using 0% of the resource request
        for name in groups.unready_pods:
            metrics[name] = PodMetric(0)

    # re-run the utilization calculation with our new numbers
    new_usage_ratio = get_resource_utilization_ratio(metrics, requests, target_utilization_pct).usage_ratio

    if (
        tolerances.is_within(new_usage_ratio)
        or (usage_ratio < 1.0 and new_usage_ratio > 1.0)
        or (usage_ratio > 1.0 and new_usage_ratio < 1.0)
    ):
        # return the current replicas if the change would be too small,
        # or if the new usage ratio would cause a change in scale direction
        return ResourceProposal(
            current_replicas, first.utilization_pct, first.raw_average_milli, usage_ratio, new_usage_ratio
        )

    new_replicas = math.ceil(new_usage_ratio * float(len(metrics)))
    if (new_usage_ratio < 1.0 and new_replicas > current_replicas) or (
        new_usage_ratio > 1.0 and new_replicas < current_replicas
    ):
        # return the current replicas if the change of metrics length would cause a change in scale direction
        return ResourceProposal(
            current_replicas, first.utilization_pct, first.raw_average_milli, usage_ratio, new_usage_ratio
        )

    # return the result, where the number of replicas considered is
    # however many replicas factored into our calculation
    return ResourceProposal(new_replicas, first.utilization_pct, first.raw_average_milli, usage_ratio, new_usage_ratio)


def get_raw_resource_replicas(
    current_replicas: int,
    target_usage_milli: int,
    resource: str,
    tolerances: Tolerances,
    pods: Iterable[Pod],
    metrics: Mapping[str, PodMetric],
    now_s: float,
    **timing,
) -> MetricProposal:
    """Replicas for a Resource metric with an ``AverageValue`` target (Go ``GetRawResourceReplicas``)."""
    if not metrics:
        raise MetricUnavailableError(
            f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        )
    return calc_plain_metric_replicas(
        metrics, current_replicas, target_usage_milli, tolerances, pods, resource, now_s, **timing
    )


def get_metric_replicas(
    current_replicas: int,
    target_usage_milli: int,
    tolerances: Tolerances,
    pods: Iterable[Pod],
    metrics: Mapping[str, PodMetric],
    now_s: float,
    **timing,
) -> MetricProposal:
    """Replicas for a Pods metric (``AverageValue`` per pod) (Go ``GetMetricReplicas``).

    The resource is ``""``, so only deleted, Failed and Pending pods are set
    aside; a pod that is not Ready but reports a sample counts as ready.
    """
    return calc_plain_metric_replicas(
        metrics, current_replicas, target_usage_milli, tolerances, pods, "", now_s, **timing
    )


def calc_plain_metric_replicas(
    metrics: Mapping[str, PodMetric],
    current_replicas: int,
    target_usage_milli: int,
    tolerances: Tolerances,
    pods: Iterable[Pod],
    resource: str,
    now_s: float,
    *,
    cpu_initialization_period_s: float = DEFAULT_CPU_INITIALIZATION_PERIOD_S,
    delay_of_initial_readiness_status_s: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S,
) -> MetricProposal:
    """Replicas for a per-pod average (Go ``calcPlainMetricReplicas``).

    Same algorithm as :func:`get_resource_replicas`, on the integer mean of
    the samples; missing pods are filled at exactly the target on a
    scale-down and at 0 on a scale-up.
    """
    metrics = dict(metrics)
    pod_list = list(pods)
    if not pod_list:
        raise MetricUnavailableError("no pods returned by selector while calculating replica count")

    groups = group_pods(
        pod_list,
        metrics,
        resource,
        cpu_initialization_period_s,
        delay_of_initial_readiness_status_s,
        now_s,
    )
    for name in groups.ignored_pods | groups.unready_pods:
        metrics.pop(name, None)
    if not metrics:
        raise MetricUnavailableError("did not receive metrics for targeted pods (pods might be unready)")

    usage_ratio, usage = get_metric_usage_ratio(metrics, target_usage_milli)

    scale_up_with_unready = len(groups.unready_pods) > 0 and usage_ratio > 1.0
    if not scale_up_with_unready and len(groups.missing_pods) == 0:
        if tolerances.is_within(usage_ratio):
            # return the current replicas if the change would be too small
            return MetricProposal(current_replicas, usage, usage_ratio)
        # if we don't have any unready or missing pods, we can calculate the new replica count now
        return MetricProposal(math.ceil(usage_ratio * float(groups.ready_pod_count)), usage, usage_ratio)

    if groups.missing_pods:
        if usage_ratio < 1.0:
            # on a scale-down, treat missing pods as using exactly the target amount
            for name in groups.missing_pods:
                metrics[name] = PodMetric(target_usage_milli)
        elif usage_ratio > 1.0:
            # on a scale-up, treat missing pods as using 0% of the resource request
            for name in groups.missing_pods:
                metrics[name] = PodMetric(0)

    if scale_up_with_unready:
        # on a scale-up, treat unready pods as using 0% of the resource request
        for name in groups.unready_pods:
            metrics[name] = PodMetric(0)

    # re-run the usage calculation with our new numbers
    new_usage_ratio, _ = get_metric_usage_ratio(metrics, target_usage_milli)

    if (
        tolerances.is_within(new_usage_ratio)
        or (usage_ratio < 1.0 and new_usage_ratio > 1.0)
        or (usage_ratio > 1.0 and new_usage_ratio < 1.0)
    ):
        # return the current replicas if the change would be too small,
        # or if the new usage ratio would cause a change in scale direction
        return MetricProposal(current_replicas, usage, usage_ratio, new_usage_ratio)

    new_replicas = math.ceil(new_usage_ratio * float(len(metrics)))
    if (new_usage_ratio < 1.0 and new_replicas > current_replicas) or (
        new_usage_ratio > 1.0 and new_replicas < current_replicas
    ):
        # return the current replicas if the change of metrics length would cause a change in scale direction
        return MetricProposal(current_replicas, usage, usage_ratio, new_usage_ratio)

    # return the result, where the number of replicas considered is
    # however many replicas factored into our calculation
    return MetricProposal(new_replicas, usage, usage_ratio, new_usage_ratio)


def get_object_metric_replicas(
    current_replicas: int,
    target_usage_milli: int,
    usage_milli: int,
    tolerances: Tolerances,
    pods: Iterable[Pod],
) -> MetricProposal:
    """Replicas for an Object metric with a ``Value`` target (Go ``GetObjectMetricReplicas``)."""
    usage_ratio = float(usage_milli) / float(target_usage_milli)
    replica_count = get_usage_ratio_replica_count(current_replicas, usage_ratio, tolerances, pods)
    return MetricProposal(replica_count, usage_milli, usage_ratio)


def get_usage_ratio_replica_count(
    current_replicas: int, usage_ratio: float, tolerances: Tolerances, pods: Iterable[Pod]
) -> int:
    """Replicas from a whole-fleet ratio and the Running+Ready pods (Go ``getUsageRatioReplicaCount``).

    For ``current_replicas == 0`` (scale from zero) neither the pod count nor
    the tolerance applies: the result is ``ceil(usage_ratio)``.
    """
    if current_replicas != 0:
        if tolerances.is_within(usage_ratio):
            # return the current replicas if the change would be too small
            return current_replicas
        try:
            ready_pod_count = get_ready_pods_count(pods)
        except MetricUnavailableError as error:
            raise MetricUnavailableError(f"unable to calculate ready pods: {error}") from None
        replica_count_float = usage_ratio * float(ready_pod_count)
        if replica_count_float > MAX_INT32:
            return MAX_INT32
        return math.ceil(replica_count_float)
    # Scale to zero or n pods depending on usageRatio
    return math.ceil(usage_ratio)


def get_object_per_pod_metric_replicas(
    status_replicas: int,
    target_average_usage_milli: int,
    usage_milli: int,
    tolerances: Tolerances,
) -> MetricProposal:
    """Replicas for an Object metric with an ``AverageValue`` target (Go ``GetObjectPerPodMetricReplicas``).

    The controller passes ``scale.status.replicas``. Outside the tolerance
    the result is ``ceil(usage / per-pod target)``: the pod count does not
    multiply in.
    """
    replica_count = status_replicas
    usage_ratio = _safe_ratio(float(usage_milli), float(target_average_usage_milli) * float(replica_count))
    if not tolerances.is_within(usage_ratio):
        # update number of replicas if change is large enough
        replica_count = math.ceil(float(usage_milli) / float(target_average_usage_milli))
    per_pod_usage = math.ceil(float(usage_milli) / float(status_replicas)) if status_replicas else usage_milli
    return MetricProposal(replica_count, per_pod_usage, usage_ratio)


def get_ready_pods_count(pods: Iterable[Pod]) -> int:
    """Pods with ``phase == Running`` and ``Ready == True`` (Go ``getReadyPodsCount``)."""
    pod_list = list(pods)
    if not pod_list:
        raise MetricUnavailableError("no pods returned by selector while calculating replica count")
    return sum(1 for pod in pod_list if pod.phase == POD_RUNNING and pod.ready is True)


def get_external_metric_replicas(
    current_replicas: int,
    target_usage_milli: int,
    metric_values_milli: Iterable[int],
    tolerances: Tolerances,
    pods: Iterable[Pod],
) -> MetricProposal:
    """Replicas for an External metric with a ``Value`` target (Go ``GetExternalMetricReplicas``).

    The usage is the sum of the returned series (capped at MaxInt64); the
    proposal multiplies the ratio by the Running+Ready pods, so it can scale
    down while the usage is above target when pods are not Ready.
    """
    usage = 0
    for value in metric_values_milli:
        # Cap at MaxInt64 for positive overflow
        if value > 0 and usage > MAX_INT64 - value:
            usage = MAX_INT64
            break
        usage += value
    usage_ratio = float(usage) / float(target_usage_milli)
    replica_count = get_usage_ratio_replica_count(current_replicas, usage_ratio, tolerances, pods)
    return MetricProposal(replica_count, usage, usage_ratio)


def get_external_per_pod_metric_replicas(
    status_replicas: int,
    target_usage_per_pod_milli: int,
    metric_values_milli: Iterable[int],
    tolerances: Tolerances,
) -> MetricProposal:
    """Replicas for an External metric with an ``AverageValue`` target (Go ``GetExternalPerPodMetricReplicas``).

    The tolerance is checked on ``usage / (target x status.replicas)``;
    outside it the result is ``ceil(usage / per-pod target)`` (capped at
    MaxInt32), independent of how many pods are Ready.
    """
    usage = 0
    for value in metric_values_milli:
        usage += value
        if usage > MAX_INT64:
            # the only way Go gets here is an int64 overflow
            usage = MAX_INT64
            break
    replica_count = status_replicas
    usage_ratio = _safe_ratio(float(usage), float(target_usage_per_pod_milli) * float(replica_count))
    if not tolerances.is_within(usage_ratio):
        # update number of replicas if the change is large enough
        replica_count_result = math.ceil(float(usage) / float(target_usage_per_pod_milli))
        replica_count = MAX_INT32 if replica_count_result > MAX_INT32 else replica_count_result
    if float(usage) >= float(MAX_INT64):
        per_pod_usage = MAX_INT64
    elif status_replicas:
        per_pod_usage = math.ceil(float(usage) / float(status_replicas))
    else:
        per_pod_usage = usage
    return MetricProposal(replica_count, per_pod_usage, usage_ratio)


def ready_pods(
    ready: int, not_ready: int = 0, *, now_s: float = 0.0, warming_since_s: float | None = None, prefix: str = "pod"
) -> tuple[Pod, ...]:
    """A fleet of ``ready`` Ready pods and ``not_ready`` Running-but-not-Ready pods.

    The Ready pods started long ago; the others started at ``warming_since_s``
    (default ``now_s``) and are inside the CPU initialization period. Used by
    the CLI and the simulator when only counts are known.
    """
    if ready < 0 or not_ready < 0:
        raise ValueError("pod counts must be >= 0")
    started = now_s if warming_since_s is None else warming_since_s
    old = now_s - 10.0 * DEFAULT_CPU_INITIALIZATION_PERIOD_S
    fleet = [Pod(f"{prefix}-{i}", start_time_s=old, ready_transition_s=old) for i in range(ready)]
    fleet += [
        Pod(f"{prefix}-{ready + i}", ready=False, start_time_s=started, ready_transition_s=started)
        for i in range(not_ready)
    ]
    return tuple(fleet)


def _safe_ratio(numerator: float, denominator: float) -> float:
    # Go's float64 division gives +Inf or NaN where Python would raise.
    if denominator == 0.0:
        if numerator == 0.0:
            return math.nan
        return math.copysign(math.inf, numerator)
    return numerator / denominator
