"""Compiled node pool: where the Deployment's GPUs come from, bit for bit the reference's.

The numba twin of :class:`planner.simulate.supply.NodePool`, function for
function: nodes requested (and billed) by the node autoscaler, allocatable
``provision_s + node_init_s`` later, holding an image once a pod pulled it,
removed once empty long enough; placeholders (low-priority pause pods) that
hold warm GPUs until a real pod preempts one; cluster-autoscaler's scans, GPU
buffer and scale-down delays, Karpenter's batch window and consolidation;
capacity failures that back off. Its random draws (provisioning times, then
capacity failures, interleaved as the reference draws them) come from the
pool's own ``numpy.random.Generator``, which numba advances exactly as numpy
does. See :mod:`planner.simulate.supply` for the model itself.

The pool's state is one :class:`NodePool` of arrays (:func:`new_node_pool`):
per-node columns indexed by node number (request order), the ascending list
of live nodes (requested, not removed), the placeholders, the autoscaler's
clock and counters in named slots (``POOL_*``), and the generator. Its
parameters are one :class:`NodePoolParams`. The pods' side (which pods are
Pending, which node each is bound to) lives in
:class:`planner.simulate.fast.fleet.Pods`, whose ``pool`` field this is, as
:attr:`planner.simulate.fleet.Fleet.pool` is the reference's; binding pods
and the tick's supply step are in :mod:`planner.simulate.fast.fleet`.

Capacity is fixed when the arrays are made; :func:`add_node` returns -1 when it
is exhausted, and the engine checks room for a tick's nodes before the tick.

What runs every tick (the autoscaler's checks, the node counts) is inlined
into the engine's loop: a call would hand over the whole pool, array by
array. What runs when something happens (a purchase, a binding) is called.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import njit

from planner.simulate.fast._numeric import NRT_ON

__all__ = [
    "NodePool",
    "NodePoolParams",
    "add_node",
    "add_placeholders",
    "autoscale",
    "bind_placeholders",
    "buy",
    "draw_duration_s",
    "free_gpus",
    "free_node",
    "new_node_pool",
    "node_counts",
    "placeholders_waiting",
    "preempt_placeholder",
    "remove_empty",
    "take_gpus",
    "upcoming_pods",
    "waiting_for_nodes",
]

# NodePool.count slots: nodes requested so far, live nodes (requested, not removed), the pending
# entries Karpenter's open batch has seen, and whether the first supply step ran (placeholders started).
POOL_CREATED, POOL_LIVE, POOL_BATCH_SEEN, POOL_STARTED = range(4)
# NodePool.clock_s slots: the last scale-up, the end of a capacity failure's back-off, and Karpenter's
# open batch (when it opened, when it last grew; inf when none is open). [s]
POOL_LAST_SCALE_UP_S, POOL_BACKOFF_UNTIL_S, POOL_BATCH_OPENED_S, POOL_BATCH_LAST_S = range(4)
# Node autoscalers (NodePoolSpec.autoscaler).
CLUSTER_AUTOSCALER, KARPENTER = 0, 1
# Distributions of a drawn duration (draw_duration_s): a pod's warmup, a node's provisioning.
DURATION_FIXED, DURATION_UNIFORM, DURATION_LOGNORMAL = 0, 1, 2
NO_LIMIT = -1  # NodePoolParams.max_nodes without a quota
_NEVER = math.inf


class NodePoolParams(NamedTuple):
    """The node pool's and the pod phases' scalars (FLEET.yaml ``nodes:``, ``pod:``, ``placeholders``).

    Attributes
    ----------
    enabled : bool
        The fleet has a node pool (``FleetSpec.nodes`` set); when not, every other field is unused.
    gpus_per_node, gpus_per_pod : int
        GPUs on one node, and asked for by one pod (``FleetSpec.gpus_per_replica``).
    max_nodes : int
        Most nodes at once, or :data:`NO_LIMIT`.
    provision_kind : int
        :data:`DURATION_FIXED`, :data:`DURATION_UNIFORM` or :data:`DURATION_LOGNORMAL`.
    provision_s, provision_spread_s, node_init_s : float
        Node request to registered (median and spread), registered to allocatable. [s]
    autoscaler : int
        :data:`CLUSTER_AUTOSCALER` or :data:`KARPENTER`.
    scan_interval_s, gpu_pod_scale_up_delay_s, scale_down_unneeded_s, scale_down_delay_after_add_s : float
        cluster-autoscaler's settings (:class:`planner.dynamics.cold_start.ClusterAutoscalerSettings`). [s]
    batch_idle_s, batch_max_s, consolidate_after_s : float
        Karpenter's (:class:`planner.dynamics.cold_start.KarpenterSettings`). [s]
    capacity_failure_frac : float
        Chance that one node request fails. [fraction]
    capacity_retry_s : float
        Back-off after a failed request. [s]
    image_pull_s, weights_load_s : float
        A bound pod's image pull (on a node without the image) and weights load, before its warmup. [s]
    placeholders : int
        Pause pods holding warm GPUs.
    warm_placeholder_nodes : bool
        Placeholders get warm nodes of their own at the start (``initial_nodes`` unset).
    """

    enabled: bool
    gpus_per_node: int
    gpus_per_pod: int
    max_nodes: int
    provision_kind: int
    provision_s: float
    provision_spread_s: float
    node_init_s: float
    autoscaler: int
    scan_interval_s: float
    gpu_pod_scale_up_delay_s: float
    scale_down_unneeded_s: float
    scale_down_delay_after_add_s: float
    batch_idle_s: float
    batch_max_s: float
    consolidate_after_s: float
    capacity_failure_frac: float
    capacity_retry_s: float
    image_pull_s: float
    weights_load_s: float
    placeholders: int
    warm_placeholder_nodes: bool


NodePool = namedtuple(
    "NodePool",
    [
        "requested_s",  # per node: requested (billed from here) [s]
        "allocatable_s",  # its GPUs can take pods [s]
        "removed_s",  # removed (NaN while not) [s]
        "gpus_free",  # GPUs no pod or placeholder holds
        "image_since_s",  # the image is on the node (or being pulled) since; inf: never pulled there [s]
        "empty_since_s",  # empty (no pod, no placeholder) since; inf while not empty [s]
        "live",  # ascending: nodes requested and not removed (NodePool.nodes())
        "placeholder_node",  # per placeholder: its node, -1 while it waits for one
        "placeholder_since_s",  # per placeholder: waiting for a node since [s]
        "clock_s",  # POOL_*_S slots
        "count",  # POOL_* slots
        "rng",  # the pool's own generator: provisioning times and capacity failures
    ],
)


def new_node_pool(capacity: int, placeholders: int, rng: np.random.Generator) -> NodePool:
    """An empty pool with room for ``capacity`` nodes over the run and ``placeholders`` placeholders."""
    clock_s = np.full(4, _NEVER)
    clock_s[POOL_LAST_SCALE_UP_S] = clock_s[POOL_BACKOFF_UNTIL_S] = -_NEVER
    return NodePool(
        requested_s=np.full(capacity, np.nan),
        allocatable_s=np.full(capacity, np.nan),
        removed_s=np.full(capacity, np.nan),
        gpus_free=np.zeros(capacity, dtype=np.int64),
        image_since_s=np.full(capacity, _NEVER),
        empty_since_s=np.full(capacity, _NEVER),
        live=np.zeros(capacity, dtype=np.int64),
        placeholder_node=np.full(placeholders, -1, dtype=np.int64),
        placeholder_since_s=np.zeros(placeholders),
        clock_s=clock_s,
        count=np.zeros(4, dtype=np.int64),
        rng=rng,
    )


# NRT_ON on the functions that draw (numba's generator methods need it): the engine's loop runs without.
@njit(cache=True, nogil=True, **NRT_ON)
def draw_duration_s(rng, kind, median_s, spread_s):
    """One seeded draw of a phase's length, as :func:`planner.simulate.supply.draw_duration_s` draws it. [s]"""
    if kind == DURATION_UNIFORM:
        return rng.uniform(max(median_s - spread_s, 0.0), median_s + spread_s)
    if kind == DURATION_LOGNORMAL and median_s > 0:
        return median_s * math.exp(spread_s / median_s * rng.standard_normal())
    return median_s


@njit(cache=True, nogil=True, **NRT_ON)
def add_node(pool, now_s, warm, params):
    """Request one node at ``now_s`` (``NodePool.add_node``); ``warm`` ones are up at once with the image.

    Returns its number, or -1 when the arrays are full.
    """
    count = pool.count
    n = count[POOL_CREATED]
    if n >= pool.requested_s.shape[0]:
        return -1
    pool.requested_s[n] = now_s
    if warm:
        pool.allocatable_s[n] = now_s
    else:
        provision_s = draw_duration_s(pool.rng, params.provision_kind, params.provision_s, params.provision_spread_s)
        pool.allocatable_s[n] = now_s + provision_s + params.node_init_s
    pool.removed_s[n] = math.nan
    pool.gpus_free[n] = params.gpus_per_node
    pool.image_since_s[n] = now_s if warm else _NEVER
    pool.empty_since_s[n] = now_s
    count[POOL_CREATED] = n + 1
    pool.live[count[POOL_LIVE]] = n  # the newest node: the list stays ascending
    count[POOL_LIVE] += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def take_gpus(pool, node, gpus_per_pod):
    """A pod or placeholder takes GPUs on ``node`` (``NodePool._take``)."""
    pool.gpus_free[node] -= gpus_per_pod
    pool.empty_since_s[node] = _NEVER


@njit(cache=True, nogil=True, inline="always")
def free_gpus(pool, node, now_s, params):
    """A pod or placeholder left ``node`` at ``now_s`` (``NodePool._free``)."""
    pool.gpus_free[node] += params.gpus_per_pod
    if pool.gpus_free[node] == params.gpus_per_node:
        pool.empty_since_s[node] = now_s


@njit(cache=True, nogil=True)
def free_node(pool, now_s, gpus_per_pod):
    """The node a pod binds to at ``now_s``, or -1 (``NodePool._free_node``).

    First fit over allocatable live nodes with room, in node order, those that
    hold the image (or are pulling it) first.
    """
    first = -1
    for j in range(pool.count[POOL_LIVE]):
        n = pool.live[j]
        if pool.allocatable_s[n] <= now_s and pool.gpus_free[n] >= gpus_per_pod:
            if pool.image_since_s[n] < _NEVER:
                return n
            if first < 0:
                first = n
    return first


@njit(cache=True, nogil=True)
def preempt_placeholder(pool, now_s, params):
    """The first placeholder holding GPUs gives them up and waits again; its node, or -1 (``_preempt_placeholder``)."""
    for k in range(pool.placeholder_node.shape[0]):
        node = pool.placeholder_node[k]
        if node >= 0:
            pool.placeholder_node[k] = -1
            pool.placeholder_since_s[k] = now_s
            free_gpus(pool, node, now_s, params)
            return node
    return -1


@njit(cache=True, nogil=True)
def bind_placeholders(pool, now_s, params):
    """Placeholders waiting for GPUs take free ones, in order, until none is free (``_bind_placeholders``)."""
    for k in range(pool.placeholder_node.shape[0]):
        if pool.placeholder_node[k] < 0:
            node = free_node(pool, now_s, params.gpus_per_pod)
            if node < 0:
                return
            pool.placeholder_node[k] = node
            take_gpus(pool, node, params.gpus_per_pod)


@njit(cache=True, nogil=True, **NRT_ON)
def add_placeholders(pool, now_s, params):
    """Start the placeholders (``NodePool.add_placeholders``), on warm nodes added for them if the pool has them.

    Returns -1 when a node did not fit the arrays (the caller sizes them so that it does), else 0.
    """
    for k in range(params.placeholders):
        node = free_node(pool, now_s, params.gpus_per_pod)
        if (
            node < 0
            and params.warm_placeholder_nodes
            and (params.max_nodes == NO_LIMIT or pool.count[POOL_LIVE] < params.max_nodes)
        ):
            node = add_node(pool, now_s, np.bool_(True), params)  # typed: one compiled add_node
            if node < 0:
                return -1
        pool.placeholder_node[k] = node
        pool.placeholder_since_s[k] = now_s
        if node >= 0:
            take_gpus(pool, node, params.gpus_per_pod)
    return 0


@njit(cache=True, nogil=True, inline="always")
def upcoming_pods(pool, now_s, gpus_per_pod):
    """Pods the nodes still on their way will hold (``NodePool._upcoming_pods``)."""
    pods = 0
    for j in range(pool.count[POOL_LIVE]):
        n = pool.live[j]
        if pool.allocatable_s[n] > now_s:
            pods += pool.gpus_free[n] // gpus_per_pod
    return pods


@njit(cache=True, nogil=True, **NRT_ON)
def buy(pool, pods, now_s, params):
    """Ask for nodes for ``pods`` pods within the quota, unless backing off (``NodePool._buy``).

    Each request may fail (one draw each, before its provisioning draw); a
    failure starts the back-off and ends the purchase. Returns -1 when a node
    did not fit the arrays (the engine's room check rules that out), else 0.
    """
    clock_s = pool.clock_s
    if pods <= 0 or now_s < clock_s[POOL_BACKOFF_UNTIL_S]:
        return 0
    wanted = math.ceil(pods / (params.gpus_per_node // params.gpus_per_pod))
    if params.max_nodes != NO_LIMIT:
        wanted = min(wanted, params.max_nodes - pool.count[POOL_LIVE])
    for _ in range(max(wanted, 0)):
        if params.capacity_failure_frac > 0 and pool.rng.random() < params.capacity_failure_frac:
            clock_s[POOL_BACKOFF_UNTIL_S] = now_s + params.capacity_retry_s
            return 0
        if add_node(pool, now_s, np.bool_(False), params) < 0:
            return -1
        clock_s[POOL_LAST_SCALE_UP_S] = now_s
    return 0


@njit(cache=True, nogil=True, inline="always")
def remove_empty(pool, now_s, empty_for_s, params):
    """Remove allocatable nodes empty for ``empty_for_s`` (``NodePool._remove_empty``)."""
    j = 0
    while j < pool.count[POOL_LIVE]:
        n = pool.live[j]
        if (
            pool.allocatable_s[n] <= now_s
            and pool.gpus_free[n] == params.gpus_per_node
            and now_s - max(pool.empty_since_s[n], pool.allocatable_s[n]) >= empty_for_s - 1e-9
        ):
            pool.removed_s[n] = now_s
            for k in range(j, pool.count[POOL_LIVE] - 1):
                pool.live[k] = pool.live[k + 1]
            pool.count[POOL_LIVE] -= 1
        else:
            j += 1


@njit(cache=True, nogil=True, inline="always")
def placeholders_waiting(pool):
    """Whether a placeholder waits for a node (NodePool.placeholder_node holds a -1)."""
    for k in range(pool.placeholder_node.shape[0]):
        if pool.placeholder_node[k] < 0:
            return True
    return False


@njit(cache=True, nogil=True, inline="always")
def waiting_for_nodes(pool, now_s, pending, n_pending, requested_s, old_enough_s):
    """Pods and placeholders without a node, and how many of them waited ``old_enough_s`` by ``now_s``.

    ``NodePool._waiting_for_nodes`` lists when each began to wait, oldest
    first; the node autoscalers use its length, and cluster-autoscaler those
    entries old enough, which are a prefix of it. A pending pod waits since
    its creation (``requested_s``); ``pending[:n_pending]`` are the pending pods.
    """
    waiting = n_pending
    old_enough = 0
    for j in range(n_pending):
        if now_s - requested_s[pending[j]] >= old_enough_s - 1e-9:
            old_enough += 1
    for k in range(pool.placeholder_node.shape[0]):
        if pool.placeholder_node[k] < 0:
            waiting += 1
            if now_s - pool.placeholder_since_s[k] >= old_enough_s - 1e-9:
                old_enough += 1
    return waiting, old_enough


@njit(cache=True, nogil=True, inline="always")
def _cluster_autoscaler(pool, now_s, params, pending, n_pending, requested_s):
    # NodePool._cluster_autoscaler, at its scans. The waiting entries beyond what the upcoming nodes hold
    # are the youngest; those old enough are the oldest: so old_enough - upcoming of them count.
    if params.scan_interval_s > 0:
        scans = now_s / params.scan_interval_s
        if abs(scans - round(scans)) > 1e-9:
            return 0
    _, old_enough = waiting_for_nodes(pool, now_s, pending, n_pending, requested_s, params.gpu_pod_scale_up_delay_s)
    upcoming = upcoming_pods(pool, now_s, params.gpus_per_pod)
    if buy(pool, max(old_enough - upcoming, 0), now_s, params) < 0:
        return -1
    if now_s - pool.clock_s[POOL_LAST_SCALE_UP_S] < params.scale_down_delay_after_add_s - 1e-9:
        return 0
    remove_empty(pool, now_s, params.scale_down_unneeded_s, params)
    return 0


@njit(cache=True, nogil=True, inline="always")
def _karpenter(pool, now_s, params, pending, n_pending, requested_s):
    # NodePool._karpenter: a batch opens on the first unplaced pod, grows with new ones, closes after
    # batch_idle_s without one or batch_max_s after it opened, then buys for what is unplaced.
    clock_s, count = pool.clock_s, pool.count
    waiting, _ = waiting_for_nodes(pool, now_s, pending, n_pending, requested_s, _NEVER)
    unplaced = max(waiting - upcoming_pods(pool, now_s, params.gpus_per_pod), 0)
    if unplaced == 0:
        clock_s[POOL_BATCH_OPENED_S] = clock_s[POOL_BATCH_LAST_S] = _NEVER
        count[POOL_BATCH_SEEN] = 0
    else:
        if clock_s[POOL_BATCH_OPENED_S] == _NEVER:
            clock_s[POOL_BATCH_OPENED_S] = clock_s[POOL_BATCH_LAST_S] = now_s
            count[POOL_BATCH_SEEN] = unplaced
        elif unplaced > count[POOL_BATCH_SEEN]:
            clock_s[POOL_BATCH_LAST_S] = now_s
            count[POOL_BATCH_SEEN] = unplaced
        closes_s = min(
            clock_s[POOL_BATCH_LAST_S] + params.batch_idle_s, clock_s[POOL_BATCH_OPENED_S] + params.batch_max_s
        )
        if now_s >= closes_s - 1e-9:
            if buy(pool, unplaced, now_s, params) < 0:
                return -1
            clock_s[POOL_BATCH_OPENED_S] = clock_s[POOL_BATCH_LAST_S] = _NEVER
            count[POOL_BATCH_SEEN] = 0
    remove_empty(pool, now_s, params.consolidate_after_s, params)
    return 0


@njit(cache=True, nogil=True, inline="always")
def autoscale(pool, now_s, params, pending, n_pending, requested_s):
    """The node autoscaler's work at ``now_s``: buy nodes for what waits, remove empty ones (``NodePool.autoscale``).

    Parameters
    ----------
    pool : NodePool
    now_s : float
        [s]
    params : NodePoolParams
    pending : numpy.ndarray of int64
        The Pending pods, ``pending[:n_pending]``.
    n_pending : int
    requested_s : numpy.ndarray of float64
        Per pod: its creation, when it began to wait. [s]

    Returns
    -------
    int
        0, or -1 when a node did not fit the arrays.
    """
    if params.autoscaler == CLUSTER_AUTOSCALER:
        return _cluster_autoscaler(pool, now_s, params, pending, n_pending, requested_s)
    return _karpenter(pool, now_s, params, pending, n_pending, requested_s)


@njit(cache=True, nogil=True, inline="always")
def node_counts(pool, now_s):
    """(nodes with allocatable GPUs, nodes still provisioning) at ``now_s`` (``NodePool.counts``)."""
    ready = 0
    for j in range(pool.count[POOL_LIVE]):
        if pool.allocatable_s[pool.live[j]] <= now_s:
            ready += 1
    return ready, pool.count[POOL_LIVE] - ready
