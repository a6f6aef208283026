"""Compiled pods of one Deployment: creation, the Service's endpoints, routing, deletion order, drain.

The numba twin of :class:`planner.simulate.fleet.Fleet`, step for step: the
same pod life (requested, Ready after the warmup, deleted, SIGTERM after
preStop, stopped at the grace period or vLLM's shutdown timeout, removed),
the same router choices, the ReplicaSet's deletion order and the same random
draws (warmups, then UIDs, from the same ``numpy.random.Generator``, which
numba advances exactly as numpy does).

State lives in two named tuples of arrays, created by :func:`new_pods` and
:func:`new_requests`:

* :class:`Pods` holds per-pod columns indexed by pod number (creation order),
  each pod's running batch ``run[p, :run_n[p]]`` and waiting queue (a linked
  list through ``Requests.next_req``, head ``wq_head[p]``), and three
  ascending pod lists kept as pods come and go (``live``: not terminating;
  ``up``: not yet removed; ``term``: terminating), so no tick walks every pod
  ever created;
* :class:`Requests` is :class:`planner.simulate.replica.RequestState` plus
  ``next_req``.

With a node pool (``FleetSpec.nodes``; ``DeploymentParams.nodes.enabled``) a
pod is created Pending (``ready_s`` infinite, on the ascending ``pending``
list), waits for a node, and is bound by :func:`supply_step` (``bound_s``, its
``node``, the ``bound`` list), its Ready time set then; ``Pods.pool`` is the
node pool (:class:`planner.simulate.fast.supply.NodePool`), as
:attr:`planner.simulate.fleet.Fleet.pool` is the reference's. Its random draws
come from the pool's own generator; the warmups drawn at binding, from the
fleet's.

Capacity is fixed when the arrays are made; :func:`add_pod` returns -1 when it
is exhausted and the engine re-runs the configuration with more.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import njit

from planner.simulate.fast import supply
from planner.simulate.fast._numeric import NRT_ON
from planner.simulate.fast.supply import DURATION_FIXED, DURATION_LOGNORMAL, DURATION_UNIFORM, NodePoolParams
from planner.simulate.replica import CUT, GATEWAY, WAITING

__all__ = [
    "DeploymentParams",
    "Pods",
    "Requests",
    "add_pod",
    "bind_pending",
    "finish_terminations",
    "new_pods",
    "new_requests",
    "release_gateway",
    "routable",
    "route_arrivals",
    "scale_to",
    "supply_counts",
    "supply_step",
]

# Pods.count slots: pods created so far, the lengths of the live, up and term lists, the gateway's
# queue (first and last request held, -1 if none, and how many), the round-robin router's next turn,
# and with a node pool the lengths of the pending list (waiting for a node) and the bound list (holding one).
(
    PODS_CREATED,
    PODS_LIVE,
    PODS_UP,
    PODS_TERMINATING,
    GATEWAY_HEAD,
    GATEWAY_TAIL,
    GATEWAY_QUEUED,
    ROUND_ROBIN_TURN,
    PODS_PENDING,
    PODS_BOUND,
) = range(10)
# Warmup distributions (FleetSpec.warmup_distribution).
WARMUP_FIXED, WARMUP_UNIFORM, WARMUP_LOGNORMAL = DURATION_FIXED, DURATION_UNIFORM, DURATION_LOGNORMAL
# Routers (FleetSpec.router).
LEAST_LOADED, ROUND_ROBIN = 0, 1
UID_HIGH = 2**62  # Fleet.add_pod draws UIDs in [0, 2**62)


class DeploymentParams(NamedTuple):
    """The Deployment's scalars (:class:`planner.simulate.fleet.FleetSpec`), as the kernels take them.

    Attributes
    ----------
    warmup_kind : int
        :data:`WARMUP_FIXED`, :data:`WARMUP_UNIFORM` or :data:`WARMUP_LOGNORMAL`.
    warmup_s, warmup_spread_s : float
        Time from creation to Ready, and its spread. [s]
    pre_stop_s, grace_period_s, shutdown_timeout_s : float
        The preStop hook, ``terminationGracePeriodSeconds`` and vLLM's shutdown timeout. [s]
    router : int
        :data:`LEAST_LOADED` or :data:`ROUND_ROBIN`.
    nodes : planner.simulate.fast.supply.NodePoolParams
        The node pool and the pod phases it brings (``nodes.enabled`` false: none).
    """

    warmup_kind: int
    warmup_s: float
    warmup_spread_s: float
    pre_stop_s: float
    grace_period_s: float
    shutdown_timeout_s: float
    router: int
    nodes: NodePoolParams


Pods = namedtuple(
    "Pods",
    [
        "requested_s",
        "ready_s",
        "deleted_s",
        "sigterm_s",
        "stop_s",
        "removed_s",
        "uid",
        "last_done_s",
        "run",
        "run_n",
        "wq_head",
        "wq_tail",
        "wq_n",
        "stall_debt_s",  # chunked prefill's stall debt carried to the next tick [s]
        "counters",
        "busy_frac",
        "live",
        "up",
        "term",
        "count",
        "bound_s",  # with a node pool: bound to a node (NaN while Pending) [s]
        "node",  # with a node pool: the node it holds GPUs on, -1 if none
        "pending",  # with a node pool: ascending, the pods waiting for a node
        "bound",  # with a node pool: ascending, the pods holding GPUs (NodePool.pod_node)
        "pool",  # the node pool (planner.simulate.fast.supply.NodePool), empty without one
    ],
)
Requests = namedtuple(
    "Requests",
    [
        "arrival_s",
        "input_tokens",
        "output_tokens",
        "status",
        "replica",
        "admit_s",
        "first_token_s",
        "done_s",
        "generated",
        "prefill_left_s",
        "preemptions",
        "next_req",
    ],
)


def new_pods(capacity: int, max_num_seqs: int, pool: supply.NodePool | None = None) -> Pods:
    """Empty pod arrays for at most ``capacity`` pods over the run, on ``pool`` (default: an empty one, unused)."""
    if pool is None:
        pool = supply.new_node_pool(0, 0, np.random.default_rng(0))
    nan = np.full(capacity, np.nan)
    count = np.zeros(10, dtype=np.int64)
    count[GATEWAY_HEAD] = count[GATEWAY_TAIL] = -1
    return Pods(
        requested_s=nan.copy(),
        ready_s=nan.copy(),
        deleted_s=nan.copy(),
        sigterm_s=nan.copy(),
        stop_s=nan.copy(),
        removed_s=nan.copy(),
        uid=np.zeros(capacity, dtype=np.int64),
        last_done_s=np.full(capacity, -np.inf),
        run=np.zeros((capacity, max_num_seqs), dtype=np.int64),
        run_n=np.zeros(capacity, dtype=np.int64),
        wq_head=np.full(capacity, -1, dtype=np.int64),
        wq_tail=np.full(capacity, -1, dtype=np.int64),
        wq_n=np.zeros(capacity, dtype=np.int64),
        stall_debt_s=np.zeros(capacity),
        counters=np.zeros((capacity, 4)),
        busy_frac=np.zeros(capacity),
        live=np.zeros(capacity, dtype=np.int64),
        up=np.zeros(capacity, dtype=np.int64),
        term=np.zeros(capacity, dtype=np.int64),
        count=count,
        bound_s=nan.copy(),
        node=np.full(capacity, -1, dtype=np.int64),
        pending=np.zeros(capacity, dtype=np.int64),
        bound=np.zeros(capacity, dtype=np.int64),
        pool=pool,
    )


def new_requests(arrival_s: np.ndarray, input_tokens: np.ndarray, output_tokens: np.ndarray) -> Requests:
    """Request arrays as :class:`planner.simulate.replica.RequestState` starts them."""
    n = len(arrival_s)
    # Contiguous and writeable, copied only if not: a read-only trace (a view of a cached one) would
    # otherwise make numba compile every kernel again for read-only arrays.
    return Requests(
        arrival_s=np.require(arrival_s, dtype=float, requirements=("C", "W")),
        input_tokens=np.require(input_tokens, dtype=np.int64, requirements=("C", "W")),
        output_tokens=np.require(output_tokens, dtype=np.int64, requirements=("C", "W")),
        status=np.zeros(n, dtype=np.int8),
        replica=np.full(n, -1, dtype=np.int64),
        admit_s=np.full(n, np.nan),
        first_token_s=np.full(n, np.nan),
        done_s=np.full(n, np.nan),
        generated=np.zeros(n),
        prefill_left_s=np.zeros(n),
        preemptions=np.zeros(n, dtype=np.int64),
        next_req=np.full(n, -1, dtype=np.int64),
    )


# ---- pod lists ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _remove(ids, slot, count, p):
    # Drop p from the ascending list ids[:count[slot]], keeping the order.
    n = count[slot]
    j = 0
    while ids[j] != p:
        j += 1
    for k in range(j, n - 1):
        ids[k] = ids[k + 1]
    count[slot] = n - 1


@njit(cache=True, nogil=True)
def _insert(ids, slot, count, p):
    # Put p into the ascending list ids[:count[slot]].
    n = count[slot]
    j = n
    while j > 0 and ids[j - 1] > p:
        ids[j] = ids[j - 1]
        j -= 1
    ids[j] = p
    count[slot] = n + 1


@njit(cache=True, nogil=True, inline="always")
def routable(pods, now_s, out):
    """The Service's endpoints at ``now_s`` (Ready, not terminating), ascending, into ``out``; returns how many."""
    n = 0
    for j in range(pods.count[PODS_LIVE]):
        p = pods.live[j]
        if pods.ready_s[p] <= now_s:
            out[n] = p
            n += 1
    return n


# ---- creation and deletion ---------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _warmup_s(rng, deployment):
    # Fleet._warmup_s, the same draws from the same generator.
    return supply.draw_duration_s(rng, deployment.warmup_kind, deployment.warmup_s, deployment.warmup_spread_s)


# NRT_ON on the functions below that allocate (here: numba's random draws, the victims list): numba
# compiles a callee with its caller's NRT setting unless told, and the engine's loop runs without NRT.
@njit(cache=True, nogil=True, **NRT_ON)
def add_pod(pods, now_s, warm, rng, deployment):
    """Create one pod at ``now_s`` (Ready at once if ``warm``); its number, or -1 when out of capacity.

    ``deployment`` is a :class:`DeploymentParams` (its warmup is drawn from ``rng``). With a node pool a
    warm pod is bound at once (on a warm node, a new one if none has room) and any other waits Pending,
    its warmup drawn when it is bound.
    """
    count = pods.count
    p = count[PODS_CREATED]
    if p >= pods.ready_s.shape[0]:
        return -1
    pods.requested_s[p] = now_s
    if not deployment.nodes.enabled:
        pods.ready_s[p] = now_s if warm else now_s + _warmup_s(rng, deployment)
    elif warm:
        pods.ready_s[p] = now_s
        pods.bound_s[p] = now_s
        if _bind_warm(pods, p, now_s, deployment.nodes) < 0:
            return -1
    else:
        pods.ready_s[p] = math.inf
        pods.bound_s[p] = math.nan
        _insert(pods.pending, PODS_PENDING, count, p)
    pods.uid[p] = rng.integers(0, UID_HIGH)
    count[PODS_CREATED] = p + 1
    pods.live[count[PODS_LIVE]] = p
    count[PODS_LIVE] += 1
    pods.up[count[PODS_UP]] = p
    count[PODS_UP] += 1
    return p


@njit(cache=True, nogil=True)
def _log_rank(now_s, since_s):
    # ActivePodsWithRanks' log2 bucket of the time since a transition (LogarithmicScaleDown).
    elapsed_ns = (now_s - since_s) * 1e9
    return int(math.log2(elapsed_ns)) if elapsed_ns > 0 else -1


@njit(cache=True, nogil=True)
def _key_less(a, b):
    # Lexicographic order of (not-ready-first flag, log rank, uid, position) rows.
    for c in range(4):
        if a[c] != b[c]:
            return a[c] < b[c]
    return False


@njit(cache=True, nogil=True)
def _delete_pod(pods, p, now_s, deployment):
    # Fleet.delete_pod: out of the Service now, SIGTERM after preStop, stopped at the deadline; a
    # Pending pod (with a node pool, one not bound yet) never binds.
    pre_stop_s, grace_period_s = deployment.pre_stop_s, deployment.grace_period_s
    pods.deleted_s[p] = now_s
    if deployment.nodes.enabled and math.isnan(pods.bound_s[p]):
        _remove(pods.pending, PODS_PENDING, pods.count, p)
    pods.sigterm_s[p] = now_s + min(pre_stop_s, grace_period_s)
    if pods.ready_s[p] > now_s:
        pods.stop_s[p] = now_s  # never served: stopped at once
    else:
        pods.stop_s[p] = min(now_s + grace_period_s, pods.sigterm_s[p] + deployment.shutdown_timeout_s)
    _remove(pods.live, PODS_LIVE, pods.count, p)
    _insert(pods.term, PODS_TERMINATING, pods.count, p)


@njit(cache=True, nogil=True, **NRT_ON)
def scale_to(pods, replicas, now_s, rng, deployment, keys):
    """Create or delete pods so that ``replicas`` are live (Fleet.scale_to); -1 when out of capacity.

    ``deployment`` is a :class:`DeploymentParams`. Deletions follow
    :func:`planner.simulate.fleet.deletion_order`; ``keys`` is a work array of
    shape (pods capacity, 4).
    """
    n_live = pods.count[PODS_LIVE]
    if replicas > n_live:
        for _ in range(replicas - n_live):
            if add_pod(pods, now_s, np.bool_(False), rng, deployment) < 0:  # typed: one compiled add_pod
                return -1
    elif replicas < n_live:
        for i in range(n_live):
            p = pods.live[i]
            if pods.ready_s[p] <= now_s:
                keys[i, 0] = 1
                keys[i, 1] = _log_rank(now_s, pods.ready_s[p])
            else:
                keys[i, 0] = 0
                keys[i, 1] = _log_rank(now_s, pods.requested_s[p])
            keys[i, 2] = pods.uid[p]
            keys[i, 3] = i
        # Insertion sort: at most a few dozen live pods.
        for i in range(1, n_live):
            j = i
            while j > 0 and _key_less(keys[j], keys[j - 1]):
                for c in range(4):
                    keys[j, c], keys[j - 1, c] = keys[j - 1, c], keys[j, c]
                j -= 1
        victims = np.empty(n_live - replicas, dtype=np.int64)
        for k in range(n_live - replicas):
            victims[k] = pods.live[keys[k, 3]]
        for k in range(n_live - replicas):
            _delete_pod(pods, victims[k], now_s, deployment)
    return 0


@njit(cache=True, nogil=True)
def finish_terminations(pods, req, now_s):
    """Remove pods that exited by ``now_s``, cutting what they hold at the deadline; returns requests cut."""
    cut = 0
    j = 0
    while j < pods.count[PODS_TERMINATING]:
        p = pods.term[j]
        held = pods.run_n[p] > 0 or pods.wq_n[p] > 0
        if not held and now_s >= pods.sigterm_s[p]:
            pods.removed_s[p] = min(max(pods.sigterm_s[p], pods.last_done_s[p]), now_s)
        elif now_s >= pods.stop_s[p]:
            for k in range(pods.run_n[p]):
                req.status[pods.run[p, k]] = CUT
                cut += 1
            i = pods.wq_head[p]
            while i >= 0:
                req.status[i] = CUT
                cut += 1
                i = req.next_req[i]
            pods.run_n[p] = 0
            pods.wq_head[p] = pods.wq_tail[p] = -1
            pods.wq_n[p] = 0
            pods.removed_s[p] = pods.stop_s[p]
        else:
            j += 1
            continue
        _remove(pods.term, PODS_TERMINATING, pods.count, p)
        _remove(pods.up, PODS_UP, pods.count, p)
    return cut


# ---- routing -----------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _append(pods, req, p, i):
    # Request i joins the tail of pod p's queue.
    req.replica[i] = p
    req.status[i] = WAITING
    req.next_req[i] = -1
    if pods.wq_tail[p] >= 0:
        req.next_req[pods.wq_tail[p]] = i
    else:
        pods.wq_head[p] = i
    pods.wq_tail[p] = i
    pods.wq_n[p] += 1


@njit(cache=True, nogil=True, inline="always")
def _hold(pods, req, i):
    # No Ready pod: the request waits at the gateway (FIFO).
    count = pods.count
    req.status[i] = GATEWAY
    req.next_req[i] = -1
    if count[GATEWAY_TAIL] >= 0:
        req.next_req[count[GATEWAY_TAIL]] = i
    else:
        count[GATEWAY_HEAD] = i
    count[GATEWAY_TAIL] = i
    count[GATEWAY_QUEUED] += 1


@njit(cache=True, nogil=True, inline="always")
def _route(pods, req, i, endpoints, n_endpoints, router):
    # Fleet.route: lowest (running + waiting, pod) for least-loaded, the next turn for round-robin.
    if n_endpoints == 0:
        _hold(pods, req, i)
        return
    if router == ROUND_ROBIN:
        p = endpoints[pods.count[ROUND_ROBIN_TURN] % n_endpoints]
        pods.count[ROUND_ROBIN_TURN] += 1
    else:
        p = endpoints[0]
        best = pods.run_n[p] + pods.wq_n[p]
        for j in range(1, n_endpoints):
            q = endpoints[j]
            load = pods.run_n[q] + pods.wq_n[q]
            if load < best:
                best = load
                p = q
    _append(pods, req, p, i)


@njit(cache=True, nogil=True, inline="always")
def route_arrivals(pods, req, first, stop, endpoints, n_endpoints, router):
    """Route requests ``first .. stop - 1`` in arrival order (Fleet.route_all)."""
    for i in range(first, stop):
        _route(pods, req, i, endpoints, n_endpoints, router)


@njit(cache=True, nogil=True)
def release_gateway(pods, req, now_s, endpoints, router):
    """Requests held while no pod was Ready go to the pods Ready now (Fleet.release_gateway)."""
    n_endpoints = routable(pods, now_s, endpoints)
    if n_endpoints == 0:
        return
    count = pods.count
    i = count[GATEWAY_HEAD]
    count[GATEWAY_HEAD] = count[GATEWAY_TAIL] = -1
    count[GATEWAY_QUEUED] = 0
    while i >= 0:
        after = req.next_req[i]
        _route(pods, req, i, endpoints, n_endpoints, router)
        i = after


# ---- the node pool -----------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _hold_gpus(pods, p, node, params):
    # Pod p takes its GPUs on node (NodePool.pod_node[p] = node, _take).
    pods.node[p] = node
    supply.take_gpus(pods.pool, node, params.gpus_per_pod)
    _insert(pods.bound, PODS_BOUND, pods.count, p)


@njit(cache=True, nogil=True)
def _bind_warm(pods, p, now_s, params):
    # NodePool.bind_warm: a pod up at time 0 goes on a warm node, a new one if none has room.
    node = supply.free_node(pods.pool, now_s, params.gpus_per_pod)
    if node < 0:
        node = supply.add_node(pods.pool, now_s, np.bool_(True), params)  # typed: one compiled add_node
        if node < 0:
            return -1
    _hold_gpus(pods, p, node, params)
    return node


@njit(cache=True, nogil=True)
def bind_pending(pods, now_s, rng, deployment):
    """Bind Pending pods, oldest first, to free GPUs, preempting placeholders when needed (Fleet._bind).

    ``NodePool.bind_pending`` and what ``Fleet._bind`` does with it: each pod
    bound pulls the image unless its node has it or is pulling it, and is
    Ready after the pull, the weights load and a warmup drawn from ``rng``
    then (the draws in binding order, as the reference makes them). Then the
    placeholders waiting for GPUs take what is left.
    """
    params = deployment.nodes
    pool = pods.pool
    count = pods.count
    while count[PODS_PENDING] > 0:
        p = pods.pending[0]
        node = supply.free_node(pool, now_s, params.gpus_per_pod)
        if node < 0:
            node = supply.preempt_placeholder(pool, now_s, params)
        if node < 0:
            break
        _remove(pods.pending, PODS_PENDING, count, p)
        _hold_gpus(pods, p, node, params)
        if pool.image_since_s[node] == math.inf:
            pool.image_since_s[node] = now_s + params.image_pull_s
        image_at_s = max(pool.image_since_s[node], now_s)
        pods.bound_s[p] = now_s
        pods.ready_s[p] = image_at_s + params.weights_load_s + _warmup_s(rng, deployment)
    supply.bind_placeholders(pool, now_s, params)


@njit(cache=True, nogil=True, inline="always")
def supply_step(pods, now_s, rng, deployment):
    """With a node pool: free the GPUs of removed pods, bind Pending pods, run the node autoscaler (Fleet.supply_step).

    The first call starts the placeholders. Returns 0, or -1 when a node did
    not fit the pool's arrays (the engine checks room for a tick's nodes first).
    Inlined into the engine's loop; binding, which changes nothing while no pod
    or placeholder waits, is called only when one does.
    """
    params = deployment.nodes
    pool = pods.pool
    count = pods.count
    if pool.count[supply.POOL_STARTED] == 0:
        pool.count[supply.POOL_STARTED] = 1
        if supply.add_placeholders(pool, now_s, params) < 0:
            return -1
    j = 0
    while j < count[PODS_BOUND]:
        p = pods.bound[j]
        if pods.removed_s[p] <= now_s:  # NodePool.release
            node = pods.node[p]
            pods.node[p] = -1
            _remove(pods.bound, PODS_BOUND, count, p)
            supply.free_gpus(pool, node, now_s, params)
        else:
            j += 1
    if count[PODS_PENDING] > 0 or supply.placeholders_waiting(pool):
        bind_pending(pods, now_s, rng, deployment)
    if supply.autoscale(pool, now_s, params, pods.pending, count[PODS_PENDING], pods.requested_s) < 0:
        return -1
    if count[PODS_PENDING] > 0 or supply.placeholders_waiting(pool):
        bind_pending(pods, now_s, rng, deployment)
    return 0


@njit(cache=True, nogil=True, inline="always")
def supply_counts(pods, now_s):
    """(nodes ready, nodes provisioning, pods Pending, pods loading) at ``now_s`` (Fleet.supply_counts)."""
    nodes_ready, nodes_provisioning = supply.node_counts(pods.pool, now_s)
    loading = 0
    for j in range(pods.count[PODS_BOUND]):
        p = pods.bound[j]
        if pods.ready_s[p] > now_s and math.isnan(pods.deleted_s[p]):
            loading += 1
    return nodes_ready, nodes_provisioning, pods.count[PODS_PENDING], loading
