"""The ``cold_start`` module times a new replica from "requested" to "Ready", phase by phase.

A pod the HPA adds first needs a GPU. On a node that has a free one it is
scheduled at once; otherwise it waits Pending while the node autoscaler
notices it, buys a node (``provision_s``), and the node joins and makes its
GPUs allocatable (driver, device plugin: ``node_init_s``). Then the pod
pulls its image unless the node ran it before (``image_pull_s``), loads the
weights (``weights_load_s``) and vLLM compiles and captures CUDA graphs
(``warmup_s``). Time to ready is the sum of the phases a pod goes through,
plus the node autoscaler's own reaction delay when it needs a new node.

The node autoscalers' reaction delays, with their documented defaults:

- cluster-autoscaler runs every ``--scan-interval`` (10 s) and leaves
  alone pods younger than a buffer: 2 s, or 30 s for a pod that asks for
  a GPU (``unschedulablePodWithGpuTimeBuffer``; kubernetes/autoscaler
  issue 9126). It scales up at the first scan once the pod is that old.
- Karpenter gathers pending pods into a batch that closes after
  ``--batch-idle-duration`` (1 s) without a new pod, or
  ``--batch-max-duration`` (10 s) after it opened, then launches nodes.

The maths here is closed-form, for one pod or one burst; the fleet
simulator runs the same phases pod by pod against a node pool.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.errors import PlannerInputError, require_non_negative, require_positive

__all__ = [
    "CLUSTER_AUTOSCALER",
    "KARPENTER",
    "NODE_AUTOSCALERS",
    "ClusterAutoscalerSettings",
    "ColdStartPhases",
    "KarpenterSettings",
    "Phase",
    "cluster_autoscaler_scale_up_s",
    "karpenter_batch_close_s",
    "phase_waterfall",
    "pods_per_node",
    "time_to_ready_s",
]

CLUSTER_AUTOSCALER = "cluster-autoscaler"
KARPENTER = "karpenter"
NODE_AUTOSCALERS = (CLUSTER_AUTOSCALER, KARPENTER)


@dataclass(frozen=True)
class ColdStartPhases:
    """How long each phase of a cold start takes.

    Attributes
    ----------
    provision_s : float
        Node autoscaler's request to a running, registered node (cloud API, boot). [s]
    node_init_s : float
        Node registered to GPUs allocatable (driver, device plugin). [s]
    image_pull_s : float
        Pulling the serving image on a node that has not run it. [s]
    weights_load_s : float
        Downloading and loading the model weights. [s]
    warmup_s : float
        vLLM's compile and CUDA-graph capture, up to the readiness probe passing. [s]
    """

    provision_s: float = 0.0
    node_init_s: float = 0.0
    image_pull_s: float = 0.0
    weights_load_s: float = 0.0
    warmup_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("provision_s", "node_init_s", "image_pull_s", "weights_load_s", "warmup_s"):
            require_non_negative(name, getattr(self, name))


@dataclass(frozen=True)
class ClusterAutoscalerSettings:
    """cluster-autoscaler's timing, with its defaults.

    Attributes
    ----------
    scan_interval_s : float
        ``--scan-interval``: how often it looks for pending pods. [s]
    gpu_pod_scale_up_delay_s : float
        How old a pending GPU pod must be before it counts for a scale-up
        (hard-coded 30 s; a flag only in recent releases). [s]
    scale_down_unneeded_s : float
        ``--scale-down-unneeded-time``: how long a node stays unneeded before removal. [s]
    scale_down_delay_after_add_s : float
        ``--scale-down-delay-after-add``: no scale-down for this long after a scale-up. [s]
    """

    scan_interval_s: float = 10.0
    gpu_pod_scale_up_delay_s: float = 30.0
    scale_down_unneeded_s: float = 600.0
    scale_down_delay_after_add_s: float = 600.0

    def __post_init__(self) -> None:
        for name in (
            "scan_interval_s",
            "gpu_pod_scale_up_delay_s",
            "scale_down_unneeded_s",
            "scale_down_delay_after_add_s",
        ):
            require_non_negative(name, getattr(self, name))


@dataclass(frozen=True)
class KarpenterSettings:
    """Karpenter's timing, with its defaults.

    Attributes
    ----------
    batch_idle_s : float
        ``--batch-idle-duration``: a batch closes after this long without a new pending pod. [s]
    batch_max_s : float
        ``--batch-max-duration``: a batch closes this long after it opened at the latest. [s]
    consolidate_after_s : float
        NodePool ``disruption.consolidateAfter`` (``0s`` by default in ``karpenter.sh/v1``):
        how long a node stays empty before removal. [s]
    """

    batch_idle_s: float = 1.0
    batch_max_s: float = 10.0
    consolidate_after_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("batch_idle_s", "batch_max_s", "consolidate_after_s"):
            require_non_negative(name, getattr(self, name))


@dataclass(frozen=True)
class Phase:
    """One bar of a cold start's waterfall.

    Attributes
    ----------
    name : str
        The phase, as :class:`ColdStartPhases` names it, or ``node autoscaler``.
    start_s, end_s : float
        From the pod's creation. [s]
    """

    name: str
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``. [s]"""
        return self.end_s - self.start_s


def cluster_autoscaler_scale_up_s(
    pending_since_s: float, settings: ClusterAutoscalerSettings, *, first_scan_s: float = 0.0
) -> float:
    """When cluster-autoscaler asks for a node for a GPU pod pending since ``pending_since_s``.

    It scans at ``first_scan_s + k x scan_interval_s`` and counts the pod at
    the first scan at which it has been pending ``gpu_pod_scale_up_delay_s``.

    Parameters
    ----------
    pending_since_s : float
        When the pod was created and found no free GPU. [s]
    settings : ClusterAutoscalerSettings
    first_scan_s : float, optional
        The time of one of its scans (the loop's phase). [s]

    Returns
    -------
    float
        The scale-up time. [s]

    Examples
    --------
    >>> cluster_autoscaler_scale_up_s(0.0, ClusterAutoscalerSettings())
    30.0
    >>> cluster_autoscaler_scale_up_s(3.0, ClusterAutoscalerSettings())
    40.0
    """
    eligible_s = pending_since_s + settings.gpu_pod_scale_up_delay_s
    if settings.scan_interval_s == 0:
        return float(eligible_s)
    scans = math.ceil(round((eligible_s - first_scan_s) / settings.scan_interval_s, 9))
    return float(first_scan_s + max(scans, 0) * settings.scan_interval_s)


def karpenter_batch_close_s(pending_times_s: Sequence[float], settings: KarpenterSettings) -> float:
    """When Karpenter closes the batch the first of ``pending_times_s`` opened, and launches nodes.

    Parameters
    ----------
    pending_times_s : sequence of float
        When each pod became pending, ascending. [s]
    settings : KarpenterSettings

    Returns
    -------
    float
        ``min(last pod in the batch + batch_idle_s, first + batch_max_s)``, the
        last pod in the batch being the last one to arrive within
        ``batch_idle_s`` of the one before it. [s]

    Examples
    --------
    >>> karpenter_batch_close_s([0.0], KarpenterSettings())
    1.0
    >>> karpenter_batch_close_s([0.0, 0.5, 1.2, 5.0], KarpenterSettings())
    2.2
    """
    if len(pending_times_s) == 0:
        raise PlannerInputError(
            "pending_times_s: expected at least one pending pod",
            parameter="pending_times_s",
            expected="at least one time",
            value=pending_times_s,
        )
    opened_s = float(pending_times_s[0])
    deadline_s = opened_s + settings.batch_max_s
    last_s = opened_s
    for time_s in pending_times_s[1:]:
        if time_s < last_s:
            raise PlannerInputError(
                "pending_times_s: expected times in ascending order",
                parameter="pending_times_s",
                expected="ascending times",
                value=pending_times_s,
            )
        if time_s - last_s > settings.batch_idle_s or time_s > deadline_s:
            break
        last_s = float(time_s)
    return min(last_s + settings.batch_idle_s, deadline_s)


def phase_waterfall(
    phases: ColdStartPhases, *, needs_node: bool, image_cached: bool, reaction_delay_s: float = 0.0
) -> tuple[Phase, ...]:
    """The phases one pod goes through, back to back, from its creation.

    Parameters
    ----------
    phases : ColdStartPhases
    needs_node : bool
        True when no node has a free GPU: the node autoscaler's delay,
        provisioning and node init come first.
    image_cached : bool
        True when the node ran the image before: no pull.
    reaction_delay_s : float, optional
        The node autoscaler's delay before it asks for a node (see
        :func:`cluster_autoscaler_scale_up_s`, :func:`karpenter_batch_close_s`);
        used only when ``needs_node``. [s]

    Returns
    -------
    tuple of Phase
        Only the phases the pod goes through, zero-length ones included.
    """
    reaction_delay_s = require_non_negative("reaction_delay_s", reaction_delay_s)
    steps: list[tuple[str, float]] = []
    if needs_node:
        steps += [
            ("node autoscaler", reaction_delay_s),
            ("provision", phases.provision_s),
            ("node init", phases.node_init_s),
        ]
    if not image_cached:
        steps.append(("image pull", phases.image_pull_s))
    steps += [("weights load", phases.weights_load_s), ("warmup", phases.warmup_s)]
    waterfall = []
    clock_s = 0.0
    for name, duration_s in steps:
        waterfall.append(Phase(name, clock_s, clock_s + duration_s))
        clock_s += duration_s
    return tuple(waterfall)


def time_to_ready_s(
    phases: ColdStartPhases, *, needs_node: bool, image_cached: bool, reaction_delay_s: float = 0.0
) -> float:
    """Pod creation to Ready: the sum of the phases the pod goes through.

    Parameters
    ----------
    phases : ColdStartPhases
    needs_node, image_cached : bool
        As :func:`phase_waterfall`. A new node has the image only when its
        boot disk carries it (a pre-baked node image or a preloaded disk).
    reaction_delay_s : float, optional
        The node autoscaler's delay before it asks for a node. [s]

    Returns
    -------
    float
        [s]

    Examples
    --------
    A cold node, then a warm node with the image cached (kaito issue 2325's phases):

    >>> phases = ColdStartPhases(provision_s=284, node_init_s=126, image_pull_s=101,
    ...                          weights_load_s=260, warmup_s=195)
    >>> time_to_ready_s(phases, needs_node=True, image_cached=False)
    966.0
    >>> time_to_ready_s(phases, needs_node=False, image_cached=True)
    455.0
    """
    waterfall = phase_waterfall(
        phases, needs_node=needs_node, image_cached=image_cached, reaction_delay_s=reaction_delay_s
    )
    return float(waterfall[-1].end_s)


def pods_per_node(gpus_per_node: int, gpus_per_pod: int) -> int:
    """How many pods one node holds when each asks for ``gpus_per_pod`` GPUs.

    Raises
    ------
    PlannerInputError
        When one pod asks for more GPUs than a node has.
    """
    gpus_per_node = int(require_positive("gpus_per_node", gpus_per_node))
    gpus_per_pod = int(require_positive("gpus_per_pod", gpus_per_pod))
    if gpus_per_pod > gpus_per_node:
        raise PlannerInputError(
            f"gpus_per_pod: {gpus_per_pod} GPUs per pod do not fit on a node of {gpus_per_node}",
            parameter="gpus_per_pod",
            expected=f"at most gpus_per_node ({gpus_per_node})",
            value=gpus_per_pod,
        )
    return gpus_per_node // gpus_per_pod
