"""The ``littles_law`` module relates arrivals, time in system and requests in flight.

Little's law, L = lambda x W, holds for any stable system in steady state,
whatever the arrival or service distributions: the mean number of requests
in flight equals the mean arrival rate times the mean time each request
spends in the system. For an LLM server, "in system" means queued plus
running (vLLM's ``num_requests_waiting + num_requests_running``), and the
time in system is the end-to-end request latency.
"""

from __future__ import annotations

import numpy as np

from planner._numeric import ceil_count
from planner.errors import require_non_negative, require_positive

__all__ = [
    "drain_rate_rps",
    "in_flight_requests",
    "per_replica_load",
    "queue_threshold_requests",
    "replicas_for_target",
]


def in_flight_requests(arrival_rate_rps, time_in_system_s):
    """Mean requests in the system, queued or running: L = lambda x W.

    Parameters
    ----------
    arrival_rate_rps : float or array_like
        Mean arrival rate. [requests/s]
    time_in_system_s : float or array_like
        Mean time a request spends in the system, queueing included. [s]

    Returns
    -------
    float or numpy.ndarray
        Mean requests in flight. [requests]

    Notes
    -----
    Holds in steady state. Near saturation the time in system grows with
    load, so the in-flight count grows faster than the arrival rate; the
    formula stays true, but ``time_in_system_s`` must be the one measured
    at that load.

    Examples
    --------
    >>> in_flight_requests(10.0, 12.0)
    120.0
    """
    arrival_rate_rps = require_non_negative("arrival_rate_rps", arrival_rate_rps)
    time_in_system_s = require_positive("time_in_system_s", time_in_system_s)
    return arrival_rate_rps * time_in_system_s


def replicas_for_target(in_flight, per_replica_target):
    """Replicas needed so that each holds at most ``per_replica_target`` requests.

    Parameters
    ----------
    in_flight : float or array_like
        Requests in flight across the fleet. [requests]
    per_replica_target : float
        Concurrency target per replica, below the knee. [requests]

    Returns
    -------
    int or numpy.ndarray of int
        ``ceil(in_flight / per_replica_target)``, at least 1. [replicas]

    Examples
    --------
    >>> replicas_for_target(120.0, 40.0)
    3
    """
    in_flight = require_non_negative("in_flight", in_flight)
    per_replica_target = require_positive("per_replica_target", per_replica_target)
    return ceil_count(np.maximum(1.0, in_flight / per_replica_target))


def per_replica_load(in_flight, replicas):
    """Average requests per replica when ``in_flight`` spreads over ``replicas``.

    Parameters
    ----------
    in_flight : float or array_like
        Requests in flight across the fleet. [requests]
    replicas : int or array_like
        Replicas sharing them. [replicas]

    Returns
    -------
    float or numpy.ndarray
        Requests per replica. [requests]
    """
    in_flight = require_non_negative("in_flight", in_flight)
    replicas = require_positive("replicas", replicas)
    return in_flight / replicas


def drain_rate_rps(concurrency, request_duration_s):
    """Requests one replica completes per second at a steady concurrency: mu = K / W.

    Parameters
    ----------
    concurrency : float or array_like
        Requests held in flight by the replica, for instance the knee K. [requests]
    request_duration_s : float or array_like
        Mean request duration at that concurrency. [s]

    Returns
    -------
    float or numpy.ndarray
        Completions per second. [requests/s]

    Examples
    --------
    >>> drain_rate_rps(48.0, 12.0)
    4.0
    """
    concurrency = require_non_negative("concurrency", concurrency)
    request_duration_s = require_positive("request_duration_s", request_duration_s)
    return concurrency / request_duration_s


def queue_threshold_requests(wait_budget_s, drain_rate_rps):
    """Waiting requests that take ``wait_budget_s`` to clear at ``drain_rate_rps``.

    A queue of Q requests in front of a server that completes mu requests per
    second clears in Q / mu seconds, so the threshold for a queue-depth
    trigger that keeps waits under a budget is Q = W_max x mu.

    Parameters
    ----------
    wait_budget_s : float or array_like
        The longest acceptable queue wait. [s]
    drain_rate_rps : float or array_like
        Completions per second of the replicas behind the queue. [requests/s]

    Returns
    -------
    float or numpy.ndarray
        Queue-depth threshold. [requests]

    Examples
    --------
    >>> round(queue_threshold_requests(5.0, 25.8), 6)
    129.0
    """
    wait_budget_s = require_positive("wait_budget_s", wait_budget_s)
    drain_rate_rps = require_positive("drain_rate_rps", drain_rate_rps)
    return wait_budget_s * drain_rate_rps
