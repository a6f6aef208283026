"""The ``fleet`` module holds the pods of one Deployment: cold starts, routing, scale-down and drain.

A pod's life, with the times kept per pod (struct of arrays in :class:`Fleet`):

1. **Requested** (``requested_s``): the ReplicaSet created it. It is billed
   from here, serves nothing, and is not Ready.
2. **Ready** (``ready_s = requested_s + warmup``): the readiness probe passes;
   the router sends it requests and Prometheus scrapes it. Readiness is
   checked at tick starts, so a pod becomes Ready up to one tick late.
3. **Deleted** (``deleted_s``): chosen by the ReplicaSet controller's order
   (:func:`deletion_order`). It leaves the Service at once (no new
   requests), runs its preStop hook, then gets SIGTERM; vLLM aborts what it
   holds at SIGTERM when ``--shutdown-timeout`` is 0, else drains for up to
   that long; the kubelet kills it at ``terminationGracePeriodSeconds``.
   Whatever is unfinished at that deadline is cut off.
4. **Removed** (``removed_s``): the container exited; billing stops.

The router sends each request, at its arrival, to a Ready pod that is not
terminating: the least loaded one (fewest running + waiting, lowest index on
ties) or, as a plain Kubernetes Service does, the next in turn.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from planner.autoscaler.defaults import DEFAULT_SYNC_PERIOD_S
from planner.capacity.cost import DEFAULT_USD_PER_GPU_HOUR
from planner.dynamics.cold_start import ColdStartPhases, time_to_ready_s
from planner.dynamics.grace import (
    DEFAULT_TERMINATION_GRACE_PERIOD_S,
    DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S,
)
from planner.errors import PlannerInputError
from planner.simulate.replica import CUT, GATEWAY, WAITING, ReplicaSpec, RequestState
from planner.simulate.supply import NodePool, NodePoolSpec, draw_duration_s

__all__ = [
    "DEFAULT_START_EPOCH_S",
    "LEAST_LOADED",
    "ROUND_ROBIN",
    "Fleet",
    "FleetSpec",
    "deletion_order",
]

DEFAULT_START_EPOCH_S = 1704067200.0
"""Simulated time 0 on the wall clock: 2024-01-01 00:00 UTC, a Monday (UTC epoch). Only cron
triggers read it; ``planner simulate --start`` moves it. [s]"""
LEAST_LOADED = "least-loaded"
ROUND_ROBIN = "round-robin"
ROUTERS = (LEAST_LOADED, ROUND_ROBIN)
WARMUP_DISTRIBUTIONS = ("fixed", "uniform", "lognormal")


@dataclass(frozen=True)
class FleetSpec:
    """Everything about the fleet that is not the autoscaler (FLEET.yaml), with defaults.

    Attributes
    ----------
    replica : ReplicaSpec
        One replica's step time, batch limit and KV cache.
    warmup_s : float
        Time from pod request to Ready (image pull, weights, CUDA graphs). [s]
    warmup_distribution : str
        ``fixed`` (every pod takes ``warmup_s``), ``uniform`` (between
        ``warmup_s - warmup_spread_s`` and ``warmup_s + warmup_spread_s``) or
        ``lognormal`` (median ``warmup_s``, sigma ``warmup_spread_s / warmup_s``).
    warmup_spread_s : float
        Spread of the warmup distribution. [s]
    gpus_per_replica : int
        GPUs billed per pod.
    usd_per_gpu_hour : float
        Price of one GPU-hour. [$]
    initial_replicas : int or None
        Ready pods at time 0; ``None`` = the autoscaler's minimum.
    ttft_slo_s : float
        A request meets its objective when TTFT is at most this. [s]
    itl_slo_ms : float or None
        If set, its mean inter-token latency must be at most this too. [ms]
    scrape_interval_s : float
        Prometheus scrape interval. [s]
    router : str
        ``least-loaded`` or ``round-robin``.
    termination_grace_period_s : float
        ``terminationGracePeriodSeconds``. [s]
    pre_stop_s : float
        preStop hook duration (the pod keeps serving what it holds). [s]
    shutdown_timeout_s : float
        vLLM ``--shutdown-timeout``: 0 aborts in-flight requests at SIGTERM. [s]
    tick_s : float
        Simulation tick. [s]
    hpa_sync_period_s : float
        kube-controller-manager ``--horizontal-pod-autoscaler-sync-period``. [s]
    signals : tuple of (str, str)
        Query or metric name -> an expression the simulator understands.
    seed : int
        Seed for warmup draws and pod UIDs.
    nodes : NodePoolSpec or None
        The GPU node pool and its autoscaler (:mod:`planner.simulate.supply`);
        ``None``: every pod finds a GPU at once and ``warmup_s`` is its whole cold start.
    image_pull_s : float
        With ``nodes``: pulling the image on a node that has not run it. [s]
    weights_load_s : float
        With ``nodes``: loading the weights, before ``warmup_s`` (compile, CUDA graphs). [s]
    placeholders : int
        With ``nodes``: low-priority pause pods of ``gpus_per_replica`` GPUs each that hold warm GPUs.
    start_epoch_s : float
        The wall-clock instant of simulated time 0, UTC epoch; the controllers read it only for
        cron triggers (default :data:`DEFAULT_START_EPOCH_S`, a Monday 00:00 UTC). [s]
    source : str
        The file the spec was read from, for messages ("" when built in code).
    """

    replica: ReplicaSpec = field(default_factory=ReplicaSpec)
    warmup_s: float = 60.0
    warmup_distribution: str = "fixed"
    warmup_spread_s: float = 0.0
    gpus_per_replica: int = 1
    usd_per_gpu_hour: float = DEFAULT_USD_PER_GPU_HOUR
    initial_replicas: int | None = None
    ttft_slo_s: float = 2.0
    itl_slo_ms: float | None = None
    scrape_interval_s: float = 15.0
    router: str = LEAST_LOADED
    termination_grace_period_s: float = DEFAULT_TERMINATION_GRACE_PERIOD_S
    pre_stop_s: float = 0.0
    shutdown_timeout_s: float = DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S
    tick_s: float = 1.0
    hpa_sync_period_s: float = DEFAULT_SYNC_PERIOD_S
    signals: tuple[tuple[str, str], ...] = ()
    seed: int = 0
    nodes: NodePoolSpec | None = None
    image_pull_s: float = 0.0
    weights_load_s: float = 0.0
    placeholders: int = 0
    start_epoch_s: float = DEFAULT_START_EPOCH_S
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise PlannerInputError(f"router: expected one of {', '.join(ROUTERS)}, got {self.router!r}")
        if self.warmup_distribution not in WARMUP_DISTRIBUTIONS:
            raise PlannerInputError(
                f"warmup_distribution: expected one of {', '.join(WARMUP_DISTRIBUTIONS)}, "
                f"got {self.warmup_distribution!r}"
            )
        non_negative = (
            "warmup_s",
            "warmup_spread_s",
            "usd_per_gpu_hour",
            "termination_grace_period_s",
            "pre_stop_s",
            "shutdown_timeout_s",
        )
        for name in non_negative:
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise PlannerInputError(f"{name}: expected a finite number >= 0, got {value!r}")
        if isinstance(self.start_epoch_s, bool) or not (
            isinstance(self.start_epoch_s, int | float) and math.isfinite(self.start_epoch_s)
        ):
            raise PlannerInputError(f"start_epoch_s: expected a finite number, got {self.start_epoch_s!r}")
        for name in ("ttft_slo_s", "scrape_interval_s", "tick_s", "hpa_sync_period_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise PlannerInputError(f"{name}: expected a finite number > 0, got {value!r}")
        if self.itl_slo_ms is not None and not self.itl_slo_ms > 0:
            raise PlannerInputError(f"itl_slo_ms: expected a number > 0, got {self.itl_slo_ms!r}")
        if not (isinstance(self.gpus_per_replica, int) and self.gpus_per_replica >= 1):
            raise PlannerInputError(f"gpus_per_replica: expected an integer >= 1, got {self.gpus_per_replica!r}")
        if self.initial_replicas is not None and not (
            isinstance(self.initial_replicas, int) and self.initial_replicas >= 0
        ):
            raise PlannerInputError(f"initial_replicas: expected an integer >= 0, got {self.initial_replicas!r}")
        self._check_supply()
        for name in ("scrape_interval_s", "hpa_sync_period_s"):
            ticks = getattr(self, name) / self.tick_s
            if abs(ticks - round(ticks)) > 1e-9:
                raise PlannerInputError(f"{name}: must be a whole number of ticks (tick_s={self.tick_s})")

    def _check_supply(self) -> None:
        for name in ("image_pull_s", "weights_load_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise PlannerInputError(f"pod.{name}: expected a finite number >= 0, got {value!r}")
        if not (isinstance(self.placeholders, int) and self.placeholders >= 0):
            raise PlannerInputError(f"placeholders: expected an integer >= 0, got {self.placeholders!r}")
        if self.nodes is None:
            for name in ("image_pull_s", "weights_load_s", "placeholders"):
                if getattr(self, name):
                    raise PlannerInputError(
                        f"{'pod.' if name != 'placeholders' else ''}{name}: needs a nodes: "
                        "section (without one, warmup_s is the whole cold start)"
                    )
        elif self.gpus_per_replica > self.nodes.gpus_per_node:
            raise PlannerInputError(
                f"gpus_per_replica: {self.gpus_per_replica} GPUs per pod do not fit on a node "
                f"of nodes.gpus_per_node = {self.nodes.gpus_per_node}"
            )

    def cold_start_phases(self) -> ColdStartPhases:
        """The phases of a cold start this fleet describes (node phases 0 without a node pool)."""
        nodes = self.nodes
        return ColdStartPhases(
            provision_s=nodes.provision_s if nodes is not None else 0.0,
            node_init_s=nodes.node_init_s if nodes is not None else 0.0,
            image_pull_s=self.image_pull_s,
            weights_load_s=self.weights_load_s,
            warmup_s=self.warmup_s,
        )

    def time_to_ready_s(self, *, needs_node: bool, image_cached: bool) -> float:
        """Pod creation to Ready at the median of each phase, with nothing else queued. [s]

        ``needs_node`` adds the node autoscaler's reaction delay, provisioning
        and node init; ``image_cached`` drops the pull. Without a node pool a
        pod's cold start is ``warmup_s`` whatever the flags say.
        """
        if self.nodes is None:
            return float(self.warmup_s)
        return time_to_ready_s(
            self.cold_start_phases(),
            needs_node=needs_node,
            image_cached=image_cached,
            reaction_delay_s=self.nodes.reaction_delay_s,
        )

    @property
    def comeback_s(self) -> float:
        """How long a replica removed in a dip takes to come back at the earliest. [s]

        Without a node pool, ``warmup_s``. With one, the node stays for the node
        autoscaler's ``empty_node_kept_s`` after its pod leaves, and a pod bound
        there skips the node and the pull; one that removes empty nodes at once
        (Karpenter's default ``consolidateAfter: 0s``) leaves only a new node.
        """
        if self.nodes is None:
            return float(self.warmup_s)
        if self.nodes.empty_node_kept_s > 0:
            return self.time_to_ready_s(needs_node=False, image_cached=True)
        return self.time_to_ready_s(needs_node=True, image_cached=False)

    @property
    def signal_map(self) -> dict[str, str]:
        return dict(self.signals)


def deletion_order(
    ready: np.ndarray, ready_s: np.ndarray, requested_s: np.ndarray, uid: np.ndarray, now_s: float
) -> np.ndarray:
    """Pods in the order the ReplicaSet controller deletes them (first = deleted first).

    Kubernetes ``ActivePodsWithRanks.Less`` (pkg/controller/controller_utils.go),
    for pods that are all scheduled, Running, with no deletion cost, one per
    node and no restarts: not Ready before Ready; then, among Ready pods, the
    more recently Ready first, compared on a log2 scale of the time since
    (``LogarithmicScaleDown``, on by default since 1.22), ties broken by UID;
    then the more recently created first, on the same log2 scale, ties by UID.

    Parameters
    ----------
    ready : numpy.ndarray of bool
    ready_s, requested_s : numpy.ndarray of float
        When each pod became Ready (NaN if not) and was created. [s]
    uid : numpy.ndarray of int
        Pseudo-random pod UIDs (the final tie-break, as in Kubernetes).
    now_s : float
        The controller's "now". [s]

    Returns
    -------
    numpy.ndarray of int
        Positions into the given arrays, deletion order.
    """

    def log_rank(since_s: float) -> int:
        elapsed_ns = (now_s - since_s) * 1e9
        return int(math.log2(elapsed_ns)) if elapsed_ns > 0 else -1

    keys = []
    for i in range(len(ready)):
        if ready[i]:
            key = (1, log_rank(ready_s[i]), int(uid[i]))
        else:
            key = (0, log_rank(requested_s[i]), int(uid[i]))
        keys.append((key, i))
    keys.sort()
    return np.array([i for _, i in keys], dtype=np.int64)


@dataclass
class Fleet:
    """The pods of one Deployment, as per-pod arrays plus each pod's batch and queue.

    Mutated by the engine tick by tick; see the module docstring for a pod's life.
    """

    spec: FleetSpec
    requested_s: list[float] = field(default_factory=list)
    ready_s: list[float] = field(default_factory=list)
    deleted_s: list[float] = field(default_factory=list)
    sigterm_s: list[float] = field(default_factory=list)
    stop_s: list[float] = field(default_factory=list)
    removed_s: list[float] = field(default_factory=list)
    uid: list[int] = field(default_factory=list)
    running: list[list[int]] = field(default_factory=list)
    waiting: list[deque] = field(default_factory=list)
    stall_debt_s: list[float] = field(default_factory=list)  # per pod: ReplicaTick.stall_debt_s [s]
    gateway: deque = field(default_factory=deque)
    rng: np.random.Generator = field(init=False)
    pool: NodePool | None = field(init=False, default=None)
    bound_s: list[float] = field(default_factory=list)
    _next_turn: int = 0
    _supply_started: bool = False
    _warm: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.spec.seed)
        if self.spec.nodes is not None:
            # Its own stream, so node draws leave the pods' warmups and UIDs as they are.
            self.pool = NodePool(
                self.spec.nodes, self.spec.gpus_per_replica, np.random.default_rng([self.spec.seed, 1])
            )
            for _ in range(self.spec.nodes.initial_nodes or 0):
                self.pool.add_node(0.0, warm=True)

    # -- pod counts ---------------------------------------------------------------------------
    def live(self) -> list[int]:
        """Pods that exist and are not terminating (what ``status.replicas`` counts)."""
        return [p for p in range(len(self.uid)) if math.isnan(self.deleted_s[p])]

    def is_ready(self, p: int, now_s: float) -> bool:
        return self.ready_s[p] <= now_s and math.isnan(self.deleted_s[p])

    def routable(self, now_s: float) -> list[int]:
        """Ready pods that are not terminating: the Service's endpoints."""
        return [p for p in self.live() if self.ready_s[p] <= now_s]

    def serving(self, now_s: float) -> list[int]:
        """Pods whose vLLM server is up: Ready once, not yet exited (terminating ones included)."""
        return [p for p in range(len(self.uid)) if self.ready_s[p] <= now_s and math.isnan(self.removed_s[p])]

    # -- scaling ------------------------------------------------------------------------------
    def _warmup_s(self) -> float:
        spec = self.spec
        return draw_duration_s(self.rng, spec.warmup_distribution, spec.warmup_s, spec.warmup_spread_s)

    def add_pod(self, now_s: float, *, warm: bool = False) -> int:
        """Create one pod at ``now_s``; ``warm`` pods are Ready at once (the fleet at time 0).

        With a node pool, a pod that is not warm is Pending until it is bound
        to a node (:meth:`supply_step`), and its Ready time is set then.
        """
        p = len(self.uid)
        self.requested_s.append(now_s)
        if self.pool is None:
            self.ready_s.append(now_s if warm else now_s + self._warmup_s())
        elif warm:
            self.ready_s.append(now_s)
            self.bound_s.append(now_s)
            self.pool.bind_warm(p, now_s)
            self._warm.add(p)
        else:
            self.ready_s.append(math.inf)
            self.bound_s.append(math.nan)
            self.pool.add_pending(p, now_s)
        for column in (self.deleted_s, self.sigterm_s, self.stop_s, self.removed_s):
            column.append(math.nan)
        self.uid.append(int(self.rng.integers(0, 2**62)))
        self.running.append([])
        self.waiting.append(deque())
        self.stall_debt_s.append(0.0)
        return p

    def scale_to(self, replicas: int, now_s: float) -> None:
        """Create or delete pods so that ``replicas`` exist and are not terminating."""
        live = self.live()
        if replicas > len(live):
            for _ in range(replicas - len(live)):
                self.add_pod(now_s)
        elif replicas < len(live):
            ready = np.array([self.is_ready(p, now_s) for p in live])
            ready_s = np.array([self.ready_s[p] for p in live])
            requested_s = np.array([self.requested_s[p] for p in live])
            uid = np.array([self.uid[p] for p in live])
            order = deletion_order(ready, ready_s, requested_s, uid, now_s)
            for position in order[: len(live) - replicas]:
                self.delete_pod(live[position], now_s)

    def delete_pod(self, p: int, now_s: float) -> None:
        """Start a pod's termination: out of the Service now, SIGTERM after preStop, kill at grace."""
        spec = self.spec
        self.deleted_s[p] = now_s
        if self.pool is not None:
            self.pool.forget_pending(p)
        grace_s = spec.termination_grace_period_s
        self.sigterm_s[p] = now_s + min(spec.pre_stop_s, grace_s)
        if self.ready_s[p] > now_s:
            # Never started serving: the container is stopped at once.
            self.stop_s[p] = now_s
        else:
            self.stop_s[p] = min(now_s + grace_s, self.sigterm_s[p] + spec.shutdown_timeout_s)

    def finish_terminations(self, now_s: float, req: RequestState) -> int:
        """Remove pods that exited by ``now_s``; cut what they held at the deadline.

        A draining pod exits as soon as it holds nothing after SIGTERM; at its
        deadline, anything still running or waiting is cut off. Returns the
        number of requests cut.
        """
        cut = 0
        for p in range(len(self.uid)):
            if math.isnan(self.deleted_s[p]) or not math.isnan(self.removed_s[p]):
                continue
            held = self.running[p] or self.waiting[p]
            if not held and now_s >= self.sigterm_s[p]:
                last_done = max((req.done_s[i] for i in self._served_by(p, req)), default=self.sigterm_s[p])
                self.removed_s[p] = min(max(self.sigterm_s[p], last_done), now_s)
            elif now_s >= self.stop_s[p]:
                for i in list(self.running[p]) + list(self.waiting[p]):
                    req.status[i] = CUT
                    cut += 1
                self.running[p].clear()
                self.waiting[p].clear()
                self.removed_s[p] = self.stop_s[p]
        return cut

    def _served_by(self, p: int, req: RequestState) -> np.ndarray:
        mine = np.flatnonzero(req.replica == p)
        return mine[np.isfinite(req.done_s[mine])]

    # -- supply -------------------------------------------------------------------------------
    def supply_step(self, now_s: float) -> None:
        """With a node pool: free the GPUs of removed pods, bind pending pods, run the node autoscaler."""
        pool = self.pool
        if pool is None:
            return
        if not self._supply_started:
            self._supply_started = True
            pool.add_placeholders(self.spec.placeholders, now_s, warm_nodes=pool.spec.initial_nodes is None)
        for p in list(pool.pod_node):
            if self.removed_s[p] <= now_s:
                pool.release(p, now_s)
        self._bind(now_s)
        pool.autoscale(now_s)
        self._bind(now_s)

    def _bind(self, now_s: float) -> None:
        pool = self.pool
        assert pool is not None
        for p, image_at_s in pool.bind_pending(now_s, self.spec.image_pull_s):
            self.bound_s[p] = now_s
            self.ready_s[p] = image_at_s + self.spec.weights_load_s + self._warmup_s()

    def supply_counts(self, now_s: float) -> tuple[int, int, int, int]:
        """(nodes ready, nodes provisioning, pods pending, pods loading) at ``now_s``."""
        assert self.pool is not None
        ready_nodes, provisioning = self.pool.counts(now_s)
        loading = sum(1 for p in self.pool.pod_node if self.ready_s[p] > now_s and math.isnan(self.deleted_s[p]))
        return ready_nodes, provisioning, len(self.pool.pending), loading

    def time_to_ready_s(self) -> np.ndarray:
        """Creation to Ready, for each pod created during the run that became Ready. [s]"""
        return np.array(
            [
                self.ready_s[p] - self.requested_s[p]
                for p in range(len(self.uid))
                if p not in self._warm and math.isfinite(self.ready_s[p])
            ],
            dtype=float,
        )

    def pending_pod_s(self, end_s: float) -> float:
        """Time the pods spent Pending, summed: creation to binding (or deletion, or ``end_s``). [s]"""
        total_s = 0.0
        for p in range(len(self.uid)):
            until_s = (
                self.bound_s[p]
                if not math.isnan(self.bound_s[p])
                else min(end_s, self.deleted_s[p] if not math.isnan(self.deleted_s[p]) else end_s)
            )
            total_s += max(until_s - self.requested_s[p], 0.0)
        return total_s

    # -- routing ------------------------------------------------------------------------------
    def route(self, i: int, now_s: float, req: RequestState, endpoints: list[int]) -> None:
        """Send request ``i`` to a pod, or hold it at the gateway when no pod is Ready."""
        if not endpoints:
            req.status[i] = GATEWAY
            self.gateway.append(i)
            return
        if self.spec.router == ROUND_ROBIN:
            p = endpoints[self._next_turn % len(endpoints)]
            self._next_turn += 1
        else:
            p = min(endpoints, key=lambda q: (len(self.running[q]) + len(self.waiting[q]), q))
        req.replica[i] = p
        req.status[i] = WAITING
        self.waiting[p].append(i)

    def route_all(self, indices, now_s: float, req: RequestState, endpoints: list[int]) -> None:
        """Route requests in arrival order (same choices as :meth:`route`, one load count kept per pod)."""
        if not endpoints or self.spec.router == ROUND_ROBIN:
            for i in indices:
                self.route(i, now_s, req, endpoints)
            return
        loads = [len(self.running[p]) + len(self.waiting[p]) for p in endpoints]
        for i in indices:
            j = loads.index(min(loads))  # lowest load, then lowest pod index (endpoints are sorted)
            p = endpoints[j]
            loads[j] += 1
            req.replica[i] = p
            req.status[i] = WAITING
            self.waiting[p].append(i)

    def release_gateway(self, now_s: float, req: RequestState) -> None:
        """Requests held while no pod was Ready go to the pods that are Ready now."""
        endpoints = self.routable(now_s)
        if not endpoints:
            return
        held, self.gateway = self.gateway, deque()
        for i in held:
            self.route(i, now_s, req, endpoints)

    # -- billing ------------------------------------------------------------------------------
    def gpu_hours(self, end_s: float) -> float:
        """GPU-hours from each pod's request (with a node pool: its binding) to its removal (or ``end_s``). [GPU-h]"""
        total_s = 0.0
        for p in range(len(self.uid)):
            removed = self.removed_s[p] if not math.isnan(self.removed_s[p]) else end_s
            if self.pool is None:
                start_s = self.requested_s[p]
            elif math.isnan(self.bound_s[p]):
                continue  # never held a GPU
            else:
                start_s = self.bound_s[p]
            total_s += max(min(removed, end_s) - start_s, 0.0)
        return total_s * self.spec.gpus_per_replica / 3600.0
