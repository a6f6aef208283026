"""The ``headroom`` module sizes the spare capacity that covers a replica's warmup.

A new replica serves nothing until it is Ready. Whatever arrives above the
fleet's capacity during that gap queues; the per-replica concurrency target
decides how much of a step the running replicas can absorb instead. These
functions give the backlog, the headroom a target buys, the target a given
step needs, what that target costs in replicas, and how long the gap is.
"""

from __future__ import annotations

import math

import numpy as np

from planner.capacity.littles_law import replicas_for_target
from planner.errors import (
    PlannerInputError,
    require_non_negative,
    require_positive,
)

__all__ = [
    "backlog_clear_s",
    "backlog_requests",
    "backlog_trajectory_requests",
    "extra_replicas_frac",
    "fleet_capacity_rps",
    "growth_during_gap_rps",
    "growth_rate_rps_per_s",
    "ramp_backlog_requests",
    "reaction_time_s",
    "replicas_for_step",
    "step_backlog_trajectory_requests",
    "step_frac",
    "step_headroom_frac",
    "target_for_step",
]


def fleet_capacity_rps(replicas, per_replica_capacity_rps):
    """Completions per second the fleet sustains at its knee.

    Parameters
    ----------
    replicas : float or array_like
        Ready replicas. [replicas]
    per_replica_capacity_rps : float
        One replica's drain rate at the knee, mu = K / W
        (:func:`planner.capacity.littles_law.drain_rate_rps`). [requests/s]

    Returns
    -------
    float or numpy.ndarray
        [requests/s]

    Examples
    --------
    >>> fleet_capacity_rps(3, 4.0)
    12.0
    """
    replicas = require_non_negative("replicas", replicas)
    per_replica_capacity_rps = require_positive("per_replica_capacity_rps", per_replica_capacity_rps)
    return replicas * per_replica_capacity_rps


def backlog_requests(arrival_rate_rps, capacity_rps, duration_s):
    """Requests queued after ``duration_s`` of arrivals above capacity.

    Used for the backlog built while a new replica warms up, and for the
    deficit a sudden step leaves before help arrives: both are the excess
    arrival rate times the time it lasts, and never negative.

    Parameters
    ----------
    arrival_rate_rps : float or array_like
        Arrival rate during the gap. [requests/s]
    capacity_rps : float or array_like
        What the Ready replicas complete per second. [requests/s]
    duration_s : float or array_like
        Length of the gap, for instance the warmup. [s]

    Returns
    -------
    float or numpy.ndarray
        ``max(0, arrival - capacity) x duration``. [requests]

    Examples
    --------
    >>> backlog_requests(16.0, 12.0, 240.0)
    960.0
    """
    arrival_rate_rps = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    capacity_rps = require_non_negative("capacity_rps", capacity_rps)
    duration_s = require_non_negative("duration_s", duration_s)
    return np.maximum(0.0, arrival_rate_rps - capacity_rps) * duration_s


def backlog_trajectory_requests(time_s, arrival_rate_rps, capacity_rps):
    """Queue length over time for piecewise-constant arrivals and capacity.

    The queue grows at the excess rate while arrivals exceed capacity and
    drains at the spare rate otherwise, never going below zero (a fluid
    model: no randomness, so it is a lower bound on real queues).

    Parameters
    ----------
    time_s : array_like
        Increasing sample times; rates hold from each time to the next. [s]
    arrival_rate_rps, capacity_rps : array_like
        Rates on each interval, same length as ``time_s``. [requests/s]

    Returns
    -------
    numpy.ndarray
        Queue length at each time in ``time_s``, starting from 0. [requests]
    """
    time_s = np.atleast_1d(np.asarray(time_s, dtype=float))
    arrival = np.broadcast_to(require_non_negative("arrival_rate_rps", arrival_rate_rps), time_s.shape)
    capacity = np.broadcast_to(require_non_negative("capacity_rps", capacity_rps), time_s.shape)
    if np.any(~np.isfinite(time_s)) or np.any(np.diff(time_s) <= 0):
        raise PlannerInputError("time_s must be finite and strictly increasing")
    queue = np.zeros_like(time_s)
    for i in range(1, time_s.size):
        net = (arrival[i - 1] - capacity[i - 1]) * (time_s[i] - time_s[i - 1])
        queue[i] = max(0.0, queue[i - 1] + net)
    return queue


def step_frac(arrival_rate_rps, step_arrival_rate_rps):
    """Relative size of a step in arrivals, e.g. 10 -> 16 req/s is 0.6; 0 for a fall.

    Parameters
    ----------
    arrival_rate_rps : float or array_like
        Arrival rate before the step. [requests/s]
    step_arrival_rate_rps : float or array_like
        Arrival rate after it. [requests/s]

    Returns
    -------
    float or numpy.ndarray
        ``max(0, after / before - 1)``. [fraction]

    Examples
    --------
    >>> round(step_frac(10.0, 16.0), 6)
    0.6
    """
    arrival_rate_rps = require_positive("arrival_rate_rps", arrival_rate_rps)
    step_arrival_rate_rps = require_non_negative("step_arrival_rate_rps", step_arrival_rate_rps)
    return np.maximum(0.0, step_arrival_rate_rps / arrival_rate_rps - 1.0)


def step_headroom_frac(knee_concurrency, target_concurrency, tolerance_frac=0.0):
    """The step in load a target absorbs with no queueing: K / (T x (1 + tolerance)) - 1.

    With ``tolerance_frac`` 0 this is the headroom just after a scale-up,
    when every replica sits at the target. The HPA adds a replica only once
    the per-replica average is more than its tolerance above the target
    (10 % by default), so between scale-ups the average can sit at up to
    ``T x (1 + tolerance)``; pass the tolerance for the headroom the fleet
    can count on at any moment.

    Parameters
    ----------
    knee_concurrency : float or array_like
        Highest per-replica concurrency that meets the SLOs. [requests]
    target_concurrency : float or array_like
        The autoscaler's per-replica target. [requests]
    tolerance_frac : float, optional
        The HPA's scale-up tolerance (:data:`planner.autoscaler.defaults.DEFAULT_TOLERANCE` is 0.1). [fraction]

    Returns
    -------
    float or numpy.ndarray
        Absorbable step. [fraction]

    Examples
    --------
    >>> round(step_headroom_frac(48, 40), 6)
    0.2
    >>> round(step_headroom_frac(48, 40, tolerance_frac=0.1), 4)
    0.0909
    """
    knee_concurrency = require_positive("knee_concurrency", knee_concurrency)
    target_concurrency = require_positive("target_concurrency", target_concurrency)
    tolerance_frac = require_non_negative("tolerance_frac", tolerance_frac)
    return knee_concurrency / (target_concurrency * (1.0 + tolerance_frac)) - 1.0


def target_for_step(knee_concurrency, step_frac, tolerance_frac=0.0):
    """The per-replica target that absorbs a step of ``step_frac``: K / ((1 + step) x (1 + tolerance)).

    Parameters
    ----------
    knee_concurrency : float or array_like
        Knee from the load test. [requests]
    step_frac : float or array_like
        Expected growth in load during one warmup, e.g. 0.6 for 10 -> 16 req/s.
        [fraction]
    tolerance_frac : float, optional
        The HPA's scale-up tolerance: with it, the step may start when the
        per-replica average is up to that much above the target (see
        :func:`step_headroom_frac`). 0 counts from the target itself. [fraction]

    Returns
    -------
    float or numpy.ndarray
        Concurrency target. [requests]

    Examples
    --------
    >>> target_for_step(48, 0.6)
    30.0
    >>> round(target_for_step(48, 0.6, tolerance_frac=0.1), 2)
    27.27
    """
    knee_concurrency = require_positive("knee_concurrency", knee_concurrency)
    step_frac = require_non_negative("step_frac", step_frac)
    tolerance_frac = require_non_negative("tolerance_frac", tolerance_frac)
    return knee_concurrency / ((1.0 + step_frac) * (1.0 + tolerance_frac))


def replicas_for_step(in_flight, knee_concurrency, step_frac):
    """Baseline replicas that keep a step of ``step_frac`` under the knee.

    ``ceil(in_flight / target_for_step(K, step))``.

    Examples
    --------
    >>> replicas_for_step(120.0, 48, 0.6)
    4
    """
    return replicas_for_target(in_flight, target_for_step(knee_concurrency, step_frac))


def extra_replicas_frac(replicas, reference_replicas):
    """Relative cost of running ``replicas`` instead of ``reference_replicas``.

    Examples
    --------
    >>> round(extra_replicas_frac(4, 3), 4)
    0.3333
    """
    replicas = require_positive("replicas", replicas)
    reference_replicas = require_positive("reference_replicas", reference_replicas)
    return replicas / reference_replicas - 1.0


def reaction_time_s(metric_window_s, eval_interval_s, cold_start_s):
    """Worst-case delay from a load change to new capacity serving it.

    The metric needs a window to show the change, the controller may have
    just evaluated, and the new replica must start and load its weights.

    Parameters
    ----------
    metric_window_s : float
        Averaging window of the scaling metric (e.g. a ``rate(...[30s])``). [s]
    eval_interval_s : float
        Controller period: the HPA sync period (15 s), KEDA's HPA included (its metrics
        server queries the scaler on every HPA request); KEDA's ``pollingInterval`` for a
        scale from zero or a trigger with ``useCachedMetrics``. [s]
    cold_start_s : float
        Pod scheduled to Ready: image pull, weight load, CUDA graphs. [s]

    Returns
    -------
    float
        [s]

    Examples
    --------
    >>> reaction_time_s(30, 15, 60)
    105.0
    """
    metric_window_s = require_non_negative("metric_window_s", metric_window_s)
    eval_interval_s = require_non_negative("eval_interval_s", eval_interval_s)
    cold_start_s = require_non_negative("cold_start_s", cold_start_s)
    return metric_window_s + eval_interval_s + cold_start_s


def growth_rate_rps_per_s(start_rate_rps, end_rate_rps, ramp_s):
    """Slope of a linear ramp in arrivals. [requests/s per s]

    Examples
    --------
    >>> round(growth_rate_rps_per_s(30, 50, 600), 4)
    0.0333
    """
    start_rate_rps = require_non_negative("start_rate_rps", start_rate_rps)
    end_rate_rps = require_non_negative("end_rate_rps", end_rate_rps)
    ramp_s = require_positive("ramp_s", ramp_s)
    return (end_rate_rps - start_rate_rps) / ramp_s


def growth_during_gap_rps(growth_rate_rps_per_s, gap_s):
    """Arrival rate added while the fleet cannot react. [requests/s]

    Parameters
    ----------
    growth_rate_rps_per_s : float or array_like
        Slope of the ramp. [requests/s per s]
    gap_s : float or array_like
        Reaction time (:func:`reaction_time_s`). [s]

    Examples
    --------
    >>> round(growth_during_gap_rps(20 / 600, 105), 3)
    3.5
    """
    growth_rate_rps_per_s = require_non_negative("growth_rate_rps_per_s", growth_rate_rps_per_s)
    gap_s = require_non_negative("gap_s", gap_s)
    return growth_rate_rps_per_s * gap_s


def ramp_backlog_requests(growth_rate_rps_per_s, time_s, spare_rps=0.0):
    """Requests queued ``time_s`` after new capacity was requested, while arrivals keep growing linearly.

    At ``time_s = 0`` the Ready replicas complete ``spare_rps`` more than
    arrive; arrivals then grow by ``growth_rate_rps_per_s`` every second and
    no new capacity serves. The queue starts once the growth has eaten the
    spare capacity, at ``spare_rps / growth_rate_rps_per_s``, and holds the
    area between arrivals and capacity since then:
    ``g / 2 x (t - spare / g)^2``. Evaluated at a pod's time to ready, it is
    the backlog its cold start leaves. A fluid model (no randomness, so real
    queues are a little longer), and it assumes nothing requested later is
    Ready sooner.

    Parameters
    ----------
    growth_rate_rps_per_s : float
        Slope of the arrivals (:func:`growth_rate_rps_per_s`). [requests/s per s]
    time_s : float or array_like
        Time since the new capacity was requested. [s]
    spare_rps : float, optional
        What the Ready replicas complete per second beyond arrivals at ``time_s = 0``. [requests/s]

    Returns
    -------
    float or numpy.ndarray
        [requests]

    Examples
    --------
    A ramp of 0.01 requests/s per second with no spare capacity, 966 s after a
    pod was requested; then with 3 requests/s spare, which lasts 300 s:

    >>> round(ramp_backlog_requests(0.01, 966.0), 1)
    4665.8
    >>> round(ramp_backlog_requests(0.01, 966.0, spare_rps=3.0), 1)
    2217.8
    """
    growth_rate_rps_per_s = require_non_negative("growth_rate_rps_per_s", growth_rate_rps_per_s)
    time_s = require_non_negative("time_s", time_s)
    spare_rps = require_non_negative("spare_rps", spare_rps)
    if growth_rate_rps_per_s == 0:
        return np.zeros_like(time_s) if np.ndim(time_s) else 0.0
    late_s = np.maximum(0.0, time_s - spare_rps / growth_rate_rps_per_s)
    backlog = 0.5 * growth_rate_rps_per_s * late_s**2
    return backlog if np.ndim(backlog) else float(backlog)


def step_backlog_trajectory_requests(
    time_s, arrival_rate_rps, step_arrival_rate_rps, capacity_rps, capacity_after_rps, reaction_time_s
):
    """Queue over time when arrivals step up at t = 0 and new capacity serves from ``reaction_time_s``.

    Parameters
    ----------
    time_s : array_like
        Increasing sample times from 0. [s]
    arrival_rate_rps : float
        Arrivals before the step (served with no queue). [requests/s]
    step_arrival_rate_rps : float
        Arrivals from t = 0 on. [requests/s]
    capacity_rps, capacity_after_rps : float
        What the Ready replicas complete per second before and after new
        replicas are Ready. [requests/s]
    reaction_time_s : float
        Load change to new capacity serving (:func:`reaction_time_s`). [s]

    Returns
    -------
    numpy.ndarray
        Queue length at each time (fluid model, as
        :func:`backlog_trajectory_requests`). [requests]

    Examples
    --------
    >>> step_backlog_trajectory_requests([0, 90, 180], 30, 75, 33, 80, 90).round(1).tolist()
    [0.0, 3780.0, 3330.0]
    """
    require_non_negative("arrival_rate_rps", arrival_rate_rps)
    time_s = np.atleast_1d(np.asarray(time_s, dtype=float))
    reaction_time_s = require_non_negative("reaction_time_s", reaction_time_s)
    capacity_rps = require_non_negative("capacity_rps", capacity_rps)
    capacity_after_rps = require_non_negative("capacity_after_rps", capacity_after_rps)
    # Sample the switch itself, so the peak is exact whatever the grid.
    grid = np.union1d(time_s, [reaction_time_s]) if time_s[0] <= reaction_time_s <= time_s[-1] else time_s
    capacity = np.where(grid < reaction_time_s, capacity_rps, capacity_after_rps)
    queue = backlog_trajectory_requests(grid, step_arrival_rate_rps, capacity)
    return queue[np.searchsorted(grid, time_s)]


def backlog_clear_s(backlog, capacity_rps, arrival_rate_rps):
    """Time for a queue to drain once capacity exceeds arrivals. [s]

    ``backlog / (capacity - arrivals)``; infinite when capacity does not
    exceed arrivals (the queue never drains). The last request of the
    backlog waits about this long on top of the reaction time.

    Examples
    --------
    >>> backlog_clear_s(3780.0, 80.0, 75.0)
    756.0
    """
    backlog = require_non_negative("backlog", backlog)
    capacity_rps = require_non_negative("capacity_rps", capacity_rps)
    arrival_rate_rps = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    spare = capacity_rps - arrival_rate_rps
    if np.ndim(spare):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(spare > 0, backlog / np.where(spare > 0, spare, 1.0), np.where(backlog > 0, np.inf, 0.0))
    if spare <= 0:
        return math.inf if backlog > 0 else 0.0
    return backlog / spare
