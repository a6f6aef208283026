"""The ``replica_queues`` module follows a backlog that sits in each replica's own queue.

Behind a Kubernetes Service there is no shared queue. Each request is sent
to one pod at its arrival and waits in that pod's vLLM scheduler queue until
a slot frees there; a pod that becomes Ready later never sees it. So when
new replicas arrive after a step in load, the backlog stays where it is, in
the old replicas, and the new replicas take only new arrivals. How fast the
backlog drains then depends on the router:

* **round robin** (kube-proxy in IPVS mode; in iptables or nftables mode
  kube-proxy picks at random, which gives each pod the same share on
  average): every Ready pod gets ``1 / n`` of the arrivals, the old pods
  keep receiving their share on top of their backlog, and each old queue
  drains only at ``mu - arrivals / n``. The spare capacity of the new pods
  goes unused while the old queues are long.
* **least loaded** (an inference gateway that counts running plus waiting
  requests, such as the simulator's default router): arrivals go to the
  pods with the fewest requests, so the new pods take all of them until
  their load reaches the old pods', and the old queues drain at the full
  ``mu``, receiving nothing. If the new pods cannot absorb every arrival
  alone, loads meet and the fleet then drains as one shared queue.

A single shared queue (the fluid model of :mod:`planner.capacity.headroom`) drains at
the whole new fleet's spare rate, ``n_after x mu - arrivals``: the
fastest any router could do, reached only by least-loaded routing once
loads are level.

The model here is a fluid one with one queue per pod: pod ``i`` holds a
load ``L_i`` (running plus waiting), runs ``min(L_i, slots)`` requests and
completes them at ``mu x min(L_i, slots) / slots`` per second (each request
takes ``slots / mu`` seconds, the mean duration at the knee); the rest,
``max(0, L_i - slots)``, waits. Arrivals are split by the router at each
instant. There is no randomness, so, like the shared-queue model, it gives a
lower bound on real queues; it agrees with the reference simulator's
per-pod queues (``tests/dynamics/test_replica_queues.py`` states the tolerance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError, require_non_negative, require_positive

__all__ = [
    "LEAST_LOADED",
    "ROUND_ROBIN",
    "ROUTERS",
    "StepDrain",
    "backlog_per_replica_requests",
    "least_loaded_clear_s",
    "per_replica_waiting_requests",
    "round_robin_clear_s",
    "step_drain",
]

LEAST_LOADED = "least-loaded"
ROUND_ROBIN = "round-robin"
ROUTERS = (LEAST_LOADED, ROUND_ROBIN)

_DEFAULT_DT_S = 0.1


def _check_router(router: str) -> None:
    if router not in ROUTERS:
        raise PlannerInputError(f"router: expected one of {', '.join(ROUTERS)}, got {router!r}")


def _level_fill(loads: np.ndarray, amount: float) -> np.ndarray:
    """Add ``amount`` to the lowest loads, raising them to one common level (least-loaded routing)."""
    order = np.argsort(loads, kind="stable")
    sorted_loads = loads[order]
    cumulative = np.cumsum(sorted_loads)
    added = np.zeros_like(loads)
    for k in range(1, loads.size + 1):
        level = (cumulative[k - 1] + amount) / k
        if k == loads.size or level <= sorted_loads[k]:
            added[order[:k]] = level - sorted_loads[:k]
            return added
    return added  # unreachable: the loop returns at k == size


def per_replica_waiting_requests(
    time_s,
    arrival_rate_rps,
    ready_replicas,
    per_replica_capacity_rps: float,
    slots: float,
    router: str,
    *,
    initial_load_requests=0.0,
    dt_s: float = _DEFAULT_DT_S,
) -> np.ndarray:
    """Requests waiting in each pod's own queue over time, with arrivals split by the router.

    Pods are numbered in the order they become Ready; a pod Ready later
    starts empty and gets only arrivals from then on.

    Parameters
    ----------
    time_s : array_like
        Increasing sample times; the rates and Ready count hold from each
        sample to the next. [s]
    arrival_rate_rps : float or array_like
        Arrivals on each interval, same length as ``time_s``. [requests/s]
    ready_replicas : int or array_like of int
        Ready pods on each interval, never decreasing. [replicas]
    per_replica_capacity_rps : float
        One busy replica's completions per second, mu = K / W
        (:func:`planner.capacity.littles_law.drain_rate_rps`). [requests/s]
    slots : float
        Requests a replica runs at once before the rest wait: the knee K. [requests]
    router : str
        ``"round-robin"`` or ``"least-loaded"``.
    initial_load_requests : float or array_like
        Running plus waiting on each pod Ready at ``time_s[0]``, for
        instance the steady in-flight count before a step. [requests]
    dt_s : float
        Integration step. [s]

    Returns
    -------
    numpy.ndarray
        Shape ``(len(time_s), most Ready pods)``: waiting requests in each
        pod's queue at each sample (0 for a pod not Ready yet). [requests]
    """
    _check_router(router)
    time_s = np.atleast_1d(np.asarray(time_s, dtype=float))
    if np.any(~np.isfinite(time_s)) or np.any(np.diff(time_s) <= 0):
        raise PlannerInputError("time_s must be finite and strictly increasing")
    arrival = np.broadcast_to(require_non_negative("arrival_rate_rps", arrival_rate_rps), time_s.shape)
    ready = np.broadcast_to(np.asarray(ready_replicas), time_s.shape)
    if np.any(ready < 1) or np.any(ready != np.round(ready)) or np.any(np.diff(ready) < 0):
        raise PlannerInputError("ready_replicas must be whole numbers >= 1 that never decrease")
    ready = ready.astype(int)
    mu = require_positive("per_replica_capacity_rps", per_replica_capacity_rps)
    slots = require_positive("slots", slots)
    dt_s = require_positive("dt_s", dt_s)
    pods = int(ready.max())
    loads = np.zeros(pods)
    loads[: ready[0]] = require_non_negative("initial_load_requests", initial_load_requests)
    waiting = np.zeros((time_s.size, pods))
    waiting[0] = np.maximum(loads - slots, 0.0)
    for i in range(1, time_s.size):
        span = time_s[i] - time_s[i - 1]
        steps = max(1, math.ceil(span / dt_s - 1e-9))
        h = span / steps
        n = ready[i - 1]
        for _ in range(steps):
            live = loads[:n]
            if router == ROUND_ROBIN:
                live += arrival[i - 1] * h / n
            else:
                live += _level_fill(live, arrival[i - 1] * h)
            live -= mu * h * np.minimum(live, slots) / slots
            np.maximum(live, 0.0, out=live)
        waiting[i] = np.maximum(loads - slots, 0.0)
    return waiting


def round_robin_clear_s(backlog_per_replica, per_replica_capacity_rps, arrival_rate_rps, replicas):
    """Time for an old replica's own queue to drain once arrivals are split evenly over ``replicas``. [s]

    ``backlog / (mu - arrivals / replicas)``; infinite when each pod's share
    of the arrivals is at least ``mu``. Compare the shared-queue
    :func:`planner.capacity.headroom.backlog_clear_s`, ``total backlog / (replicas x mu
    - arrivals)``: with the backlog in ``n_before`` of the ``replicas`` pods,
    round robin takes ``replicas / n_before`` times as long.

    Parameters
    ----------
    backlog_per_replica : float
        Requests waiting in one old replica's queue when the new replicas are Ready. [requests]
    per_replica_capacity_rps : float
        mu. [requests/s]
    arrival_rate_rps : float
        Arrivals to the whole fleet. [requests/s]
    replicas : int
        Ready replicas sharing them. [replicas]

    Examples
    --------
    >>> round(round_robin_clear_s(455.0, 4.0, 75.0, 23), 1)
    615.6
    """
    backlog = require_non_negative("backlog_per_replica", backlog_per_replica)
    mu = require_positive("per_replica_capacity_rps", per_replica_capacity_rps)
    arrival = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    replicas = require_positive("replicas", replicas)
    spare = mu - arrival / replicas
    if spare <= 0:
        return math.inf if backlog > 0 else 0.0
    return float(backlog / spare)


def backlog_per_replica_requests(
    arrival_rate_rps, step_arrival_rate_rps, replicas, per_replica_capacity_rps, slots, reaction_time_s
):
    """Requests waiting in each old replica's own queue when new replicas are Ready after a step. [requests]

    Each of ``replicas`` pods gets ``step / replicas`` requests per second and
    completes at most mu; the excess first fills the slots the pod had free
    before the step (it held ``arrival x W / replicas`` of its ``slots``,
    W = slots / mu) and then waits. The closed form takes the free slots as
    filled at once; :func:`step_drain` integrates the fill.

    Parameters
    ----------
    arrival_rate_rps, step_arrival_rate_rps : float
        Arrivals before and after the step. [requests/s]
    replicas : int
        Ready replicas before the new ones. [replicas]
    per_replica_capacity_rps : float
        mu = K / W. [requests/s]
    slots : float
        The knee K. [requests]
    reaction_time_s : float
        Step to new replicas Ready. [s]

    Examples
    --------
    >>> round(backlog_per_replica_requests(30.0, 75.0, 9, 4.0, 48.0, 105.0), 6)  # 455 less 8 free slots
    447.0
    """
    arrival = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    step = require_non_negative("step_arrival_rate_rps", step_arrival_rate_rps)
    replicas = require_positive("replicas", replicas)
    mu = require_positive("per_replica_capacity_rps", per_replica_capacity_rps)
    slots = require_positive("slots", slots)
    reaction = require_non_negative("reaction_time_s", reaction_time_s)
    free_slots = max(0.0, slots - arrival * (slots / mu) / replicas)
    return float(max(0.0, (step / replicas - mu) * reaction - free_slots))


def least_loaded_clear_s(
    backlog_per_replica, per_replica_capacity_rps, slots, arrival_rate_rps, replicas_before, replicas_after
):
    """Time for the old replicas' queues to drain behind a least-loaded router, from new replicas Ready. [s]

    The closed form of the fluid model of :func:`per_replica_waiting_requests`
    for ``replicas_after - replicas_before`` new, empty replicas:

    * if the new replicas can complete every arrival (``new x mu >=
      arrivals``), the router sends them everything while the old queues
      are longer, and each old queue drains at the full mu: ``backlog / mu``;
    * otherwise the new replicas fill their slots (in
      ``-W ln(1 - new x mu / arrivals)``, W = slots / mu), then queue too, until
      their load meets the old replicas' falling one; from there the fleet
      drains as one shared queue at ``replicas_after x mu - arrivals``
      (never, if that is not positive).

    Parameters
    ----------
    backlog_per_replica : float
        Requests waiting in one old replica's queue when the new replicas are Ready. [requests]
    per_replica_capacity_rps : float
        mu = K / W. [requests/s]
    slots : float
        The knee K: requests a replica runs at once. [requests]
    arrival_rate_rps : float
        Arrivals to the whole fleet. [requests/s]
    replicas_before, replicas_after : int
        Ready replicas before and after the new ones. [replicas]

    Examples
    --------
    >>> least_loaded_clear_s(455.0, 4.0, 48.0, 75.0, 9, 29)  # 20 new replicas take all 75 requests/s
    113.75
    """
    backlog = require_non_negative("backlog_per_replica", backlog_per_replica)
    mu = require_positive("per_replica_capacity_rps", per_replica_capacity_rps)
    slots = require_positive("slots", slots)
    arrival = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    old, after = int(replicas_before), int(replicas_after)
    if not 1 <= old <= after:
        raise PlannerInputError(f"replicas {replicas_before} -> {replicas_after}: expected 1 <= before <= after")
    new = after - old
    if backlog == 0:
        return 0.0
    if new == 0:
        spare = after * mu - arrival
        return float(backlog / (spare / after)) if spare > 0 else math.inf
    share_rps = arrival / new
    if share_rps <= mu:
        return float(backlog / mu)
    fill_s = -(slots / mu) * math.log(1.0 - mu / share_rps)
    if backlog <= mu * fill_s:
        return float(backlog / mu)
    # Old queues fall at mu, new ones rise at share - mu: they meet at t.
    meet_s = (backlog + (share_rps - mu) * fill_s) / share_rps
    level = backlog - mu * meet_s
    spare = after * mu - arrival
    if spare <= 0:
        return math.inf
    return float(meet_s + level * after / spare)


@dataclass(frozen=True)
class StepDrain:
    """A step in arrivals, met by new replicas that are Ready ``reaction_time_s`` later.

    Attributes
    ----------
    router : str
    time_s : numpy.ndarray
        Sample times from the step. [s]
    old_waiting_requests, new_waiting_requests : numpy.ndarray
        Requests waiting in the queues of the replicas that were running
        before the step, and of those added after it. [requests]
    peak_backlog_requests : float
        Most requests waiting at once. [requests]
    clear_s : float
        Time from the new replicas being Ready to every queue being empty
        (infinite if it does not happen within ``time_s``). [s]
    """

    router: str
    time_s: np.ndarray
    old_waiting_requests: np.ndarray
    new_waiting_requests: np.ndarray
    peak_backlog_requests: float
    clear_s: float

    @property
    def waiting_requests(self) -> np.ndarray:
        """Requests waiting fleet-wide. [requests]"""
        return self.old_waiting_requests + self.new_waiting_requests


def step_drain(
    time_s,
    arrival_rate_rps: float,
    step_arrival_rate_rps: float,
    replicas_before: int,
    replicas_after: int,
    per_replica_capacity_rps: float,
    slots: float,
    reaction_time_s: float,
    router: str,
    *,
    dt_s: float = _DEFAULT_DT_S,
) -> StepDrain:
    """The per-replica queues after arrivals step up at t = 0 and new replicas are Ready at ``reaction_time_s``.

    Before the step each of the ``replicas_before`` pods holds its share of
    the steady in-flight count, ``arrival_rate_rps x W / replicas_before``
    with W = ``slots / per_replica_capacity_rps`` (Little's law).

    Parameters
    ----------
    time_s : array_like
        Increasing sample times from 0. [s]
    arrival_rate_rps, step_arrival_rate_rps : float
        Arrivals before and after the step. [requests/s]
    replicas_before, replicas_after : int
        Ready replicas before and after the new ones are Ready. [replicas]
    per_replica_capacity_rps : float
        mu = K / W. [requests/s]
    slots : float
        The knee K. [requests]
    reaction_time_s : float
        Step to new replicas Ready (:func:`planner.capacity.headroom.reaction_time_s`). [s]
    router : str
        ``"round-robin"`` or ``"least-loaded"``.
    dt_s : float
        Integration step. [s]

    Returns
    -------
    StepDrain
    """
    time_s = np.atleast_1d(np.asarray(time_s, dtype=float))
    reaction_time_s = require_non_negative("reaction_time_s", reaction_time_s)
    if not (int(replicas_before) >= 1 and int(replicas_after) >= int(replicas_before)):
        raise PlannerInputError(f"replicas {replicas_before} -> {replicas_after}: expected 1 <= before <= after")
    mu = require_positive("per_replica_capacity_rps", per_replica_capacity_rps)
    arrival_rate_rps = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    # Sample the switch itself, so the peak and the clearing time do not depend on the grid.
    grid = np.union1d(time_s, [reaction_time_s]) if time_s[0] <= reaction_time_s <= time_s[-1] else time_s
    ready = np.where(grid < reaction_time_s, int(replicas_before), int(replicas_after))
    steady_load = arrival_rate_rps * (slots / mu) / int(replicas_before)
    waiting = per_replica_waiting_requests(
        grid, step_arrival_rate_rps, ready, mu, slots, router, initial_load_requests=steady_load, dt_s=dt_s
    )
    old = waiting[:, : int(replicas_before)].sum(axis=1)
    new = waiting[:, int(replicas_before) :].sum(axis=1)
    total = old + new
    # The queues are empty for good from the first sample after Ready with nothing waiting anywhere after it.
    nonzero_after = np.flatnonzero((grid >= reaction_time_s) & (total > 1e-6))
    if nonzero_after.size == 0:
        clear_s = 0.0
    elif nonzero_after[-1] == grid.size - 1:
        clear_s = math.inf
    else:
        clear_s = float(grid[nonzero_after[-1] + 1] - reaction_time_s)
    at = np.searchsorted(grid, time_s)
    return StepDrain(router, time_s, old[at], new[at], float(total.max()), clear_s)
