"""The ``supply`` module models where a replica's GPUs come from: a node pool and its autoscaler.

Without a node pool (``FleetSpec.nodes`` unset) every pod lands at once on a
GPU that is always there and is Ready ``warmup_s`` after it is created. With
one, a pod's life is, in simulated time:

1. **Pending**: created by the ReplicaSet, counted in ``status.replicas``,
   waiting for a node with ``gpus_per_replica`` free GPUs.
2. **Node bought**: the node autoscaler notices pending pods (see
   :mod:`planner.dynamics.cold_start` for cluster-autoscaler's scan and GPU
   buffer and Karpenter's batch window) and asks for enough nodes for those
   that will not fit on nodes already on their way, within ``max_nodes``. A
   request can fail for lack of capacity (``capacity_failure_frac``); the
   autoscaler backs off for ``capacity_retry_s`` and tries again. A node is
   billed from its request and can take pods ``provision_s + node_init_s``
   later (the GPUs are allocatable once the driver and device plugin are up).
3. **Loading**: bound to a node (first fit, nodes in creation order, those
   that hold the image first, as kube-scheduler's ImageLocality prefers), the
   pod pulls its image unless the node has it (a pull under way is shared),
   loads its weights and warms up: Ready after
   ``image_pull_s + weights_load_s + warmup``.
4. Terminating and removed as without a node pool; its GPUs are free again
   once it is removed.

``placeholders`` are low-priority pause pods that hold GPUs on nodes: a real
pod that finds no free GPU preempts one at once and takes its place, and the
evicted placeholder is pending again, so the node autoscaler buys a node for
it. They are not the Deployment's pods: the HPA does not count them.

A node with no pod on it (placeholders count) is removed by
cluster-autoscaler once unneeded for ``scale_down_unneeded_s`` and at least
``scale_down_delay_after_add_s`` after the last scale-up, at its scans; by
Karpenter once empty for ``consolidate_after_s``. The bill is per node from
its request to its removal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from planner.dynamics.cold_start import (
    CLUSTER_AUTOSCALER,
    NODE_AUTOSCALERS,
    ClusterAutoscalerSettings,
    KarpenterSettings,
    cluster_autoscaler_scale_up_s,
    karpenter_batch_close_s,
)
from planner.errors import PlannerInputError

__all__ = ["PROVISION_DISTRIBUTIONS", "NodePool", "NodePoolSpec", "SupplyOutcome", "draw_duration_s"]

PROVISION_DISTRIBUTIONS = ("fixed", "uniform", "lognormal")
_NEVER = math.inf


def draw_duration_s(rng: np.random.Generator, distribution: str, median_s: float, spread_s: float) -> float:
    """One seeded draw of a cold-start phase's length (a pod's warmup, a node's provisioning).

    Parameters
    ----------
    rng : numpy.random.Generator
    distribution : str
        ``fixed`` (always ``median_s``), ``uniform`` (``median_s`` +/- ``spread_s``, not below 0)
        or ``lognormal`` (median ``median_s``, sigma ``spread_s / median_s``).
    median_s, spread_s : float
        [s]

    Returns
    -------
    float
        [s]
    """
    if distribution == "uniform":
        return float(rng.uniform(max(median_s - spread_s, 0.0), median_s + spread_s))
    if distribution == "lognormal" and median_s > 0:
        return float(median_s * math.exp(spread_s / median_s * rng.standard_normal()))
    return float(median_s)


@dataclass(frozen=True)
class NodePoolSpec:
    """The GPU node pool and its autoscaler (FLEET.yaml ``nodes:``).

    Attributes
    ----------
    gpus_per_node : int
        GPUs on one node.
    usd_per_node_hour : float or None
        Price of one node-hour; ``None`` = ``gpus_per_node`` x the fleet's ``usd_per_gpu_hour``. [$]
    max_nodes : int or None
        Most nodes at once (quota); ``None``: no limit.
    initial_nodes : int or None
        Nodes up at time 0 (image cached); ``None``: as many as the initial pods and placeholders need.
    provision_s : float
        Node request to a registered node. [s]
    provision_distribution : str
        ``fixed``, ``uniform`` (``provision_s`` +/- ``provision_spread_s``) or ``lognormal``
        (median ``provision_s``, sigma ``provision_spread_s / provision_s``).
    provision_spread_s : float
        Spread of the provisioning time. [s]
    node_init_s : float
        Registered to GPUs allocatable (driver, device plugin). [s]
    autoscaler : str
        ``cluster-autoscaler`` or ``karpenter``.
    cluster_autoscaler : ClusterAutoscalerSettings
    karpenter : KarpenterSettings
    capacity_failure_frac : float
        Chance that a node request fails for lack of capacity. [fraction]
    capacity_retry_s : float
        How long the autoscaler backs off after a failed request. [s]
    """

    gpus_per_node: int = 8
    usd_per_node_hour: float | None = None
    max_nodes: int | None = None
    initial_nodes: int | None = None
    provision_s: float = 0.0
    provision_distribution: str = "fixed"
    provision_spread_s: float = 0.0
    node_init_s: float = 0.0
    autoscaler: str = CLUSTER_AUTOSCALER
    cluster_autoscaler: ClusterAutoscalerSettings = field(default_factory=ClusterAutoscalerSettings)
    karpenter: KarpenterSettings = field(default_factory=KarpenterSettings)
    capacity_failure_frac: float = 0.0
    capacity_retry_s: float = 60.0

    def __post_init__(self) -> None:
        if not (isinstance(self.gpus_per_node, int) and self.gpus_per_node >= 1):
            raise PlannerInputError(f"nodes.gpus_per_node: expected an integer >= 1, got {self.gpus_per_node!r}")
        for name in ("max_nodes", "initial_nodes"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 0):
                raise PlannerInputError(f"nodes.{name}: expected an integer >= 0, got {value!r}")
        if self.max_nodes is not None and self.initial_nodes is not None and self.initial_nodes > self.max_nodes:
            raise PlannerInputError(
                f"nodes.initial_nodes: {self.initial_nodes} is above nodes.max_nodes ({self.max_nodes})"
            )
        for name in ("provision_s", "provision_spread_s", "node_init_s", "capacity_retry_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise PlannerInputError(f"nodes.{name}: expected a finite number >= 0, got {value!r}")
        if self.usd_per_node_hour is not None and not (
            math.isfinite(self.usd_per_node_hour) and self.usd_per_node_hour >= 0
        ):
            raise PlannerInputError(f"nodes.usd_per_node_hour: expected a number >= 0, got {self.usd_per_node_hour!r}")
        if not 0.0 <= self.capacity_failure_frac < 1.0:
            raise PlannerInputError(
                f"nodes.capacity_failure_frac: expected a fraction in [0, 1), got {self.capacity_failure_frac!r}"
            )
        if self.autoscaler not in NODE_AUTOSCALERS:
            raise PlannerInputError(
                f"nodes.autoscaler: expected one of {', '.join(NODE_AUTOSCALERS)}, got {self.autoscaler!r}"
            )
        if self.provision_distribution not in PROVISION_DISTRIBUTIONS:
            raise PlannerInputError(
                f"nodes.provision_distribution: expected one of "
                f"{', '.join(PROVISION_DISTRIBUTIONS)}, got {self.provision_distribution!r}"
            )

    @property
    def reaction_delay_s(self) -> float:
        """From the first pod pending to the node autoscaler's request, with no other pod in the way. [s]

        cluster-autoscaler: its GPU-pod buffer, then the next scan; Karpenter: one pod's batch window.
        """
        if self.autoscaler == CLUSTER_AUTOSCALER:
            return cluster_autoscaler_scale_up_s(0.0, self.cluster_autoscaler)
        return karpenter_batch_close_s([0.0], self.karpenter)

    @property
    def empty_node_kept_s(self) -> float:
        """How long an empty node stays before the node autoscaler removes it. [s]

        cluster-autoscaler's ``--scale-down-unneeded-time`` (its delay after a
        scale-up can hold a node longer), Karpenter's ``consolidateAfter``.
        """
        if self.autoscaler == CLUSTER_AUTOSCALER:
            return self.cluster_autoscaler.scale_down_unneeded_s
        return self.karpenter.consolidate_after_s

    def node_price_usd_per_hour(self, usd_per_gpu_hour: float) -> float:
        """One node-hour's price: the given one, else the GPUs' price. [$]"""
        if self.usd_per_node_hour is not None:
            return float(self.usd_per_node_hour)
        return self.gpus_per_node * usd_per_gpu_hour


@dataclass(frozen=True)
class SupplyOutcome:
    """What the node pool did over a run.

    Attributes
    ----------
    node_hours : float
        Node time billed, from each node's request to its removal. [node-h]
    peak_nodes : int
        Most nodes requested and not removed at once.
    pending_pod_s : float
        Time the Deployment's pods spent Pending, summed over pods. [s]
    time_to_ready_s : numpy.ndarray
        Per pod created during the run that became Ready: creation to Ready. [s]
    usd_per_node_hour : float
        The price the run's cost is counted at. [$]
    """

    node_hours: float
    peak_nodes: int
    pending_pod_s: float
    time_to_ready_s: np.ndarray
    usd_per_node_hour: float

    def summary(self) -> dict:
        """The scalar results, for JSON."""
        ready = self.time_to_ready_s

        def stat(fn) -> float | None:
            return float(fn(ready)) if ready.size else None

        return {
            "time_to_ready_s": {
                "p50": stat(lambda x: np.percentile(x, 50)),
                "p95": stat(lambda x: np.percentile(x, 95)),
                "max": stat(np.max),
            },
            "node_hours": self.node_hours,
            "peak_nodes": self.peak_nodes,
            "pending_pod_s": self.pending_pod_s,
            "usd_per_node_hour": self.usd_per_node_hour,
        }


@dataclass
class NodePool:
    """The nodes of one pool and the pods bound to them, mutated tick by tick by :class:`~planner.simulate.fleet.Fleet`.

    Pods are the Deployment's pod indices; placeholders are kept here alone.
    """

    spec: NodePoolSpec
    gpus_per_pod: int
    rng: np.random.Generator
    requested_s: list[float] = field(default_factory=list)
    allocatable_s: list[float] = field(default_factory=list)
    removed_s: list[float] = field(default_factory=list)
    gpus_free: list[int] = field(default_factory=list)
    image_since_s: list[float] = field(default_factory=list)
    empty_since_s: list[float] = field(default_factory=list)
    pod_node: dict[int, int] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    pending_since_s: dict[int, float] = field(default_factory=dict)
    placeholder_node: list[int] = field(default_factory=list)
    placeholder_pending_since_s: list[float] = field(default_factory=list)
    last_scale_up_s: float = -_NEVER
    backoff_until_s: float = -_NEVER
    batch_opened_s: float = _NEVER
    batch_last_s: float = _NEVER
    batch_seen: int = 0

    # -- nodes --------------------------------------------------------------------------------
    def add_node(self, now_s: float, *, warm: bool = False) -> int:
        """Request one node at ``now_s``; ``warm`` nodes are up at once with the image (time 0)."""
        self.requested_s.append(now_s)
        self.allocatable_s.append(now_s if warm else now_s + self._provision_s() + self.spec.node_init_s)
        self.removed_s.append(math.nan)
        self.gpus_free.append(self.spec.gpus_per_node)
        self.image_since_s.append(now_s if warm else _NEVER)
        self.empty_since_s.append(now_s)
        return len(self.requested_s) - 1

    def _provision_s(self) -> float:
        spec = self.spec
        return draw_duration_s(self.rng, spec.provision_distribution, spec.provision_s, spec.provision_spread_s)

    def nodes(self) -> list[int]:
        """Nodes requested and not removed."""
        return [n for n in range(len(self.requested_s)) if math.isnan(self.removed_s[n])]

    def _pods_fit(self, gpus: int) -> int:
        return gpus // self.gpus_per_pod

    # -- pods ---------------------------------------------------------------------------------
    def add_pending(self, p: int, now_s: float) -> None:
        self.pending.append(p)
        self.pending_since_s[p] = now_s

    def forget_pending(self, p: int) -> None:
        """A pod deleted while Pending never binds."""
        if p in self.pending:
            self.pending.remove(p)

    def release(self, p: int, now_s: float) -> None:
        """A bound pod was removed: its GPUs are free."""
        node = self.pod_node.pop(p, None)
        if node is not None:
            self._free(node, now_s)

    def bind_warm(self, p: int, now_s: float) -> None:
        """Place a pod that is up at time 0, on a warm node (a new one if none has room)."""
        node = self._free_node(now_s)
        if node is None:
            node = self.add_node(now_s, warm=True)
        self.pod_node[p] = node
        self._take(node)

    def _free(self, node: int, now_s: float) -> None:
        self.gpus_free[node] += self.gpus_per_pod
        if self.gpus_free[node] == self.spec.gpus_per_node:
            self.empty_since_s[node] = now_s

    def _take(self, node: int) -> None:
        self.gpus_free[node] -= self.gpus_per_pod
        self.empty_since_s[node] = _NEVER

    def _free_node(self, now_s: float) -> int | None:
        # First fit over allocatable nodes, those that hold the image (or are pulling it) first.
        candidates = [
            n for n in self.nodes() if self.allocatable_s[n] <= now_s and self.gpus_free[n] >= self.gpus_per_pod
        ]
        if not candidates:
            return None
        with_image = [n for n in candidates if self.image_since_s[n] < _NEVER]
        return (with_image or candidates)[0]

    def bind_pending(self, now_s: float, image_pull_s: float) -> list[tuple[int, float]]:
        """Bind pending pods (oldest first) to free GPUs, preempting placeholders when needed.

        Returns
        -------
        list of (int, float)
            Each bound pod and when its image is on the node. [s]
        """
        bound = []
        for p in list(self.pending):
            node = self._free_node(now_s)
            if node is None:
                node = self._preempt_placeholder(now_s)
            if node is None:
                break
            self.pending.remove(p)
            self.pod_node[p] = node
            self._take(node)
            if self.image_since_s[node] == _NEVER:
                self.image_since_s[node] = now_s + image_pull_s
            bound.append((p, max(self.image_since_s[node], now_s)))
        self._bind_placeholders(now_s)
        return bound

    def _preempt_placeholder(self, now_s: float) -> int | None:
        for k, node in enumerate(self.placeholder_node):
            if node >= 0:
                self.placeholder_node[k] = -1
                self.placeholder_pending_since_s[k] = now_s
                self._free(node, now_s)
                return node
        return None

    def _bind_placeholders(self, now_s: float) -> None:
        for k, node in enumerate(self.placeholder_node):
            if node < 0:
                free = self._free_node(now_s)
                if free is None:
                    return
                self.placeholder_node[k] = free
                self._take(free)

    def add_placeholders(self, count: int, now_s: float, *, warm_nodes: bool) -> None:
        """Start ``count`` placeholders; with ``warm_nodes``, on warm nodes added for them as needed."""
        for _ in range(count):
            node = self._free_node(now_s)
            if node is None and warm_nodes and (self.spec.max_nodes is None or len(self.nodes()) < self.spec.max_nodes):
                node = self.add_node(now_s, warm=True)
            self.placeholder_node.append(-1 if node is None else node)
            self.placeholder_pending_since_s.append(now_s)
            if node is not None:
                self._take(node)

    # -- the node autoscaler ------------------------------------------------------------------
    def _waiting_for_nodes(self) -> list[float]:
        """Pending since, for every pod and placeholder without a node, oldest first."""
        since = [self.pending_since_s[p] for p in self.pending]
        since += [self.placeholder_pending_since_s[k] for k, node in enumerate(self.placeholder_node) if node < 0]
        return sorted(since)

    def _upcoming_pods(self, now_s: float) -> int:
        # Nodes on their way hold this many more pods: the autoscaler counts them before buying more.
        return sum(self._pods_fit(self.gpus_free[n]) for n in self.nodes() if self.allocatable_s[n] > now_s)

    def autoscale(self, now_s: float) -> None:
        """The node autoscaler's work at ``now_s``: buy nodes for pending pods, remove empty ones."""
        if self.spec.autoscaler == CLUSTER_AUTOSCALER:
            self._cluster_autoscaler(now_s)
        else:
            self._karpenter(now_s)

    def _buy(self, pods: int, now_s: float) -> None:
        if pods <= 0 or now_s < self.backoff_until_s:
            return
        wanted = math.ceil(pods / self._pods_fit(self.spec.gpus_per_node))
        if self.spec.max_nodes is not None:
            wanted = min(wanted, self.spec.max_nodes - len(self.nodes()))
        for _ in range(max(wanted, 0)):
            if self.spec.capacity_failure_frac > 0 and self.rng.random() < self.spec.capacity_failure_frac:
                self.backoff_until_s = now_s + self.spec.capacity_retry_s
                return
            self.add_node(now_s)
            self.last_scale_up_s = now_s

    def _cluster_autoscaler(self, now_s: float) -> None:
        settings: ClusterAutoscalerSettings = self.spec.cluster_autoscaler
        if settings.scan_interval_s > 0:
            scans = now_s / settings.scan_interval_s
            if abs(scans - round(scans)) > 1e-9:
                return
        waiting = self._waiting_for_nodes()
        upcoming = self._upcoming_pods(now_s)
        eligible = [since for since in waiting[upcoming:] if now_s - since >= settings.gpu_pod_scale_up_delay_s - 1e-9]
        self._buy(len(eligible), now_s)
        if now_s - self.last_scale_up_s < settings.scale_down_delay_after_add_s - 1e-9:
            return
        self._remove_empty(now_s, settings.scale_down_unneeded_s)

    def _karpenter(self, now_s: float) -> None:
        settings: KarpenterSettings = self.spec.karpenter
        waiting = self._waiting_for_nodes()
        unplaced = waiting[self._upcoming_pods(now_s) :]
        if not unplaced:
            self.batch_opened_s = self.batch_last_s = _NEVER
            self.batch_seen = 0
        else:
            if self.batch_opened_s == _NEVER:
                self.batch_opened_s = self.batch_last_s = now_s
                self.batch_seen = len(unplaced)
            elif len(unplaced) > self.batch_seen:
                self.batch_last_s = now_s
                self.batch_seen = len(unplaced)
            closes_s = min(self.batch_last_s + settings.batch_idle_s, self.batch_opened_s + settings.batch_max_s)
            if now_s >= closes_s - 1e-9:
                self._buy(len(unplaced), now_s)
                self.batch_opened_s = self.batch_last_s = _NEVER
                self.batch_seen = 0
        self._remove_empty(now_s, settings.consolidate_after_s)

    def _remove_empty(self, now_s: float, empty_for_s: float) -> None:
        for n in self.nodes():
            if (
                self.allocatable_s[n] <= now_s
                and self.gpus_free[n] == self.spec.gpus_per_node
                # The unneeded clock starts once the node can hold pods, not at its request.
                and now_s - max(self.empty_since_s[n], self.allocatable_s[n]) >= empty_for_s - 1e-9
            ):
                self.removed_s[n] = now_s

    # -- accounting ---------------------------------------------------------------------------
    def node_hours(self, end_s: float) -> float:
        """Node time billed from each node's request to its removal (or ``end_s``). [node-h]"""
        total_s = 0.0
        for n in range(len(self.requested_s)):
            removed = self.removed_s[n] if not math.isnan(self.removed_s[n]) else end_s
            total_s += max(min(removed, end_s) - self.requested_s[n], 0.0)
        return total_s / 3600.0

    def counts(self, now_s: float) -> tuple[int, int]:
        """(nodes with allocatable GPUs, nodes still provisioning) at ``now_s``."""
        live = self.nodes()
        ready = sum(1 for n in live if self.allocatable_s[n] <= now_s)
        return ready, len(live) - ready
